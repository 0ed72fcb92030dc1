"""Cases the simulation's grammar generator (tests/sim/grammar.py) found on the pure engine:
opposite changes of one column or index answered at the same time, and statements that write a
column's whole definition.  Each failed on the engine before its fix (docs/lock-algorithm.md,
invariant 4)."""
from __future__ import annotations

import dataclasses

from coordinator.etcdproto import Stage
from coordinator.lock import LockKeeper
from coordinator.schema.ddl import apply_ddl

from .harness import LOCK, Harness

T = "CREATE TABLE t (id INT PRIMARY KEY, w INT, u INT)"
WIDEN, NARROW = "ALTER TABLE t MODIFY COLUMN w BIGINT", "ALTER TABLE t MODIFY COLUMN w INT"


def ddls(out):
    return out.operation.ddls


def test_a_widening_waits_for_a_running_narrowing_of_the_same_column():
    """A and B widen `w` and narrow it back; the narrowing (B's, the last) is answered and not run
    yet when C widens `w` again.  Run in either order the column could end INT while C writes
    BIGINT values: C is held until B's narrowing is done, then decided afresh."""
    h = Harness(T, tables=("A", "B", "C"))
    assert ddls(h.send("A", WIDEN)) == [WIDEN]
    h.send("B", WIDEN)
    assert ddls(h.send("A", NARROW)) == []                       # B still has BIGINT
    assert ddls(h.send("B", NARROW, done=False)) == [NARROW]     # running
    c = h.send("C", WIDEN)
    assert c.operation.stage is Stage.SKIP_AND_WAIT and c.operation.runs_after == str(h.refs["B"])
    released = h.done("B")
    assert [(o.table, o.stage) for o in released.others] == [(h.refs["C"], Stage.RESOLVED)]
    assert ddls(h.send("C", WIDEN)) == [WIDEN]                   # the replay widens after the narrowing


def test_dropping_a_unique_index_waits_for_a_running_add_of_it():
    """B is the last to add `ux` (its ADD runs) and A drops `ux` again before B's ADD ran: in
    the wrong order the index would stay while A writes duplicates under it."""
    add, drop = "ALTER TABLE t ADD UNIQUE INDEX ux (u)", "ALTER TABLE t DROP INDEX ux"
    h = Harness(T)
    assert ddls(h.send("A", add)) == []                          # B lacks it
    assert ddls(h.send("B", add, done=False)) == [add]           # the last table adds it: running
    out = h.send("A", drop)
    assert out.operation.stage is Stage.SKIP_AND_WAIT and out.operation.runs_after == str(h.refs["B"])
    released = h.done("B")
    assert [(o.table, o.stage) for o in released.others] == [(h.refs["A"], Stage.RESOLVED)]
    assert ddls(h.send("A", drop)) == [drop]


def test_moving_a_column_does_not_narrow_it_downstream():
    """`MODIFY w INT AFTER id` only moves `w` for this shard, but runs with the whole definition:
    after another shard widened `w` it would narrow the merged column."""
    h = Harness(T)
    assert ddls(h.send("A", WIDEN)) == [WIDEN]
    assert ddls(h.send("B", "ALTER TABLE t MODIFY COLUMN w INT AFTER id")) == []


def test_catching_up_to_a_width_others_passed_does_not_narrow_it_downstream():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, w SMALLINT)")
    assert ddls(h.send("A", WIDEN)) == [WIDEN]
    assert ddls(h.send("B", "ALTER TABLE t MODIFY COLUMN w INT")) == []     # still narrower than A's


def test_a_default_change_holds_nobody_and_runs_with_the_last_table():
    """A sets `d`'s default before it adds `c1`; B adds `c1` first.  A default touches no value
    (row events carry every one), so A is not held: nothing runs while B keeps the old default
    (the join's default is then the top, and the downstream keeps its own); B's SET DEFAULT,
    the last, runs it.  Before, A was held until B made the change: with changes in the other
    order elsewhere the two waited for each other (tests/sim)."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, d INT DEFAULT 1)")
    default = "ALTER TABLE t ALTER COLUMN d SET DEFAULT 5"
    a = h.send("A", default)
    assert a.operation.stage is Stage.NONE and ddls(a) == []
    assert h.lock.members[h.refs["A"]].schema.column("d").default == "5"
    assert ddls(h.send("B", "ALTER TABLE t ADD COLUMN c1 INT")) == ["ALTER TABLE t ADD COLUMN c1 INT"]
    b = h.send("B", default)
    assert b.operation.stage is Stage.NONE and ddls(b) == [default]
    h.send("A", "ALTER TABLE t ADD COLUMN c1 INT")
    assert h.lock is None or h.lock.is_resolved()


def test_a_new_default_two_tables_disagree_on_is_detected():
    """DM's conflict stays where the tables disagree on the *new* default: B sets 7 after A set
    5 (neither is B's old default).  The operator's `exec` picks B's for the merged table."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, d INT DEFAULT 1)")
    h.send("A", "ALTER TABLE t ALTER COLUMN d SET DEFAULT 5")
    b = h.send("B", "ALTER TABLE t ALTER COLUMN d SET DEFAULT 7")
    assert b.operation.stage is Stage.DETECTED and "DEFAULT 5 on another table but DEFAULT 7 here" in b.operation.message
    assert h.unlock("B", "exec").operation.ddls == ["ALTER TABLE t ALTER COLUMN d SET DEFAULT 7"]


def test_after_an_unlock_exec_of_a_held_rename_the_others_catch_up_with_nothing_run():
    """The operator ran A's held rename with `unlock --action exec`; B's identical rename later is
    the same change, already made downstream: nothing runs, the lock resolves (before: B was
    `detected` with "values cannot be carried" and needed its own unlock)."""
    rename = "ALTER TABLE t RENAME COLUMN c1 TO c2"
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)")
    assert h.send("A", rename).operation.stage is Stage.SKIP_AND_WAIT
    assert h.unlock("A", "exec").operation.ddls == [rename]
    h.done("A")
    b = h.send("B", rename)
    assert b.operation.stage is Stage.NONE and ddls(b) == []
    assert h.lock is None or h.lock.is_resolved()


def test_after_an_unlock_exec_and_a_rebuild_the_others_still_catch_up():
    from .test_protocol_cases import _rebuild
    rename = "ALTER TABLE t RENAME COLUMN c1 TO c2"
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT)")
    h.send("A", rename)
    h.unlock("A", "exec")
    h.done("A")
    rb = _rebuild(h)
    out = rb.keeper.handle_info(h.make_info("B", rename, before=h.init))
    assert out.operation.stage is Stage.NONE and out.operation.ddls == []


def test_a_drop_that_reaches_a_held_rename_by_ordinary_statements_waits_for_the_held_table():
    """A's rename `col -> new_col` is held; B adds `new_col`, then drops `col`.  B's DROP must not
    run while A still has `col` (A's values would be lost while A is also asked to decide): it
    runs nothing, A gets the named exit (at B's ADD), and the unlock completes the drop."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, col INT)")
    assert h.send("A", "ALTER TABLE t RENAME COLUMN col TO new_col").operation.stage is Stage.SKIP_AND_WAIT
    add = h.send("B", "ALTER TABLE t ADD COLUMN new_col INT")
    assert ddls(add) == ["ALTER TABLE t ADD COLUMN new_col INT"]
    # detected at once, and it stays so when the lock asks again (the downstream has `new_col`)
    assert [(o.table, o.stage) for o in add.others] == [(h.refs["A"], Stage.DETECTED)]
    assert "unlock" in add.others[0].message
    b = h.send("B", "ALTER TABLE t DROP COLUMN col")
    assert ddls(b) == [] and h.last["A"].stage is Stage.DETECTED
    out = h.unlock("A", "skip")
    assert out.operation.ddls == ["ALTER TABLE `db`.`t` DROP COLUMN `col`"]
    h.done("A")
    assert h.lock is None or h.lock.is_resolved()


def test_unlock_exec_does_not_drop_a_column_another_table_still_has():
    """`unlock --action exec` of A's held `[RENAME b TO b2, DROP c]`: the rename runs (the
    operator's decision), the DROP of `c` does not while B still has `c`; B's own DROP, the
    last, runs it later."""
    rename = "ALTER TABLE t RENAME COLUMN b TO b2"
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, b INT, c INT)")
    assert h.send("A", rename, "ALTER TABLE t DROP COLUMN c").operation.stage is Stage.SKIP_AND_WAIT
    assert h.unlock("A", "exec").operation.ddls == [rename]
    h.done("A")
    assert ddls(h.send("B", rename)) == []                               # already made downstream
    assert ddls(h.send("B", "ALTER TABLE t DROP COLUMN c")) == ["ALTER TABLE t DROP COLUMN c"]


def test_unlock_exec_of_a_wider_add_widens_the_existing_column():
    """B added `y INT` (ran); A's `ADD y BIGINT` is refused (the downstream would keep INT).  The
    exit `unlock --action exec` gives the downstream A's wider type with a MODIFY: the ADD as
    written would fail as a duplicate column and keep INT under A's BIGINT values."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY)")
    assert ddls(h.send("B", "ALTER TABLE t ADD COLUMN y INT")) == ["ALTER TABLE t ADD COLUMN y INT"]
    a = h.send("A", "ALTER TABLE t ADD COLUMN y BIGINT")
    assert a.operation.stage is Stage.ERROR
    assert h.unlock("A", "exec").operation.ddls == ["ALTER TABLE `db`.`t` MODIFY COLUMN `y` bigint(20) DEFAULT NULL"]


def test_a_table_created_mid_lock_with_the_new_shape_does_not_turn_the_others_change_into_a_conflict():
    """C is created while A's rename is held, from a shard that already renamed (its checkpoint
    holds `b2`).  It made the change upstream only: the downstream still has `b`.  B's rename is
    then the last one and runs (before, C counted as a table that "reached this shape with
    ordinary statements that already ran downstream", B was `detected` and the rename never ran)."""
    from coordinator.lock import LockKeeper
    rename = "ALTER TABLE t RENAME COLUMN b TO b2"
    created = {}
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, b INT)",
                keeper=LockKeeper(schema_source=lambda _lock, t: created.get(t.table)))
    assert h.send("A", rename).operation.stage is Stage.SKIP_AND_WAIT
    ref = h.add("C", apply_ddl(h.init, rename))
    created[ref.table] = h.schema["C"]
    h.publish_source_tables()
    b = h.send("B", rename)
    assert b.operation.stage is Stage.NONE and ddls(b) == [rename]


def test_a_column_turns_invisible_downstream_when_the_last_table_hides_it():
    """Visibility joins (visible wins): hiding a column is not a change every table must make
    before anything runs (the tables were held, and two such changes in opposite orders waited
    for each other for ever); it runs downstream once, with the last table's statement, and a
    table that hides the column before or after another conflicting change is not held for it."""
    hide = "ALTER TABLE t ALTER COLUMN u SET INVISIBLE"
    rename = "ALTER TABLE t RENAME COLUMN w TO w2"
    h = Harness(T, tables=("A", "B"))
    a = h.send("A", hide)
    assert a.operation.stage is Stage.NONE and ddls(a) == []     # B still shows `u`
    assert h.send("A", rename).operation.stage is Stage.SKIP_AND_WAIT
    b = h.send("B", rename)                                       # B renames first, then hides
    assert b.operation.stage is Stage.NONE and ddls(b) == [rename]
    last = h.send("B", hide)
    assert last.operation.stage is Stage.NONE and ddls(last) == [hide]


def test_a_drop_the_lock_writes_itself_quotes_the_column_name():
    """The DROP an unlock completes is built by the engine: a column name with a back-quote is
    quoted by the one quoting function (`a``b`), not spliced into the statement."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, `co``l` INT)")
    assert h.send("A", "ALTER TABLE t RENAME COLUMN `co``l` TO new_col").operation.stage is Stage.SKIP_AND_WAIT
    assert ddls(h.send("B", "ALTER TABLE t ADD COLUMN new_col INT")) == ["ALTER TABLE t ADD COLUMN new_col INT"]
    assert ddls(h.send("B", "ALTER TABLE t DROP COLUMN `co``l`")) == []
    out = h.unlock("A", "skip")
    assert out.operation.ddls == ["ALTER TABLE `db`.`t` DROP COLUMN `co``l`"]


def test_an_index_rename_holds_no_table_and_the_downstream_follows_the_join_of_the_indexes():
    """A name does not touch a row: no table waits for a RENAME INDEX.  The downstream keeps the
    indexes every table has: the first table's rename drops `ix_f`, the last one's adds `ix_f2`.
    Before, the rename was a conflicting change: a retype pending on another table was then
    `detected` against it, and the exit the lock named let INT values into the VARCHAR column."""
    rename, retype = "ALTER TABLE t RENAME INDEX ix_f TO ix_f2", "ALTER TABLE t MODIFY COLUMN v DATE"
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), f INT, KEY ix_f (f))",
                tables=("A", "B", "C"))
    a = h.send("A", rename)
    assert a.operation.stage is Stage.NONE and ddls(a) == ["ALTER TABLE t DROP INDEX `ix_f`"]
    assert h.send("B", retype).operation.stage is Stage.SKIP_AND_WAIT      # a conflict of its own
    assert ddls(h.send("C", rename)) == []                                 # B still has `ix_f`
    assert h.send("A", retype).operation.stage is Stage.SKIP_AND_WAIT
    assert ddls(h.send("C", retype)) == [retype]
    assert ddls(h.send("B", retype)) == []                                 # B's replay: C ran it
    assert ddls(h.send("B", rename)) == ["ALTER TABLE t DROP INDEX `ix_f`", "ALTER TABLE t ADD KEY `ix_f2` (`f`)"]


def test_a_table_dropping_a_renamed_index_before_the_others_renamed_it():
    """A renames `ix_f` and drops `ix_f2` while B has not renamed yet: nothing names an index the
    downstream lacks (the rename dropped `ix_f` there), and B's late rename adds nothing."""
    rename = "ALTER TABLE t RENAME INDEX ix_f TO ix_f2"
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, f INT, KEY ix_f (f))")
    assert ddls(h.send("A", rename)) == ["ALTER TABLE t DROP INDEX `ix_f`"]
    # a DROP of an index the join lacks is returned as for any index (a no-op downstream, error
    # 1091 is one the worker's DDL runner takes as "already done")
    assert h.send("A", "ALTER TABLE t DROP INDEX ix_f2").operation.stage is Stage.NONE
    assert ddls(h.send("B", rename)) == []
    assert h.send("B", "ALTER TABLE t DROP INDEX ix_f2").operation.stage is Stage.NONE
    assert h.lock is None or h.lock.is_resolved()


def test_a_lone_table_renames_its_index_as_written():
    rename = "ALTER TABLE t RENAME INDEX ix_f TO ix_f2"
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, f INT, KEY ix_f (f))", tables=("A",))
    assert ddls(h.send("A", rename)) == [rename]


def test_a_default_set_while_a_rename_is_held_reaches_the_downstream_with_the_last_table():
    """A holds a rename; B and C set a default meanwhile: not held, not `detected` (a default
    touches no value), nothing runs while A keeps the old one.  A's identical SET DEFAULT, after
    the rename resolved, is the last: it runs (before: B and C were `detected` against the held
    rename, needed the operator, and the default never reached the downstream)."""
    rename, default = "ALTER TABLE t RENAME COLUMN c1 TO c2", "ALTER TABLE t ALTER COLUMN d SET DEFAULT 5"
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, c1 INT, d INT DEFAULT 1)", tables=("A", "B", "C"))
    assert h.send("A", rename).operation.stage is Stage.SKIP_AND_WAIT
    for t in ("B", "C"):
        out = h.send(t, default)
        assert out.operation.stage is Stage.NONE and ddls(out) == []
    assert h.send("B", rename).operation.stage is Stage.SKIP_AND_WAIT
    assert ddls(h.send("C", rename)) == [rename]
    assert ddls(h.send("A", rename)) == []                                 # A's replay: C ran it
    a = h.send("A", default)
    assert a.operation.stage is Stage.NONE and ddls(a) == [default]


def test_a_table_released_from_an_ordering_hold_is_rebuilt_as_live():
    """B's ADD of `t1` waits for A's running DROP of it; A's done mark releases B (`resolved`).
    The lock rebuilt from etcd now must hold B where the live one does, before its ADD (decided
    afresh on the replay): the redirect keeps `runs_after`.  Before, the rebuild read `resolved`
    as an accepted change and gave B the column (the simulation's `rebuild-differs`)."""
    from .test_scenarios import SourceTablesFor
    add, drop = "ALTER TABLE t ADD COLUMN t1 INT", "ALTER TABLE t DROP COLUMN t1"
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY)")
    assert ddls(h.send("A", add)) == [add]
    assert ddls(h.send("A", drop, done=False)) == [drop]
    b = h.send("B", add)
    assert b.operation.stage is Stage.SKIP_AND_WAIT and b.operation.runs_after == str(h.refs["A"])
    released = h.done("A")
    [op_b] = [o for o in released.others if o.table == h.refs["B"]]
    assert op_b.stage is Stage.RESOLVED and op_b.runs_after == str(h.refs["A"])
    live = {str(t): m.schema.column_keys() for t, m in h.lock.members.items()}
    ops = {o.table: o for o in h.written}
    rb = LockKeeper.rebuild(list(h.infos.values()), list(ops.values()), [SourceTablesFor(h)], [])
    assert rb.errors == []
    rebuilt = {str(t): m.schema.column_keys() for t, m in rb.keeper.find(LOCK).members.items()}
    assert rebuilt == live and "t1" not in rebuilt[str(h.refs["B"])]


def test_a_refused_add_does_not_teach_a_rebuild_the_columns_first_type():
    """A adds `c1` SMALLINT (run); B's ADD `c1` INT is refused (`error`: the downstream keeps the
    first definition).  A master dies before it reads C's ADD `c1` INT and A's next Info (a widen,
    which replaces A's ADD in etcd).  The rebuilt lock must refuse C too, as the live one does;
    before, it learnt INT from B's refused Info as the type `c1` was first added as and answered
    C's ADD as written on a downstream whose `c1` is SMALLINT, where it is swallowed as a
    duplicate column and C's values are truncated."""
    from .test_protocol_cases import _rebuild
    add_small, add_int = "ALTER TABLE t ADD COLUMN c1 SMALLINT", "ALTER TABLE t ADD COLUMN c1 INT"
    live = Harness("CREATE TABLE t (id INT PRIMARY KEY)", tables=("A", "B", "C"))
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY)", tables=("A", "B", "C"))
    for x in (live, h):
        assert ddls(x.send("A", add_small)) == [add_small]
        assert x.send("B", add_int).operation.stage is Stage.ERROR
    assert live.send("C", add_int).operation.stage is Stage.ERROR
    h.infos["C"] = h.make_info("C", add_int)             # written to etcd, not read by the dead master
    h.infos["A"] = h.make_info("A", "ALTER TABLE t MODIFY COLUMN c1 INT")
    checkpoints = {h.refs[n]: h.schema[n] for n in h.refs}
    rb = _rebuild(h, schema_source=lambda _lock, t: checkpoints[t])
    [op_c] = [o for o in rb.operations if o.table == h.refs["C"]]
    assert op_c.stage is Stage.ERROR and op_c.ddls == []


def test_a_retype_told_after_an_operator_skip_is_not_taken_for_one_made_downstream():
    """B's statement renamed `x` and retyped `v`; the operator skipped it (`binlog skip`), so the
    worker tells the lock the rest of the statement as B's schema (an ignore-conflict Info):
    nothing of it ran downstream.  A's identical retype must then wait for C and run when C makes
    it too.  Before, the lock took B's told schema for a retype made downstream, answered A
    `detected` ("values cannot be carried"), and after the operator's exit A wrote DATE values
    into the VARCHAR column."""
    retype = "ALTER TABLE t MODIFY COLUMN v DATE"
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", tables=("A", "B", "C"))
    out = h.send("B", info=h.make_info("B", retype, ignore_conflict=True))
    assert out.operation is None
    a = h.send("A", retype)
    assert a.operation.stage is Stage.SKIP_AND_WAIT, a.operation
    assert ddls(h.send("C", retype)) == [retype]


def test_the_rest_of_a_skipped_statement_is_rebuilt_from_where_the_skip_left_the_table():
    """Every table runs `[RENAME w, RENAME k]`, one change at a time.  C is the last to rename `w`
    and runs it; its execution fails and the operator skips C's statement (`binlog skip`): the
    rename is handed over, and C tells the lock the rest of the statement (`RENAME k`, an
    ignore-conflict Info).  A master dies before it reads that Info.  The rebuilt lock takes C's
    schema from its checkpoint, already past the whole statement, and must still decide the told
    rest from where the skip left C, as the live lock does: C counts as ahead of the downstream,
    so A's `RENAME k` waits and B's, the last, runs it.  Before, the rebuilt lock took C for a
    table that made the rename downstream and answered A `detected` ("values cannot be carried");
    the operator's exit then left the downstream without `k_rn`."""
    from .test_protocol_cases import _rebuild
    rn_w, rn_k = "ALTER TABLE t RENAME COLUMN w TO w_rn", "ALTER TABLE t RENAME COLUMN k TO k_rn"
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, w INT, k INT)", tables=("A", "B", "C"))
    assert h.send("A", rn_w).operation.stage is Stage.SKIP_AND_WAIT
    assert h.send("B", rn_w).operation.stage is Stage.SKIP_AND_WAIT
    assert ddls(h.send("C", rn_w, done=False)) == [rn_w]
    skipped = h.last["C"]
    h.last["C"] = dataclasses.replace(skipped, done=True, ran=False)     # the operator's binlog skip
    after_w = apply_ddl(h.init, rn_w)
    h.infos["C"] = h.make_info("C", rn_k, before=after_w, ignore_conflict=True)   # not read by the dead master
    checkpoints = {h.refs["A"]: h.init, h.refs["B"]: h.init, h.refs["C"]: apply_ddl(after_w, rn_k)}
    rb = _rebuild(h, schema_source=lambda _lock, t: checkpoints[t])
    # the skipped rename is handed over to A: its replay runs it, B's replay finds it made
    assert [(o.table, o.stage) for o in rb.operations] == [(h.refs["A"], Stage.RESOLVED),
                                                          (h.refs["B"], Stage.SKIP_AND_WAIT)]
    h.k = rb.keeper
    assert ddls(h.send("A", rn_w)) == [rn_w]
    assert h.last["B"].stage is Stage.RESOLVED
    assert ddls(h.send("B", rn_w)) == []
    assert h.send("A", rn_k).operation.stage is Stage.SKIP_AND_WAIT
    assert ddls(h.send("B", rn_k)) == [rn_k]


def test_a_column_added_as_an_integer_here_and_text_there_is_a_conflict():
    """The lattice joins INT and VARCHAR (a retype between them holds nobody), but two tables
    *adding* one column so differently disagree on what it is: DM's conflict (strict mode
    stops), not a silent VARCHAR(20)."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY)")
    assert ddls(h.send("A", "ALTER TABLE t ADD COLUMN c INT")) == ["ALTER TABLE t ADD COLUMN c INT"]
    b = h.send("B", "ALTER TABLE t ADD COLUMN c VARCHAR(30)")
    assert b.operation.stage is Stage.DETECTED and "INT(11) on another table but VARCHAR(30) here" in b.operation.message
