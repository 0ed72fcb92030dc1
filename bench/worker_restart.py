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

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pymysql

ROOT = Path(__file__).resolve().parent.parent
SHARDCTL = str(ROOT / ".venv" / "bin" / "shardctl")
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import devservices  # noqa: E402
from ddl_latency import free_port  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--short", action="store_true", help="CI form: 1 round")
    ap.add_argument("--ttl", type=int, default=3)
    a = ap.parse_args()
    rounds = 1 if a.short else a.rounds
    info = devservices.start()
    my = info["mysql"]
    tag = uuid.uuid4().hex[:6]
    work = Path(tempfile.mkdtemp(prefix="sm-restart-bench-"))
    prefix = f"/shardmerge-bench-{tag}/"
    schema, target = f"brst_{tag}_a", f"brst_{tag}"
    up = pymysql.connect(**my["source1"], autocommit=True)
    with up.cursor() as cur:            # the task starts before the CREATE: the target is replicated
        cur.execute("SHOW MASTER STATUS")
        f, p = cur.fetchone()[:2]
        cur.execute(f"CREATE DATABASE {schema}")
        cur.execute(f"CREATE TABLE {schema}.t_0 (id INT PRIMARY KEY, v INT)")
    task = {"name": f"rstbench{tag}", "task-mode": "incremental", "shard-mode": "optimistic",
            "meta-schema": f"brst_meta_{tag}", "target-database": my["downstream"],
            "mysql-instances": [{"source-id": "s1", "route-rules": ["r"], "block-allow-list": "only",
                                 "meta": {"binlog-name": f, "binlog-pos": p}}],
            "block-allow-list": {"only": {"do-dbs": [schema]}},
            "routes": {"r": {"schema-pattern": schema, "table-pattern": "t_*", "target-schema": target,
                             "target-table": "t"}}}
    (work / "task.yaml").write_text(json.dumps(task))
    (work / "s1.yaml").write_text(json.dumps({"source-id": "s1", "flavor": "mariadb", "from": my["source1"]}))
    addr = f"127.0.0.1:{free_port()}"
    procs = []

    def spawn(name, *args):
        log = open(work / f"{name}.log", "ab")
        p = subprocess.Popen([SHARDCTL, *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p

    def worker():
        return spawn("worker", "worker", "--etcd", info["etcd"], "--source", str(work / "s1.yaml"), "--prefix",
                     prefix, "--name", f"bench-s1-{tag}", "--spark-master", "local[1]", "--ttl", str(a.ttl))

    def ctl(*args):
        return subprocess.run([SHARDCTL, "--master-addr", addr, *args], capture_output=True, text=True)

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
        spawn("master", "master", "--etcd", info["etcd"], "--listen", addr, "--prefix", prefix, "--election-ttl", "5")
        w = worker()
        deadline = time.monotonic() + 60
        while ctl("list-member").returncode != 0:
            assert time.monotonic() < deadline, "master did not come up"
            time.sleep(0.3)
        r = ctl("start-task", str(work / "task.yaml"))
        assert r.returncode == 0, r.stdout + r.stderr
        t0 = time.monotonic()
        with up.cursor() as cur:
            cur.execute(f"INSERT INTO {schema}.t_0 VALUES (0, 0)")
        first = wait_row(0, t0)
        print(f"[bench] first start: first row downstream {first:.1f} s after start-task", flush=True)
        kills, starts = [], []
        for i in range(1, rounds + 1):
            os.killpg(w.pid, signal.SIGKILL)
            w.wait()
            t_kill = time.monotonic()
            with up.cursor() as cur:
                cur.execute(f"INSERT INTO {schema}.t_0 VALUES (%s, %s)", (i, i))
            t_start = time.monotonic()
            w = worker()
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
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        print(f"[bench] logs in {work}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
