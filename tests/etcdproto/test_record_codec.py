"""Record encoding and decoding (coordinator/etcdproto/record.py): the per-field checks built
once per class must accept exactly what the old per-value walk accepted and name what they
refuse; orjson's bytes must be the stdlib's (records written before and after compare equal)."""
from __future__ import annotations

import dataclasses
import json

import pytest

from coordinator.etcdproto import BadKey, GarbageRecord, Info, Keys, Operation, Stage, UnknownVersion

KEY = "/t/info/task1/shop/orders/s1/shop_01/orders_0001"


def _info_dict(**over) -> dict:
    d = {"v": 1, "task": "task1", "source": "s1", "up_schema": "shop_01", "up_table": "orders_0001",
         "down_schema": "shop", "down_table": "orders", "ddls": ["ALTER TABLE t ADD COLUMN c INT"],
         "before": {"columns": []}, "afters": [{"columns": ["c"]}]}
    d.update(over)
    return d


def _decode(d: dict) -> Info:
    return Info.decode(KEY, json.dumps(d).encode())


def test_decode_accepts_a_well_formed_record_and_fills_meta():
    info = Info.decode(KEY, json.dumps(_info_dict(before=None, ignore_conflict=True)).encode(), revision=7)
    assert info.before is None and info.ignore_conflict is True and info.revision == 7
    assert info.ddls == ["ALTER TABLE t ADD COLUMN c INT"] and info.afters == [{"columns": ["c"]}]


@pytest.mark.parametrize("field,value,words", [
    ("task", 5, "expected a string, got 5"),
    ("ddls", "ALTER", "expected a list, got str"),
    ("ddls", ["ok", 3], "expected a string, got 3"),
    ("before", [1], "expected an object, got list"),
    ("afters", [{"a": 1}, "x"], "expected an object, got str"),
    ("ignore_conflict", 1, "expected true/false, got 1"),
])
def test_decode_names_the_field_and_the_bad_value(field, value, words):
    with pytest.raises(GarbageRecord) as ei:
        _decode(_info_dict(**{field: value}))
    assert f"field {field!r}" in str(ei.value) and words in str(ei.value) and ei.value.etcd_key == KEY


def test_decode_of_ints_enums_and_missing_fields():
    op = {"v": 1, "lock_id": "task1-`shop`.`orders`", "task": "task1", "source": "s1", "up_schema": "a",
          "up_table": "b", "down_schema": "shop", "down_table": "orders", "info_revision": 9, "ddls": [],
          "stage": "skip-and-wait"}
    assert Operation.decode("/t/operation/x", json.dumps(op).encode()).stage is Stage.SKIP_AND_WAIT
    for bad, words in ((True, "expected an integer, got True"), ("9", "expected an integer, got '9'")):
        with pytest.raises(GarbageRecord, match=words):
            Operation.decode("/t/operation/x", json.dumps({**op, "info_revision": bad}).encode())
    with pytest.raises(GarbageRecord, match="'stage'.*'later'"):
        Operation.decode("/t/operation/x", json.dumps({**op, "stage": "later"}).encode())
    with pytest.raises(GarbageRecord, match="lacks field 'info_revision'"):
        Operation.decode("/t/operation/x", json.dumps({k: v for k, v in op.items() if k != "info_revision"}).encode())


def test_encode_is_the_stdlib_compact_sorted_json_and_round_trips():
    info = Info(task="task1", source="s1", up_schema="shop_01", up_table="orders_0001", down_schema="shop",
                down_table="orders", ddls=["ALTER TABLE t ADD COLUMN `ü` INT COMMENT '\u2028\"'"],
                before={"z": 1, "a": [None, True, 1.5]}, afters=[])
    raw = info.encode()

    def std(x) -> str:
        return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # an Info (version 2) embeds each schema as JSON text
    assert raw == std({**info.to_dict(), "before": std(info.before), "afters": []}).encode()
    assert Info.decode(KEY, raw) == info
    op = Operation(lock_id="task1-`shop`.`orders`", task="task1", source="s1", up_schema="a", up_table="b",
                   down_schema="shop", down_table="orders", info_revision=9, ddls=["ALTER  "], stage=Stage.NONE)
    assert op.encode() == std(op.to_dict()).encode()


def test_info_schemas_are_stored_as_text_parsed_once_and_version_1_is_still_read():
    a = Info(task="task1", source="s1", up_schema="shop_01", up_table="orders_0001", down_schema="shop",
             down_table="orders", ddls=["x"], before={"columns": [1]}, afters=[{"columns": [1, 2]}])
    b = dataclasses.replace(a, up_table="orders_0002")
    stored = json.loads(a.encode())
    assert stored["v"] == 2 and stored["before"] == '{"columns":[1]}' and stored["afters"] == ['{"columns":[1,2]}']
    da = Info.decode(KEY, a.encode())
    db = Info.decode(KEY.replace("0001", "0002"), b.encode())
    assert da.before == a.before and da.afters == a.afters and db.before is da.before   # parsed once, shared
    v1 = _decode(_info_dict())                                  # written by a release before version 2
    assert v1.before == {"columns": []} and v1.afters == [{"columns": ["c"]}]
    with pytest.raises(GarbageRecord, match="field 'before'.*expected an object, got str"):
        Info.decode(KEY, json.dumps({**stored, "before": "{not json"}).encode())
    with pytest.raises(UnknownVersion, match="format version 3"):
        Info.decode(KEY, json.dumps({**stored, "v": 3}).encode())


def test_encode_falls_back_to_the_stdlib_for_what_orjson_refuses():
    # a free-form dict field may hold integers beyond 64 bits or non-string keys
    rec = Info(task="t", source="s", up_schema="a", up_table="b", down_schema="c", down_table="d", ddls=[],
               before={"big": 2 ** 70, "by_id": {1: "x"}}, afters=[])
    raw = rec.encode()
    assert json.loads(json.loads(raw)["before"]) == {"big": 2 ** 70, "by_id": {"1": "x"}}
    op = Operation(lock_id="l", task="t", source="s", up_schema="a", up_table="b", down_schema="c",
                   down_table="d", info_revision=2 ** 70, ddls=[], stage=Stage.NONE)
    assert b'"info_revision":1180591620717411303424' in op.encode()


def test_key_components_that_need_quoting_parse_back():
    keys = Keys("/p/")
    key = keys.info("task 1", "shop", "orders", "s/1", "shop_01", "orders%1")
    kind, parts = keys.parse(key)
    assert kind == "info" and parts["task"] == "task 1" and parts["source"] == "s/1"
    assert parts["up_table"] == "orders%1" and parts["down_schema"] == "shop"


def test_encode_with_a_changed_field_is_the_record_with_that_field():
    op = Operation(lock_id="task1-`shop`.`orders`", task="task1", source="s1", up_schema="a", up_table="b",
                   down_schema="shop", down_table="orders", info_revision=9, ddls=[], stage=Stage.NONE)
    assert op.encode(done=True) == dataclasses.replace(op, done=True).encode()
    assert op.encode(stage=Stage.UNLOCKED) == dataclasses.replace(op, stage=Stage.UNLOCKED).encode()
    with pytest.raises(TypeError, match="no stored field 'revision'"):
        op.encode(revision=5)        # not stored: it comes from the key's metadata


def test_remembered_keys_are_the_built_ones_and_bad_components_still_fail():
    keys = Keys("/p/")
    first = keys.info("t", "shop", "orders", "s1", "shop_01", "orders 1")
    assert keys.info("t", "shop", "orders", "s1", "shop_01", "orders 1") is first     # remembered
    assert keys.parse(first)[1]["up_table"] == "orders 1"
    assert keys.key("info", "t", "shop") == "/p/info/t/shop/"                          # prefixes are not
    with pytest.raises(BadKey):
        keys.key("info", "t", ["shop"])                                                 # unhashable
    with pytest.raises(BadKey):
        keys.info("t", "shop", "orders", "s1", "", "x")
