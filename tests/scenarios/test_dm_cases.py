"""Runs ``dm_cases.CASES`` against real `shardctl master`/`worker` processes: each case on fresh
upstream/downstream databases with its own task on the shared cluster."""
from __future__ import annotations

import re

import pytest

from .dm_cases import CASES, Case

_TB = re.compile(r"\btb([12])\b")


def _sql(stmt: str) -> str:
    return _TB.sub(lambda m: f"orders_0{m.group(1)}", stmt)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_dm_case(scenario, case: Case):
    shards = {sid: tuple(_sql(t) for t in tabs) for sid, tabs in case.tables.items()}
    sc = scenario(columns=case.columns, rows=0, shards={"s1": shards.get("s1", ()), "s2": shards.get("s2", ())},
                  table_options=case.table_options)
    sc.start()
    for step in case.steps:
        kind = step[0]
        sc.c.context = f"{case.dm}: {step}"
        if kind in sc.dbs:
            sc.dbs[kind].execute(_sql(step[1]))
        elif kind == "expect" and step[1] == "stage":
            sid, stage, phrases = step[2], step[3], step[4:]
            st = sc.c.wait(lambda sid=sid, stage=stage: next(
                (x for s, x in sc.subtasks().items() if sid in (s, "any") and x["stage"] == stage), None),
                90, f"{sid} {stage}")
            for p in phrases:
                assert p in st["error"], (p, st)
        elif kind == "ctl":
            sc.c.ctl_ok(*(a.replace("{task}", sc.name) for a in step[1:]))
        elif kind == "down":
            sc.down.execute(step[1])
        elif kind == "count":
            sc.c.wait(lambda n=step[1]: sc.down.execute("SELECT COUNT(*) FROM orders")[0][0] == n, 90,
                      f"{step[1]} rows downstream")
        elif kind == "wait_equal":
            sc.wait_running()
            sc.wait_equal()
        else:
            raise AssertionError(f"unknown step {step!r} in {case.name}")
    sc.stop()
