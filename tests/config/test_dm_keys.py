"""Every key of DM's task and source files, one at a time, with what shardmerge does with it.

The keys are those of DM's sample files (``dm/master/task_basic.yaml``, ``task_advanced.yaml``,
``dm/config/source.yaml``, ``dm/master/source.yaml``, ``dm/worker/source.yaml``) and of its
task/source structs (``dm/config/task.go``, ``source_config.go``) that its documentation's
full examples use.  Files are written here for the test (never DM's own text).  Each key is
asserted to act (the parsed config changes), to warn (accepted, no effect on data, the
warning names file and key) or to be refused (ConfigError naming file and key, saying why).
"""
from __future__ import annotations

import base64
import copy

import pytest
import yaml

from coordinator import dm_encrypt
from coordinator.config import LoadOptions, load_options, parse_source, parse_task
from coordinator.errors import ConfigError

FILE = "dm-task.yaml"
BASE_TASK = {
    "name": "t", "task-mode": "all", "shard-mode": "optimistic", "meta-schema": "dm_meta",
    "target-database": {"host": "127.0.0.1", "port": 4000, "user": "root", "password": ""},
    "mysql-instances": [{"source-id": "s1", "route-rules": ["r"], "block-allow-list": "bal"}],
    "routes": {"r": {"schema-pattern": "test_*", "table-pattern": "t_*", "target-schema": "test",
                     "target-table": "t"}},
    "block-allow-list": {"bal": {"do-dbs": ["~^test.*"]}},
}
BASE_SOURCE = {"source-id": "mysql-replica-01", "from": {"host": "127.0.0.1", "user": "root", "password": "x",
                                                          "port": 3306}}


def _task(where: str, key: str, value) -> dict:
    t = copy.deepcopy(BASE_TASK)
    inst = t["mysql-instances"][0]
    node = {"task": t, "instance": inst, "route": t["routes"]["r"], "target": t["target-database"]}.get(where)
    if where in ("syncer", "mydumper", "loader"):
        node = inst.setdefault(where, {})
    if where in ("syncers", "mydumpers", "loaders"):
        t[where] = {"global": {}}
        inst[f"{where[:-1]}-config-name"] = "global"
        node = t[where]["global"]
    if where == "security":
        node = t["target-database"].setdefault("security", {})
    node[key] = value
    return t


def _parse(doc: dict):
    return parse_task(yaml.safe_dump(doc), FILE)


def _refused(doc: dict, key: str, *words: str) -> str:
    with pytest.raises(ConfigError) as ei:
        _parse(doc)
    msg = str(ei.value)
    assert FILE in msg and key in msg, msg
    for w in words:
        assert w in msg, msg
    return msg


def _warned(doc: dict, key: str) -> None:
    cfg = _parse(doc)
    hits = [w for w in cfg.warnings if f"{key}`" in w and FILE in w and "no effect" in w]
    assert hits, cfg.warnings


# keys that have no effect on the data: accepted, with a warning naming file and key
WARN_KEYS = [
    ("task", "enable-heartbeat", True), ("task", "heartbeat-update-interval", 1),
    ("task", "heartbeat-report-interval", 10),
    ("task", "clean-dump-file", True), ("task", "experimental", {"async-checkpoint-flush": True}),
    ("instance", "mydumper-thread", 4),
    ("syncer", "queue-size", 1024), ("syncer", "checkpoint-flush-interval", 30), ("syncer", "compact", True),
    ("syncer", "multiple-rows", True), ("syncer", "max-retry", 100), ("syncer", "auto-fix-gtid", True),
    ("syncer", "enable-gtid", True), ("syncer", "disable-detect", True), ("syncer", "safe-mode-duration", "60s"),
    ("syncer", "meta-file", "x"),
    ("mydumpers", "threads", 4), ("mydumpers", "chunk-filesize", "64"), ("mydumpers", "skip-tz-utc", True),
    ("mydumpers", "statement-size", 100), ("mydumpers", "mydumper-path", "./bin/mydumper"),
    ("loaders", "dir", "./dumped_data"), ("loaders", "on-duplicate-physical", "none"),
    ("loaders", "sorting-dir-physical", "/tmp"), ("loaders", "disk-quota-physical", "10G"),
    ("loaders", "checksum-physical", "required"), ("loaders", "analyze", "optional"),
    ("loaders", "range-concurrency", 16), ("loaders", "compress-kv-pairs", "gz"), ("loaders", "pd-addr", "x:2379"),
    ("target", "max-allowed-packet", 67108864), ("security", "cert-allowed-cn", ["dm"]),
]


@pytest.mark.parametrize("where,key,value", WARN_KEYS, ids=[f"{w}.{k}" for w, k, _ in WARN_KEYS])
def test_key_without_effect_on_data_warns(where, key, value):
    _warned(_task(where, key, value), key)


# keys that would change the data if ignored: refused with the reason and what to do
REFUSED_KEYS = [
    ("task", "column-mappings", {"cm": {"schema-pattern": "test_*", "expression": "partition id"}}, "column mapping"),
    ("instance", "column-mapping-rules", ["cm"], "column mapping"),
    ("task", "timezone", "Asia/Shanghai", "instants"), ("task", "case-sensitive", True, "case-insensitively"),
    ("task", "collation_compatible", "strict", "loose"), ("task", "ansi-quotes", True, "ANSI_QUOTES"),
    ("task", "remove-meta", True, "checkpoint"), ("syncer", "enable-ansi-quotes", True, "ANSI_QUOTES"),
    ("mydumpers", "extra-args", "-B test -T t1,t2 --consistency none", "mydumper command-line"),
    ("loaders", "import-mode", "physical", "INSERT"), ("target", "session", {"sql_mode": "ANSI"}, "session"),
]


@pytest.mark.parametrize("where,key,value,why", REFUSED_KEYS, ids=[f"{w}.{k}" for w, k, _, _ in REFUSED_KEYS])
def test_key_changing_data_is_refused_with_reason(where, key, value, why):
    _refused(_task(where, key, value), key, "not supported", why)


@pytest.mark.parametrize("where,key,value", [
    ("task", "timezone", ""), ("task", "case-sensitive", False), ("task", "collation_compatible", "loose"),
    ("task", "ansi-quotes", False), ("task", "remove-meta", False), ("loaders", "import-mode", "logical"),
    ("mydumpers", "extra-args", ""), ("task", "is-sharding", False),
])
def test_key_at_dm_default_is_accepted_silently(where, key, value):
    cfg = _parse(_task(where, key, value))
    assert not [w for w in cfg.warnings if key in w], cfg.warnings


def test_keys_that_act():
    t = _task("instance", "syncer-thread", 7)
    t["mysql-instances"][0]["loader-thread"] = 5
    t["mysql-instances"][0]["mydumper"] = {"rows": 123, "where": "id < 100"}
    t["mysql-instances"][0]["loader"] = {"pool-size": 2, "on-duplicate-logical": "replace", "batch-rows": 50}
    cfg = _parse(t)
    assert cfg.instances[0].syncer.worker_count == 7                # syncer-thread: DM's alias of worker-count
    opts = load_options(cfg, "s1", FILE)
    assert opts == LoadOptions(chunk_rows=123, on_duplicate="replace", pool_size=5, batch_rows=50,  # loader-thread wins
                               where="id < 100")
    _refused(_task("mydumpers", "where", "id <"), "mydumpers.global.where", "not an SQL condition")
    t = _task("syncers", "worker-count", 3)
    t["syncers"]["global"].update({"batch": 10, "safe-mode": True})
    s = _parse(t).instances[0].syncer
    assert (s.worker_count, s.batch, s.safe_mode) == (3, 10, True)
    t = _task("task", "filters", {"f": {"schema-pattern": "test_*", "table-pattern": "t_*",
                                        "events": ["truncate table", "drop table"],
                                        "sql-pattern": ["^DROP\\s+PROCEDURE"], "action": "Ignore"}})
    t["mysql-instances"][0]["filter-rules"] = ["f"]
    rule = _parse(t).instances[0].filters[0]
    assert (rule.events, rule.action, rule.sql_pattern) == (("truncate table", "drop table"), "Ignore",
                                                             ("^DROP\\s+PROCEDURE",))


def test_route_extract_keys_act_with_dms_values():
    t = _task("route", "extract-table", {"table-regexp": "t_(.*)", "target-column": "c_table"})
    t["routes"]["r"]["extract-schema"] = {"schema-regexp": "test_(.*)", "target-column": "c_schema"}
    t["routes"]["r"]["extract-source"] = {"source-regexp": "(.*)", "target-column": "c_source"}
    t["mysql-instances"][0]["source-id"] = "mysql-01"
    cfg = _parse(t)
    from coordinator.routing import TableMapper
    m = TableMapper(cfg.instances[0])
    # DM's documented example: test_11.t_1 on mysql-01 -> c_table 1, c_schema 11, c_source mysql-01
    assert m.extract("test_11", "t_1") == (("c_table", "1"), ("c_schema", "11"), ("c_source", "mysql-01"))
    t["routes"]["r"]["extract-table"]["table-regexp"] = "~t_(.*)"
    _refused(t, "routes.r.extract-table.table-regexp", "remove the leading ~")
    t["routes"]["r"]["extract-table"] = {"table-regexp": "t_(.*)", "target-column": "c_schema"}
    _refused(t, "routes.r.extract-schema.target-column", "not used by another extract")


def test_expression_filter_keys_act_and_unsupported_sql_is_refused():
    t = _task("task", "expression-filter", {"even": {"schema": "test_1", "table": "t_1",
                                                      "insert-value-expr": "c % 2 = 0",
                                                      "update-new-value-expr": "c > 100",
                                                      "delete-value-expr": "name LIKE 'keep%'"}})
    t["mysql-instances"][0]["expression-filters"] = ["even"]
    rule = _parse(t).instances[0].expr_filters[0]
    assert (rule.schema, rule.table, rule.insert, rule.update_old, rule.update_new, rule.delete) == (
        "test_1", "t_1", "c % 2 = 0", "", "c > 100", "name LIKE 'keep%'")
    t["expression-filter"]["even"]["insert-value-expr"] = "UPPER(name) = 'A'"
    _refused(t, "expression-filter.even.insert-value-expr", "outside the supported subset")
    t["expression-filter"]["even"]["insert-value-expr"] = "c >"
    _refused(t, "expression-filter.even.insert-value-expr", "not an SQL expression")
    t["expression-filter"]["even"] = {"schema": "test_1", "table": "t_1"}
    _refused(t, "expression-filter.even", "sets none of")
    t["expression-filter"]["even"] = {"schema": "test_1", "table": "t_1", "insert-value-expr": "c > 1"}
    t["mysql-instances"][0]["expression-filters"] = ["odd"]
    _refused(t, "expression-filters[0]", "not defined under `expression-filter`")


def test_unknown_keys_in_dump_load_syncer_sections_are_errors():
    _refused(_task("mydumpers", "threadz", 4), "mydumpers.global.threadz", "unknown key")
    _refused(_task("loader", "pool_size", 4), "mysql-instances[0].loader.pool_size", "unknown key")
    _refused(_task("syncers", "batchsize", 4), "syncers.global.batchsize", "unknown key")
    _refused(_task("instance", "mydumper-config-name", "nope"), "mydumper-config-name", "not defined")


def test_is_sharding_without_shard_mode_is_refused_as_pessimistic():
    t = _task("task", "is-sharding", True)
    del t["shard-mode"]
    _refused(t, "is-sharding", "pessimistic", "shard-mode: optimistic")
    t["shard-mode"] = "optimistic"
    assert _parse(t).shard_mode == "optimistic"
    t["shard-mode"] = "pessimistic"
    _refused(t, "shard-mode", "not supported")


def test_validator_config_name_checked_and_warned():
    t = _task("task", "validators", {"v": {"mode": "full", "worker-count": 4}})
    t["mysql-instances"][0]["validator-config-name"] = "v"
    cfg = _parse(t)
    assert any("validator-config-name" in w and "full" in w for w in cfg.warnings), cfg.warnings
    t["mysql-instances"][0]["validator-config-name"] = "nope"
    _refused(t, "validator-config-name", "not defined under `validators`")
    t["mysql-instances"][0]["validator-config-name"] = "v"
    t["validators"]["v"]["mode"] = "sometimes"
    _refused(t, "validators.v.mode", "none, fast, full")
    t = _task("instance", "continuous-validator-config-name", "v")
    _refused(t, "continuous-validator-config-name", "validator-config-name")


def test_filter_rule_errors_name_the_key():
    t = _task("task", "filters", {"f": {"schema-pattern": "test_*", "events": ["delete rows"], "action": "Ignore"}})
    t["mysql-instances"][0]["filter-rules"] = ["f"]
    _refused(t, "filters.f.events[0]", "DM's binlog event types")
    t["filters"]["f"] = {"schema-pattern": "test_*", "events": ["delete"], "action": "Skip"}
    _refused(t, "filters.f.action", "Ignore or Do")
    t["filters"]["f"] = {"schema-pattern": "test_*", "events": ["delete"], "action": "Error"}
    _refused(t, "filters.f.action", "not supported")
    t["filters"]["f"] = {"schema-pattern": "test_*", "sql-pattern": ["(unclosed"], "action": "Ignore"}
    _refused(t, "filters.f.sql-pattern[0]", "regular expression")
    t["filters"]["f"] = {"schema-pattern": "test_*", "events": ["delete"], "action": "Ignore"}
    t["mysql-instances"][0]["filter-rules"] = ["g"]
    _refused(t, "filter-rules[0]", "not defined under `filters`")


# ------------------------------------------------------------------ DM's sample files, whole
TASK_ADVANCED = """
name: test
task-mode: all
is-sharding: true
meta-schema: "dm_meta"
enable-heartbeat: false
target-database: {host: "192.168.0.1", port: 4000, user: "root", password: ""}
mysql-instances:
  - source-id: "instance118-4306"
    meta: {binlog-name: mysql-bin.000001, binlog-pos: 4}
    route-rules: ["user-route-rules-schema", "user-route-rules"]
    filter-rules: ["user-filter-1", "user-filter-2"]
    block-allow-list: "instance"
    mydumper-config-name: "global"
    loader-config-name: "global"
    syncer-config-name: "global"
  - source-id: "instance118-5306"
    meta: {binlog-name: mysql-bin.000001, binlog-pos: 320}
    route-rules: ["user-route-rules-schema", "user-route-rules"]
    filter-rules: ["user-filter-2"]
    block-allow-list: "instance"
    mydumper: {threads: 4, chunk-filesize: 64, skip-tz-utc: true}
    loader: {pool-size: 16, dir: "./dumped_data"}
    syncer: {worker-count: 16, batch: 100}
routes:
  user-route-rules-schema: {schema-pattern: "test_*", target-schema: "test"}
  user-route-rules: {schema-pattern: "test_*", table-pattern: "t_*", target-schema: "test", target-table: "t"}
filters:
  user-filter-1:
    schema-pattern: "test_*"
    table-pattern: "t_*"
    events: ["truncate table", "drop table"]
    sql-pattern: ["^DROP\\\\s+PROCEDURE", "^CREATE\\\\s+PROCEDURE"]
    action: Ignore
  user-filter-2: {schema-pattern: "test_*", events: ["all dml"], action: Do}
block-allow-list:
  instance:
    do-dbs: ["~^test.*", "do"]
    ignore-dbs: ["mysql", "ignored"]
    do-tables: [{db-name: "~^test.*", tbl-name: "~^t.*"}, {db-name: "do", tbl-name: "do"}]
    ignore-tables: [{db-name: "test", tbl-name: "log"}]
mydumpers:
  global: {threads: 4, chunk-filesize: 64, skip-tz-utc: true, extra-args: "-B test -T t1,t2 --consistency none"}
loaders:
  global: {pool-size: 16, dir: "./dumped_data"}
syncers:
  global: {worker-count: 16, batch: 100}
"""


def test_dm_task_advanced_sample_is_refused_first_for_pessimistic_then_for_extra_args_then_runs():
    _refused(yaml.safe_load(TASK_ADVANCED), "is-sharding", "pessimistic")
    doc = yaml.safe_load(TASK_ADVANCED)
    doc["shard-mode"] = "optimistic"
    _refused(doc, "mydumpers.global.extra-args", "mydumper command-line")
    del doc["mydumpers"]["global"]["extra-args"]
    cfg = _parse(doc)
    i1, i2 = cfg.instances
    assert [r.name for r in i1.filters] == ["user-filter-1", "user-filter-2"]
    assert [r.name for r in i2.filters] == ["user-filter-2"]
    assert (i1.syncer.worker_count, i1.syncer.batch) == (16, 100) == (i2.syncer.worker_count, i2.syncer.batch)
    assert load_options(cfg, "instance118-4306", FILE).pool_size == 16
    assert i1.meta is not None and i1.meta.binlog_pos == 4
    warned = " ".join(cfg.warnings)
    for key in ("enable-heartbeat", "mydumpers.global.threads", "loaders.global.dir", "mydumper.skip-tz-utc"):
        assert f"`{key}`" in warned or key.rsplit(".", 1)[-1] in warned, (key, cfg.warnings)


TASK_BASIC = """
name: test
task-mode: all
target-database: {host: "192.168.0.1", port: 4000, user: "root", password: ""}
mysql-instances:
  - {source-id: "instance118-4306", block-allow-list: "instance", mydumper-thread: 4, loader-thread: 16,
     syncer-thread: 16}
  - {source-id: "instance118-5306", block-allow-list: "instance", mydumper-thread: 4, loader-thread: 16,
     syncer-thread: 16}
block-allow-list:
  instance:
    do-dbs: ["~^test.*", "do"]
    do-tables: [{db-name: "~^test.*", tbl-name: "~^t.*"}, {db-name: "do", tbl-name: "do"}]
"""


def test_dm_task_basic_sample_runs_with_its_thread_aliases():
    cfg = _parse(yaml.safe_load(TASK_BASIC))
    assert [i.syncer.worker_count for i in cfg.instances] == [16, 16]
    assert load_options(cfg, "instance118-5306", FILE).pool_size == 16
    assert sum("mydumper-thread" in w for w in cfg.warnings) == 2, cfg.warnings
    assert cfg.shard_mode == ""


SOURCE_CONFIG = """
server-id: 101
source-id: mysql-replica-01
flavor: mysql
enable-relay: false
enable-gtid: false
enable: true
auto-fix-gtid: false
meta-dir: ./dm_meta
relay-dir: ./relay_log
relay-binlog-name: ''
relay-binlog-gtid: "e68f6068-53ec-11eb-9c5f-0242ac110003:1-50"
charset: ''
from: {host: 127.0.0.1, user: root, password: Up8156jArvIPymkVC+5LxkAT6rek, port: 3306, max-allowed-packet: 0}
purge: {interval: 3600, expires: 24, remain-space: 15}
checker: {check-enable: true, backoff-rollback: 5m, backoff-max: 5m}
"""


def test_dm_source_samples_load_and_the_encrypted_password_is_decrypted(monkeypatch):
    monkeypatch.delenv(dm_encrypt.KEY_ENV, raising=False)
    src = parse_source(SOURCE_CONFIG, "source.yaml")
    assert (src.source_id, src.server_id, src.flavor, src.enable_gtid) == ("mysql-replica-01", 101, "mysql", False)
    assert src.db.resolved_password() == "1234"        # dmctl encrypt, DM's built-in key before v8.0
    assert src.db.to_json()["password"] == "Up8156jArvIPymkVC+5LxkAT6rek"   # stored as given, never plain
    warned = " ".join(src.warnings)
    for key in ("enable", "auto-fix-gtid", "meta-dir", "enable-relay", "relay-dir", "relay-binlog-name",
                "relay-binlog-gtid", "charset", "purge", "checker", "from.max-allowed-packet"):
        assert f"`{key}`" in warned, (key, src.warnings)
    doc = yaml.safe_load(SOURCE_CONFIG)
    doc["flavor"] = ""                                  # DM: detected from the server
    assert parse_source(yaml.safe_dump(doc), "source.yaml").flavor == ""      # "" is kept: detected at connect
    doc["flavor"] = " MariaDB "
    assert parse_source(yaml.safe_dump(doc), "source.yaml").flavor == "mariadb"
    del doc["flavor"]
    assert parse_source(yaml.safe_dump(doc), "source.yaml").flavor == ""
    doc["filters"] = [{"schema-pattern": "x", "events": ["erase"], "action": "Ignore"}]
    with pytest.raises(ConfigError, match=r"(?=.*source.yaml)`filters\[0\].events\[0\]`"):
        parse_source(yaml.safe_dump(doc), "source.yaml")


def test_source_filters_act_after_the_tasks_as_dm_merges_them():
    """DM >= v2.0.2: `filters` in a source file apply to every task on the source, after the
    task's rules; a source rule for the same patterns as a task rule is dropped."""
    from coordinator.config import with_source_filters
    doc = copy.deepcopy(BASE_SOURCE)
    doc["source-id"] = "s1"
    doc["filters"] = [{"schema-pattern": "test_*", "table-pattern": "t_*", "events": ["delete"], "action": "Ignore"},
                      {"schema-pattern": "test_*", "events": ["truncate table"], "action": "Ignore"}]
    src = parse_source(yaml.safe_dump(doc), "s.yaml")
    assert [r.events for r in src.filters] == [("delete",), ("truncate table",)]
    t = _task("task", "filters", {"mine": {"schema-pattern": "TEST_*", "table-pattern": "t_*", "events": ["insert"],
                                           "action": "Ignore"}})
    t["mysql-instances"][0]["filter-rules"] = ["mine"]
    inst = with_source_filters(_parse(t).instances[0], src)
    assert [(r.name, r.events) for r in inst.filters] == [("mine", ("insert",)), ("source-filter-1", ("truncate table",))]
    from coordinator.routing import TableMapper
    m = TableMapper(inst)
    assert m.events is not None and m.events.ignores("test_1", "x", "truncate table")
    assert not m.events.ignores("test_1", "t_1", "delete")            # the task's rule for t_* won


def test_encrypted_password_with_secret_key_path(tmp_path, monkeypatch):
    key = bytes(range(32))
    (tmp_path / "key").write_text(key.hex())
    monkeypatch.setenv(dm_encrypt.KEY_ENV, str(tmp_path / "key"))
    iv = bytes(range(100, 116))
    ks = dm_encrypt._encrypt_block(dm_encrypt._expand(key), iv)       # one CFB block: ciphertext = pt ^ E(iv)
    cipher = bytes(a ^ b for a, b in zip(b"s3cret!", ks))
    token = base64.b64encode(iv + b"@" + cipher).decode()
    doc = copy.deepcopy(BASE_SOURCE)
    doc["from"]["password"] = token
    assert parse_source(yaml.safe_dump(doc), "s.yaml").db.resolved_password() == "s3cret!"
    # DM's sample was encrypted with the old built-in key: with this key file it does not decrypt
    doc["from"]["password"] = "Up8156jArvIPymkVC+5LxkAT6rek"
    with pytest.raises(ConfigError, match=r"(?=.*file=s.yaml)`from.password`.*dmctl encrypt.*SHARDMERGE_DM_SECRET"):
        parse_source(yaml.safe_dump(doc), "s.yaml")
    (tmp_path / "key").write_text("not hex")
    with pytest.raises(ConfigError, match="64 hexadecimal"):
        parse_source(yaml.safe_dump(doc), "s.yaml")


def test_aes_block_matches_fips_197_vector():
    rk = dm_encrypt._expand(bytes(range(32)))
    assert dm_encrypt._encrypt_block(rk, bytes.fromhex("00112233445566778899aabbccddeeff")).hex() == \
        "8ea2b7ca516745bfeafc49904b496089"


def test_plain_passwords_are_not_mistaken_for_ciphertexts():
    for pw in ("123456", "shardmerge", "", "Zm9vYmFy", "a" * 24):
        assert not dm_encrypt.looks_encrypted(pw)


def test_encrypt_gives_dm_ciphertext_and_shardctl_encrypt_decrypt_round_trip(monkeypatch, tmp_path):
    """``dmctl encrypt``'s output for "1234" with DM's key before v8.0 (DM's own sample file) is
    reproduced from its IV: the same cipher; the CLI commands run without a master and round trip
    with that key and with a secret-key-path file."""
    import base64
    import subprocess
    import sys
    monkeypatch.delenv(dm_encrypt.KEY_ENV, raising=False)
    raw = base64.b64decode("Up8156jArvIPymkVC+5LxkAT6rek")
    key, _ = dm_encrypt.secret_key()
    assert dm_encrypt.cfb_encrypt(key, raw[:16], b"1234") == raw[17:]
    once, twice = dm_encrypt.encrypt("p@ss w0rd"), dm_encrypt.encrypt("p@ss w0rd")
    assert once != twice and dm_encrypt.decrypt(once) == dm_encrypt.decrypt(twice) == "p@ss w0rd"   # fresh IVs
    shardctl = [sys.executable, "-m", "coordinator.cli"]
    for env in ({}, {dm_encrypt.KEY_ENV: str(tmp_path / "key")}):
        (tmp_path / "key").write_text("ab" * 32 + "\n")
        e = {**__import__("os").environ, **env, "SHARDMERGE_MASTER_ADDR": "127.0.0.1:1"}   # no master is asked
        out = subprocess.run([*shardctl, "encrypt", "s3cret"], capture_output=True, text=True, env=e, timeout=60)
        assert out.returncode == 0 and dm_encrypt.looks_encrypted(out.stdout.strip()), out
        back = subprocess.run([*shardctl, "decrypt", out.stdout.strip()], capture_output=True, text=True, env=e,
                              timeout=60)
        assert back.returncode == 0 and back.stdout == "s3cret\n", back
    bad = subprocess.run([*shardctl, "decrypt", "plain"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "not a dmctl-encrypted value" in bad.stderr, bad
