"""Bad-input corpus, part 1: task and source YAML.  Every case must fail with a ConfigError
that names the file and the key (or line) and says what to do — never a crash or a
traceback-only error."""
import textwrap

import pytest

from coordinator.config import ConfigError, parse_source, parse_task

GOOD_TASK = textwrap.dedent("""\
    name: t
    shard-mode: optimistic
    target-database: {host: 127.0.0.1, port: 3306, user: root}
    mysql-instances:
      - {source-id: s1, route-rules: [r], block-allow-list: b}
    routes:
      r: {schema-pattern: "db_*", table-pattern: "t_*", target-schema: db, target-table: t}
    block-allow-list:
      b: {do-dbs: ["db_*"]}
""")
GOOD_SOURCE = "source-id: s1\nfrom: {host: 127.0.0.1, port: 3306, user: root, password: x}\n"

TASK_CASES = [
    ("empty file", "", "(top level)", "must be a mapping"),
    ("a list at top", "- a\n- b\n", "(top level)", "must be a mapping"),
    ("tabs/garbage yaml", "name: [unclosed\n", None, "not valid YAML at line"),
    ("missing name", GOOD_TASK.replace("name: t\n", ""), "name", "is required"),
    ("name with slash", GOOD_TASK.replace("name: t", "name: a/b"), "name", "without '/'"),
    ("name is a number", GOOD_TASK.replace("name: t", "name: 12"), "name", "must be a string"),
    ("bad task-mode", GOOD_TASK + "task-mode: everything\n", "task-mode", "must be one of"),
    ("pessimistic", GOOD_TASK.replace("optimistic", "pessimistic"), "shard-mode", "use `shard-mode: optimistic`"),
    ("unknown top key", GOOD_TASK + "colour: blue\n", "colour", "unknown key"),
    ("meta-schema a list", GOOD_TASK + "meta-schema: [a]\n", "meta-schema", "must be a string"),
    ("no target", GOOD_TASK.replace("target-database: {host: 127.0.0.1, port: 3306, user: root}\n", ""), "target-database", "is required"),
    ("target not mapping", GOOD_TASK.replace("{host: 127.0.0.1, port: 3306, user: root}", "127.0.0.1"), "target-database", "must be a mapping"),
    ("target no host", GOOD_TASK.replace("host: 127.0.0.1, ", ""), "target-database.host", "is required"),
    ("target port text", GOOD_TASK.replace("port: 3306", "port: abc"), "target-database.port", "must be an integer"),
    ("target port zero", GOOD_TASK.replace("port: 3306", "port: 0"), "target-database.port", "TCP port"),
    ("target port bool", GOOD_TASK.replace("port: 3306", "port: true"), "target-database.port", "must be an integer"),
    ("two passwords", GOOD_TASK.replace("user: root}", "user: root, password: a, password-env: B}"), "target-database", "only one of"),
    ("target unknown key", GOOD_TASK.replace("user: root}", "user: root, pwd: x}"), "target-database.pwd", "unknown key"),
    ("no instances", GOOD_TASK.split("mysql-instances")[0] + "routes: {}\n", "mysql-instances", "is required"),
    ("empty instances", GOOD_TASK.replace("mysql-instances:\n  - {source-id: s1, route-rules: [r], block-allow-list: b}", "mysql-instances: []"), "mysql-instances", "at least one"),
    ("instance not mapping", GOOD_TASK.replace("  - {source-id: s1, route-rules: [r], block-allow-list: b}", "  - s1"), "mysql-instances[0]", "must be a mapping"),
    ("instance no source-id", GOOD_TASK.replace("source-id: s1, ", ""), "mysql-instances[0].source-id", "is required"),
    ("undefined route", GOOD_TASK.replace("route-rules: [r]", "route-rules: [zz]"), "mysql-instances[0].route-rules[0]", "not defined"),
    ("route-rules not list", GOOD_TASK.replace("route-rules: [r]", "route-rules: r"), "mysql-instances[0].route-rules", "must be a list"),
    ("route-rules of numbers", GOOD_TASK.replace("route-rules: [r]", "route-rules: [1]"), "mysql-instances[0].route-rules[0]", "must be a string"),
    ("undefined bal", GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: nope}"), "mysql-instances[0].block-allow-list", "not defined"),
    ("route missing target-schema", GOOD_TASK.replace("target-schema: db, ", ""), "routes.r.target-schema", "is required"),
    ("route empty schema-pattern", GOOD_TASK.replace('schema-pattern: "db_*"', 'schema-pattern: ""'), "routes.r.schema-pattern", "must not be empty"),
    ("route unknown key", GOOD_TASK.replace("target-table: t}", "target-table: t, target: x}"), "routes.r.target", "unknown key"),
    ("bal do-dbs string", GOOD_TASK.replace('do-dbs: ["db_*"]', 'do-dbs: "db_*"'), "block-allow-list.b.do-dbs", "must be a list"),
    ("bal do-tables bad entry", GOOD_TASK.replace('do-dbs: ["db_*"]', 'do-tables: [{db-name: x}]'), "block-allow-list.b.do-tables[0].tbl-name", "is required"),
    ("meta pos text", GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: b, meta: {binlog-pos: x}}"), "mysql-instances[0].meta.binlog-pos", "must be an integer"),
    ("undefined syncer", GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: b, syncer-config-name: g}"), "mysql-instances[0].syncer-config-name", "not defined"),
    ("strict flag text", GOOD_TASK + "strict-optimistic-shard-mode: yes-please\n", "strict-optimistic-shard-mode", "true or false"),
    # DM keys that would change the data if ignored (issue 30): refused, with what to do instead
    ("is-sharding without shard-mode", GOOD_TASK.replace("shard-mode: optimistic\n", "is-sharding: true\n"),
     "is-sharding", "pessimistic"),
    ("column-mappings", GOOD_TASK + "column-mappings: {c: {schema-pattern: x}}\n", "column-mappings", "column mapping"),
    ("column-mapping-rules", GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: b, column-mapping-rules: [c]}"),
     "mysql-instances[0].column-mapping-rules", "column mapping"),
    ("expression-filter function", GOOD_TASK + "expression-filter: {e: {schema: db, table: t, insert-value-expr: "
     "'LENGTH(c) > 1'}}\n", "expression-filter.e.insert-value-expr", "outside the supported subset"),
    ("extract-table bad regexp", GOOD_TASK.replace("target-table: t}", "target-table: t, extract-table: {table-regexp: "
     "'t_((', target-column: c}}"), "routes.r.extract-table.table-regexp", "not a regular expression"),
    ("extract-table no column", GOOD_TASK.replace("target-table: t}", "target-table: t, extract-table: {table-regexp: "
     "'t_(.*)'}}"), "routes.r.extract-table.target-column", "is required"),
    ("dump where not SQL", GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: b, mydumper: {where: 'id >'}}"),
     "mysql-instances[0].mydumper.where", "not an SQL condition"),
    ("dump extra-args", GOOD_TASK + "mydumpers: {g: {extra-args: '-B test'}}\n", "mydumpers.g.extra-args",
     "mydumper command-line"),
    ("dump typo", GOOD_TASK + "mydumpers: {g: {thread: 4}}\n", "mydumpers.g.thread", "unknown key"),
    ("loader typo", GOOD_TASK + "loaders: {g: {pool_size: 4}}\n", "loaders.g.pool_size", "unknown key"),
    ("filter bad event", GOOD_TASK + "filters: {f: {schema-pattern: x, events: [remove], action: Ignore}}\n",
     "filters.f.events[0]", "binlog event types"),
    ("filter undefined", GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: b, filter-rules: [f]}"),
     "mysql-instances[0].filter-rules[0]", "not defined under `filters`"),
    ("case-sensitive", GOOD_TASK + "case-sensitive: true\n", "case-sensitive", "case-insensitively"),
    ("timezone", GOOD_TASK + "timezone: Asia/Shanghai\n", "timezone", "instants"),
    ("validator ref", GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: b, validator-config-name: v}"),
     "mysql-instances[0].validator-config-name", "not defined under `validators`"),
]

SOURCE_CASES = [
    ("source empty", "", "(top level)", "must be a mapping"),
    ("source no id", GOOD_SOURCE.replace("source-id: s1\n", ""), "source-id", "is required"),
    ("source blank id", GOOD_SOURCE.replace("source-id: s1", "source-id: ' '"), "source-id", "must not be empty"),
    ("source no from", "source-id: s1\n", "from", "is required"),
    ("source bad flavor", GOOD_SOURCE + "flavor: postgres\n", "flavor", "mysql, mariadb or empty (detected"),
    ("source gtid text", GOOD_SOURCE + "enable-gtid: maybe\n", "enable-gtid", "true or false"),
    ("source port text", GOOD_SOURCE.replace("port: 3306", "port: '3306x'"), "from.port", "must be an integer"),
    ("source unknown key", GOOD_SOURCE + "hostname: x\n", "hostname", "unknown key"),
    ("source security not map", GOOD_SOURCE.replace("password: x}", "password: x, security: yes}"), "from.security", "must be a mapping"),
    ("source bad yaml", "source-id: s1\nfrom: {host: [\n", None, "not valid YAML"),
    ("source filter bad action", GOOD_SOURCE + "filters: [{schema-pattern: x, events: [delete], action: Drop}]\n",
     "filters[0].action", "Ignore or Do"),
    ("encrypted password, wrong key", GOOD_SOURCE.replace("password: x", "password: " + "QUFBQUFBQUFBQUFBQUFBQUD/"
     + "/v8="), "from.password", "dmctl encrypt"),
]


@pytest.mark.parametrize("name,text,key,words", TASK_CASES, ids=[c[0] for c in TASK_CASES])
def test_bad_task(name, text, key, words):
    with pytest.raises(ConfigError) as e:
        parse_task(text, "bad-task.yaml")
    assert e.value.context["file"] == "bad-task.yaml"
    if key:
        assert e.value.context.get("key") == key
    assert words in str(e.value)
    assert "bad-task.yaml" in str(e.value)


@pytest.mark.parametrize("name,text,key,words", SOURCE_CASES, ids=[c[0] for c in SOURCE_CASES])
def test_bad_source(name, text, key, words):
    with pytest.raises(ConfigError) as e:
        parse_source(text, "bad-source.yaml")
    assert e.value.context["file"] == "bad-source.yaml"
    if key:
        assert e.value.context.get("key") == key
    assert words in str(e.value)


def test_good_inputs_still_parse():
    assert parse_task(GOOD_TASK).name == "t"
    assert parse_source(GOOD_SOURCE).source_id == "s1"


LOADER_CASES = [
    ("loader ref undefined", GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: b, loader-config-name: g}"),
     "loader-config-name 'g' is not defined under `loaders`"),
    ("bad on-duplicate", GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: b, loader-config-name: g}") + "loaders: {g: {on-duplicate-logical: overwrite}}\n",
     "must be one of error, replace, ignore"),
    ("mydumper rows zero", GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: b, mydumper: {rows: 0}}"),
     "must be an integer >= 1"),
]


@pytest.mark.parametrize("name,text,words", LOADER_CASES, ids=[c[0] for c in LOADER_CASES])
def test_bad_loader_options_fail_at_parse(name, text, words):
    with pytest.raises(ConfigError) as e:
        parse_task(text, "bad-task.yaml")
    assert words in str(e.value) and e.value.context["file"] == "bad-task.yaml"


def test_loader_sections_are_not_warned_as_ignored():
    t = parse_task(GOOD_TASK.replace("block-allow-list: b}", "block-allow-list: b, loader-config-name: g}")
                   + "loaders: {g: {on-duplicate-logical: replace}}\n", "t.yaml")
    assert not any("loader" in w for w in t.warnings)
