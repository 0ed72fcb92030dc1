"""Two different conflicting changes pending at once, when a table makes the other one later in
the same ALTER (``Info.rest``): the lock asks that table for the later change first
(``Operation.first``) instead of holding both groups until an operator loses one column's
values.  Each failed on the engine before (detected, or a rename with a position clause
MariaDB refuses), except the one pinning that changes which do not commute keep the old answer."""
from __future__ import annotations

import dataclasses

from coordinator.etcdproto import Stage
from coordinator.lock import LockKeeper

from .harness import LOCK, Harness

T = "CREATE TABLE t (id INT PRIMARY KEY, v INT, a INT, b INT)"
RA, RB = "ALTER TABLE t RENAME COLUMN a TO a2", "ALTER TABLE t RENAME COLUMN b TO b2"


def send(h: Harness, name: str, ddl: str, rest=(), ts: int = 0, done: bool = True):
    info = dataclasses.replace(h.make_info(name, ddl), rest=list(rest), timestamp=ts)
    return h.send(name, info=info, done=done)


def test_an_alter_packing_two_renames_in_the_other_order_is_asked_for_the_held_one_first():
    """A renames `a` then `b` in one ALTER, B `b` then `a`: B's `RENAME b` would be detected
    against A's pending `RENAME a`.  B is asked for its `RENAME a` first; then both renames are
    agreed in one order and each runs once."""
    h = Harness(T)
    assert send(h, "A", RA, [RB]).operation.stage is Stage.SKIP_AND_WAIT
    b = send(h, "B", RB, [RA])
    assert b.operation.stage is Stage.SKIP_AND_WAIT and b.operation.first == RA and b.operation.ddls == []
    assert h.lock.members[h.refs["B"]].conflict is None            # its RENAME b is withdrawn
    assert h.lock.waiting_for(h.refs["B"]).startswith(f"asked for a later change of its ALTER first: {RA}")
    assert send(h, "B", RA, [RB]).operation.ddls == [RA]           # the last to rename a: runs it
    assert send(h, "A", RB).operation.stage is Stage.SKIP_AND_WAIT
    assert send(h, "B", RB).operation.ddls == [RB]
    assert [d for o in h.written for d in o.ddls] == [RA, RB]


def test_the_tables_held_before_are_asked_when_the_one_arriving_has_no_later_change():
    """A and B hold `RENAME a` with `RENAME b` later in their ALTER; C renames `b` only.  C
    cannot wait for `a`, so A and B are asked for `RENAME b` first, and C's is held, not
    detected."""
    h = Harness(T, tables=("A", "B", "C"))
    send(h, "A", RA, [RB])
    send(h, "B", RA, [RB])
    c = send(h, "C", RB)
    assert c.operation.stage is Stage.SKIP_AND_WAIT and not c.operation.first
    asked = {o.table: o.first for o in c.others}
    assert asked == {h.refs["A"]: RB, h.refs["B"]: RB}
    send(h, "A", RB, [RA])
    assert send(h, "B", RB, [RA]).operation.ddls == [RB]
    # C's ALTER had no `RENAME a`: the lock waits for C's own later statement, as for any rename
    assert send(h, "A", RA).operation.stage is Stage.SKIP_AND_WAIT


def test_changes_that_do_not_commute_are_not_reordered():
    """Each ALTER makes the other's rename later, but an `ADD ... AFTER` before it names the
    column the held rename renames: moved first, that ADD would fail.  Nothing is asked; B is
    detected as before (the operator's exits)."""
    h = Harness(T)
    send(h, "A", RA, ["ALTER TABLE t ADD COLUMN c INT AFTER b", RB])
    b = send(h, "B", RB, ["ALTER TABLE t ADD COLUMN c INT AFTER a", RA])
    assert b.operation.stage is Stage.DETECTED and not b.operation.first
    assert not b.others


def test_a_rename_run_after_a_later_committed_add_gets_no_position_clause():
    """The lock places an ADD COLUMN committed upstream before columns other shards added later
    (DM keeps commit order) with ``AFTER``; a rename committed before such an ADD once got the
    same clause, and ``RENAME COLUMN a TO a2 AFTER v`` is refused by MariaDB and MySQL."""
    h = Harness(T)
    add = "ALTER TABLE t ADD COLUMN c INT"
    send(h, "A", add, ts=200)
    send(h, "B", add, ts=200)
    send(h, "A", RA, ts=150)
    assert send(h, "B", RA, ts=150).operation.ddls == [RA]


def test_an_asked_table_is_rebuilt_as_live():
    """A master that dies after asking B for a later change first: the rebuilt lock has B's
    change withdrawn and the same answer, as the live one."""
    from .test_scenarios import SourceTablesFor
    h = Harness(T)
    send(h, "A", RA, [RB])
    send(h, "B", RB, [RA])
    ops = {o.table: o for o in h.written}
    rb = LockKeeper.rebuild(list(h.infos.values()), list(ops.values()), [SourceTablesFor(h)], [])
    assert rb.errors == []
    lock = rb.keeper.find(LOCK)
    live = h.lock
    for t, m in live.members.items():
        r = lock.members[t]
        assert (r.schema.lattice_key(), r.conflict is None, r.answer.stage, r.answer.first) == \
            (m.schema.lattice_key(), m.conflict is None, m.answer.stage, m.answer.first)
    assert lock.members[h.refs["B"]].answer.first == RA
