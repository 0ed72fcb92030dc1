"""Exhaustive exploration of a small configuration: every interleaving of the master's and the
workers' steps, with at most ``crashes`` faults (master crash, worker kill) at any point, each
distinct state expanded once.  Returns the number of distinct states and the first violation
with the action path that reaches it.

Speed (it decides what size is exhaustive in practice): a state is forked with ``World.fork``
(records and schemas shared, the keeper deep-copied) only for an action that can progress
(``_enabled``), and states are told apart by ``full_key``, which keeps every field a later step
reads with etcd revisions replaced by the relations between them that the protocol compares
(an Operation answering the table's current Info, a worker having seen it), so two states that
differ only in revision numbers are one."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from .run import apply
from .store import Violation
from .world import LOCK, World


A = "ALTER TABLE t "
_R, _W, _D = A + "RENAME COLUMN b TO b2", A + "MODIFY COLUMN r BIGINT", A + "DROP COLUMN r"
_N, _C = A + "MODIFY COLUMN a SMALLINT", A + "ADD COLUMN c1 INT"
_R2 = A + "RENAME COLUMN k TO k2"
_V = A + "MODIFY COLUMN v INT"
_DEF, _Z, _RZ = A + "ALTER COLUMN d SET DEFAULT 5", A + "ADD COLUMN z1 INT", A + "RENAME COLUMN z1 TO z1_rn"

# Named configurations (per table its DDLs, one Info each) for ``python -m tests.sim --explore``:
# issue 28 asks for 3 tables x 3 DDLs with a crash at every point.  Each ends with every table at
# the same schema, so a correct protocol ends resolved with the downstream equal to it.
CONFIGS: dict[str, list[list[list[str]]]] = {
    # case 1 and cases 3/4: a rename everywhere; r widened then dropped by two tables, dropped
    # unwidened by the third (the DROP must wait for the last table that still has it)
    "rename-widen-drop": [[[_R], [_W], [_D]], [[_W], [_D], [_R]], [[_D], [_R]]],
    # case 2: one table renames, the others reach b2 by ordinary statements (both orders): exits
    "rename-ordinary": [[[_R], [_W], [_D]], [[A + "DROP COLUMN b"], [A + "ADD COLUMN b2 INT"], [_D]],
                        [[A + "ADD COLUMN b2 INT"], [A + "DROP COLUMN b"], [_D]]],
    # a narrowing MODIFY (runs once, by the last table), a rename and an ADD in three orders
    "narrow-rename-add": [[[_N], [_R], [_C]], [[_R], [_C], [_N]], [[_C], [_N], [_R]]],
    # multi-change ALTERs (coordinated one change at a time): a widen packed with a rename in both
    # orders against the two made one per statement; a narrowing packed with an ADD
    "packed-rename-widen": [[[_W, _R]], [[_R], [_W]], [[_R, _W]]],
    "packed-narrow-add": [[[_N, _C], [_R]], [[_C], [_R, _N]]],
    # two renames packed in one ALTER in opposite orders (the lock asks one table for its later
    # rename first), and a third table making them one per statement
    "packed-opposite-renames": [[[_R, _R2]], [[_R2, _R]], [[_R], [_R2]]],
    # two renames in opposite orders, each its own statement (rows between): the held tables read
    # ahead and the lock asks each to coordinate both as one ALTER
    "separate-opposite-renames": [[[_R], [_R2]], [[_R2], [_R]]],
    "separate-opposite-renames-3": [[[_R], [_R2]], [[_R2], [_R]], [[_R, _R2]]],
    # a table drops b, widens r, then adds b2, while two rename b: its DROP may complete the
    # rename (it takes no side) or come after it; its ADD waits for the rename to have run
    "rename-dropped-then-added": [[[_R], [_W]], [[A + "DROP COLUMN b"], [_W], [A + "ADD COLUMN b2 INT"]],
                                  [[_W], [_R]]],
    # a default change in the other order than a rename, on a column one table adds late: the
    # default holds nobody, so the tables never wait for each other across the two changes
    "default-against-rename": [[[_DEF, _Z], [_RZ]], [[_Z], [_RZ], [_DEF]], [[_Z, _DEF], [_RZ]]],
    # a retype (VARCHAR(10) -> INT: their join is VARCHAR(20)) in the other order than a rename:
    # the retype widens the downstream and holds nobody, so the two never wait for each other
    "retype-against-rename": [[[_R], [_V]], [[_R], [_V]], [[_V], [_R]]],
    # a table that adds `z1` only after renaming `b`, then renames `z1`, while the others rename
    # `z1` and `b` in opposite orders: it takes no side in the `z1` rename, and its ADD is folded
    # into its own rename once the others' renames ran
    "late-add-rename": [[[_Z], [_R], [_RZ]], [[_R], [_Z], [_RZ]], [[_Z], [_RZ], [_R]]],
    # CI's short form: two tables, the rename against DROP+ADD
    "small": [[[_R]], [[A + "DROP COLUMN b"], [A + "ADD COLUMN b2 INT"]]],
}


@dataclass
class Explored:
    states: int = 0
    transitions: int = 0
    seconds: float = 0.0
    complete: bool = True                   # False: stopped at ``limit`` states
    violation: tuple[Violation, list[str]] | None = None
    quiet: int = 0                          # terminal states checked with World.quiet_check
    kinds: dict[str, int] = field(default_factory=dict)


def _rel(rev: int, *against: int) -> int:
    """A revision as its relation to others: which of ``against`` it equals (1-based), 0 none."""
    for i, a in enumerate(against, 1):
        if rev == a and rev:
            return i
    return 0 if rev else -1


_FP: dict[int, tuple[object, str]] = {}


def _fp(d: object) -> str:
    """A fingerprint of an Info's before-schema (a JSON dict, shared between forks: memoised on
    its identity, the entry holding it so the id is not reused)."""
    e = _FP.get(id(d))
    if e is None or e[0] is not d:
        if len(_FP) > 100_000:
            _FP.clear()
        e = _FP[id(d)] = (d, json.dumps(d, sort_keys=True))
    return e[1]


def full_key(world: World) -> tuple:
    """The state as far as any later step can tell (revision numbers abstracted to relations)."""
    store = world.store
    ws = []
    for w in world.workers:
        info = store.infos.get((LOCK, w.t))
        op = store.ops.get((LOCK, w.t))
        done = op is not None and (op.done or store.marks.get((LOCK, w.t)) == op.revision)
        irev = info.revision if info else 0
        orev = op.revision if op else 0
        ws.append((w.pos, w.phase, w.met == w.pos, w.ran == w.pos, w.intent, w.gone, w.skipped, w.read_ahead,
                   len(w.events), None if info is None else (tuple(info.ahead), info.extends > 0),
                   None if op is None else (tuple(op.combine), op.hopeful),
                   _rel(w.rev, irev), _rel(w.seen, orev),
                   None if w.info is None else (tuple(w.info.ddls), _fp(w.info.before)),
                   None if w.op is None else (w.op.stage.value, tuple(w.op.ddls), _rel(w.op.revision, orev)),
                   None if info is None else (tuple(info.ddls), _fp(info.before)),
                   None if op is None else (op.stage.value, tuple(op.ddls), op.runner, op.runs_after,
                                            done, _rel(op.info_revision, irev))))
    pending = []
    for kind, rec in store.events[world.cursor:]:
        if kind == "tables":
            pending.append((kind, rec.source, tuple(sorted(rec.members(LOCK.down_schema, LOCK.down_table)))))
            continue
        cur = store.infos.get((LOCK, rec.table)) if kind == "info" else store.ops.get((LOCK, rec.table))
        pending.append((kind, str(rec.table), tuple(getattr(rec, "ddls", ())), getattr(rec, "stage", None),
                        getattr(rec, "ran", True), _rel(getattr(rec, "op_revision", 0) or rec.revision,
                                                        cur.revision if cur else 0)))
    lock = world.keeper.find(LOCK)
    lk: tuple = ()
    if lock is not None:
        irevs = {t: i.revision for (_, t), i in store.infos.items()}
        mem = []
        for t, m in sorted(lock.members.items(), key=lambda x: str(x[0])):
            a = m.answer
            mem.append((str(t), m.schema.lattice_key(), m.conflict.lattice_key() if m.conflict else None,
                        m.done, _rel(m.info_revision, irevs.get(t, 0)), bool(m.error), m.note,
                        m.applied_by_other.lattice_key() if m.applied_by_other else None, m.applied_by,
                        None if a is None else (a.stage.value, tuple(a.ddls), tuple(a.cols), a.runner,
                                                a.runs_after, _rel(a.info.revision, irevs.get(t, 0)))))
        st = lock.__dict__
        lk = (tuple(mem), tuple(st["_redirects"]), tuple(sorted(st["_redirect_after"].items(), key=str)),
              tuple(sorted(st["_gates"], key=str)), tuple(sorted(st["_accepted"], key=repr)),
              tuple(sorted(st["_uncarried"].items(), key=str)),
              tuple(sorted((c, tuple(sorted(d.items(), key=str))) for c, d in st["_columns"].items())),
              tuple(sorted((c, t.sql()) for c, t in st["_added_as"].items())))
    dropped = tuple(sorted(((c, str(t), s.value) for (_, c, t), s in store.dropped.items())))
    return (tuple(ws), tuple(pending), lk, dropped, world.down.lattice_key(),
            world.left.lattice_key() if world.left is not None else None, frozenset(store.unran))


def _enabled(world: World, action: str) -> bool:
    """False when ``apply(world, action)`` would change nothing (saves a fork)."""
    if action == "m":
        return world.cursor < len(world.store.events)
    if action == "crash-m":
        return True
    kind, _, idx = action.rpartition("-w")
    w = world.workers[int(idx)]
    if kind == "leave":
        return not w.gone
    if kind == "skip":
        return world.can_skip(w)
    if kind == "watch":
        return w.phase in ("wait", "held", "paused") and w.seen != 0
    if kind == "crash":
        return not (w.phase == "run" and w.info is None and w.rev == 0 and w.seen == 0 and w.op is None)
    if w.gone:
        return False
    if w.phase == "advance" and w.skipped:
        return world._rows_misfit(w, w.schemas[w.pos + 1]) is None
    if w.phase in ("wait", "paused", "held"):
        op = world.store.get_operation(LOCK, w.t)
        if op is not None and op.info_revision == w.rev and op.revision > w.seen:
            return True
        cur = world.store.get_info(LOCK, w.t)
        if w.phase == "held":
            return world.can_read_ahead(w)
        return w.phase == "wait" and (cur is None or cur.revision != w.rev)
    if w.phase == "run" and w.pos >= len(w.events) and w.ran != w.pos:
        world.worker_step(w)      # a finished worker's rows are checked (may raise); nothing changes
        return False
    return True


def explore(events: list, crashes: int = 1, limit: int = 200_000, progress: float = 0.0,
            kinds: tuple[str, ...] = ("crash",), seconds: float = 0.0) -> Explored:
    """Depth-first over every interleaving; ``crashes`` faults at most per path, of ``kinds``:
    ``crash`` (master crash, worker kill), ``leave`` (a table's abrupt departure at any
    point, as the operator's `remove-table`), ``skip`` (a runner's DDL skipped by the operator), ``watch`` (a broken
    watch); ``progress``: print a line every that many seconds (0: silent); ``seconds``: stop
    (``complete`` False) after that long (0: no budget)."""
    out = Explored()
    t0 = last = time.monotonic()
    start = World(events)
    n = len(start.workers)
    seen: set = set()
    stack: list[tuple[World, list[str], int]] = [(start, [], crashes)]
    steps = ["m"] + [f"step-w{i}" for i in range(n)]
    faults = (["crash-m"] if "crash" in kinds else []) + [
        f"{k}-w{i}" for k in kinds for i in range(n)]
    try:
        while stack:
            world, path, left = stack.pop()
            key = (full_key(world), left)
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > limit or (seconds and time.monotonic() - t0 > seconds):
                out.complete = False
                break
            if progress and time.monotonic() - last > progress:
                last = time.monotonic()
                print(f"  {len(seen)} states, {out.transitions} transitions, stack {len(stack)}, "
                      f"{last - t0:.0f}s", flush=True)
            try:
                todo = [a for a in steps + (faults if left else []) if _enabled(world, a)]
            except Violation as v:
                out.violation = (v, path)
                return out
            moved = False
            # the last action reuses the popped state (not needed after its expansion) unless the
            # state must stay for the operator's exit or the quiet check (only faults enabled)
            reuse = any(a == "m" or a.startswith("step") for a in todo)
            for i, a in enumerate(todo):
                w = world if reuse and i == len(todo) - 1 else world.fork()
                try:
                    ok = apply(w, a)
                except Violation as v:
                    out.violation = (v, path + [a])
                    return out
                if not ok:
                    continue
                out.transitions += 1
                is_fault = not (a == "m" or a.startswith("step"))
                moved = moved or not is_fault
                stack.append((w, path + [a], left - is_fault))
            if not moved:
                assert not reuse, f"an enabled step did not progress after {path}"
                w = world
                try:
                    if apply(w, "unlock"):
                        out.transitions += 1
                        stack.append((w, path + ["unlock"], left))
                        continue
                    out.quiet += 1
                    w.quiet_check()
                except Violation as v:
                    out.violation = (v, path)
                    return out
        return out
    finally:
        out.states = len(seen)
        out.seconds = time.monotonic() - t0
