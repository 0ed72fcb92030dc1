"""``SchemaOverrides`` (``binlog-schema update|delete`` without ``--flush``), pure logic: the kept
structure goes into the infos a subtask restores from while the checkpoint still holds the one
it replaced, and is dropped once the checkpoint has it or has moved on (a later DDL).  The e2e
test (tests/e2e/test_binlog_schema_inject.py) runs it on real processes."""
from __future__ import annotations

from worker.sync.schema_ops import SchemaOverrides

OLD = '{"columns":["id","v"]}'
NEW = '{"columns":["id","v","c"]}'
LATER = '{"columns":["id","v","c","d"]}'
T = ("shop_01", "orders_01")


def test_kept_until_the_checkpoint_holds_it():
    o = SchemaOverrides()
    o.put("t1", "s1", T, OLD, NEW)
    assert o.get("t1", "s1", T) == (True, NEW) and o.get("t1", "s2", T) == (False, None)
    assert o.apply("t1", "s1", {T: OLD, ("shop_01", "x"): OLD}) == {T: NEW, ("shop_01", "x"): OLD}
    assert o.apply("t1", "s1", {T: OLD})[T] == NEW               # a second restart: still in force
    assert o.apply("t1", "s1", {T: ' {"columns": ["id","v","c"]}'})[T] == ' {"columns": ["id","v","c"]}'
    assert o.get("t1", "s1", T) == (False, None)                  # checkpointed: dropped


def test_dropped_when_a_newer_structure_was_checkpointed():
    o = SchemaOverrides()
    o.put("t1", "s1", T, OLD, NEW)
    assert o.apply("t1", "s1", {T: LATER}) == {T: LATER}
    assert o.get("t1", "s1", T) == (False, None)


def test_delete_forgets_the_table_and_a_table_without_checkpoint_gets_it():
    o = SchemaOverrides()
    o.put("t1", "s1", T, OLD, None)
    assert o.apply("t1", "s1", {T: OLD}) == {T: None}            # restored untracked: re-read upstream
    assert o.apply("t1", "s1", {T: OLD}) == {T: None}
    assert o.apply("t1", "s1", {T: "null"}) == {T: "null"}       # the checkpoint says "none" too: done
    assert o.get("t1", "s1", T) == (False, None)
    o.put("t1", "s1", ("shop_01", "new"), None, NEW)
    assert o.apply("t1", "s1", {})[("shop_01", "new")] == NEW
    o.drop("t1", "s1", ("shop_01", "new"))
    assert o.apply("t1", "s1", {}) == {}
