"""Benchmark: how long a source stands still when its worker is killed and started again.

A master and one worker (``shardctl`` subprocesses, the local services) replicate one shard table
(task-mode incremental).  Each round: SIGKILL the worker, write a row upstream, start a new worker
process with the same name; print (1) SIGKILL -> the row downstream, (2) new process start -> the
row downstream.  The limit printed beside them is the registration TTL (``--ttl``): the master
may not rebind a source before the dead worker's lease could have expired... unless the same
worker comes back, which is what this measures (the common case: a restarted pod keeps its name).

    .venv/bin/python bench/worker_restart.py [--rounds 3] [--short]
"""
from __future__ import annotations

import statistics
import sys
import time

import pymysql

from _procs import BenchCluster, free_port, round_args


def main() -> int:
    a, rounds = round_args(__doc__, "--ttl")
    cl = BenchCluster("restart")
    my, tag, work = cl.mysql, cl.tag, cl.work
    schema, target = f"brst_{tag}_a", f"brst_{tag}"
    up, start = cl.upstream_schema(schema, ("t_0",), "id INT PRIMARY KEY, v INT")
    task_file = cl.task_file(f"rstbench{tag}", task_mode="incremental", meta_schema=f"brst_meta_{tag}",
                             schema_pattern=schema, target=target, starts={"s1": start})
    cl.source_file("s1", my["source1"])
    addr = f"127.0.0.1:{free_port()}"

    def worker():
        return cl.worker("s1", "--ttl", str(a.ttl))

    down = pymysql.connect(**my["downstream"], autocommit=True)

    def wait_row(i, since, limit=180):
        while True:
            try:
                with down.cursor() as cur:
                    cur.execute(f"SELECT COUNT(*) FROM {target}.t WHERE id = %s", (i,))
                    if cur.fetchone()[0]:
                        return time.monotonic() - since
            except pymysql.err.ProgrammingError:
                pass                       # the target is created by the first DDL replicated
            assert time.monotonic() - since < limit, f"row {i} not downstream after {limit} s; logs in {work}"
            time.sleep(0.02)

    try:
        cl.master("master", addr, "--election-ttl", "5")
        worker()
        cl.wait_master(addr)
        cl.start_task(addr, task_file)
        t0 = time.monotonic()
        with up.cursor() as cur:
            cur.execute(f"INSERT INTO {schema}.t_0 VALUES (0, 0)")
        first = wait_row(0, t0)
        print(f"[bench] first start: first row downstream {first:.1f} s after start-task", flush=True)
        kills, starts = [], []
        for i in range(1, rounds + 1):
            cl.kill("worker-s1")
            t_kill = time.monotonic()
            with up.cursor() as cur:
                cur.execute(f"INSERT INTO {schema}.t_0 VALUES (%s, %s)", (i, i))
            t_start = time.monotonic()
            worker()
            wait_row(i, t_kill)
            kills.append(time.monotonic() - t_kill)
            starts.append(time.monotonic() - t_start)
            print(f"[bench] round {i}: SIGKILL -> row downstream {kills[-1]:.1f} s, process start -> row "
                  f"{starts[-1]:.1f} s", flush=True)
        print(f"worker restart over {rounds} round(s): SIGKILL -> streaming again p50 {statistics.median(kills):.1f} s, "
              f"new process -> first row p50 {statistics.median(starts):.1f} s (target <= 10 s; registration TTL "
              f"{a.ttl} s; first start of the task {first:.1f} s)")
        return 0
    finally:
        cl.stop()


if __name__ == "__main__":
    sys.exit(main())
