"""Bad or inconsistent records mark their lock `error` at rebuild instead of failing it (dm#1185)."""
from __future__ import annotations

from coordinator.etcdproto import GarbageRecord, Stage
from coordinator.lock import LockKeeper

from .harness import LOCK, Harness
from .test_scenarios import SourceTablesFor


def test_garbage_info_marks_only_its_lock_error():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY)")
    h.send("A", "ALTER TABLE t ADD COLUMN c1 INT")
    bad = GarbageRecord("info record is not JSON", etcd_key="/x/info/task/db/t/s1/db/b", kind="info",
                        parts={"task": "task", "down_schema": "db", "down_table": "t", "source": "s1",
                               "up_schema": "db", "up_table": "b"})
    other = GarbageRecord("info record is not JSON", etcd_key="/x/info/task2/db/u/s1/db/x", kind="info",
                          parts={"task": "task2", "down_schema": "db", "down_table": "u", "source": "s1",
                                 "up_schema": "db", "up_table": "x"})
    rb = LockKeeper.rebuild(list(h.infos.values()), [h.last["A"]], [SourceTablesFor(h)], [], bad=[bad, other])
    views = {v.ID: v for v in rb.keeper.locks()}
    assert views[LOCK.id].state == "error" and "/x/info/task/db/t/s1/db/b" in views[LOCK.id].error
    assert "task2-`db`.`u`" in views and views["task2-`db`.`u`"].state == "error"
    assert len(rb.errors) == 2
    # the worker re-sends a valid Info for the bad table: its error clears
    out = rb.keeper.handle_info(h.make_info("B", "ALTER TABLE t ADD COLUMN c1 INT"))
    assert out.operation.stage is Stage.NONE
    assert rb.keeper.locks(task="task")[0].state != "error"


def test_unreadable_schema_in_info_is_answered_with_error():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY)")
    h.send("A", "ALTER TABLE t ADD COLUMN c1 INT")
    info = h.make_info("B", "ALTER TABLE t ADD COLUMN c1 INT")
    info.afters = [{"nonsense": 1}]
    out = h.k.handle_info(info)
    assert out.operation.stage is Stage.ERROR and "unreadable schema" in out.operation.message
    assert "unlock" in h.lock.waiting_for(h.refs["B"])
