"""Two renames in opposite orders, each its own statement (rows between them): a held table's
worker reads past it and sends its later changes (``Info.ahead``); a table whose rename would be
``detected`` against another's is held instead while the one in the way makes it later
(``Answer.hopeful``), and once every table's next renames are the same ones the lock asks each
to coordinate them as one ALTER (``Operation.combine``), which it then agrees as one change.
Before, the second rename was ``detected`` and the exit the lock named lost one column's values
(as in DM).  Each test but the last failed on the engine before."""
from __future__ import annotations

import dataclasses

from coordinator.etcdproto import Stage
from coordinator.lock import LockKeeper

from .harness import LOCK, Harness

T = "CREATE TABLE t (id INT PRIMARY KEY, v INT, a INT, b INT)"
RA, RB = "ALTER TABLE t RENAME COLUMN a TO a2", "ALTER TABLE t RENAME COLUMN b TO b2"


def send(h: Harness, name: str, ddl: str, ahead=(), done: bool = True, extends: int = 0):
    """``name``'s Info for ``ddl`` from a worker that reads ahead; ``extends``: the revision of
    the Info it repeats with more look-ahead."""
    info = dataclasses.replace(h.make_info(name, ddl), ahead=list(ahead), reads_ahead=True, extends=extends)
    return h.send(name, info=info, done=done)


def read_further(h: Harness, name: str, ahead):
    """The held table's worker read past it to ``ahead``: the same Info again, with them."""
    held = h.infos[name]
    info = dataclasses.replace(held, ahead=list(ahead), revision=next(h.rev), extends=held.extends or held.revision)
    return h.send(name, info=info, done=False)


def test_two_renames_in_opposite_orders_across_statements_are_coordinated_as_one_alter():
    h = Harness(T)
    assert send(h, "A", RA).operation.stage is Stage.SKIP_AND_WAIT
    b = send(h, "B", RB, done=False)
    assert b.operation.stage is Stage.DETECTED            # nothing known yet of A's later changes
    out = read_further(h, "A", [RB])
    assert out.operation.stage is Stage.SKIP_AND_WAIT and out.operation.info_revision == h.infos["A"].revision
    [(bop)] = [o for o in out.others if o.table == h.refs["B"]]
    assert bop.stage is Stage.SKIP_AND_WAIT and bop.hopeful     # A renames b later: B waits for it
    assert "coordinated as one ALTER" in h.lock.waiting_for(h.refs["B"])
    out = read_further(h, "B", [RA])
    asked = {o.table.table: o.combine for o in [out.operation, *out.others] if o.combine}
    assert asked == {"a": [0], "b": [0]}
    assert "together with 1 later change" in h.lock.waiting_for(h.refs["A"])
    both_a = "ALTER TABLE t RENAME COLUMN a TO a2, RENAME COLUMN b TO b2"
    both_b = "ALTER TABLE t RENAME COLUMN b TO b2, RENAME COLUMN a TO a2"
    assert send(h, "A", both_a).operation.stage is Stage.SKIP_AND_WAIT
    out = send(h, "B", both_b)
    assert out.operation.ddls == [both_b]                  # the last to make them runs them, once
    a = h.last["A"]
    assert a.stage is Stage.RESOLVED
    assert send(h, "A", both_a).operation.ddls == []        # A's replay catches up
    assert h.lock.is_resolved()


def test_a_change_of_other_columns_between_the_renames_stays_where_it_is():
    """A adds `z` between its two renames: its renames are combined past it (the ADD touches
    neither column and is coordinated on its own later); a change of a renamed column between
    them is not moved past (the rename stays detected)."""
    h = Harness(T)
    send(h, "A", RA)
    send(h, "B", RB, done=False)
    read_further(h, "A", ["ALTER TABLE t ADD COLUMN z INT", RB])
    out = read_further(h, "B", [RA])
    asked = {o.table.table: o.combine for o in [out.operation, *out.others] if o.combine}
    assert asked == {"a": [1], "b": [0]}
    h = Harness(T)
    send(h, "A", RA)
    send(h, "B", RB, done=False)
    read_further(h, "A", ["ALTER TABLE t MODIFY COLUMN b BIGINT", RB])
    assert h.last["B"].stage is Stage.DETECTED


def test_a_table_in_the_way_that_does_something_else_with_the_column_leaves_it_detected():
    """A's later change drops `b` instead of renaming it: B's rename of `b` stays detected with
    DM's exits.  A table held in hope is detected once it reads further itself and turns out
    not to make the other table's rename (it drops that column); a later change touching
    neither column keeps the hope."""
    h = Harness(T)
    send(h, "A", RA, ahead=["ALTER TABLE t DROP COLUMN b"])
    assert send(h, "B", RB, done=False).operation.stage is Stage.DETECTED
    h = Harness(T)
    send(h, "A", RA, ahead=[RB])
    b = send(h, "B", RB, done=False)
    assert b.operation.stage is Stage.SKIP_AND_WAIT and b.operation.hopeful
    read_further(h, "B", ["ALTER TABLE t ADD COLUMN z INT"])
    assert h.last["B"].stage is Stage.SKIP_AND_WAIT and h.last["B"].hopeful
    # a DROP of `a` may be the first half of reaching `a2` by ordinary statements: still hope
    read_further(h, "B", ["ALTER TABLE t ADD COLUMN z INT", "ALTER TABLE t DROP COLUMN a"])
    assert h.last["B"].stage is Stage.SKIP_AND_WAIT and h.last["B"].hopeful
    # ... but `a2` added with another definition is not A's rename
    read_further(h, "B", ["ALTER TABLE t ADD COLUMN z INT", "ALTER TABLE t DROP COLUMN a",
                          "ALTER TABLE t ADD COLUMN a2 BIGINT"])
    assert h.last["B"].stage is Stage.DETECTED and "does not make this rename later" in h.last["B"].message


def test_a_table_reaching_the_other_rename_by_drop_and_add_keeps_the_hope():
    """B reaches A's rename `a -> a2` by ordinary statements (DROP a, then ADD a2 with the same
    definition) after its own rename of `b`, A renames `b` after `a`: B is held in hope, not
    ``detected`` (whose exit, `skip`, left B writing `b2` into a downstream without it)."""
    h = Harness(T)
    send(h, "A", RA, ahead=[RB])
    b = send(h, "B", RB, ahead=["ALTER TABLE t DROP COLUMN a", "ALTER TABLE t ADD COLUMN a2 INT"], done=False)
    assert b.operation.stage is Stage.SKIP_AND_WAIT and b.operation.hopeful


def test_an_ordinary_add_of_a_held_renames_new_column_makes_that_rename_detected_with_a_safe_exit():
    """C adds `a2` while A holds `a -> a2`: the ADD runs downstream, so A's rename can never run
    there; A is ``detected`` at once (values cannot be carried), and its `skip` exit is safe
    (the downstream has the column A's rows write).  Before, A stayed held for an agreement
    that could not come, and the lock never resolved."""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, v INT, a INT, b INT)", tables=("A", "B", "C"))
    assert send(h, "A", RA).operation.stage is Stage.SKIP_AND_WAIT
    assert h.send("C", "ALTER TABLE t DROP COLUMN a").operation.stage is Stage.NONE
    c = h.send("C", "ALTER TABLE t ADD COLUMN a2 INT")
    assert c.operation.stage is Stage.NONE and c.operation.ddls
    assert h.last["A"].stage is Stage.DETECTED and "cannot carry its values" in h.last["A"].message


def test_a_rebuild_keeps_the_holds_and_the_requests_to_combine():
    """A master restart while the tables are asked to combine: the requests stand (a rebuild
    restores them), and an Info repeated with more look-ahead keeps the answer it extends."""
    h = Harness(T)
    send(h, "A", RA)
    send(h, "B", RB, done=False)
    read_further(h, "A", [RB])
    read_further(h, "B", [RA])
    ops = {n: h.last[n] for n in ("A", "B")}
    assert [o.combine for o in ops.values()] == [[0], [0]]
    from .test_protocol_cases import _source_tables
    rb = LockKeeper.rebuild(list(h.infos.values()), list(ops.values()), _source_tables(h), [])
    again = rb.keeper.find(LOCK)
    assert {t.table: (m.answer.stage, m.answer.combine) for t, m in again.members.items()} == {
        "a": (Stage.SKIP_AND_WAIT, (0,)), "b": (Stage.SKIP_AND_WAIT, (0,))}


def test_workers_that_do_not_read_ahead_keep_dm_s_answer():
    """An Info without ``reads_ahead`` (a worker that cannot combine) is decided as before."""
    h = Harness(T)
    h.send("A", info=dataclasses.replace(h.make_info("A", RA), ahead=[RB]))
    assert h.send("B", RB, done=False).operation.stage is Stage.DETECTED


def test_a_drop_of_the_old_column_completing_a_held_rename_has_a_held_table_run_it():
    """A holds `a -> a2`; B drops `a` (and has no `a2`): B no longer takes a side, the rename is
    agreed and A runs it (values carried); B waits for that, then its DROP runs nothing.  Before, the DROP counted as
    B reaching A's shape with ordinary statements: A was ``detected`` (values cannot be carried)
    and its `skip` exit left A writing `a2` into a downstream that never got it."""
    h = Harness(T)
    assert send(h, "A", RA, done=False).operation.stage is Stage.SKIP_AND_WAIT
    b = h.send("B", "ALTER TABLE t DROP COLUMN a")
    assert b.operation.stage is Stage.SKIP_AND_WAIT and not b.operation.ddls   # until A ran it
    assert h.last["A"].stage is Stage.RESOLVED
    again = h.send("A", RA)
    assert again.operation.stage is Stage.NONE and again.operation.ddls == [RA]
    assert h.last["B"].stage is Stage.RESOLVED
    assert h.send("B", "ALTER TABLE t DROP COLUMN a").operation.ddls == []


def test_two_renames_of_one_column_to_different_names_are_rivals_not_tables_without_it():
    """A renames `a` to `c`, B and C rename it to `d` (DM_050): B's shape lacks `a` and `c`, yet it
    does not take A's side by having neither -- it renamed the same column another way.  The
    second rename stays a conflict; neither runs downstream.  (A first version of "a table with
    neither column takes no side" agreed both, and the merged table got `c`, then rows of `d`.)"""
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)", tables=("A", "B", "C"))
    assert h.send("A", "ALTER TABLE t RENAME COLUMN a TO c").operation.stage is Stage.SKIP_AND_WAIT
    b = h.send("B", "ALTER TABLE t RENAME COLUMN a TO d")
    c = h.send("C", "ALTER TABLE t RENAME COLUMN a TO d")
    assert b.operation.stage is Stage.DETECTED and not c.operation.ddls
    assert not any(o.ddls for o in [*b.others, *c.others])


def test_an_add_of_the_new_column_waits_for_a_handed_over_rename_to_run():
    """C dropped `a` (it takes no side); B runs A's and its rename, but the downstream refuses it
    and the operator skips B's DDL: the rename is handed over to A, whose replay runs it.  C's
    ADD of `a2` meanwhile waits for that replay: had it run first, the downstream would have
    `a2` from C and the replay nothing to rename onto (the merged table kept `a` for good)."""
    h = Harness(T, tables=("A", "B", "C"))
    assert send(h, "A", RA, done=False).operation.stage is Stage.SKIP_AND_WAIT
    assert h.send("C", "ALTER TABLE t DROP COLUMN a").operation.ddls == []     # B still has `a`
    b = h.send("B", RA, done=False)
    assert b.operation.ddls == [RA]
    h.last["B"].ran = False                      # its run failed; `binlog skip`: done, not run
    h.done("B")
    assert h.last["A"].stage is Stage.RESOLVED   # A's replay runs it now
    add = h.send("C", "ALTER TABLE t ADD COLUMN a2 INT", done=False)
    assert add.operation.stage is Stage.SKIP_AND_WAIT and not add.operation.ddls
    assert h.send("A", RA).operation.ddls == [RA]
    assert h.last["C"].stage is Stage.RESOLVED


def test_a_table_that_has_not_added_the_column_yet_is_not_one_without_it():
    """A adds `e` and renames it; B has not added `e` yet.  B has neither `e` nor `s`, but it
    did not drop `e`: it still has to catch up, so A's rename waits for B (the chaos run caught
    a first version that ran it, after which B's lagging ADD put `e` back downstream)."""
    h = Harness(T)
    assert h.send("A", "ALTER TABLE t ADD COLUMN e INT").operation.stage is Stage.NONE
    assert h.send("A", "ALTER TABLE t RENAME COLUMN e TO s", done=False).operation.stage is Stage.SKIP_AND_WAIT
    assert h.send("B", "ALTER TABLE t ADD COLUMN e INT").operation.stage is Stage.NONE
    b = h.send("B", "ALTER TABLE t RENAME COLUMN e TO s", done=False)
    assert b.operation.ddls == ["ALTER TABLE t RENAME COLUMN e TO s"]


def test_a_handover_prefers_a_table_holding_the_rename_over_the_one_whose_drop_completed_it():
    """B and C hold `a -> a2`, A's DROP of `a` completes it and B is to run it; B's run fails and
    the operator skips it: the change goes to C, which holds it, not to A (first by name), whose
    replay is only a DROP (before, A was chosen: its DROP ran downstream, C ran nothing and
    wrote `a2` into a downstream without it)."""
    h = Harness(T, tables=("A", "B", "C"))
    assert send(h, "B", RA, done=False).operation.stage is Stage.SKIP_AND_WAIT
    assert send(h, "C", RA, done=False).operation.stage is Stage.SKIP_AND_WAIT
    a = h.send("A", "ALTER TABLE t DROP COLUMN a", done=False)
    assert a.operation.stage is Stage.SKIP_AND_WAIT
    assert h.last["B"].stage is Stage.RESOLVED
    assert h.send("B", RA, done=False).operation.ddls == [RA]
    h.last["B"].ran = False                      # its run failed; `binlog skip`: done, not run
    h.done("B")
    assert h.last["C"].stage is Stage.RESOLVED and h.last["A"].stage is Stage.SKIP_AND_WAIT
    assert h.send("C", RA).operation.ddls == [RA]
    assert h.last["A"].stage is Stage.RESOLVED
    assert h.send("A", "ALTER TABLE t DROP COLUMN a").operation.ddls == []


def test_a_skipped_rename_away_from_a_column_nobody_else_has_drops_it_downstream():
    """B adds `z`, drops it (that DROP runs: nobody else had `z` yet) and adds `z2`; A adds `z`
    after that and renames it to `z2`, which the downstream already has from B: ``detected``,
    and A's `skip` leaves `z` with no table and no drop record (B's drop was done before A
    added it again): the unlock drops it.  Before, `z` stayed downstream for good."""
    h = Harness(T)
    assert h.send("B", "ALTER TABLE t ADD COLUMN z INT").operation.ddls
    assert h.send("B", "ALTER TABLE t DROP COLUMN z").operation.ddls
    assert h.send("B", "ALTER TABLE t ADD COLUMN z2 INT").operation.ddls
    assert h.send("A", "ALTER TABLE t ADD COLUMN z INT").operation.ddls
    assert h.send("A", "ALTER TABLE t RENAME COLUMN z TO z2", done=False).operation.stage is Stage.DETECTED
    assert h.unlock("A", "skip").operation.ddls == ["ALTER TABLE `db`.`t` DROP COLUMN `z`"]


ADD_Z, RZ = "ALTER TABLE t ADD COLUMN z INT", "ALTER TABLE t RENAME COLUMN z TO z2"


def _lagging_shard(h: Harness) -> None:
    """A added `z` and holds `a -> a2` (its next statement renames `z`); B holds `a -> a2` and has
    no `z` yet (it adds it, then renames it); C renames `z` first, then `a`."""
    assert send(h, "A", ADD_Z).operation.ddls == [ADD_Z]
    assert send(h, "A", RA, done=False).operation.stage is Stage.SKIP_AND_WAIT
    read_further(h, "A", [RZ])
    assert send(h, "B", RA, done=False).operation.stage is Stage.SKIP_AND_WAIT
    read_further(h, "B", [ADD_Z, RZ])
    send(h, "C", ADD_Z)


def test_a_shard_that_adds_a_column_late_takes_no_side_in_its_rename_and_folds_its_add_into_it():
    """The others rename `z` in another order than `a`; B, which has no `z` yet, takes no side in
    the `z` rename (its look-ahead adds `z`, then renames it).  A and C combine their renames and
    the last runs them; B's replay runs nothing, then its ADD is coordinated together with its
    rename (the downstream has `z2`): nothing runs, and its rows between are written as `z2`.
    Before, C's rename was ``detected`` (B's list touched `z` otherwise) and the operator's
    `skip` exit lost C's `z2`; run as written, B's ADD brought `z` back downstream."""
    h = Harness(T, tables=("A", "B", "C"))
    _lagging_shard(h)
    out = send(h, "C", RZ, ahead=[RA], done=False)
    asked = {o.table.table: o.combine for o in [out.operation, *out.others] if o.combine}
    assert asked == {"a": [0], "c": [0]}                    # B stays held on `a -> a2`
    both_a = "ALTER TABLE t RENAME COLUMN a TO a2, RENAME COLUMN z TO z2"
    both_c = "ALTER TABLE t RENAME COLUMN z TO z2, RENAME COLUMN a TO a2"
    assert send(h, "A", both_a, done=False).operation.stage is Stage.SKIP_AND_WAIT
    out = send(h, "C", both_c)
    assert out.operation.ddls == [both_c]                   # the last to make both runs them, once
    assert h.last["A"].stage is Stage.RESOLVED and h.last["B"].stage is Stage.RESOLVED
    assert send(h, "A", both_a).operation.ddls == []
    assert send(h, "B", RA).operation.ddls == []            # B's replay: A's statement made it
    add = send(h, "B", ADD_Z, done=False)
    assert add.operation.stage is Stage.SKIP_AND_WAIT and add.operation.hopeful and not add.operation.ddls
    assert read_further(h, "B", [RZ]).operation.combine == [0]
    folded = send(h, "B", "ALTER TABLE t ADD COLUMN z INT, RENAME COLUMN z TO z2")
    assert folded.operation.stage is Stage.NONE and folded.operation.ddls == []
    assert h.lock.is_resolved()


def test_the_catching_up_record_survives_a_rebuild():
    """The look-ahead that showed B's later rename is gone once B replays: the record that its
    ADD is to be folded is persisted with its answers, so a new master still folds it."""
    h = Harness(T, tables=("A", "B", "C"))
    _lagging_shard(h)
    send(h, "C", RZ, ahead=[RA], done=False)
    send(h, "A", "ALTER TABLE t RENAME COLUMN a TO a2, RENAME COLUMN z TO z2")
    send(h, "C", "ALTER TABLE t RENAME COLUMN z TO z2, RENAME COLUMN a TO a2")
    send(h, "B", RA)
    assert h.last["B"].catch_up == [["z", "z2"]]
    from .test_protocol_cases import _source_tables
    rb = LockKeeper.rebuild(list(h.infos.values()), list(h.last.values()), _source_tables(h), [])
    h.k = rb.keeper
    add = send(h, "B", ADD_Z, ahead=[RZ], done=False)
    assert add.operation.combine == [0] and not add.operation.ddls


def test_an_add_of_a_column_the_others_renamed_runs_as_written_when_no_rename_follows():
    """Without the record (B never showed the rename), B's ADD of the old name is an ordinary
    ADD: it runs, and B holds nothing."""
    h = Harness(T, tables=("A", "B"))
    send(h, "A", ADD_Z)
    send(h, "B", ADD_Z)
    send(h, "A", RZ, done=False)
    assert send(h, "B", RZ).operation.ddls == [RZ]
    h2 = Harness(T, tables=("A", "B", "C"))
    send(h2, "A", ADD_Z)
    send(h2, "C", ADD_Z)
    send(h2, "A", RZ)
    send(h2, "C", RZ)
    out = send(h2, "B", ADD_Z)
    assert out.operation.stage is Stage.NONE and out.operation.ddls == [ADD_Z]
