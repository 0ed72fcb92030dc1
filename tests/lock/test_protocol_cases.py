"""Issue 28's cases on the pure engine: each sequence a deployment meets (a restart, two shards
changing one column differently, an operator exit), with what must happen instead of what the
engine did before (docs/lock-algorithm.md, "Invariants").  Each of these failed on the engine
before the fix it names."""
from __future__ import annotations

from coordinator.etcdproto import DroppedColumn, DroppedStage, Info, SourceTables, Stage, TableRef
from coordinator.lock import LockKeeper
from coordinator.schema.ddl import apply_ddl

from .harness import LOCK, Harness

T = "CREATE TABLE t (id INT PRIMARY KEY, c1 INT, r INT, v VARCHAR(10))"
RENAME = "ALTER TABLE t RENAME COLUMN c1 TO c2"


def ddls(out):
    return out.operation.ddls


def _source_tables(h: Harness) -> list[SourceTables]:
    by: dict[str, SourceTables] = {}
    for r in h.refs.values():
        by.setdefault(r.source, SourceTables(LOCK.task, r.source)).add(r.schema, r.table, LOCK.down_schema,
                                                                       LOCK.down_table)
    return list(by.values())


def _rebuild(h: Harness, without: tuple[str, ...] = (), schema_source=None):
    """A master restart: a new keeper from what etcd holds (the Infos and each table's last
    Operation with its done flag).  ``without``: tables whose source's SourceTables no longer
    list them (dropped upstream while no leader watched)."""
    ops = {}
    for op in h.written:
        ops[op.table] = op
    for n, op in h.last.items():
        ops[h.refs[n]] = op
    listed = _source_tables(h)
    for n in without:
        r = h.refs[n]
        for st in listed:
            if st.source == r.source:
                st.remove(r.schema, r.table, LOCK.down_schema, LOCK.down_table)
    rb = LockKeeper.rebuild(list(h.infos.values()), list(ops.values()), listed, [], schema_source=schema_source)
    assert rb.errors == []
    return rb


# ---------------------------------------------------------------------------- case 1
def test_case1_widen_then_drop_does_not_drop_a_column_another_shard_still_has():
    h = Harness(T, tables=("A", "B", "C"))
    assert ddls(h.send("B", "ALTER TABLE t MODIFY COLUMN r BIGINT")) == ["ALTER TABLE t MODIFY COLUMN r BIGINT"]
    assert ddls(h.send("B", "ALTER TABLE t DROP COLUMN r")) == []          # A and C still have `r`
    assert ddls(h.send("A", "ALTER TABLE t DROP COLUMN r")) == []          # C still has it
    assert ddls(h.send("C", "ALTER TABLE t DROP COLUMN r")) == ["ALTER TABLE t DROP COLUMN r"]
    assert h.lock.is_resolved()


def test_case1_varchar_widen_then_drop():
    h = Harness(T)
    h.send("B", "ALTER TABLE t MODIFY COLUMN v VARCHAR(20)")
    assert ddls(h.send("B", "ALTER TABLE t DROP COLUMN v")) == []
    assert ddls(h.send("A", "ALTER TABLE t DROP COLUMN v")) == ["ALTER TABLE t DROP COLUMN v"]


# ---------------------------------------------------------------------------- case 2
def _resolve_by_unlock_skip(h: Harness, held: str):
    out = h.unlock(held, "skip")
    op = out.operation
    assert op.stage is Stage.UNLOCKED
    # nobody has c1 any more: the unlocked table's answer completes its drop downstream
    assert op.ddls == ["ALTER TABLE `db`.`t` DROP COLUMN `c1`"] and op.cols == ["c1"]
    done = h.done(held)
    assert done.resolved and h.lock.is_resolved()


def test_case2_a_shard_that_drops_the_renamed_column_takes_no_side_and_the_rename_runs():
    """B drops `c1` (and has no `c2`): it takes no side in A's held rename, which is agreed and
    run by A (A's values carried; B's old rows keep their `c1` values under `c2`, as a DROP keeps
    them downstream).  B's later ADD of `c2` with the same definition meets the renamed column.
    Before, B's DROP + ADD ran the ADD downstream and A's rename was
    ``detected`` (its values lost), which needed an operator."""
    h = Harness(T)
    assert h.send("A", RENAME, done=False).operation.stage is Stage.SKIP_AND_WAIT
    drop = h.send("B", "ALTER TABLE t DROP COLUMN c1")
    # the rename takes c1 away downstream; B waits until it ran (its next statement may add c2)
    assert drop.operation.stage is Stage.SKIP_AND_WAIT and ddls(drop) == []
    [a] = [o for o in drop.others if o.table == h.refs["A"]]
    assert a.stage is Stage.RESOLVED
    h.last["A"] = a
    ran = h.send("A", RENAME)
    assert ddls(ran) == [RENAME]                      # A's replay runs it
    assert h.last["B"].stage is Stage.RESOLVED        # released by A's done mark
    assert h.send("B", "ALTER TABLE t DROP COLUMN c1").operation.ddls == []
    add = h.send("B", "ALTER TABLE t ADD COLUMN c2 INT")
    # a shard catching up to a column the downstream has: at most the same ADD (a duplicate
    # the worker takes as done), never a conflict
    assert add.operation.stage is Stage.NONE and ddls(add) in ([], ["ALTER TABLE t ADD COLUMN c2 INT"])
    assert h.lock.is_resolved()


def test_case2_add_first_then_drop_then_the_rename_is_a_conflict_too():
    h = Harness(T)
    h.send("B", "ALTER TABLE t ADD COLUMN c2 INT")
    h.send("B", "ALTER TABLE t DROP COLUMN c1")
    a = h.send("A", RENAME)
    assert a.operation.stage is Stage.DETECTED and "cannot be carried" in a.operation.message
    _resolve_by_unlock_skip(h, "A")


# ---------------------------------------------------------------------------- cases 3 and 4
def test_case3_a_restart_and_a_master_rebuild_keep_the_runner():
    """C's answer says "run it"; C's worker dies before running; A's worker restarts and re-sends
    its Info; the master restarts.  C stays the runner; A and B are held naming C."""
    h = Harness(T, tables=("A", "B", "C"))
    h.send("A", RENAME)
    h.send("B", RENAME)
    c = h.send("C", RENAME, done=False)
    assert ddls(c) == [RENAME]
    assert {(o.table.table, o.stage, o.runner) for o in c.others} == {
        ("a", Stage.SKIP_AND_WAIT, str(h.refs["C"])), ("b", Stage.SKIP_AND_WAIT, str(h.refs["C"]))}
    again = h.send("A", RENAME)                           # A's worker restarted
    assert again.operation.stage is Stage.SKIP_AND_WAIT and again.operation.runner == str(h.refs["C"])
    rb = _rebuild(h)
    by = {o.table.table: o for o in rb.operations}
    assert by["c"].stage is Stage.NONE and by["c"].ddls == [RENAME] and not by["c"].done
    assert by["a"].stage is Stage.SKIP_AND_WAIT and by["a"].runner == str(h.refs["C"])
    assert by["b"].stage is Stage.SKIP_AND_WAIT and by["b"].runner == str(h.refs["C"])
    op_c = by["c"]
    op_c.done = True
    released = rb.keeper.mark_done(op_c)
    assert sorted((o.table.table, o.stage) for o in released.others) == [("a", Stage.RESOLVED), ("b", Stage.RESOLVED)]


def test_case4_a_master_restart_after_the_change_ran_does_not_run_it_again():
    h = Harness(T, tables=("A", "B", "C"))
    h.send("A", RENAME)
    h.send("B", RENAME)
    h.send("C", RENAME)                                   # ran and done: A and B redirected
    assert h.last["A"].stage is Stage.RESOLVED
    rb = _rebuild(h)
    by = {o.table.table: o for o in rb.operations}
    assert by["a"].stage is Stage.RESOLVED and by["b"].stage is Stage.RESOLVED
    for n in ("A", "B"):                                  # their replays, to the rebuilt master
        info = h.make_info(n, RENAME, before=h.init)
        out = rb.keeper.handle_info(info)
        assert out.operation.stage is Stage.NONE and out.operation.ddls == [], n


def test_case4_a_rebuilt_narrowing_is_not_run_again():
    h = Harness(T)
    h.send("A", "ALTER TABLE t MODIFY COLUMN r SMALLINT")
    assert ddls(h.send("B", "ALTER TABLE t MODIFY COLUMN r SMALLINT")) == ["ALTER TABLE t MODIFY COLUMN r SMALLINT"]
    rb = _rebuild(h)
    out = rb.keeper.handle_info(h.make_info("B", "ALTER TABLE t MODIFY COLUMN r SMALLINT", before=h.init))
    assert out.operation.ddls == []                       # done before the restart: nothing runs twice


def test_a_departure_that_completes_an_agreement_picks_one_runner():
    h = Harness(T, tables=("A", "B", "C"))
    h.send("A", RENAME)
    h.send("B", RENAME)
    out = h.k.remove_table(LOCK.id, h.refs["C"])
    assert [(o.table.table, o.stage) for o in out.others] == [("a", Stage.RESOLVED), ("b", Stage.SKIP_AND_WAIT)]
    assert ddls(h.send("A", RENAME, done=False)) == [RENAME]     # A's replay runs it, once
    h.done("A")
    assert ddls(h.send("B", RENAME)) == [] and h.lock.is_resolved()


def test_a_departed_table_s_drop_is_completed_once_no_member_has_the_column():
    """C reaches A's and B's rename by ordinary statements (DROP c1: held back downstream while
    they have it; ADD c2: runs), so their renames are detected (values cannot be carried).  C
    leaves; the operator skips both renames: no member has c1 any more, and the last exit
    completes C's drop.  Before, C's departure took its drop record with it (c1 stayed downstream
    for good), and what C made downstream with it: re-asked, B's rename was run onto the c2 C had
    added there (a duplicate column).  Both found by tests/sim."""
    h = Harness(T, tables=("A", "B", "C"))
    assert ddls(h.send("C", "ALTER TABLE t DROP COLUMN c1")) == []
    assert ddls(h.send("C", "ALTER TABLE t ADD COLUMN c2 INT")) == ["ALTER TABLE t ADD COLUMN c2 INT"]
    for n in ("A", "B"):
        assert h.send(n, RENAME, done=False).operation.stage is Stage.DETECTED, n
    out = h.k.remove_table(LOCK.id, h.refs["C"])
    assert h.lock.dropped_columns["c1"] == {h.refs["C"]: DroppedStage.PARTIAL}     # its drop record is kept
    assert out.operations == [] and "c2" in str(out.departed[h.refs["C"]])
    assert [h.lock.members[h.refs[n]].answer.stage for n in ("A", "B")] == [Stage.DETECTED] * 2
    # a master restart then rebuilds from etcd (C's departed Info and drop record) the same lock
    left = out.departed[h.refs["C"]]
    infos = [h.infos["A"], h.infos["B"], Info.of_departed(LOCK, h.refs["C"], left, revision=999)]
    st = SourceTables(LOCK.task, "s1")
    for n in ("A", "B"):
        st.add(h.refs[n].schema, h.refs[n].table, LOCK.down_schema, LOCK.down_table)
    dc = DroppedColumn(DroppedStage.PARTIAL, task=LOCK.task, down_schema=LOCK.down_schema,
                       down_table=LOCK.down_table, column="c1", source="s1", up_schema="db", up_table="c")
    rb = LockKeeper.rebuild(infos, [h.last["A"], h.last["B"]], [st], [dc])
    again = rb.keeper.find(LOCK)
    assert set(again.departed) == {h.refs["C"]} and set(again.members) == {h.refs["A"], h.refs["B"]}
    assert [again.members[h.refs[n]].answer.stage for n in ("A", "B")] == [Stage.DETECTED] * 2
    assert ddls(h.unlock("A", "skip")) == []                 # B still has c1
    assert ddls(h.unlock("B", "skip")) == ["ALTER TABLE `db`.`t` DROP COLUMN `c1`"]


# ---------------------------------------------------------------------------- case 9
def _ran_rename(ops) -> list[str]:
    """The tables told to run the rename, one entry per answered Info (a rebuild re-states an
    answer it restores: the same Info revision, not a second run)."""
    return sorted(t for t, _ in {(o.table.table, o.info_revision) for o in ops if o is not None and RENAME in o.ddls})


def test_case9_workers_and_the_master_killed_while_the_lock_resolves_run_the_rename_once():
    """DM_RESYNC_NOT_FLUSHED on two sources: every table renames, D's answer runs it; D's worker
    dies after running it and before its done mark (on restart its finished intent marks the
    stored Operation done); the redirected tables' workers die while replaying and re-send their
    Info; the leader dies too and a new one rebuilds from etcd.  The rename runs once (D's), every
    replay runs nothing, and the lock resolves."""
    h = Harness(T, tables=("s1.A", "s1.B", "s2.C", "s2.D"))
    answered = []
    for n in ("s1.A", "s1.B", "s2.C"):
        out = h.send(n, RENAME)
        assert out.operation.stage is Stage.SKIP_AND_WAIT, n
        answered += [out.operation, *out.others]
    d = h.send("s2.D", RENAME, done=False)          # D runs it; its worker dies before the done mark
    answered += [d.operation, *d.others]
    assert _ran_rename(answered) == ["d"]
    again = h.send("s1.A", info=h.make_info("s1.A", RENAME, before=h.init))   # A restarted before D's mark
    assert again.operation.stage is Stage.SKIP_AND_WAIT and again.operation.ddls == []
    released = h.done("s2.D")                       # D restarted: its finished intent marks done
    assert sorted(o.table.table for o in released.others if o.stage is Stage.RESOLVED) == ["a", "b", "c"]
    answered += [again.operation, *again.others, *released.others]
    rb = _rebuild(h)                                # the leader dies as the redirects are read
    answered += rb.operations
    assert _ran_rename(answered) == ["d"]
    k = rb.keeper
    last = None
    for n in ("s1.A", "s2.C", "s1.B"):              # the restarted workers replay from the DDL
        out = k.handle_info(h.make_info(n, RENAME, before=h.init))
        assert out.operation.stage is Stage.NONE and out.operation.ddls == [], (n, out.operation)
        answered += [out.operation, *out.others]
        op = out.operation
        op.done = True
        last = k.mark_done(op)
    assert _ran_rename(answered) == ["d"]
    assert last is not None and last.resolved


def test_case9_without_a_master_restart_the_replays_run_nothing_and_the_lock_resolves():
    h = Harness(T, tables=("s1.A", "s1.B", "s2.C", "s2.D"))
    for n in ("s1.A", "s1.B", "s2.C"):
        h.send(n, RENAME)
    h.send("s2.D", RENAME)                          # ran and done: the others are redirected
    for n in ("s2.C", "s1.A"):                      # killed while replaying: a new Info each
        h.send(n, info=h.make_info(n, RENAME, before=h.init), done=False)
        assert h.last[n].stage is Stage.NONE and h.last[n].ddls == [], n
    assert ddls(h.send("s2.C", info=h.make_info("s2.C", RENAME, before=h.init))) == []
    assert ddls(h.send("s1.A", info=h.make_info("s1.A", RENAME, before=h.init))) == []
    assert ddls(h.send("s1.B", info=h.make_info("s1.B", RENAME, before=h.init))) == []
    assert h.lock.is_resolved()


# ---------------------------------------------------------------------------- case 10
def test_case10_members_differing_only_in_charset_resolve():
    """DM_040: one shard adds the column in utf8, the others in utf8mb4: every Operation is done
    and nothing is left to run, so the lock resolves (it stayed `syncing` forever)."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY)", tables=("A", "B", "C"))
    h.send("A", "ALTER TABLE t ADD COLUMN col1 VARCHAR(10) CHARACTER SET utf8")
    h.send("B", "ALTER TABLE t ADD COLUMN col1 VARCHAR(10) CHARACTER SET utf8mb4")
    h.send("C", "ALTER TABLE t ADD COLUMN col1 VARCHAR(10) CHARACTER SET utf8mb4")
    assert h.lock.is_resolved() and h.last_done.resolved


def test_case10_tables_skipped_by_the_operator_do_not_hold_the_lock_forever():
    """DM_130: `MODIFY b INT DEFAULT -1` on two tables conflicts with `DEFAULT 0` on the third;
    the operator skips both (`binlog skip`: an ignore-conflict Info forcing their schema).  No DDL
    will come from them any more: the lock resolves instead of waiting."""
    h = Harness("CREATE TABLE t (a INT PRIMARY KEY, b INT NOT NULL)", tables=("A", "B", "C"))
    h.send("A", "ALTER TABLE t MODIFY b INT DEFAULT 0")
    for n in ("B", "C"):
        out = h.send(n, "ALTER TABLE t MODIFY b INT DEFAULT -1")
        assert out.operation.stage is Stage.DETECTED
        skip = h.make_info(n, "ALTER TABLE t MODIFY b INT DEFAULT -1", ignore_conflict=True)
        h.send(n, info=skip)
    view = h.k.locks()[0] if h.k.locks() else None
    assert h.lock.is_resolved(), view and view.waiting


# ---------------------------------------------------------------------------- case 5
def _three_renamed_runner_c(h: Harness):
    h.send("A", RENAME)
    h.send("B", RENAME)
    assert ddls(h.send("C", RENAME, done=False)) == [RENAME]


def test_case5_the_runner_dropped_upstream_before_running_hands_the_change_over():
    h = Harness(T, tables=("A", "B", "C"))
    _three_renamed_runner_c(h)
    out = h.k.remove_table(LOCK.id, h.refs["C"], reason="dropped upstream")
    # not "nothing to run" for everyone: A (first queued) replays and runs the rename; B waits for A
    assert [(o.table.table, o.stage, o.runner) for o in out.others] == [
        ("a", Stage.RESOLVED, ""), ("b", Stage.SKIP_AND_WAIT, str(h.refs["A"]))]
    assert ddls(h.send("A", RENAME, done=False)) == [RENAME]
    released = h.done("A")
    assert [(o.table.table, o.stage) for o in released.others] == [("b", Stage.RESOLVED)]
    assert ddls(h.send("B", RENAME)) == [] and h.lock.is_resolved()


def test_case5_the_runners_ddl_skipped_by_the_operator_hands_the_change_over():
    """`binlog skip` of the runner's DDL after its execution failed: its done mark says the
    statements did not run (DoneMark.ran=False)."""
    from coordinator.etcdproto import DoneMark
    h = Harness(T, tables=("A", "B", "C"))
    _three_renamed_runner_c(h)
    op = h.last["C"]
    mark = DoneMark(info_revision=op.info_revision, op_revision=op.revision, stage=op.stage, ran=False,
                    task=op.task, down_schema=op.down_schema, down_table=op.down_table, source=op.source,
                    up_schema=op.up_schema, up_table=op.up_table)
    out = h.k.mark_done(mark)
    assert [(o.table.table, o.stage) for o in out.others] == [("a", Stage.RESOLVED), ("b", Stage.SKIP_AND_WAIT)]
    assert ddls(h.send("A", RENAME, done=False)) == [RENAME]


def test_case5_the_runners_schema_set_by_the_operator_hands_the_change_over():
    h = Harness(T, tables=("A", "B", "C"))
    _three_renamed_runner_c(h)
    forced = h.make_info("C", RENAME, before=h.init, ignore_conflict=True)
    out = h.send("C", info=forced)
    assert ("a", Stage.RESOLVED) in [(o.table.table, o.stage) for o in out.others]


# found by tests/sim once case 5 was modelled (a table dropped upstream at a restart, a runner's
# DDL skipped by the operator), each failing before the fix it names
def test_case5_a_skipped_runner_read_by_a_rebuilt_master_still_hands_the_change_over():
    """The skip's done mark (ran=false) is written, the leader dies before handling it: the
    rebuild reads the mark's ``ran`` with the Operation (``Operation.ran``) and hands the change
    to the first held table (it redirected both tables with nothing to run)."""
    h = Harness(T, tables=("A", "B", "C"))
    _three_renamed_runner_c(h)
    h.last["C"].done, h.last["C"].ran = True, False
    rb = _rebuild(h)
    by = {o.table.table: o for o in rb.operations}
    assert (by["a"].stage, by["a"].runner) == (Stage.RESOLVED, "")          # A replays and runs it
    assert (by["b"].stage, by["b"].runner) == (Stage.SKIP_AND_WAIT, str(h.refs["A"]))
    out = rb.keeper.handle_info(h.make_info("A", RENAME, before=h.init))
    assert out.operation.ddls == [RENAME]


def test_case5_the_replay_of_a_handed_over_redirect_after_a_rebuild_runs_the_change():
    """A is handed the change (its redirect says: replay and run it); its worker sends the replay,
    then the leader dies: the rebuild restores A's redirect under the replay's Info and the replay
    runs the rename (it was answered "already made downstream", nothing ran)."""
    h = Harness(T, tables=("A", "B", "C"))
    _three_renamed_runner_c(h)
    gone = h.k.remove_table(LOCK.id, h.refs["C"], reason="dropped upstream")
    for o in gone.others:                                      # what the leader wrote
        h.last[o.table.table.upper()] = o
    del h.infos["C"], h.last["C"]                              # and deleted
    h.written = [o for o in h.written if o.table != h.refs["C"]]
    assert h.last["A"].stage is Stage.RESOLVED
    h.infos["A"] = h.make_info("A", RENAME, before=h.init)     # the replay, not yet handled
    rb = _rebuild(h, without=("C",))
    by = {o.table.table: o for o in rb.operations}
    assert by["a"].ddls == [RENAME] and by["a"].info_revision == h.infos["A"].revision
    assert by["b"].stage is Stage.SKIP_AND_WAIT and by["b"].runner == str(h.refs["A"])


def test_case5_a_table_that_left_while_no_leader_watched_is_removed_and_completes_the_agreement():
    """C never sent its rename and was dropped upstream while the leader was down: the rebuilt
    lock does not wait for it (A and B stayed held "waiting for C" forever), one of them runs the
    rename, and a table that left with records has them deleted (``Rebuilt.removed_tables``)."""
    h = Harness(T, tables=("A", "B", "C"))
    h.send("A", RENAME)
    h.send("B", RENAME)
    rb = _rebuild(h, without=("C",))
    by = {o.table.table: o for o in rb.operations}
    assert (by["a"].stage, by["b"].stage) == (Stage.RESOLVED, Stage.SKIP_AND_WAIT)
    assert by["b"].runner == str(h.refs["A"])
    h2 = Harness(T, tables=("A", "B", "C"))
    h2.send("C", "ALTER TABLE t ADD COLUMN d INT", done=False)
    rb2 = _rebuild(h2, without=("C",))
    assert rb2.removed_tables == [(LOCK, h2.refs["C"])]


def test_case5_a_runner_that_ran_its_change_before_leaving_is_not_replaced():
    """C ran the rename downstream, its worker died before the done mark and its table was
    dropped upstream: its checkpoint (the finished DDL's schema) says it ran, so the held tables
    are released with nothing to run (A was handed the rename and ran it a second time)."""
    finished: dict = {}          # the checkpoints' finished DDLs (the schema source reads them)
    h2 = Harness(T, tables=("A", "B", "C"), keeper=LockKeeper(schema_source=lambda lock, t: finished.get(t)))
    _three_renamed_runner_c(h2)
    finished[h2.refs["C"]] = h2.schema["C"]                   # C ran it; no done mark
    out = h2.k.remove_table(LOCK.id, h2.refs["C"], reason="dropped upstream")
    assert sorted((o.table.table, o.stage, o.ddls == []) for o in out.others) == [
        ("a", Stage.RESOLVED, True), ("b", Stage.RESOLVED, True)]
    assert ddls(h2.send("A", RENAME)) == [] and ddls(h2.send("B", RENAME)) == []
    assert h2.lock.is_resolved()


def test_case5_a_runner_that_moved_on_before_a_rebuild_is_not_handed_its_change_again():
    """tests/sim seed 7050: C ran the rename, wrote its done mark and sent its next DDL; the leader
    died before handling either.  The rebuild restores A's and B's holds naming C, and C's stored
    Operation answers an older Info (its done mark says the rename ran): C's gate must go with it.
    It stayed, so A's replay was held for C's next answer, and the operator's `binlog skip` of that
    ordinary DDL (ran=false) handed the rename to A, which ran it a second time."""
    from coordinator.etcdproto import DoneMark
    h = Harness(T, tables=("A", "B", "C"))
    _three_renamed_runner_c(h)
    h.last["C"].done, h.last["C"].ran = True, True            # the mark is written, not handled
    h.schema["C"] = apply_ddl(h.init, RENAME)
    h.infos["C"] = h.make_info("C", "ALTER TABLE t ADD COLUMN d INT")     # its next DDL, not handled
    rb = _rebuild(h)
    k = rb.keeper
    add = k.handle_info(h.infos["C"]).operation
    assert add.ddls == ["ALTER TABLE t ADD COLUMN d INT"]
    replay = k.handle_info(h.make_info("A", RENAME, before=h.init)).operation
    assert (replay.stage, replay.ddls) == (Stage.NONE, []), replay.message
    skipped = DoneMark(info_revision=add.info_revision, op_revision=add.revision, stage=add.stage, ran=False,
                       task=add.task, down_schema=add.down_schema, down_table=add.down_table, source=add.source,
                       up_schema=add.up_schema, up_table=add.up_table)
    out = k.mark_done(skipped)                                  # C's ADD failed and was skipped
    assert all(o.ddls == [] for o in out.others)
    assert k.handle_info(h.make_info("B", RENAME, before=h.init)).operation.ddls == []


def test_case5_a_runner_that_skipped_and_moved_on_before_a_rebuild_still_hands_its_change_over():
    """As above, but the operator skipped C's rename (done mark ran=false) before C sent its next
    DDL: the rebuild reads the overwritten answer's mark and hands the rename to A."""
    h = Harness(T, tables=("A", "B", "C"))
    _three_renamed_runner_c(h)
    h.last["C"].done, h.last["C"].ran = True, False
    h.infos["C"] = h.make_info("C", "ALTER TABLE t ADD COLUMN d INT", before=apply_ddl(h.init, RENAME))
    rb = _rebuild(h)
    by = {o.table.table: o for o in rb.operations}
    assert (by["a"].stage, by["a"].runner) == (Stage.RESOLVED, "")          # A replays and runs it
    assert (by["b"].stage, by["b"].runner) == (Stage.SKIP_AND_WAIT, str(h.refs["A"]))
    assert rb.keeper.handle_info(h.make_info("A", RENAME, before=h.init)).operation.ddls == [RENAME]


def test_an_ordering_hold_is_persisted_as_one_not_as_a_resolutions_runner():
    """tests/sim seed 4685: A's `ADD c9; DROP c9` waits for C's running DROP of c9
    (``Lock._order_conflict``, ``Operation.runs_after``).  The redirect drain of the same call
    re-wrote that hold as "C runs the agreed change" (``runner`` set, ``runs_after`` lost), the
    Operation the leader writes last: it told the operator, the sim's `binlog skip` and a rebuild
    that C's ordinary DROP was a resolution A's rows depend on."""
    h = Harness(T, tables=("A", "B", "C"))
    h.send("B", "ALTER TABLE t ADD COLUMN c9 INT")
    h.send("C", "ALTER TABLE t ADD COLUMN c9 INT")
    assert ddls(h.send("B", "ALTER TABLE t DROP COLUMN c9")) == []               # C still has c9
    assert ddls(h.send("C", "ALTER TABLE t DROP COLUMN c9", done=False)) == ["ALTER TABLE t DROP COLUMN c9"]
    out = h.send("A", "ALTER TABLE t ADD COLUMN c9 INT", "ALTER TABLE t DROP COLUMN c9")
    written = [o for o in out.operations if o.table == h.refs["A"]]
    assert written and all((o.stage, o.runner, o.runs_after) == (Stage.SKIP_AND_WAIT, "", str(h.refs["C"]))
                           for o in written), written
    assert all("agreed change" not in o.message for o in written)
    h.last["A"] = written[-1]                                    # what etcd holds
    rb = _rebuild(h)
    by = {o.table.table: o for o in rb.operations}
    assert (by["a"].stage, by["a"].runner, by["a"].runs_after) == (Stage.SKIP_AND_WAIT, "", str(h.refs["C"]))
    released = h.done("C")
    assert [(o.table.table, o.stage, o.runner) for o in released.others] == [("a", Stage.RESOLVED, "")]


def test_a_released_replay_is_not_held_again_for_its_runners_later_ordering_gate():
    """tests/sim seed 5117: C ran the rename and A was released (its worker is slow to replay); C
    then runs a DROP of `d` that B's `ADD d; DROP d` must wait for (an ordering hold, which gates C
    again).  A's replay of the rename was held again "for C's change", and the operator's skip of
    C's DROP (ran=false) handed the rename to A, which ran it a second time.  A released redirect
    means the change is in effect: its replay runs nothing and waits for nobody."""
    from coordinator.etcdproto import DoneMark
    h = Harness(T, tables=("A", "B", "C"))
    _three_renamed_runner_c(h)
    released = h.done("C")
    assert sorted((o.table.table, o.stage) for o in released.others) == [("a", Stage.RESOLVED), ("b", Stage.RESOLVED)]
    assert ddls(h.send("B", RENAME, info=h.make_info("B", RENAME, before=h.init))) == []
    assert ddls(h.send("C", "ALTER TABLE t ADD COLUMN d INT")) == ["ALTER TABLE t ADD COLUMN d INT"]
    drop = h.send("C", "ALTER TABLE t DROP COLUMN d", done=False).operation
    assert drop.ddls == ["ALTER TABLE t DROP COLUMN d"]
    pair = ("ALTER TABLE t ADD COLUMN d INT", "ALTER TABLE t DROP COLUMN d")
    assert h.send("B", *pair).operation.runs_after == str(h.refs["C"])       # ordering: gates C again
    replay = h.send("A", info=h.make_info("A", RENAME, before=h.init)).operation
    assert (replay.stage, replay.ddls) == (Stage.NONE, []), replay.message
    skipped = DoneMark(info_revision=drop.info_revision, op_revision=drop.revision, stage=drop.stage, ran=False,
                       task=drop.task, down_schema=drop.down_schema, down_table=drop.down_table, source=drop.source,
                       up_schema=drop.up_schema, up_table=drop.up_table)
    h.k.mark_done(skipped)
    assert ddls(h.send("A", info=h.make_info("A", RENAME, before=h.init))) == []


def test_a_table_adding_a_column_others_widened_since_is_not_an_error():
    """The chaos run's lagging worker: A adds `w INT` and widens it to BIGINT before B's worker
    sends B's `ADD COLUMN w INT`.  B's definition equals the one the column was added with: B has
    not widened yet (the lock waits for it), it is not a different definition (DM's s19 refusal,
    `VARCHAR(5)` against `VARCHAR(4)` added, still holds)."""
    h = Harness(T)
    h.send("A", "ALTER TABLE t ADD COLUMN w INT")
    h.send("A", "ALTER TABLE t MODIFY COLUMN w BIGINT")
    b = h.send("B", "ALTER TABLE t ADD COLUMN w INT")
    assert b.operation.stage is Stage.NONE, b.operation.message
    assert not h.lock.is_synced()                  # B has not widened
    h.send("A", "ALTER TABLE t DROP COLUMN w")
    assert ddls(h.send("B", "ALTER TABLE t DROP COLUMN w")) == ["ALTER TABLE t DROP COLUMN w"]
    assert h.lock.is_resolved()


def test_a_rebuilt_master_still_knows_the_type_a_widened_column_was_added_as():
    """The master restarts after A added `w INT` and widened it (A's stored Info is now the
    MODIFY): B's later `ADD COLUMN w INT` is still only behind, not a different definition."""
    h = Harness(T)
    h.send("A", "ALTER TABLE t ADD COLUMN w INT")
    h.send("A", "ALTER TABLE t MODIFY COLUMN w BIGINT")
    rb = _rebuild(h)
    out = rb.keeper.handle_info(h.make_info("B", "ALTER TABLE t ADD COLUMN w INT"))
    assert out.operation.stage is Stage.NONE, out.operation.message


# ---------------------------------------------------------------------------- what a departed table left
def _lock_removed(h: Harness, gone: str) -> list:
    """The master's removal of a resolved lock whose table ``gone`` left (dropped upstream): the
    remnants written first, then the lock forgotten; ``gone`` is no longer in its SourceTables.
    Returns the Remnant records etcd then holds."""
    assert h.lock.is_resolved()
    puts, deletes = h.k.remnant_writes(LOCK)
    assert [r.table for r in puts] == [h.refs[gone]] and deletes == []
    h.k.drop_lock(LOCK)
    del h.refs[gone]
    h.publish_source_tables()
    return puts


def test_what_a_departed_table_left_downstream_is_known_to_the_target_s_next_lock():
    """C adds c2 (it runs downstream) and leaves, before or after dropping c1 (a drop that did not
    run: A and B have c1); its lock resolves and is removed.  A and B then rename c1 to c2: the
    downstream already has C's c2, so the rename cannot run there -- detected (values cannot be
    carried), with the exits that names; once the last table skips, no member has c1 and C's drop
    completes.  Before, the next lock knew nothing of C: both renames were agreed and the
    runner's failed with a duplicate column (and, had it not, c1 stayed downstream for good).  A
    rebuild from etcd (the remnant records) decides the same."""
    for first in ((), ("ALTER TABLE t DROP COLUMN c1",)):
        h = Harness(T, tables=("A", "B", "C"))
        for stmt in first:
            assert ddls(h.send("C", stmt)) == []
        assert ddls(h.send("C", "ALTER TABLE t ADD COLUMN c2 INT")) == ["ALTER TABLE t ADD COLUMN c2 INT"]
        h.k.remove_table(LOCK.id, h.refs["C"])
        remnants = _lock_removed(h, "C")
        assert [r.dropped for r in remnants] == [["c1"] if first else []]
        for n in ("A", "B"):
            out = h.send(n, RENAME, done=False)
            assert out.operation.stage is Stage.DETECTED, n
            assert "values cannot be carried" in out.operation.message, out.operation.message
        rb = LockKeeper.rebuild([h.infos["A"], h.infos["B"]], [h.last["A"], h.last["B"]], _source_tables(h), [],
                                remnants=remnants)
        again = rb.keeper.find(LOCK)
        assert set(again.departed) == {TableRef("s1", "db", "c")}
        assert [again.members[h.refs[n]].answer.stage for n in ("A", "B")] == [Stage.DETECTED] * 2
        assert ddls(h.unlock("A", "skip")) == []                 # B still has c1
        assert ddls(h.unlock("B", "skip")) == (["ALTER TABLE `db`.`t` DROP COLUMN `c1`"] if first else [])


def test_an_add_of_a_column_a_departed_table_left_narrower_widens_it():
    """C adds c9 SMALLINT (it runs downstream) and leaves.  A later ADD c9 INT would be a duplicate
    column downstream, ignored, and INT values would then be truncated into the SMALLINT: it runs
    as the MODIFY that widens the column.  The same definition runs as written (a duplicate,
    ignored); an incompatible one is refused, naming the table that left.  The operator's
    ``exec`` of an ADD refused while C was a member widens the column too.  Before, both ran
    the ADD and the column stayed SMALLINT (found by tests/sim)."""
    widen = "ALTER TABLE `db`.`t` MODIFY COLUMN `c9` int(11) DEFAULT NULL"
    h = Harness(T, tables=("A", "B", "C", "D"))
    assert ddls(h.send("C", "ALTER TABLE t ADD COLUMN c9 SMALLINT")) == ["ALTER TABLE t ADD COLUMN c9 SMALLINT"]
    refused = h.send("D", "ALTER TABLE t ADD COLUMN c9 INT", done=False)
    assert refused.operation.stage is Stage.ERROR          # DM's rule while C is a member
    h.k.remove_table(LOCK.id, h.refs["C"])
    assert ddls(h.unlock("D", "exec")) == [widen]
    h = Harness(T, tables=("A", "B", "C"))
    h.send("C", "ALTER TABLE t ADD COLUMN c9 SMALLINT")
    h.k.remove_table(LOCK.id, h.refs["C"])
    _lock_removed(h, "C")
    assert ddls(h.send("A", "ALTER TABLE t ADD COLUMN c9 INT")) == [widen]
    assert ddls(h.send("B", "ALTER TABLE t ADD COLUMN c9 INT")) == ["ALTER TABLE t ADD COLUMN c9 INT"]
    h = Harness(T, tables=("A", "B", "C"))
    h.send("C", "ALTER TABLE t ADD COLUMN c9 SMALLINT")
    h.k.remove_table(LOCK.id, h.refs["C"])
    out = h.send("B", "ALTER TABLE t ADD COLUMN c9 VARCHAR(5)", done=False)
    assert out.operation.stage is Stage.ERROR and "which left the lock" in out.operation.message
    assert ddls(h.send("A", "ALTER TABLE t ADD COLUMN c9 TINYINT")) == ["ALTER TABLE t ADD COLUMN c9 TINYINT"]
