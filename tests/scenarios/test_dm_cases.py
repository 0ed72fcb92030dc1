"""Runs every case of ``registry.CASES`` against real `shardctl master`/`worker` processes: each case
on fresh upstream/downstream databases with its own task on the module's cluster.  The step
language is documented in ``case.py``."""
from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest
import yaml

from .case import Case
from .registry import CASES

_TB = re.compile(r"\btb([1-4])\b")


def _sql(stmt: str) -> str:
    return _TB.sub(lambda m: f"orders_0{m.group(1)}", stmt)


def _locks(sc) -> list:
    rc, doc = sc.c.ctl("shard-ddl-lock", sc.name)
    return doc.get("locks", []) if isinstance(doc, dict) else []


def _run(sc, case: Case, step: tuple) -> None:
    kind = step[0]
    fill = {"{task}": sc.name, "{task_file}": sc.task_file, "{down}": sc.down.name, "{db}": sc.dbs["s1"].name,
            "{tmp}": str(sc.tmp),
            **{f"{{db:{sid}}}": db.name for sid, db in sc.dbs.items()}}
    if kind in sc.dbs:
        stmts = step[1] if isinstance(step[1], tuple) else (step[1],)
        with sc.dbs[kind].connect() as conn, conn.cursor() as cur:     # one session (e.g. SET TIMESTAMP first)
            for stmt in stmts:
                stmt = _sql(stmt)
                if sc.dbs[kind].server.startswith("mysql"):
                    for maria, mysql in case.mysql_forms:
                        stmt = stmt.replace(maria, mysql)
                cur.execute(stmt)
    elif kind == "start":
        sc.start()
    elif kind == "expect" and step[1] == "stage":
        sid, stage, phrases = step[2], step[3], step[4:]
        # wait for the stage with every phrase (an older error of the same stage may be read first)
        sc.c.wait(lambda: next((x for s, x in sc.subtasks().items() if sid in (s, "any") and x["stage"] == stage
                                and all(p in x["error"] for p in phrases)), None), 90, f"{sid} {stage} {phrases}")
    elif kind == "expect" and step[1] == "locks":
        n, phrases = step[2], step[3:]
        sc.c.wait(lambda: (lambda ls: len(ls) == n and all(p in json.dumps(ls) for p in phrases))(_locks(sc)),
                  90, f"{n} locks with {phrases}")
    elif kind == "running":
        sc.wait_running()
    elif kind in ("ctl", "ctl_fails"):
        phrases, argv = (step[1], step[2:]) if kind == "ctl_fails" else ((), step[1:])
        args = [_sql(a) for a in argv]
        for k, v in fill.items():
            args = [a.replace(k, v) for a in args]
        if kind == "ctl":
            sc.c.ctl_ok(*args)
        else:
            rc, doc = sc.c.ctl(*args)
            text = doc if isinstance(doc, str) else json.dumps(doc)
            assert rc != 0 and all(p in text for p in phrases), (args, rc, text)
    elif kind == "ignore_tables":
        doc = yaml.safe_load(Path(sc.task_file).read_text())
        for sid, db in sc.dbs.items():
            bal = doc["block-allow-list"][f"bal-{sid}"]
            bal["ignore-tables"] = [{"db-name": db.name, "tbl-name": _sql(t)} for t in step[1:]]
        Path(sc.task_file).write_text(yaml.safe_dump(doc))
    elif kind == "file":
        (Path(sc.tmp) / step[1]).write_text(_sql(step[2]))
    elif kind == "down":
        sc.down.execute(step[1])
    elif kind == "down_rows":
        sql, want = step[1], [tuple(r) for r in step[2]]
        sc.c.wait(lambda: [tuple(r) for r in sc.down.execute(sql)] == want, 90, f"{sql} -> {want}")
    elif kind == "count":
        sc.c.wait(lambda: sc.down.execute("SELECT COUNT(*) FROM orders")[0][0] == step[1], 90,
                  f"{step[1]} rows downstream")
    elif kind in ("restart", "kill", "revive"):
        proc = sc.c.master if step[1] == "master" else sc.c.workers[step[2]]
        if kind in ("restart", "kill"):
            proc.kill(signal.SIGKILL)
        if kind in ("restart", "revive"):
            if step[1] == "master":
                sc.c.restart_master()
                # /readyz answers as a follower too: wait until this master leads again
                sc.c.wait(lambda: sc.c.ctl("shard-ddl-lock", sc.name)[0] == 0, 60, "the restarted master leading")
            else:
                sc.c.restart_worker(step[2])
    elif kind == "expect" and step[1] == "different":
        sc.wait_running()
        sc.c.wait(lambda: (lambda rc_rep: rc_rep[0] == 1 and not rc_rep[1].get("equal"))(sc.check()), 90,
                  "shardctl check: different")
    elif kind == "stop_task":
        sc.c.ctl_ok("stop-task", sc.name)
    elif kind == "start_task":
        sc.c.ctl_ok("start-task", sc.task_file)
    elif kind == "wait_equal":
        sc.wait_running()
        sc.wait_equal()
    else:
        raise AssertionError(f"unknown step {step!r} in {case.name}")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_dm_case(scenario, case: Case):
    run_case(scenario, case)


def run_case(scenario, case: Case) -> None:
    """One case on the ``scenario`` factory's cluster (whichever servers it runs on)."""
    shards = {sid: tuple(_sql(t) for t in tabs) for sid, tabs in case.tables.items()}
    sc = scenario(columns=case.columns, rows=0, shards={"s1": shards.get("s1", ()), "s2": shards.get("s2", ())},
                  table_options=case.table_options, mode=case.mode)
    if case.task_options:
        doc = yaml.safe_load(Path(sc.task_file).read_text())
        doc.update(dict(case.task_options))
        Path(sc.task_file).write_text(yaml.safe_dump(doc))
    if ("start",) not in case.steps:
        sc.start()
    for step in case.steps:
        sc.c.context = f"{case.dm}: {step}"
        _run(sc, case, step)
    sc.stop()
