"""``python -m tests.sim --seeds N [--start S] [--tables T] [--plans P] [--steps M]``: run N
seeds; print each violation with its scenario and a minimal replay; exit 1 if any."""
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
    p.add_argument("--plans", type=int, default=2)
    p.add_argument("--steps", type=int, default=400, help="scheduled steps before the faultless drain")
    p.add_argument("--fault-rate", type=float, default=0.08)
    p.add_argument("--stop-after", type=int, default=5, help="stop after this many violations")
    p.add_argument("--exclude", default="", help="comma-separated plans to leave out")
    p.add_argument("--no-shrink", action="store_true")
    a = p.parse_args(argv)
    cfg = Config(tables=a.tables, plans=a.plans, max_steps=a.steps, fault_rate=a.fault_rate,
                 exclude=tuple(x for x in a.exclude.split(",") if x))
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


if __name__ == "__main__":
    sys.exit(main())
