"""The seeded scheduler: which action runs next, faults, the invariant checks, shrinking a
failing trace to a minimal replay."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from . import grammar, scripts
from .store import Violation
from .world import LOCK, World
from coordinator.schema import parse_create_table


@dataclass
class Config:
    tables: int = 3
    plans: int = 2
    max_steps: int = 400
    fault_rate: float = 0.08       # share of steps that inject a fault
    master_crashes: int = 3
    worker_crashes: int = 4
    departures: int = 1            # abrupt departures, as `remove-table` (issue 28 case 5), at most this many
    skips: int = 1                 # runner DDLs skipped by the operator (case 5), at most this many
    exclude: tuple[str, ...] = ()  # plans (scripts.PLANS) or clause kinds (grammar.MAKERS) left out
    generator: str = "grammar"     # grammar: changes drawn from the statement grammar; plans: scripts.PLANS
    sources: int = 2               # tables are spread over this many sources
    born: float = 0.0              # share of tables (not the first) created mid-lock (grammar only)
    unit: str = "change"           # World.unit: a multi-change ALTER coordinated per change or whole
    check_rebuild: bool = True     # World.check_rebuild: a master crash compares the rebuilt lock with the live one


@dataclass
class Outcome:
    seed: int
    steps: int
    trace: list[str]
    events: list
    violation: Violation | None = None
    states: set = field(default_factory=set)


def scenario(seed: int, cfg: Config) -> list:
    rng = random.Random(seed)
    if cfg.generator == "plans":
        return scripts.table_events(rng, scripts.plans(rng, cfg.plans, cfg.exclude), cfg.tables)
    return grammar.table_events(rng, grammar.changes(rng, cfg.plans, cfg.exclude), cfg.tables)


def new_world(events: list, cfg: Config, seed: int = 0) -> World:
    base = scripts.BASE if cfg.generator == "plans" else grammar.BASE
    return World(events, base=parse_create_table(base), sources=cfg.sources, born=births(seed, cfg, events),
                 unit=cfg.unit, check_rebuild=cfg.check_rebuild)


def births(seed: int, cfg: Config, events: list) -> dict[int, int]:
    """Tables created mid-lock: index -> how many events of its path its CREATE already has."""
    if cfg.generator == "plans" or not cfg.born:
        return {}
    rng = random.Random(seed * 31 + 7)          # apart from the scenario's own draws
    return {i: rng.randrange(len(evs) + 1) for i, evs in enumerate(events)
            if i and rng.random() < cfg.born}


def apply(world: World, action: str) -> bool:
    """Perform one named action; False when it could not progress."""
    if action == "m":
        return world.master_step()
    if action == "crash-m":
        world.master_crash()
        return True
    if action == "unlock":
        return world.operator_unlock()
    kind, _, idx = action.rpartition("-w")
    w = world.workers[int(idx)]
    if kind == "crash":
        world.worker_crash(w)
        return True
    if kind == "watch":
        world.broken_watch(w)
        return True
    if kind == "leave":
        return world.table_dropped(w)
    if kind == "skip":
        return world.binlog_skip(w)
    return world.worker_step(w)


def state_key(world: World) -> tuple:
    """What distinguishes two states of the protocol (for counting the distinct states covered)."""
    lock = world.keeper.find(LOCK)
    members = ()
    if lock is not None:
        members = tuple(sorted((str(t), m.schema.lattice_key(), m.conflict is not None,
                                m.answer.stage.value if m.answer else "", m.done) for t, m in lock.members.items()))
    return (tuple((w.pos, w.phase) for w in world.workers), world.down.lattice_key(), members,
            len(world.store.events) - world.cursor)


def _act(world: World, out: Outcome, action: str, count_if_false: bool = True) -> bool:
    """``apply`` and record the action in the trace (also when it raises a violation: a replay of
    the trace must reach the same point)."""
    try:
        ok = apply(world, action)
    except Violation:
        out.trace.append(action)
        out.steps += 1
        raise
    if ok or count_if_false:
        out.trace.append(action)
        out.steps += 1
    return ok


def run_seed(seed: int, cfg: Config, trace: list[str] | None = None, collect: bool = False) -> Outcome:
    rng = random.Random(seed * 7919 + 1)
    events = scenario(seed, cfg)
    world = new_world(events, cfg, seed)
    out = Outcome(seed, 0, [], events)
    mc, wc, dc, sc = cfg.master_crashes, cfg.worker_crashes, cfg.departures, cfg.skips
    n = len(world.workers)
    try:
        if trace is not None:            # replay
            for a in trace:
                apply(world, a)
                out.trace.append(a)
                out.steps += 1
            _drain(world, out)
            world.quiet_check()
            return out
        for _ in range(cfg.max_steps):
            if collect:
                out.states.add(state_key(world))
            skippable = [i for i, w in enumerate(world.workers) if world.can_skip(w)] if sc else []
            if skippable and rng.random() < 0.5:
                a, sc = f"skip-w{rng.choice(skippable)}", sc - 1
                _act(world, out, a)
                continue
            if rng.random() < cfg.fault_rate:
                r = rng.random()
                if r < 0.3 and mc:
                    a, mc = "crash-m", mc - 1
                elif r < 0.6 and wc:
                    a, wc = f"crash-w{rng.randrange(n)}", wc - 1
                elif r < 0.7 and dc:
                    a, dc = f"leave-w{rng.randrange(n)}", dc - 1
                else:
                    a = f"watch-w{rng.randrange(n)}"
                _act(world, out, a)
                continue
            cands = ["m"] + [f"step-w{i}" for i in range(n)]
            rng.shuffle(cands)
            for a in cands:
                if _act(world, out, a, count_if_false=False):
                    break
            else:
                if _act(world, out, "unlock", count_if_false=False):
                    out.steps -= 1        # an operator's exit is not a scheduled step
                    continue
                break
        _drain(world, out)
        world.quiet_check()
    except Violation as v:
        out.violation = v
    return out


def _drain(world: World, out: Outcome) -> None:
    """No more faults: let everything run to quiet (operator exits included)."""
    for _ in range(10_000):
        progressed = False
        for a in ["m"] + [f"step-w{i}" for i in range(len(world.workers))]:
            if apply(world, a):
                out.trace.append(a)
                out.steps += 1
                progressed = True
                break
        if not progressed:
            if apply(world, "unlock"):
                out.trace.append("unlock")
                continue
            return


def shrink(seed: int, cfg: Config, out: Outcome) -> list[str]:
    """Drop actions while the same kind of violation still happens (a minimal replay)."""
    kind = out.violation.kind
    trace = list(out.trace)
    changed = True
    while changed:
        changed = False
        i = 0
        while i < len(trace):
            cand = trace[:i] + trace[i + 1:]
            r = run_seed(seed, cfg, trace=cand)
            if r.violation is not None and r.violation.kind == kind:
                trace = cand
                changed = True
            else:
                i += 1
    return trace
