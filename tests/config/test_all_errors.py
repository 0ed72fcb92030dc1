"""A config file's errors come in one answer, each with its key; typos get a "did you mean";
duplicate keys, bytes that are not UTF-8 and names MySQL cannot hold are refused with where."""
import pytest

from coordinator.config import load_task, parse_source, parse_task
from coordinator.errors import ConfigError, ConfigErrors

from .test_config import TASK


def _errors(text: str, parse=parse_task) -> list[ConfigError]:
    with pytest.raises(ConfigError) as e:
        parse(text, "t.yaml")
    return list(getattr(e.value, "errors", [e.value]))


def _keys(errs: list[ConfigError]) -> set[str]:
    return {e.context.get("key", "") for e in errs}


def test_a_dm_file_with_three_refused_keys_and_a_typo_is_answered_once_with_all_four():
    text = (TASK.replace("target-database:", "tagret-database:")
            + "timezone: Asia/Shanghai\ncase-sensitive: true\ncolumn-mappings: {m: {}}\n")
    with pytest.raises(ConfigErrors) as e:
        parse_task(text, "t.yaml")
    keys = _keys(e.value.errors)
    assert {"timezone", "case-sensitive", "column-mappings", "tagret-database", "target-database"} <= keys
    msg = str(e.value)
    assert msg.startswith(f"{len(e.value.errors)} errors in t.yaml:")
    assert "unknown key `tagret-database` (did you mean `target-database`?)" in msg
    assert "`target-database` is required" in msg
    assert e.value.context["file"] == "t.yaml"


def test_errors_in_several_sections_and_instances_are_all_reported():
    text = (TASK.replace("batch: 100", "batch: 0")                       # a syncers entry
                .replace("route-rules: [orders]\n    block", "route-rules: [order]\n    block")   # a reference
                .replace("- source-id: s2\n    route-rules: [orders]",
                         "- source-id: s2\n    route-rules: [orders]\n    syncer-thred: 2")    # an instance key
                .replace("task-mode: incremental", "task-mode: sometimes"))
    errs = _errors(text)
    assert _keys(errs) >= {"syncers.global.batch", "mysql-instances[0].route-rules[0]",
                           "mysql-instances[1].syncer-thred", "task-mode"}
    by_key = {e.context["key"]: str(e) for e in errs}
    assert "(did you mean `orders`?)" in by_key["mysql-instances[0].route-rules[0]"]
    assert "(did you mean `syncer-thread`?)" in by_key["mysql-instances[1].syncer-thred"]


def test_a_reference_to_a_definition_with_errors_is_not_reported_again():
    errs = _errors(TASK.replace("batch: 100", "batch: 0"))
    assert [e.context["key"] for e in errs] == ["syncers.global.batch"]


def test_one_error_is_raised_as_itself():
    with pytest.raises(ConfigError) as e:
        parse_task(TASK.replace("task-mode: incremental", "task-mode: x"), "t.yaml")
    assert not isinstance(e.value, ConfigErrors) and e.value.context["key"] == "task-mode"


def test_source_file_errors_come_together():
    text = "source-id: ''\nflavor: oracle\nfrom: {host: h, port: 99999}\nenable-relay: true\nrelay-dri: x\n"
    errs = _errors(text, parse_source)
    assert _keys(errs) == {"source-id", "flavor", "from.port", "relay-dri"}
    assert "(did you mean `relay-dir`?)" in next(str(e) for e in errs if e.context["key"] == "relay-dri")


@pytest.mark.parametrize("text,key,line", [
    ("name: a\nname: b\n", "name", "lines 1 and 2"),
    (TASK.replace("  port: 33063\n", "  port: 33063\n  port: 3306\n"), "port", "lines 9 and 10"),
])
def test_a_key_given_twice_is_refused_with_its_lines(text, key, line):
    assert text.count(f"{key}:") == 2
    [dup] = [e for e in _errors(text) if "given twice" in str(e)]
    assert dup.context["key"] == key and f"`{key}` is given twice ({line})" in str(dup)


def test_a_key_given_twice_comes_with_the_files_other_errors():
    text = TASK.replace("task-mode: incremental", "task-mode: incremental\ntask-mode: all\ntagret-db: x")
    errs = _errors(text)
    assert _keys(errs) == {"task-mode", "tagret-db"}
    assert "`task-mode` is given twice" in str(errs[0])


def test_yaml_merge_keys_are_not_duplicates():
    text = TASK + "syncers-base: &b {worker-count: 2}\n"
    errs = _errors(text)            # only the unknown key: the anchor itself is fine
    assert _keys(errs) == {"syncers-base"}


def test_a_file_that_is_not_utf8_is_refused_with_line_and_column(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_bytes(TASK.encode().replace(b"name: shop", b"name: sh\xe9p"))
    with pytest.raises(ConfigError) as e:
        load_task(str(p))
    assert "not valid UTF-8 at line 1, column 9 (byte 0xe9)" in str(e.value)
    assert e.value.context["file"] == str(p)


@pytest.mark.parametrize("change,key,words", [
    (("name: shop", "name: " + "n" * 47), "name", "at most 46"),
    (("name: shop", 'name: "sh\\0op"'), "name", "control characters (U+0000)"),
    (("name: shop", 'name: "shop "'), "name", "trailing spaces"),
    (("meta-schema: dm_meta", "meta-schema: " + "m" * 65), "meta-schema", "at most 64"),
])
def test_names_mysql_cannot_hold_are_refused(change, key, words):
    errs = _errors(TASK.replace(*change))
    assert len(errs) == 1 and errs[0].context["key"] == key and words in str(errs[0])


def test_the_longest_task_name_that_fits_is_accepted():
    assert parse_task(TASK.replace("name: shop", "name: " + "n" * 46), "t.yaml").name == "n" * 46


def test_a_section_that_stopped_at_its_error_does_not_make_its_other_keys_unknown():
    errs = _errors(TASK.replace("shard-mode: optimistic", "shard-mode: pessimistic\nis-sharding: true")
                   .replace("online-ddl: true", "online-ddl-scheme: nope\nshadow-table-rules: ['^_(.+)_new$']"))
    assert _keys(errs) == {"shard-mode", "online-ddl-scheme"}, [str(e) for e in errs]
