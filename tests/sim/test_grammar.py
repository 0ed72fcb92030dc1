"""The grammar generator (tests/sim/grammar.py): it covers every clause kind the schema model
knows, its paths converge, it packs enough multi-change ALTERs, and the engine keeps the
invariants on its single-change scenarios over 6 tables and 3 sources with every fault the
scheduler injects.  (Scenarios of several changes still find violations: docs/lock-algorithm.md,
"Known limits", has the figures; ``python -m tests.sim`` runs them.)"""
from __future__ import annotations

import random

from coordinator.lock.schema_bag import eq
from coordinator.schema import apply_ddl, parse_create_table
from coordinator.schema.kinds import ClauseKind

from . import grammar
from .run import Config, run_seed


def test_every_clause_kind_has_a_maker_or_a_reason():
    missing = [k.value for k in ClauseKind if k not in grammar.MAKERS and k not in grammar.NOT_SIMULATED]
    assert missing == [], f"add a maker to tests/sim/grammar.py MAKERS for {missing}"
    assert not set(grammar.MAKERS) & set(grammar.NOT_SIMULATED)


def test_every_kind_is_drawn_and_every_path_of_a_scenario_ends_at_one_schema():
    base = parse_create_table(grammar.BASE)
    seen: set[str] = set()
    for seed in range(200):
        rng = random.Random(seed)
        chosen = grammar.changes(rng, 3)
        seen |= {c.kind for c in chosen}
        finals = []
        for events in grammar.table_events(rng, chosen, 6):
            s = base
            for ev in events:
                for stmt in ev:
                    s = apply_ddl(s, stmt)
            finals.append(s)
        assert all(eq(finals[0], f) for f in finals), (seed, [c.kind for c in chosen])
    assert seen == {k.value for k in grammar.MAKERS}


def test_at_least_30_percent_of_alters_carry_several_changes():
    multi = total = 0
    for seed in range(300):
        rng = random.Random(seed)
        m, t = grammar.multi_share(grammar.table_events(rng, grammar.changes(rng, 3), 6))
        multi, total = multi + m, total + t
    assert multi / total >= 0.30, (multi, total)


def test_single_change_scenarios_over_six_tables_and_three_sources_keep_the_invariants():
    cfg = Config(tables=6, sources=3, plans=1, max_steps=300)
    outs = [run_seed(s, cfg) for s in range(150)]
    assert sum(o.steps for o in outs) > 6000
    assert [(o.seed, str(o.violation)) for o in outs if o.violation is not None] == []
