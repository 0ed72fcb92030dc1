"""Replication lag under a steady trickle of small transactions (issue 14, target 2).

A real master and a real ``shardctl worker`` (its own process group, Spark ``local[2]``) run one
incremental task.  A writer commits ``--rate`` single-row transactions per second (default
1,000) into a shard table for ``--seconds`` (default 60); a poller reads the merged target's
``MAX(id)`` every 10 ms.  A row's lag = the first poll that saw it (or a later id) minus its
commit.  Printed: lag p50 / p99 / max, the rate the writer reached, and the worker's CPU share
over the window (its whole process tree: driver, Spark JVM, Python workers, binlog decoder,
from /proc), as cores used and as a share of the machine's cores.  Target: p99 <= 1 s.

    .venv/bin/python bench/steady_lag.py                  # 60 s at 1,000 txn/s
    .venv/bin/python bench/steady_lag.py --short          # CI form: 15 s
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import pymysql

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _procs import BenchCluster, free_port  # noqa: E402
from tests.support.proctree import session_cpu  # noqa: E402   (_procs put the repository on sys.path)

def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=int, default=1000, help="single-row transactions per second")
    ap.add_argument("--short", action="store_true", help="CI form: 15 s")
    a = ap.parse_args()
    if a.short:
        a.seconds = 15.0
    cl = BenchCluster("steady")
    tag = cl.tag
    schema, target = f"bstd_{tag}_a", f"bstd_{tag}"
    up, start = cl.upstream_schema(schema, ("t_0",), "id BIGINT PRIMARY KEY, v INT, note VARCHAR(40)")
    task_file = cl.task_file(f"stdbench{tag}", task_mode="incremental", meta_schema=f"bstd_meta_{tag}",
                             schema_pattern=schema, target=target, starts={"s1": start})
    cl.source_file("s1", cl.mysql["source1"])
    addr = f"127.0.0.1:{free_port()}"
    down = pymysql.connect(**cl.mysql["downstream"], autocommit=True)

    def max_id() -> int:
        try:
            with down.cursor() as cur:
                cur.execute(f"SELECT COALESCE(MAX(id), -1) FROM {target}.t")
                return cur.fetchone()[0]
        except pymysql.err.ProgrammingError:
            return -1                      # the target is created by the first DDL replicated

    try:
        cl.master("master", addr)
        worker = cl.worker("s1", "--spark-master", "local[2]")
        cl.wait_master(addr)
        cl.start_task(addr, task_file, wait_registered=60)
        with up.cursor() as cur:
            cur.execute(f"INSERT INTO {schema}.t_0 VALUES (0, 0, 'warm-up')")
        deadline = time.monotonic() + 240
        while max_id() < 0:
            assert time.monotonic() < deadline, f"first row not downstream; logs in {cl.work}"
            time.sleep(0.1)
        time.sleep(3.0)   # let the worker settle (Spark session up, caught up)

        n = int(a.seconds * a.rate)
        commits = [0.0] * (n + 1)
        samples: list[tuple[float, int]] = []
        done = threading.Event()

        def poll():
            while not done.is_set():
                samples.append((time.monotonic(), max_id()))
                time.sleep(0.01)
        poller = threading.Thread(target=poll, daemon=True)
        cpu0, w0 = session_cpu(worker.pid), time.monotonic()
        poller.start()
        t0 = time.monotonic()
        with up.cursor() as cur:
            for i in range(1, n + 1):
                wait = t0 + i / a.rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                cur.execute(f"INSERT INTO {schema}.t_0 VALUES (%s, %s, 'steady')", (i, i))
                commits[i] = time.monotonic()
        write_s = time.monotonic() - t0
        deadline = time.monotonic() + 120
        while not samples or samples[-1][1] < n:     # the poller's connection only: one per thread
            assert time.monotonic() < deadline, f"rows not all downstream after 120 s; logs in {cl.work}"
            time.sleep(0.01)
        time.sleep(0.05)
        done.set()
        poller.join()
        cpu1, w1 = session_cpu(worker.pid), time.monotonic()
        lags, j = [], 0
        for i in range(1, n + 1):
            while j < len(samples) and samples[j][1] < i:
                j += 1
            seen = samples[j][0] if j < len(samples) else w1
            lags.append(max(0.0, seen - commits[i]))
        cores = (cpu1 - cpu0) / (w1 - w0)
        p99 = _pct(lags, 0.99)
        print(f"steady trickle: {n} single-row transactions in {write_s:.1f} s ({n / write_s:.0f}/s, asked "
              f"{a.rate}/s); replication lag p50 {_pct(lags, 0.5) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
              f"max {max(lags) * 1000:.0f} ms (target p99 <= 1000 ms: {'met' if p99 <= 1.0 else 'NOT met'}); "
              f"worker CPU {cores:.2f} cores ({100 * cores / os.cpu_count():.0f}% of {os.cpu_count()}) "
              f"over {w1 - w0:.1f} s; poll every 10 ms, {len(samples)} polls", flush=True)
        return 0
    finally:
        cl.stop()


if __name__ == "__main__":
    sys.exit(main())
