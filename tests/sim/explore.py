"""Exhaustive exploration of a small configuration: every interleaving of the master's and the
workers' steps, with at most ``crashes`` faults (master crash, worker kill) at any point,
deduplicated on the protocol state.  Returns the number of distinct states and the first
violation with the action path that reaches it."""
from __future__ import annotations

import copy

from .run import apply, state_key
from .store import Violation
from .world import World


def explore(events: list, crashes: int = 1, limit: int = 200_000) -> tuple[int, tuple[Violation, list[str]] | None]:
    start = World(events)
    n = len(start.workers)
    seen: set = set()
    stack: list[tuple[World, list[str], int]] = [(start, [], crashes)]
    while stack:
        world, path, left = stack.pop()
        key = (state_key(world), left)
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > limit:
            break
        moved = False
        actions = ["m"] + [f"step-w{i}" for i in range(n)]
        if left:
            actions += ["crash-m"] + [f"crash-w{i}" for i in range(n)]
        for a in actions:
            w = copy.deepcopy(world)
            try:
                ok = apply(w, a)
            except Violation as v:
                return len(seen), (v, path + [a])
            if not ok:
                continue
            if not a.startswith("crash"):
                moved = True
            stack.append((w, path + [a], left - a.startswith("crash")))
        if not moved:
            w = copy.deepcopy(world)
            try:
                if apply(w, "unlock"):
                    stack.append((w, path + ["unlock"], left))
                    continue
                w.quiet_check()
            except Violation as v:
                return len(seen), (v, path)
    return len(seen), None
