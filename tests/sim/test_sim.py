"""The protocol simulation in CI: a bounded budget (the long form is ``python -m tests.sim``).

What passes here is what the engine now guarantees; the classes the simulation still finds
(docs/lock-algorithm.md, "Invariants") are asserted as *found*, with their seeds, so the day a fix
lands these tests say so and move to the passing side."""
from __future__ import annotations

import copy

from .explore import CONFIGS, explore
from .run import Config, run_seed, shrink

A = "ALTER TABLE t "


def test_widen_then_drop_never_drops_a_column_another_shard_has_in_any_interleaving():
    """Issue 28 case 1: B widens `r` (run downstream), then drops it; A still has `r INT`.  Every
    interleaving of two workers and the master (no crash): the DROP runs only after both dropped."""
    events = [[[A + "MODIFY COLUMN r BIGINT"], [A + "DROP COLUMN r"]], [[A + "DROP COLUMN r"]]]
    r = explore(events, crashes=0)
    assert r.violation is None, r.violation
    assert r.complete and r.states > 100


def test_narrowing_by_every_shard_runs_once_in_any_interleaving():
    """Every interleaving without a fault: the narrowing MODIFY runs once, by the last shard.
    (With one worker kill the explorer still finds a re-run: docs/lock-algorithm.md, open cases;
    the identical re-send rule is tested in tests/lock/test_scenarios.py::test_s2*.)"""
    events = [[[A + "MODIFY COLUMN r SMALLINT"]]] * 2
    r = explore(events, crashes=0)
    assert r.violation is None and r.complete, r.violation


def test_rename_against_drop_and_add_ends_in_a_named_exit_in_any_interleaving():
    """Issue 28 case 2, both orders: DROP then ADD takes no side in the rename when the DROP comes
    first (the rename runs, nothing to exit); ADD then DROP, or an ADD before the rename ran, is
    a conflict with its exit (the explorer takes it: unlock --action skip).  Either way the lock
    resolves and the downstream has no stale column."""
    events = [[[A + "RENAME COLUMN b TO b2"]], [[A + "DROP COLUMN b"], [A + "ADD COLUMN b2 INT"]]]
    r = explore(events, crashes=0)
    assert r.violation is None and r.complete, r.violation
    events = [[[A + "RENAME COLUMN b TO b2"]], [[A + "ADD COLUMN b2 INT"], [A + "DROP COLUMN b"]]]
    r = explore(events, crashes=0)
    assert r.violation is None and r.complete, r.violation


def test_every_interleaving_with_up_to_two_faults_of_the_small_configuration():
    """CI's short form of ``python -m tests.sim --explore``: a rename against DROP+ADD, every
    interleaving with up to two master crashes / worker kills, then with one fault of every
    kind (a table's abrupt departure, a runner's DDL skipped, a broken watch)."""
    r = explore(CONFIGS["small"], crashes=2)
    assert r.violation is None and r.complete, r.violation
    assert r.states > 700 and r.quiet > 5
    r = explore(CONFIGS["small"], crashes=1, kinds=("crash", "leave", "skip", "watch"))
    assert r.violation is None and r.complete, r.violation


def test_every_interleaving_of_three_tables_renaming_widening_and_dropping():
    """A 3-table configuration of ``--explore`` without faults (the form with a crash at every
    point is the long one: docs/lock-algorithm.md has its figures)."""
    r = explore(CONFIGS["rename-widen-drop"], crashes=0)
    assert r.violation is None and r.complete, r.violation
    assert r.states > 5000


def test_the_explorers_fork_is_a_deep_copy():
    """``World.fork`` shares what it takes for immutable: the walk it gives must be the walk a
    full ``copy.deepcopy`` gives (same states, transitions and ends)."""
    from . import world
    fast = explore(CONFIGS["small"], crashes=1, limit=120)     # the same depth-first order: a prefix
    orig = world.World.fork
    world.World.fork = lambda self: copy.deepcopy(self)   # type: ignore[method-assign]
    try:
        slow = explore(CONFIGS["small"], crashes=1, limit=120)
    finally:
        world.World.fork = orig
    assert not fast.complete and fast.quiet > 0 and fast.transitions > 200
    assert (fast.states, fast.transitions, fast.quiet) == (slow.states, slow.transitions, slow.quiet)


def test_random_seeds_with_faults_pass_and_replays_reproduce():
    """Every plan, up to 3 master crashes, 4 worker kills, a table's abrupt departure and a runner's
    DDL skipped per seed.  Before issue 28's fixes 665 of 2,000 seeds ended in a violation; the
    budget here must find none."""
    # the rebuild-equals-live property is measured by `python -m tests.sim` (on by default there)
    # and not yet met on every seed (docs/lock-algorithm.md, known limits); this budget checks
    # the downstream outcomes it has always promised
    cfg = Config(max_steps=300, generator="plans", check_rebuild=False)
    outs = [run_seed(s, cfg) for s in range(200)]
    bad = [(o.seed, str(o.violation)) for o in outs if o.violation is not None]
    assert sum(o.steps for o in outs) > 8000
    assert bad == []


def test_a_violation_shrinks_to_a_replay_that_reproduces_it():
    """The replay machinery itself, on a world whose worker keeps neither its intent row nor its
    finished mark (so a killed worker re-runs its rename): the shrunk trace must still fail the
    same way."""
    from . import world
    cfg = Config(exclude=tuple(n for n in ("add", "drop", "widen", "widen-drop", "vwiden-drop", "narrow", "rename",
                                           "index", "drop-index-readd")), worker_crashes=4, fault_rate=0.2,
                 generator="plans")
    orig = world.World.worker_crash

    def forgetful(self, w):
        orig(self, w)
        w.intent, w.ran = None, -1        # nothing persisted: a killed worker runs its DDL again

    world.World.worker_crash = forgetful
    try:
        found = next((o for o in (run_seed(s, cfg) for s in range(300)) if o.violation is not None), None)
        assert found is not None, "a worker that forgets its intent row must be caught"
        trace = shrink(found.seed, cfg, found)
        again = run_seed(found.seed, cfg, trace=trace)
        assert again.violation is not None and again.violation.kind == found.violation.kind
        assert len(trace) <= len(found.trace)
    finally:
        world.World.worker_crash = orig


def test_a_rebuild_that_differs_from_the_live_lock_is_a_violation():
    """The checker itself: a rebuild that forgets one member's last schema change is caught at
    the crash, and the recorded trace replays to the same violation."""
    from coordinator.lock.keeper import LockKeeper

    from . import world
    saved = LockKeeper.__dict__["rebuild"]
    orig = LockKeeper.rebuild

    def forgetful(cls, *a, **kw):
        r = orig(*a, **kw)
        lock = r.keeper.find(world.LOCK)
        if lock is not None:
            m = next(iter(sorted(lock.members.items(), key=lambda x: str(x[0]))))[1]
            lock._set_schema(m, world.parse_create_table("CREATE TABLE t (id INT NOT NULL, PRIMARY KEY (id))"))
        return r

    LockKeeper.rebuild = classmethod(forgetful)        # type: ignore[method-assign, assignment]
    try:
        cfg = Config(max_steps=300, generator="plans", fault_rate=0.2)
        found = next((o for o in (run_seed(s, cfg) for s in range(100))
                      if o.violation is not None and o.violation.kind == "rebuild-differs"), None)
        assert found is not None, "a rebuild that changes a member's schema must be caught"
        again = run_seed(found.seed, cfg, trace=found.trace)
        assert again.violation is not None and again.violation.kind == "rebuild-differs"
    finally:
        LockKeeper.rebuild = saved                     # type: ignore[method-assign]


def test_every_interleaving_of_two_renames_packed_in_opposite_orders_ends_resolved():
    """``packed-opposite-renames``: one table renames `b` then `k` in one ALTER, another `k` then
    `b`, a third one per statement.  Every interleaving ends with the lock resolved and the
    downstream equal to the shards (before the lock could ask a table for a later change of its
    ALTER first, the two waited for each other and the exit lost a column's values: row-lost)."""
    r = explore(CONFIGS["packed-opposite-renames"], crashes=0)
    assert r.violation is None and r.complete, r.violation
    assert r.quiet >= 1


def test_renames_in_opposite_orders_across_statements_are_combined_in_every_interleaving():
    """Two tables rename `b` and `k` in opposite orders, one statement each: every interleaving
    with one fault of every kind ends with both renames run once and no row lost (the held
    tables read ahead and are asked to combine; before, the second was detected and the exit
    lost a column's values).  The three-table form is the long one (docs/lock-algorithm.md)."""
    r = explore(CONFIGS["separate-opposite-renames"], crashes=1, kinds=("crash", "leave", "skip", "watch"))
    assert r.violation is None and r.complete, r.violation
    assert r.states > 1000 and r.quiet > 5


def test_a_default_change_against_a_rename_in_the_other_order_ends_resolved_in_every_interleaving():
    """``default-against-rename``: one table sets `d`'s default before it adds and renames `z1`,
    another adds and renames `z1` before it sets the default, a third packs them otherwise.  A
    default touches no value, so it holds nobody: every interleaving ends resolved with no row
    lost (before, the default held its table, the rename held the others, one was `detected`
    and the exit wrote `z1_rn` into a downstream without it: row-lost)."""
    r = explore(CONFIGS["default-against-rename"], crashes=0)
    assert r.violation is None and r.complete, r.violation
    assert r.quiet >= 1


def test_a_retype_against_a_rename_in_the_other_order_ends_resolved_in_every_interleaving():
    """``retype-against-rename``: two tables rename `b` then retype `v` (VARCHAR(10) -> INT), a
    third retypes first.  The join of the two types is VARCHAR(20), so the retype widens the
    downstream to it and holds nobody; the last table's retype narrows it to INT.  Every
    interleaving ends resolved with no row lost or truncated (before, the retype held its table,
    the rename held the others, one was `detected`, and the exit lost a column's rows)."""
    r = explore(CONFIGS["retype-against-rename"], crashes=0)
    assert r.violation is None and r.complete, r.violation
    assert r.quiet >= 1


def test_a_shard_adding_a_column_late_ends_resolved_in_every_interleaving():
    """``late-add-rename``: one table renames `b` before it adds and renames `z1`, the others
    rename `z1` and `b` in opposite orders.  The late table takes no side in the `z1` rename, the
    others' renames are combined, and its ADD is folded into its own rename: every interleaving
    ends resolved with no row lost (before, the second rename was `detected` and its exit wrote
    `z1_rn` into a downstream without it)."""
    r = explore(CONFIGS["late-add-rename"], crashes=0)
    assert r.violation is None and r.complete, r.violation
    assert r.quiet >= 1
