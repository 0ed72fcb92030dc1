"""``python -m tests.sim --seeds N [--start S] [--tables T] [--plans P] [--steps M]``: run N
seeds; print each violation with its scenario and a minimal replay; exit 1 if any.
``python -m tests.sim --explore NAME [--crashes C] [--limit L]``: walk every interleaving of a
named configuration (``tests/sim/explore.py``, CONFIGS; ``all`` for each) with at most C faults
per path; print the distinct states, transitions and time; exit 1 on a violation (with its path)
or when the walk stopped at L states."""
from __future__ import annotations

import argparse
import sys
import time

from .run import Config, run_seed, shrink


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__)
    p.add_argument("--seeds", type=int, default=1000)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--tables", type=int, default=3)
    p.add_argument("--plans", type=int, default=2, help="changes per scenario (plans with --generator plans)")
    p.add_argument("--sources", type=int, default=2)
    p.add_argument("--born", type=float, default=0.0, help="share of tables created mid-lock (grammar generator)")
    p.add_argument("--generator", choices=("grammar", "plans"), default="grammar",
                   help="grammar: DDLs drawn from the statement grammar (tests/sim/grammar.py); plans: the fixed list")
    p.add_argument("--unit", choices=("change", "statement"), default="change",
                   help="change: each change of an ALTER is its own Info (the worker's rule); statement: one Info per ALTER")
    p.add_argument("--steps", type=int, default=400, help="scheduled steps before the faultless drain")
    p.add_argument("--fault-rate", type=float, default=0.08)
    p.add_argument("--stop-after", type=int, default=5, help="stop after this many violations")
    p.add_argument("--exclude", default="", help="comma-separated plans to leave out")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--no-check-rebuild", action="store_true",
                   help="do not compare the lock rebuilt at a master crash with the live one")
    p.add_argument("--explore", metavar="NAME", help="exhaustive walk of a named configuration (or 'all')")
    p.add_argument("--crashes", type=int, default=1, help="--explore: faults (master crash, worker kill) per path")
    p.add_argument("--limit", type=int, default=2_000_000, help="--explore: stop after this many states")
    p.add_argument("--seconds", type=float, default=0.0, help="--explore: stop each walk after this long (0: none)")
    p.add_argument("--faults", default="crash", help="--explore: fault kinds, comma-separated: crash, leave, skip, watch")
    a = p.parse_args(argv)
    if a.explore:
        return _explore(a.explore, a.crashes, a.limit, tuple(a.faults.split(",")), a.seconds)
    cfg = Config(tables=a.tables, plans=a.plans, max_steps=a.steps, fault_rate=a.fault_rate,
                 exclude=tuple(x for x in a.exclude.split(",") if x), generator=a.generator, sources=a.sources, born=a.born,
                 unit=a.unit, check_rebuild=not a.no_check_rebuild)
    steps = bad = 0
    kinds: dict[str, int] = {}
    t0 = time.monotonic()
    for seed in range(a.start, a.start + a.seeds):
        out = run_seed(seed, cfg)
        steps += out.steps
        if out.violation is not None:
            bad += 1
            kinds[out.violation.kind] = kinds.get(out.violation.kind, 0) + 1
            print(f"seed {seed}: {out.violation}")
            print(f"  scenario: {out.events}")
            if not a.no_shrink:
                print(f"  replay: {shrink(seed, cfg, out)}")
            if bad >= a.stop_after:
                break
        if (seed - a.start + 1) % 1000 == 0:
            print(f"progress: {seed - a.start + 1} seeds, {steps} steps, {bad} violations, "
                  f"{time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
    print(f"{seed - a.start + 1} seeds, {steps} steps, {bad} violations {kinds}, {time.monotonic() - t0:.1f}s")
    return 1 if bad else 0


def _explore(name: str, crashes: int, limit: int, kinds: tuple[str, ...], seconds: float = 0.0) -> int:
    from .explore import CONFIGS, explore
    names = sorted(CONFIGS) if name == "all" else [name]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        print(f"unknown configuration {unknown[0]!r}: use one of {', '.join(sorted(CONFIGS))} or 'all'",
              file=sys.stderr)
        return 2
    rc = 0
    for n in names:
        r = explore(CONFIGS[n], crashes=crashes, limit=limit, progress=60, kinds=kinds, seconds=seconds)
        print(f"{n}: {len(CONFIGS[n])} tables, {crashes} x {'/'.join(kinds)}: {r.states} states, {r.transitions} transitions, "
              f"{r.quiet} quiet ends, {r.seconds:.0f}s, {'complete' if r.complete else 'STOPPED (limit or time budget)'}, "
              f"{'violation ' + str(r.violation[0]) if r.violation else 'no violation'}", flush=True)
        if r.violation:
            print(f"  path: {r.violation[1]}")
        rc |= 1 if (r.violation or not r.complete) else 0
    return rc


if __name__ == "__main__":
    sys.exit(main())
