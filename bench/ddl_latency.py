"""Benchmark: shard DDL coordination latency through real processes.

A master and two workers (``shardctl`` subprocesses, the local services) replicate 2 sources x
2 shard tables into one target.  Each round is one optimistic lock: every shard drops the same
column, one after another.  The downstream may drop it only when the last shard has, so the
latency measured is: last shard's ``ALTER ... DROP COLUMN`` committed upstream -> the column gone
downstream.  Prints p50/p99 over the rounds, the same-run cost of one plain downstream ALTER
(the limit) as a ratio, the workers' peak RSS (process tree: Python driver + Spark JVM), and
where the time goes (medians, from the processes' structured logs; one clock, one machine):
commit -> Info put (binlog read, the rows before the DDL applied, schema preview), Info put ->
Operation written (master: watch, lock decision, fenced write), Operation -> done (worker: sees
the Operation, runs the DDL downstream, marks it done), done -> seen (checkpoint, bench poll).

    .venv/bin/python bench/ddl_latency.py [--locks 50] [--short]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pymysql

from _procs import BenchCluster, ctl, free_port
from tests.support.proctree import tree_rss  # (_procs put the repository on sys.path)


def db(params, database=None):
    return pymysql.connect(**params, database=database, autocommit=True)


def _ts(line: dict) -> float:
    return datetime.strptime(line["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def stage_breakdown(work: Path, commits: list[float], seen: list[float]) -> dict[str, float]:
    """Median per stage over the locks, read from the master's and workers' JSON log lines: the
    Operation that carries lock i's DROP (``c{i}``) names the Info revision it answers; that
    Info's put and the table's next "done" bound the other stages."""
    logs = []
    for p in work.glob("*.log"):
        for raw in p.read_text(errors="replace").splitlines():
            if raw.startswith("{"):
                try:
                    logs.append(json.loads(raw))
                except ValueError:
                    pass
    puts = {d.get("info_revision"): d for d in logs if d.get("msg") == "shard DDL info put"}
    dones = [d for d in logs if d.get("msg") == "shard DDL done"]
    rows = []
    for i, (c, s) in enumerate(zip(commits, seen)):
        op = next((d for d in logs if d.get("msg") == "operation written" and f"`c{i}`" in str(d.get("ddls"))), None)
        put = puts.get(op.get("info_revision")) if op else None
        if op is None or put is None:
            continue
        done = next((d for d in sorted(dones, key=_ts) if d.get("table") == put.get("table") and _ts(d) >= _ts(op)),
                    None)
        if done is None:
            continue
        rows.append({"commit->Info put": _ts(put) - c, "put->Operation": _ts(op) - _ts(put),
                     "Operation->done": _ts(done) - _ts(op), "done->seen": s - _ts(done)})
    if not rows:
        return {}
    return {k: statistics.median(r[k] for r in rows) * 1000 for k in rows[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--locks", type=int, default=50)
    ap.add_argument("--short", action="store_true", help="CI form: 8 locks")
    a = ap.parse_args()
    n_locks = 8 if a.short else a.locks
    cl = BenchCluster("ddl")
    my, tag, work = cl.mysql, cl.tag, cl.work
    cols = ", ".join(f"c{i} INT NULL" for i in range(n_locks))
    shards = {"s1": (f"bddl_{tag}_a", my["source1"]), "s2": (f"bddl_{tag}_b", my["source2"])}
    for schema, params in shards.values():
        with db(params) as c, c.cursor() as cur:
            cur.execute(f"CREATE DATABASE {schema}")
            for t in ("t_0", "t_1"):
                cur.execute(f"CREATE TABLE {schema}.{t} (id INT PRIMARY KEY, v INT, {cols})")
    target = f"bddl_{tag}"
    task_name = f"ddlbench{tag}"
    task_file = cl.task_file(task_name, task_mode="all", meta_schema=f"bddl_meta_{tag}",
                             schema_pattern=f"bddl_{tag}_*", target=target, starts=dict.fromkeys(shards))
    for sid, (_, params) in shards.items():
        cl.source_file(sid, params)
    addr = f"127.0.0.1:{free_port()}"
    peak = {"kb": 0}
    stop = threading.Event()
    try:
        cl.master("master", addr, "--election-ttl", "5")
        workers = [cl.worker(s, "--log-level", os.environ.get("BENCH_LOG_LEVEL", "INFO")) for s in shards]

        def sample():
            while not stop.is_set():
                peak["kb"] = max(peak["kb"], max(tree_rss(w.pid) // 1024 for w in workers))
                stop.wait(0.5)
        threading.Thread(target=sample, daemon=True).start()
        cl.wait_master(addr, timeout=120, interval=0.5)
        cl.start_task(addr, task_file)
        print("[bench] task started; waiting for the load and the switch to binlog", flush=True)
        down = db(my["downstream"])

        def has_col(col):
            with down.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema=%s "
                            "AND table_name='t' AND column_name=%s", (target, col))
                return cur.fetchone()[0] == 1

        deadline = time.monotonic() + 300
        while True:
            st = json.loads(ctl(addr, "query-status", task_name).stdout or "{}")
            subs = [s for src in st.get("sources", []) for s in src.get("subTaskStatus", [])]
            if len(subs) == 2 and all(s["stage"] == "Running" and s.get("unit") == "Sync" for s in subs) \
                    and has_col("c0"):
                break
            assert time.monotonic() < deadline, f"task not running: {st}"
            time.sleep(0.5)
        ups = {sid: db(params) for sid, (_, params) in shards.items()}
        lat, commits = [], []
        for i in range(n_locks):
            for si, (sid, (schema, _)) in enumerate(shards.items()):
                for ti, t in enumerate(("t_0", "t_1")):
                    with ups[sid].cursor() as cur:   # ids unique across shards: they merge into one table
                        cur.execute(f"INSERT INTO {schema}.{t} (id, v) VALUES (%s, %s)", (i * 10 + si * 2 + ti, i))
                        cur.execute(f"ALTER TABLE {schema}.{t} DROP COLUMN c{i}")
            t_last = time.monotonic()
            commits.append(time.time())
            deadline, next_look, errors_seen = t_last + 120, t_last + 5, 0
            while has_col(f"c{i}"):
                assert time.monotonic() < deadline, f"lock {i}: c{i} still downstream after 120 s"
                if time.monotonic() > next_look:   # slow: fail early if a subtask stays in Error
                    next_look = time.monotonic() + 5
                    st = json.loads(ctl(addr, "query-status", task_name).stdout or "{}")
                    bad = [s for src in st.get("sources", []) for s in src.get("subTaskStatus", [])
                           if s.get("stage") == "Error"]
                    errors_seen = errors_seen + 1 if bad else 0
                    assert errors_seen < 3, f"lock {i}: a subtask is in Error: {json.dumps(bad)[:2000]}"
                time.sleep(0.01)
            lat.append(time.monotonic() - t_last)
            print(f"[bench] lock {i + 1}/{n_locks}: {lat[-1] * 1000:.0f} ms", flush=True)
        # the limit: the same ALTER run directly on the downstream by one client
        with down.cursor() as cur:
            cur.execute(f"CREATE TABLE {target}.limit_probe (id INT PRIMARY KEY, x INT NULL)")
            direct = []
            for _ in range(5):
                t0 = time.monotonic()
                cur.execute(f"ALTER TABLE {target}.limit_probe ADD COLUMN y INT NULL")
                cur.execute(f"ALTER TABLE {target}.limit_probe DROP COLUMN y")
                direct.append((time.monotonic() - t0) / 2)
        stages = stage_breakdown(work, commits, [c + x for c, x in zip(commits, lat)])
        p50 = statistics.median(lat)
        p99 = sorted(lat)[max(0, int(round(0.99 * len(lat))) - 1)]
        limit = statistics.median(direct)
        print(f"DDL coordination latency over {n_locks} locks (2 sources x 2 shards, DROP COLUMN, last shard -> "
              f"downstream): p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms; direct downstream ALTER "
              f"{limit * 1000:.1f} ms; p50/limit ratio {p50 / limit:.1f}; worker peak RSS {peak['kb'] / 1024:.0f} MB")
        if stages:
            print("where the time goes (median ms): " + ", ".join(f"{k} {v:.0f}" for k, v in stages.items()))
        return 0
    finally:
        stop.set()
        cl.stop()


if __name__ == "__main__":
    sys.exit(main())
