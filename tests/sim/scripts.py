"""Seeded generator of shard-DDL scripts: every table of the lock ends at the same schema, by
its own path (a rename here, DROP + ADD there; a widening MODIFY before the DROP on some), so a
correct protocol always ends with the lock resolved and the downstream equal to that schema."""
from __future__ import annotations

import random

BASE = ("CREATE TABLE t (id INT NOT NULL, a INT, b INT, r INT, v VARCHAR(10), k INT, d INT DEFAULT 1, "
        "PRIMARY KEY (id))")


def _alter(clause: str) -> str:
    return f"ALTER TABLE t {clause}"


# plan name -> per-table variants (each a list of statements); the first variant is the usual one
PLANS: dict[str, list[list[str]]] = {
    "add": [["ADD COLUMN c1 INT"]],
    "drop": [["DROP COLUMN a"]],
    "widen": [["MODIFY COLUMN r BIGINT"]],
    "widen-drop": [["DROP COLUMN r"], ["MODIFY COLUMN r BIGINT", "DROP COLUMN r"]],
    "vwiden-drop": [["DROP COLUMN v"], ["MODIFY COLUMN v VARCHAR(20)", "DROP COLUMN v"]],
    "narrow": [["MODIFY COLUMN r SMALLINT"]],
    "rename": [["RENAME COLUMN b TO b2"], ["DROP COLUMN b", "ADD COLUMN b2 INT"],
               ["ADD COLUMN b2 INT", "DROP COLUMN b"]],
    "rename-all": [["RENAME COLUMN b TO b2"]],
    "index": [["ADD INDEX ix_k (k)"]],
    "drop-index-readd": [["ADD INDEX ix_k (k)", "DROP INDEX ix_k"]],
    # a table adding a column after others widened it (the chaos run's lagging worker)
    "add-widen-drop": [["ADD COLUMN c9 INT", "DROP COLUMN c9"], ["ADD COLUMN c9 INT", "MODIFY COLUMN c9 BIGINT",
                                                                "DROP COLUMN c9"]],
}
# plans touching the same column are exclusive
_COLUMN = {"widen": "r", "widen-drop": "r", "narrow": "r", "rename": "b", "rename-all": "b",
           "index": "k", "drop-index-readd": "k", "vwiden-drop": "v", "add": "c1", "drop": "a",
           "add-widen-drop": "c9"}


def plans(rng: random.Random, count: int, exclude: tuple[str, ...] = ()) -> list[str]:
    names = sorted(n for n in PLANS if n not in exclude)
    rng.shuffle(names)
    out, used = [], set()
    for n in names:
        if _COLUMN[n] in used:
            continue
        out.append(n)
        used.add(_COLUMN[n])
        if len(out) == count:
            break
    return out


def table_events(rng: random.Random, chosen: list[str], tables: int) -> list[list[list[str]]]:
    """Per table its events (one event = the statements of one upstream DDL, i.e. one Info)."""
    out = []
    for _ in range(tables):
        events: list[list[str]] = []
        for n in chosen:
            variant = rng.choice(PLANS[n]) if rng.random() < 0.6 else PLANS[n][0]
            stmts = [_alter(c) for c in variant]
            if len(stmts) > 1 and rng.random() < 0.25:
                events.append(stmts)            # one multi-clause ALTER: one Info, several statements
            else:
                events.extend([s] for s in stmts)
        out.append(events)
    return out
