"""The scenario table of the design document (§5), one test per row group, on the pure engine."""
from __future__ import annotations

import pytest

from coordinator.etcdproto import Stage, TableRef
from coordinator.lock import LockKeeper, UnlockRefused

from .harness import LOCK, Harness
from coordinator.schema.ddl import apply_ddl

ID = "CREATE TABLE t (id INT PRIMARY KEY)"


def ret(out):
    return out.operation.ddls


def stage(out):
    return out.operation.stage


def test_s1_add_column_on_both_tables():
    h = Harness(ID)
    a = h.send("A", "ALTER TABLE t ADD COLUMN c1 INT")
    assert ret(a) == ["ALTER TABLE t ADD COLUMN c1 INT"] and stage(a) is Stage.NONE
    assert not h.synced() and h.ready() == {"A": True, "B": False}
    assert "has not added column `c1`" in h.lock.waiting_for(h.refs["B"])
    b = h.send("B", "ALTER TABLE t ADD COLUMN c1 INT")
    assert ret(b) == ["ALTER TABLE t ADD COLUMN c1 INT"] and h.synced()
    assert h.lock.is_resolved()


def test_s2_restart_resends_the_same_info():
    h = Harness(ID)
    h.send("A", "ALTER TABLE t ADD COLUMN c1 INT")
    h.send("B", "ALTER TABLE t ADD COLUMN c1 INT")
    again = h.make_info("A", "ALTER TABLE t ADD COLUMN c1 INT", before=h.init)
    out = h.send("A", info=again)
    # DM returns the DDL again (the downstream ignores the duplicate column); ours knows A's
    # answer was done, so nothing runs twice (invariant 5, docs/lock-algorithm.md)
    assert ret(out) == [] and stage(out) is Stage.NONE and h.synced()
    assert "already in effect" in out.operation.message


def test_s2b_restart_before_done_gets_the_same_answer_again():
    """The worker died between its Operation and its done mark: the re-sent Info is answered
    with the same statements (its intent row absorbs a repeat), not re-decided."""
    h = Harness(ID)
    h.send("A", "ALTER TABLE t ADD COLUMN c1 INT", done=False)
    again = h.make_info("A", "ALTER TABLE t ADD COLUMN c1 INT", before=h.init)
    out = h.send("A", info=again)
    assert ret(out) == ["ALTER TABLE t ADD COLUMN c1 INT"] and out.operation.info_revision == again.revision


def test_s3_multi_statement_info():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)")
    out = h.send("A", "ALTER TABLE t ADD COLUMN c2 BIGINT", "ALTER TABLE t ADD COLUMN c3 TEXT")
    assert ret(out) == ["ALTER TABLE t ADD COLUMN c2 BIGINT", "ALTER TABLE t ADD COLUMN c3 TEXT"]
    assert h.ready() == {"A": True, "B": False}
    assert ret(h.send("B", "ALTER TABLE t ADD COLUMN c2 BIGINT")) == ["ALTER TABLE t ADD COLUMN c2 BIGINT"]
    assert h.ready()["B"] is False
    assert ret(h.send("B", "ALTER TABLE t ADD COLUMN c3 TEXT")) == ["ALTER TABLE t ADD COLUMN c3 TEXT"]
    assert h.synced()


def test_s4_drop_column_returned_only_by_the_last_table():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT, c2 BIGINT, c3 TEXT)", tables=("A", "B", "C"))
    a = h.send("A", "ALTER TABLE t DROP COLUMN c3")
    assert ret(a) == [] and a.operation.cols == ["c3"]
    assert h.ready() == {"A": False, "B": True, "C": True} and h.remain() == 1
    assert "dropped column `c3`; waiting for s1-`db`.`b`, s1-`db`.`c`" in h.lock.waiting_for(h.refs["A"])
    b = h.send("B", "ALTER TABLE t DROP COLUMN c3")
    assert ret(b) == [] and b.operation.cols == ["c3"] and h.remain() == 2
    c = h.send("C", "ALTER TABLE t DROP COLUMN c3")
    assert ret(c) == ["ALTER TABLE t DROP COLUMN c3"] and c.operation.cols == ["c3"] and h.synced()
    assert h.dropped() == {}  # C executed the DROP downstream: records cleared
    assert h.last_done.dropped_deletes == ["c3"]


def test_s5_drop_two_columns_in_different_batches():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT, c2 BIGINT)", tables=("A", "B", "C"))
    a = h.send("A", "ALTER TABLE t DROP COLUMN c2", "ALTER TABLE t DROP COLUMN c1")
    assert ret(a) == [] and a.operation.cols == ["c2", "c1"]
    assert h.send("B", "ALTER TABLE t DROP COLUMN c2").operation.cols == ["c2"]
    assert ret(h.send("B", "ALTER TABLE t DROP COLUMN c1")) == []
    c = h.send("C", "ALTER TABLE t DROP COLUMN c2", "ALTER TABLE t DROP COLUMN c1")
    assert ret(c) == ["ALTER TABLE t DROP COLUMN c2", "ALTER TABLE t DROP COLUMN c1"] and h.synced()


def test_s6_drop_and_re_add_unique_index():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT, UNIQUE INDEX idx_c1(c1))")
    assert ret(h.send("A", "ALTER TABLE t DROP INDEX idx_c1")) == ["ALTER TABLE t DROP INDEX idx_c1"]
    assert h.remain() == 1
    assert ret(h.send("B", "ALTER TABLE t DROP INDEX idx_c1")) == ["ALTER TABLE t DROP INDEX idx_c1"]
    assert h.synced()
    assert ret(h.send("A", "ALTER TABLE t ADD UNIQUE INDEX idx_c1(c1)")) == []
    assert h.remain() == 1
    assert "index `idx_c1`" in h.lock.waiting_for(h.refs["A"])
    assert ret(h.send("B", "ALTER TABLE t ADD UNIQUE INDEX idx_c1(c1)")) == ["ALTER TABLE t ADD UNIQUE INDEX idx_c1(c1)"]
    assert h.synced()


def test_s7_add_index_returned_by_the_last_table():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)")
    assert ret(h.send("A", "ALTER TABLE t ADD INDEX new_idx(c1)")) == [] and h.remain() == 1
    assert ret(h.send("B", "ALTER TABLE t ADD INDEX new_idx(c1)")) == ["ALTER TABLE t ADD INDEX new_idx(c1)"]
    assert h.synced()


def test_s8_modify_nullability():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT NULL DEFAULT 1234)")
    nn = "ALTER TABLE t MODIFY COLUMN c1 INT NOT NULL DEFAULT 1234"
    null = "ALTER TABLE t MODIFY COLUMN c1 INT NULL DEFAULT 1234"
    assert ret(h.send("A", nn)) == []
    assert ret(h.send("B", nn)) == [nn]
    assert ret(h.send("A", null)) == [null]
    assert ret(h.send("B", null)) == [null] and h.synced()


def test_s9_widen_int_to_bigint():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT NOT NULL DEFAULT 1234)")
    m = "ALTER TABLE t MODIFY COLUMN c1 BIGINT NOT NULL DEFAULT 1234"
    assert ret(h.send("A", m)) == [m]
    assert ret(h.send("B", m)) == [m] and h.synced()


def held_by(out, runner: str, h) -> bool:
    """The resolution persisted with the held tables' answers: each is still held, naming the
    table that runs the agreed change (issue 28: a rebuild restores the runner, never re-decides)."""
    return bool(out.others) and all(o.stage is Stage.SKIP_AND_WAIT and o.runner == str(h.refs[runner])
                                    for o in out.others)


def test_s10_rename_column_skip_and_wait_then_redirect():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)")
    r = "ALTER TABLE t RENAME COLUMN c1 TO c2"
    a = h.send("A", r)
    assert ret(a) == [] and stage(a) is Stage.SKIP_AND_WAIT
    assert h.k.locks()[0].state == "conflict"
    assert "skip-and-wait" in h.lock.waiting_for(h.refs["A"]) and "s1-`db`.`b`" in h.lock.waiting_for(h.refs["A"])
    b = h.send("B", r)
    assert ret(b) == [r] and stage(b) is Stage.NONE and held_by(b, "B", h)   # nothing redirected before B ran it
    [redirect] = h.last_done.others       # B's done mark: the downstream has the change, A replays
    assert redirect.table == h.refs["A"] and redirect.stage is Stage.RESOLVED
    assert redirect.info_revision == a.operation.info_revision and redirect.ddls == []
    replay = h.send("A", r)   # worker replays from the conflict start: same Info again
    # B's execution renamed the merged column: A's replay must not rename it a second time
    assert ret(replay) == [] and stage(replay) is Stage.NONE and h.synced() and h.lock.is_resolved()


def test_s10b_redirects_wait_for_the_agreed_change_to_run_downstream():
    """DM_RESYNC_NOT_FLUSHED: the last table's worker dies between its Operation (run the rename)
    and running it.  Held tables are not redirected, and a held table's replay is held again,
    until that rename ran downstream: their rows after it need the renamed column (a replay that
    streamed on met "Unknown column", and on one source it could never reach the other table)."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)", tables=("A", "B", "C"))
    r = "ALTER TABLE t RENAME COLUMN c1 TO c2"
    assert stage(h.send("A", r)) is Stage.SKIP_AND_WAIT
    assert stage(h.send("B", r)) is Stage.SKIP_AND_WAIT
    c = h.send("C", r, done=False)                  # the worker dies before running it
    assert ret(c) == [r] and held_by(c, "C", h)
    again = h.send("A", r)                          # A's worker restarted and replays its DDL
    assert stage(again) is Stage.SKIP_AND_WAIT and ret(again) == [] and "C" in again.operation.message
    c2 = h.send("C", info=h.make_info("C", r, before=h.init), done=False)   # C's worker restarted: runs it, once
    assert ret(c2) == [r] and stage(c2) is Stage.NONE
    done = h.done("C")
    assert sorted(str(o.table) for o in done.others) == sorted(str(h.refs[n]) for n in ("A", "B"))
    assert all(o.stage is Stage.RESOLVED and o.ddls == [] for o in done.others)
    assert ret(h.send("A", r)) == [] and ret(h.send("B", r)) == []   # the replays run nothing
    assert h.synced() and h.lock.is_resolved()


def test_s10c_only_the_resolving_table_gates_a_replay():
    """The hold of s10b is narrow: a replay waits for the table that runs ITS change, not for an
    unrelated DDL some other table is running (holding it there made held tables churn between
    hold and redirect, and replay their later DDLs into a lock that had moved on)."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)", tables=("A", "B", "C"))
    r = "ALTER TABLE t RENAME COLUMN c1 TO c2"
    assert stage(h.send("A", r)) is Stage.SKIP_AND_WAIT
    assert stage(h.send("B", r)) is Stage.SKIP_AND_WAIT
    c = h.send("C", r)                                       # C runs the rename and is done
    assert ret(c) == [r] and stage(c) is Stage.NONE
    assert sorted(str(o.table) for o in h.last_done.others) == sorted(str(h.refs[n]) for n in ("A", "B"))
    add = h.send("C", "ALTER TABLE t ADD COLUMN d INT", done=False)   # C now runs an unrelated ADD
    assert ret(add) == ["ALTER TABLE t ADD COLUMN d INT"]
    replay = h.send("A", r)                                  # A's replay: the rename is downstream
    assert stage(replay) is Stage.NONE and ret(replay) == []


def test_s10d_a_held_replay_is_released_when_the_resolving_table_leaves():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)", tables=("A", "B"))
    r = "ALTER TABLE t RENAME COLUMN c1 TO c2"
    assert stage(h.send("A", r)) is Stage.SKIP_AND_WAIT
    b = h.send("B", r, done=False)
    assert ret(b) == [r] and held_by(b, "B", h)
    again = h.send("A", r)
    assert stage(again) is Stage.SKIP_AND_WAIT
    gone = h.k.remove_table(LOCK.id, h.refs["B"], reason="dropped upstream")
    assert [(str(o.table), o.stage) for o in gone.others] == [(str(h.refs["A"]), Stage.RESOLVED)]


def test_s10e_a_master_rebuilt_before_the_agreed_change_ran_keeps_the_redirects_queued():
    """Master failover between the last shard's Operation (run the rename) and its done mark:
    the rebuilt lock must not redirect the held tables (their replays need the rename
    downstream); the done mark the new master then sees releases them."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)", tables=("A", "B", "C"))
    r = "ALTER TABLE t RENAME COLUMN c1 TO c2"
    h.send("A", r)
    h.send("B", r)
    c = h.send("C", r, done=False)
    assert ret(c) == [r] and held_by(c, "C", h)
    ops = {o.table: o for o in h.written}
    rb = LockKeeper.rebuild(list(h.infos.values()), list(ops.values()), [SourceTablesFor(h)], [])
    assert rb.errors == []
    stages = {str(o.table): o.stage for o in rb.operations}
    assert stages[str(h.refs["A"])] is Stage.SKIP_AND_WAIT and stages[str(h.refs["B"])] is Stage.SKIP_AND_WAIT
    op_c = next(o for o in rb.operations if o.table == h.refs["C"])
    assert op_c.stage is Stage.NONE and op_c.ddls == [r] and not op_c.done
    op_c.done = True
    released = rb.keeper.mark_done(op_c)
    assert sorted(str(o.table) for o in released.others) == sorted(str(h.refs[n]) for n in ("A", "B"))
    assert all(o.stage is Stage.RESOLVED for o in released.others)


def test_s11_modify_type_skip_and_wait():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c3 INT)")
    m = "ALTER TABLE t MODIFY COLUMN c3 DATE"
    assert stage(h.send("A", m)) is Stage.SKIP_AND_WAIT
    b = h.send("B", m)
    assert ret(b) == [m] and [o.stage for o in h.last_done.others] == [Stage.RESOLVED]
    assert ret(h.send("A", m)) == [] and h.synced()     # the replay: the type change ran once


def test_a_retype_to_a_type_whose_join_holds_both_holds_nobody():
    """INT -> VARCHAR(4): DM holds A (S11 above).  The join of INT and VARCHAR(4) is VARCHAR(20)
    (an integer's text): A runs the widening to it and goes on; B, the last, runs its statement,
    which narrows the downstream to the type every table has now."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c3 INT)")
    m = "ALTER TABLE t MODIFY COLUMN c3 VARCHAR(4)"
    a = h.send("A", m)
    assert stage(a) is Stage.NONE and ret(a) == ["ALTER TABLE `db`.`t` MODIFY COLUMN `c3` varchar(20) DEFAULT NULL"]
    b = h.send("B", m)
    assert ret(b) == [m] and h.synced()


def test_s12_add_not_null_column_without_default():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c3 VARCHAR(4))")
    add = "ALTER TABLE t ADD COLUMN c4 INT NOT NULL"
    assert stage(h.send("A", add)) is Stage.SKIP_AND_WAIT
    again = h.send("A", add)
    assert stage(again) is Stage.SKIP_AND_WAIT and ret(again) == []
    b = h.send("B", add)
    assert ret(b) == [add] and [o.table for o in h.last_done.others] == [h.refs["A"]]
    assert ret(h.send("B", info=h.make_info("B", add, before=h.init))) == []   # B re-sends: it ran already
    assert ret(h.send("A", add)) == [] and h.synced()    # B ran it downstream; A's replay runs nothing


def test_s13_two_different_conflicting_ddls_detected():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c3 VARCHAR(4), c4 INT NOT NULL)")
    assert stage(h.send("A", "ALTER TABLE t RENAME COLUMN c3 TO c2")) is Stage.SKIP_AND_WAIT
    b = h.send("B", "ALTER TABLE t MODIFY COLUMN c3 DATE")
    assert ret(b) == [] and stage(b) is Stage.DETECTED
    assert "s1-`db`.`a`" in b.operation.message
    assert h.lock.members[h.refs["B"]].conflict is None             # B reverted
    assert h.lock.members[h.refs["A"]].conflict is not None         # A still waiting
    view = h.k.locks()[0]
    assert view.owner == "s1-`db`.`b`" and view.DDLs == ["ALTER TABLE t MODIFY COLUMN c3 DATE"]


def test_s14_drop_not_null_column_without_default():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c INT NOT NULL)")
    assert stage(h.send("A", "ALTER TABLE t DROP COLUMN c")) is Stage.SKIP_AND_WAIT
    b = h.send("B", "ALTER TABLE t DROP COLUMN c")
    assert ret(b) == ["ALTER TABLE t DROP COLUMN c"] and b.operation.cols == ["c"]
    assert [o.stage for o in h.last_done.others] == [Stage.RESOLVED]


def test_s15_detected_add_then_non_intrusive_fix_answers_blocked_table():
    h = Harness(ID)
    assert ret(h.send("A", "ALTER TABLE t ADD COLUMN c1 TEXT")) == ["ALTER TABLE t ADD COLUMN c1 TEXT"]
    b = h.send("B", "ALTER TABLE t ADD COLUMN c1 DATETIME", "ALTER TABLE t ADD COLUMN c2 INT")
    assert ret(b) == [] and stage(b) is Stage.DETECTED
    assert h.lock.members[h.refs["B"]].schema == h.init      # lock keeps B at (id)
    assert "conflict" in h.lock.waiting_for(h.refs["B"]) and "unlock" in h.lock.waiting_for(h.refs["B"])
    a = h.send("A", "ALTER TABLE t DROP COLUMN c1")
    assert ret(a) == ["ALTER TABLE t DROP COLUMN c1"] and a.operation.cols == ["c1"]
    # improvement over DM: the blocked table is re-evaluated without a resume.  Its ADD of c1 and
    # A's DROP of c1 must not run in either order (B's ADD first: swallowed as a duplicate, then
    # A's DROP removes the column B writes), so B is held until A's DROP is done ...
    [ob] = a.others
    assert ob.table == h.refs["B"] and ob.stage is Stage.SKIP_AND_WAIT and ob.runs_after == str(h.refs["A"])
    assert ob.info_revision == b.operation.info_revision
    [released] = h.last_done.others
    assert released.table == h.refs["B"] and released.stage is Stage.RESOLVED
    # ... then its replay runs its ADDs
    again = h.send("B", info=h.infos["B"])
    assert ret(again) == ["ALTER TABLE t ADD COLUMN c1 DATETIME", "ALTER TABLE t ADD COLUMN c2 INT"]


def test_s16_intrusive_fix_by_replacing_the_ddl():
    h = Harness(ID)
    h.send("A", "ALTER TABLE t ADD COLUMN c1 TEXT")
    assert stage(h.send("B", "ALTER TABLE t ADD COLUMN c1 DATETIME", "ALTER TABLE t ADD COLUMN c2 INT")) is Stage.DETECTED
    assert stage(h.send("B", "ALTER TABLE t ADD COLUMN c1 DATETIME")) is Stage.DETECTED
    out = h.send("B", "ALTER TABLE t ADD COLUMN c1 TEXT")
    assert ret(out) == ["ALTER TABLE t ADD COLUMN c1 TEXT"] and h.synced()


def test_s17_replace_with_a_different_statement():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 TEXT)")
    h.send("A", "ALTER TABLE t ADD COLUMN c2 TEXT")
    assert stage(h.send("B", "ALTER TABLE t ADD COLUMN c2 DATETIME", "ALTER TABLE t ADD COLUMN c3 INT")) is Stage.DETECTED
    out = h.send("B", "ALTER TABLE t ADD COLUMN c3 INT")
    assert ret(out) == ["ALTER TABLE t ADD COLUMN c3 INT"] and h.ready() == {"A": False, "B": False}
    assert ret(h.send("A", "ALTER TABLE t ADD COLUMN c3 INT")) == ["ALTER TABLE t ADD COLUMN c3 INT"]
    assert ret(h.send("B", "ALTER TABLE t ADD COLUMN c2 TEXT")) == ["ALTER TABLE t ADD COLUMN c2 TEXT"]
    assert h.synced()


def test_s18_add_then_revert_on_one_table():
    h = Harness(ID)
    assert ret(h.send("A", "ALTER TABLE t ADD COLUMN c1 TEXT")) == ["ALTER TABLE t ADD COLUMN c1 TEXT"]
    d = h.send("A", "ALTER TABLE t DROP COLUMN c1")
    assert ret(d) == ["ALTER TABLE t DROP COLUMN c1"] and d.operation.cols == ["c1"] and h.synced()
    assert h.dropped() == {}   # A's done cleared the c1 record (it executed the DROP)
    out = h.send("A", "ALTER TABLE t ADD COLUMN c1 TEXT", "ALTER TABLE t ADD COLUMN c2 INT")
    assert len(ret(out)) == 2
    d2 = h.send("A", "ALTER TABLE t DROP COLUMN c2")
    assert ret(d2) == ["ALTER TABLE t DROP COLUMN c2"] and d2.operation.cols == ["c2"]
    d1 = h.send("A", "ALTER TABLE t DROP COLUMN c1")
    assert ret(d1) == ["ALTER TABLE t DROP COLUMN c1"] and d1.operation.cols == ["c1"] and h.synced()


def test_s19_same_column_with_different_lengths_is_an_error():
    for first, second in (("VARCHAR(4)", "VARCHAR(5)"), ("VARCHAR(5)", "VARCHAR(4)")):
        h = Harness(ID)
        assert ret(h.send("A", f"ALTER TABLE t ADD COLUMN c1 {first}")) == [f"ALTER TABLE t ADD COLUMN c1 {first}"]
        b = h.send("B", f"ALTER TABLE t ADD COLUMN c1 {second}")
        assert ret(b) == [] and stage(b) is Stage.ERROR
        assert "c1" in b.operation.message and "different" in b.operation.message
        assert h.k.locks()[0].state == "conflict"


def test_s20_re_adding_a_partially_dropped_column_is_refused():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, b INT, c INT)")
    ca = h.send("A", "ALTER TABLE t DROP COLUMN c", done=False)       # A has not confirmed yet
    assert ret(ca) == [] and ca.dropped_puts == [(h.refs["A"], ["c"], 0)]
    h.done("A")
    assert h.dropped() == {"c": {"A": 1}}
    assert ret(h.send("A", "ALTER TABLE t DROP COLUMN b")) == []
    bb = h.send("B", "ALTER TABLE t DROP COLUMN b")
    assert ret(bb) == ["ALTER TABLE t DROP COLUMN b"]
    assert "b" not in h.dropped() and h.last_done.dropped_deletes == ["b"]   # B executed it, A confirmed
    assert ret(h.send("A", "ALTER TABLE t ADD COLUMN b INT")) == ["ALTER TABLE t ADD COLUMN b INT"]
    err = h.send("A", "ALTER TABLE t ADD COLUMN c INT")
    assert stage(err) is Stage.ERROR and "`c`" in err.operation.message
    assert "s1-`db`.`b`" in err.operation.message          # names the shard that still has c
    # B drops c without A... A's record is PARTIAL: B's DROP executes downstream -> cleared
    h2 = Harness("CREATE TABLE t (id INT PRIMARY KEY, c INT)")
    h2.send("A", "ALTER TABLE t DROP COLUMN c", done=False)
    assert ret(h2.send("B", "ALTER TABLE t DROP COLUMN c")) == ["ALTER TABLE t DROP COLUMN c"]
    assert h2.dropped() == {"c": {"A": 0, "B": 2}}   # A never confirmed: still partially dropped
    readd = h2.send("B", "ALTER TABLE t ADD COLUMN c INT")
    assert stage(readd) is Stage.ERROR and "not yet confirmed by s1-`db`.`a`" in readd.operation.message
    h2.done("A")
    assert h2.dropped() == {}
    assert ret(h2.send("B", "ALTER TABLE t ADD COLUMN c INT")) == ["ALTER TABLE t ADD COLUMN c INT"]
    # dropped and re-added in one Info
    h3 = Harness("CREATE TABLE t (id INT PRIMARY KEY, c INT)")
    same = h3.send("A", "ALTER TABLE t DROP COLUMN c", "ALTER TABLE t ADD COLUMN c INT")
    assert stage(same) is Stage.ERROR and "same DDL batch" in same.operation.message


def test_s21_eight_tables_add_and_drop_in_one_info():
    names = [f"T{i}" for i in range(1, 9)]
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)", tables=names)
    add, drop = "ALTER TABLE t ADD COLUMN c2 INT", "ALTER TABLE t DROP COLUMN c1"
    for n in names[:7]:
        out = h.send(n, add, drop)
        assert ret(out) == [add] and out.operation.cols == ["c1"]
    last = h.send("T8", add, drop)
    assert ret(last) == [add, drop] and h.synced()
    again = h.send("T8", info=h.make_info("T8", add, drop, before=h.init))
    assert ret(again) == []          # T8's answer was done: its re-sent Info runs nothing twice
    d2, a3 = "ALTER TABLE t DROP COLUMN c2", "ALTER TABLE t ADD COLUMN c3 TEXT"
    for n in names[:7]:
        assert ret(h.send(n, d2, a3)) == [a3]
    assert ret(h.send("T8", d2, a3)) == [d2, a3] and h.synced()


def test_s22_inconsistent_statement_and_schema_counts():
    h = Harness(ID)
    info = h.make_info("A", "ALTER TABLE t ADD COLUMN c1 INT")
    info.afters = info.afters * 2
    out = h.send("A", info=info)
    assert stage(out) is Stage.ERROR and "inconsistent" in out.operation.message
    assert h.lock.members[h.refs["A"]].schema == h.init


def test_s23_unknown_table_joins_the_lock_on_the_fly():
    k = LockKeeper()
    h = Harness(ID, tables=("s1.A",), keeper=k)
    h.send("s1.A", "ALTER TABLE t ADD COLUMN c0 INT", done=True)   # creates the lock
    h.add("s2.B", h.schema["s1.A"])
    out = h.send("s2.B", "ALTER TABLE t ADD COLUMN c1 INT")
    assert ret(out) == ["ALTER TABLE t ADD COLUMN c1 INT"]
    assert h.ready() == {"s1.A": False, "s2.B": True}


def test_s24_source_tables_bring_new_members_with_checkpoint_schema():
    init = "CREATE TABLE t (id INT PRIMARY KEY)"
    checkpoints = {}
    k = LockKeeper(schema_source=lambda lock, t: checkpoints.get(t))
    h = Harness(init, tables=("s1.A",), keeper=k)
    h.send("s1.A", "ALTER TABLE t ADD COLUMN c0 INT")
    checkpoints[TableRef("s1", "db", "c")] = h.schema["s1.A"]   # C's checkpoint already has c0
    h.add("s1.C", h.schema["s1.A"])
    h.add("s2.D")                                               # no checkpoint: init schema
    h.publish_source_tables()
    out = h.send("s1.A", "ALTER TABLE t ADD COLUMN c1 INT")
    assert ret(out) == ["ALTER TABLE t ADD COLUMN c1 INT"]
    assert h.ready() == {"s1.A": True, "s1.C": False, "s2.D": False}
    assert h.lock.members[TableRef("s2", "db", "d")].schema.column("c0") is None
    assert ret(h.send("s1.C", "ALTER TABLE t ADD COLUMN c1 INT")) == ["ALTER TABLE t ADD COLUMN c1 INT"]
    assert ret(h.send("s2.D", "ALTER TABLE t ADD COLUMN c0 INT", "ALTER TABLE t ADD COLUMN c1 INT")) == [
        "ALTER TABLE t ADD COLUMN c0 INT", "ALTER TABLE t ADD COLUMN c1 INT"]
    assert h.synced()


def test_s25_table_dropped_upstream_leaves_the_lock():
    h = Harness(ID)
    h.send("A", "ALTER TABLE t ADD COLUMN c1 INT")
    b = h.refs.pop("B")
    [out] = h.publish_source_tables()          # B no longer listed
    assert out.removed_tables == [b] and h.synced() and out.operation is None and out.resolved
    h.refs["B"] = b
    h.publish_source_tables()
    h.schema["B"] = h.schema["A"]             # re-created with (id, c1)
    res = h.send("B", "ALTER TABLE t ADD COLUMN c2 INT")
    assert ret(res) == ["ALTER TABLE t ADD COLUMN c2 INT"] and h.ready()["A"] is False


def test_s26_stop_task_for_one_source_removes_its_tables():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)", tables=("s1.A", "s1.B", "s2.A", "s2.B"))
    assert ret(h.send("s1.A", "ALTER TABLE t DROP COLUMN c1")) == []
    outs = h.k.remove_sources(LOCK.task, ["s2"])
    assert sorted(str(t) for o in outs for t in o.removed_tables) == ["s2-`db`.`a`", "s2-`db`.`b`"]
    last = h.send("s1.B", "ALTER TABLE t DROP COLUMN c1")
    assert ret(last) == ["ALTER TABLE t DROP COLUMN c1"] and h.synced()
    outs = h.k.remove_sources(LOCK.task, ["s1"])
    assert outs[-1].empty


def test_s27_resolution_needs_synced_and_all_done():
    h = Harness(ID)
    a = h.send("A", "ALTER TABLE t ADD COLUMN c1 INT")
    assert h.lock.members[h.refs["A"]].done and not a.resolved
    h.send("B", "ALTER TABLE t ADD COLUMN c1 INT", "ALTER TABLE t ADD COLUMN c2 INT")
    assert not h.lock.is_resolved()
    a2 = h.send("A", "ALTER TABLE t ADD COLUMN c2 INT", done=False)
    assert ret(a2) == ["ALTER TABLE t ADD COLUMN c2 INT"] and not h.lock.members[h.refs["A"]].done
    assert not h.lock.is_resolved()
    fin = h.done("A")
    assert fin.resolved and fin.handled_revision == a2.operation.info_revision


def test_s28_show_locks_synced_and_unsynced():
    h = Harness(ID, tables=("s1.bar-1", "s1.bar-2"))
    h.send("s1.bar-1", "ALTER TABLE t ADD COLUMN c1 INT", done=False)
    [v] = h.k.locks(task=LOCK.task)
    assert (v.ID, v.mode, v.owner, v.DDLs, v.state) == (LOCK.id, "optimistic", "", [], "syncing")
    assert v.synced == ["s1-`db`.`bar-1`"] and v.unsynced == ["s1-`db`.`bar-2`"]
    assert dict(v.waiting)["s1-`db`.`bar-1`"].startswith("waiting for the worker")
    assert h.k.locks(task="other") == [] and h.k.locks(sources=["s9"]) == []
    h.done("s1.bar-1")
    out = h.send("s1.bar-2", "ALTER TABLE t ADD COLUMN c1 INT")
    assert out.resolved or h.lock.is_resolved()


def test_s29_rebuild_restores_locks_done_flags_and_unlocks():
    from coordinator.etcdproto import DroppedColumn
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT, c2 INT)", tables=("A", "B", "C"))
    h.send("A", "ALTER TABLE t ADD COLUMN c3 INT")                       # done
    h.send("B", "ALTER TABLE t DROP COLUMN c2", done=False)              # not done
    h.send("C", "ALTER TABLE t MODIFY COLUMN c1 INT DEFAULT 5")          # widening
    h.send("A", "ALTER TABLE t MODIFY COLUMN c1 INT DEFAULT 7")          # detected: defaults differ
    assert h.last["A"].stage is Stage.DETECTED
    h.unlock("A", "skip")
    ops = {}
    for op in h.written:
        ops[op.table] = op
    for n in ("A", "C"):
        ops[h.refs[n]] = h.last[n]
    dropped = [DroppedColumn(stage=s, task=LOCK.task, down_schema="db", down_table="t", column=c,
                             source=t.source, up_schema=t.schema, up_table=t.table)
               for c, per in h.lock.dropped_columns.items() for t, s in per.items()]
    st = [SourceTablesFor(h)]
    rb = LockKeeper.rebuild(list(h.infos.values()), list(ops.values()), st, dropped)
    assert rb.errors == [] and rb.dropped_puts == [] and rb.dropped_deletes == []
    new, old = rb.keeper.locks()[0], h.k.locks()[0]
    assert (new.synced, new.unsynced, new.state, new.waiting) == (old.synced, old.unsynced, old.state, old.waiting)
    lk = rb.keeper.find(LOCK)
    assert {t: m.done for t, m in lk.members.items()} == {t: m.done for t, m in h.lock.members.items()}
    by_table = {o.table: o for o in rb.operations}
    assert by_table[h.refs["A"]].stage is Stage.UNLOCKED and by_table[h.refs["B"]].done is False
    # a resolved lock is reported for removal at rebuild
    h2 = Harness(ID)
    h2.send("A", "ALTER TABLE t ADD COLUMN c1 INT")
    h2.send("B", "ALTER TABLE t ADD COLUMN c1 INT")
    rb2 = LockKeeper.rebuild(list(h2.infos.values()), [h2.last["A"], h2.last["B"]], [SourceTablesFor(h2)], [])
    assert rb2.resolved == [LOCK]


def SourceTablesFor(h):
    from coordinator.etcdproto import SourceTables
    st = SourceTables(LOCK.task, "s1")
    for r in h.refs.values():
        st.add(r.schema, r.table, LOCK.down_schema, LOCK.down_table)
    return st


def test_s30_drop_column_across_sources():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT, c2 INT)", tables=("s1.bar-1", "s2.bar-3"))
    a = h.send("s1.bar-1", "ALTER TABLE t DROP COLUMN c2")
    assert (stage(a), ret(a)) == (Stage.NONE, [])
    v = h.k.locks()[0]
    assert v.synced == ["s2-`db`.`bar-3`"] and v.unsynced == ["s1-`db`.`bar-1`"]
    b = h.send("s2.bar-3", "ALTER TABLE t DROP COLUMN c2")
    assert ret(b) == ["ALTER TABLE t DROP COLUMN c2"] and h.lock.is_resolved()


def test_s31_conflicting_defaults_detected_then_unlock_skip():
    h = Harness("CREATE TABLE t (a INT PRIMARY KEY, b INT NOT NULL)", tables=("s1.tb1", "s2.tb1", "s2.tb2"))
    # (our lattice orders a zero default below other defaults, so use two non-zero ones)
    m0 = "ALTER TABLE t MODIFY b INT DEFAULT 1"
    assert ret(h.send("s1.tb1", m0)) == [m0]
    d = h.send("s2.tb1", "ALTER TABLE t MODIFY b INT DEFAULT 2")
    assert stage(d) is Stage.DETECTED
    v = h.k.locks()[0]
    assert v.owner == "s2-`db`.`tb1`" and v.state == "conflict"
    with pytest.raises(UnlockRefused):
        h.unlock("s1.tb1", "skip")           # not blocked
    u = h.unlock("s2.tb1", "skip")
    assert u.operation.stage is Stage.UNLOCKED and u.operation.ddls == []
    assert u.operation.info_revision == d.operation.info_revision
    assert "unlocked with skip" in h.lock.members[h.refs["s2.tb1"]].note
    d2 = h.send("s2.tb2", "ALTER TABLE t MODIFY b INT DEFAULT 2")
    assert stage(d2) is Stage.DETECTED
    u2 = h.unlock("s2.tb2", "exec")
    assert u2.operation.ddls == ["ALTER TABLE t MODIFY b INT DEFAULT 2"]
    assert h.k.locks()[0].state != "conflict"


def test_s32_ignore_conflict_info_forces_the_schema():
    h = Harness(ID)
    forced = apply_ddl(h.init, "ALTER TABLE t ADD COLUMN x INT NOT NULL")
    info = h.make_info("A", "ALTER TABLE t ADD COLUMN x INT NOT NULL", ignore_conflict=True)
    info.before, info.afters, info.ddls = forced.to_json(), [forced.to_json()], [""]
    out = h.send("A", info=info)
    assert out.operation is None
    assert h.lock.members[h.refs["A"]].schema.column("x") is not None


def test_unlock_exits_skip_and_wait_and_remove_table_exits_a_waiting_lock():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)", tables=("A", "B", "C"))
    r = "ALTER TABLE t RENAME COLUMN c1 TO c2"
    assert stage(h.send("A", r)) is Stage.SKIP_AND_WAIT
    assert stage(h.send("B", r)) is Stage.SKIP_AND_WAIT
    # C will never rename (dm#2062): the operator removes it; the pending renames now resolve
    out = h.k.remove_table(LOCK.id, h.refs["C"])
    assert out.removed_tables == [h.refs["C"]]
    # nobody ran the rename: one held table (chosen once, A) replays and runs it; B waits for it
    assert [(str(o.table), o.stage, o.runner) for o in out.others] == [
        ("s1-`db`.`a`", Stage.RESOLVED, ""), ("s1-`db`.`b`", Stage.SKIP_AND_WAIT, "s1-`db`.`a`")]
    run = h.send("A", r, done=False)
    assert ret(run) == [r]                      # A's replay runs the rename, once
    released = h.done("A")
    assert [(str(o.table), o.stage) for o in released.others] == [("s1-`db`.`b`", Stage.RESOLVED)]
    assert ret(h.send("B", r)) == [] and h.lock.is_resolved()
    h2 = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)")
    assert stage(h2.send("A", r)) is Stage.SKIP_AND_WAIT
    u = h2.unlock("A", "exec")          # DM refuses unlock in skip-and-wait (tiflow#12840)
    assert u.operation.stage is Stage.UNLOCKED and u.operation.ddls == [r]
    assert h2.k.locks()[0].state == "syncing"


def test_force_remove_and_remove_task_forget_locks():
    h = Harness(ID)
    h.send("A", "ALTER TABLE t ADD COLUMN c1 INT")
    v = h.k.force_remove(LOCK.id)
    assert v.ID == LOCK.id and h.k.locks() == []
    h.send("A", "ALTER TABLE t ADD COLUMN c2 INT")
    assert h.k.remove_task(LOCK.task) == [LOCK] and h.k.locks() == []


def test_unique_auto_increment_added_on_shards_is_held_as_a_conflict():
    """Issue 12 §2.5: merged shards would collide on a new unique AUTO_INCREMENT column; DM holds
    it with "there will be conflicts if DDLs ... are applied to the downstream"."""
    h = Harness("CREATE TABLE t (id INT NOT NULL, v INT, KEY k (id))")
    add = "ALTER TABLE t ADD COLUMN new_col INT UNIQUE AUTO_INCREMENT"
    for n in ("A", "B"):
        out = h.send(n, add)
        assert stage(out) is Stage.DETECTED and ret(out) == []
        assert "there will be conflicts if DDLs ALTER TABLE t ADD COLUMN new_col INT UNIQUE AUTO_INCREMENT " \
               "are applied to the downstream" in out.operation.message
        assert "shard-ddl-lock unlock" in out.operation.message and "binlog skip" in out.operation.message
        _pasteable(out.operation.message, LOCK.id)
    # a plain column is fine, and so is an AUTO_INCREMENT the table already had
    assert stage(h.send("A", "ALTER TABLE t ADD COLUMN w INT")) is Stage.NONE


def _pasteable(message: str, lock_id: str) -> None:
    """Every ``shardctl`` command a message suggests parses as one shell command line with the
    lock ID as one word (its back-quotes quoted), and offers no ``skip|exec`` (a pipe when pasted)."""
    import re
    import shlex
    assert "skip|exec" not in message, message
    cmds = re.findall(r"`(shardctl (?:[^`']|'[^']*')*)`", message)
    assert cmds, message
    for cmd in cmds:
        words = shlex.split(cmd)
        if words[1:3] == ["shard-ddl-lock", "unlock"]:
            assert words[3] == lock_id and words[-2:] in (["--action", "skip"], ["--action", "exec"]), words


def test_suggested_exits_paste_into_a_shell_as_shown():
    """A detected conflict's message and its waiting-for text name exits as whole commands."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    h.send("A", "ALTER TABLE t MODIFY COLUMN v DATE")
    out = h.send("B", "ALTER TABLE t MODIFY COLUMN v VARBINARY(20)")
    assert stage(out) is Stage.DETECTED
    (view,) = h.k.locks()
    texts = [reason for _, reason in view.waiting]
    assert any("shardctl" in t for t in texts), texts
    for text in [out.operation.message, *texts]:
        if "shardctl" in text:
            _pasteable(text, LOCK.id)
