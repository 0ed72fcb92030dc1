"""OLTP catch-up against the database's own replication, measured in one run (issue 33).

The load generator is sysbench (Debian's package, installed by ``scripts/services``) with its own
Lua workloads (``oltp_write_only``, ``oltp_insert``, ``oltp_update_index``): ``--tables`` shard
tables ``sbtest1..N`` in one schema on each of the two upstream MariaDB sources (8 shards by
default).  sysbench's tables have ``AUTO_INCREMENT`` ids 1..table-size in every shard, so merged
shards collide on ``id``; the route solves it as a DM user does, with DM's shard origin columns
(``extract-source`` -> ``c_source``, ``extract-table`` -> ``c_table``; the full load appends them to
the primary key), so sysbench runs unchanged (``--auto_inc`` on, its ids as they come).

Set-up (not timed): sysbench ``prepare``; ``shardctl master`` + one ``shardctl worker`` a source
(real processes, real etcd, Spark ``local[--cores]``) run a task-mode ``all`` task that merges the
8 shards into one table; the native replicas (one fresh ``mariadbd`` each, the same server and
settings as the downstream, multi-source replication of both sources with
``MASTER_USE_GTID=slave_pos``, ``slave_parallel_mode=optimistic``, one replica per
``--native-threads`` value of ``slave_parallel_threads``; each shard stays in its own schema, as
native replication cannot merge) replicate the prepared tables.  Both sides are caught up, then
stopped: ``pause-task`` and ``STOP ALL SLAVES``.  sysbench ``run`` writes the backlog of
``--transactions`` transactions (half on each source, ``--threads`` clients each).

Timed: each native replica catches up alone (``START ALL SLAVES`` -> its ``gtid_slave_pos``
reaches both sources' ends), then shardmerge (``resume-task`` -> both sources' global checkpoints
reach the ends).  Printed: each catch-up time, transactions/s and row changes/s, the ratio
shardmerge / best native (>= 1.0 is the target), where the workers' time went (the
``shardmerge_worker_batch_seconds_total{stage}`` counters of their ``/metrics``, and their CPU),
the load average; then a data check: every shard's row count and CRC sum upstream = its schema's
table on the native replica = its ``(c_source, c_table)`` rows of the merged table.

    .venv/bin/python bench/vs_native.py                                # oltp_write_only, 20,000 txn
    .venv/bin/python bench/vs_native.py --workload oltp_insert
    .venv/bin/python bench/vs_native.py --short                        # CI form: 3,000 txn
    .venv/bin/python bench/vs_native.py --steady --native-threads 0    # + the steady form

``--steady`` (after the catch-up and its data check): the highest sysbench rate each side
sustains with lag p99 <= 1 s.  Each side runs alone (the other stopped, then caught up before
its turn, then 5 s of warm-up at the lowest rate, not counted): sysbench ``--rate`` R/2 on each
source for ``--steady-seconds``, R climbing the
``--steady-rates`` ladder until the lag p99 passes 1 s or sysbench cannot write R (a source
limit, printed as such).  Lag: ``bench/_lag.py``, from GTID progress sampled every 50 ms on both
sides alike (upstream ``gtid_binlog_pos``; the replica's ``gtid_slave_pos``, shardmerge's global
checkpoints).  The merged table is checked against the sources again at the end.
Uses fresh databases on the local services (``scripts/services``), starts its replicas under the
services dir and removes them afterwards.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pymysql

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _lag import lags, pct  # noqa: E402
from _procs import BenchCluster, ctl, devservices, free_port  # noqa: E402
from tests.support.proctree import session_cpu  # noqa: E402   (_procs put the repository on sys.path)

WORKLOADS = ("oltp_write_only", "oltp_insert", "oltp_update_index")
# row changes one transaction of each workload writes (sysbench's defaults: oltp_write_only = one
# index update, one non-index update, one delete + insert)
ROWS_PER_TXN = {"oltp_write_only": 4, "oltp_insert": 1, "oltp_update_index": 1}


def log(msg: str) -> None:
    print(f"[bench] {msg}", flush=True)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ------------------------------------------------------------------ sysbench
def sysbench(workload: str, command: str, params: dict, schema: str, args, *extra: str) -> str:
    """Run sysbench's own Lua ``workload`` (``prepare`` / ``run``) against one source."""
    exe = shutil.which("sysbench")
    if exe is None:
        raise SystemExit("sysbench is not installed: run scripts/bootstrap (or scripts/services start)")
    cmd = [exe, workload, "--db-driver=mysql", f"--mysql-host={params['host']}", f"--mysql-port={params['port']}",
           f"--mysql-user={params['user']}", f"--mysql-password={params['password']}", f"--mysql-db={schema}",
           f"--tables={args.tables}", f"--table-size={args.table_size}", *extra, command]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"sysbench {workload} {command} on {schema} failed ({r.returncode}):\n"
                         f"{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
    return r.stdout


def _txns(out: str) -> int:
    m = re.search(r"transactions:\s+(\d+)", out)
    return int(m.group(1)) if m else 0


def sysbench_runs(a, sources: dict, schemas: dict, seed: int, *extra: str) -> dict[str, subprocess.Popen]:
    """``sysbench <workload> run`` on every source at once; ``extra`` sets the amount, the k-th
    source's random seed is ``seed + k``."""
    procs = {}
    for k, (sid, p) in enumerate(sources.items()):
        procs[sid] = subprocess.Popen(
            [shutil.which("sysbench") or "sysbench", a.workload, "--db-driver=mysql",
             f"--mysql-host={p['host']}", f"--mysql-port={p['port']}", f"--mysql-user={p['user']}",
             f"--mysql-password={p['password']}", f"--mysql-db={schemas[sid]}", f"--tables={a.tables}",
             f"--table-size={a.table_size}", f"--threads={a.threads}", *extra, f"--rand-seed={seed + k}", "run"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return procs


def sysbench_done(procs: dict[str, subprocess.Popen]) -> int:
    """Wait for ``sysbench_runs``; the transactions they wrote."""
    txns = 0
    for sid, pr in procs.items():
        out, _ = pr.communicate()
        if pr.returncode != 0:
            raise SystemExit(f"sysbench run on {sid} failed:\n{out[-2000:]}")
        txns += _txns(out)
    return txns


# ------------------------------------------------------------------ GTID positions
def gtid_map(text: str) -> dict[int, int]:
    """MariaDB GTID list ``d-s-n,...`` -> {domain: seq}."""
    out = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        d, _, n = part.split("-")
        out[int(d)] = int(n)
    return out


def binlog_pos(params: dict) -> dict[int, int]:
    with pymysql.connect(**params) as c, c.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        return gtid_map(cur.fetchone()[0])


def reached(have: dict[int, int], want: dict[int, int]) -> bool:
    return all(have.get(d, -1) >= n for d, n in want.items())


# ------------------------------------------------------------------ the native replica
class NativeReplica:
    """A fresh mariadbd (the downstream's settings: devservices' config, no binlog) replicating
    both sources through two named connections, ``slave_parallel_threads`` = ``threads``."""

    def __init__(self, idx: int, tag: str, threads: int):
        self.threads = threads
        self.m = devservices.MariaDB(f"native-{tag}-{idx}", free_port(), 900 + idx, False)
        devservices.start_mariadb(self.m)
        self.params = {"host": devservices.HOST, "port": self.m.port, "user": devservices.USER,
                       "password": devservices.PASSWORD}
        self.conn = pymysql.connect(**self.params, autocommit=True)

    def sql(self, q: str, *a):
        with self.conn.cursor() as cur:
            cur.execute(q, a or None)
            return cur.fetchall()

    def setup(self, sources: dict[str, dict], start: str, schemas_like: str) -> None:
        """Two connections ``s1``/``s2`` from ``start`` (GTID), optimistic parallel apply,
        only ``schemas_like`` tables (the services' sources carry other benches' and tests' data)."""
        self.sql(f"SET GLOBAL slave_parallel_threads = {self.threads}")
        self.sql("SET GLOBAL slave_parallel_mode = 'optimistic'")
        self.sql("SET GLOBAL gtid_slave_pos = %s", start)
        for name, p in sources.items():
            self.sql(f"CHANGE MASTER '{name}' TO MASTER_HOST=%s, MASTER_PORT=%s, MASTER_USER=%s, "
                     "MASTER_PASSWORD=%s, MASTER_USE_GTID=slave_pos", p["host"], p["port"], p["user"], p["password"])
            self.sql(f"SET @@default_master_connection = '{name}'")
            self.sql("SET GLOBAL replicate_wild_do_table = %s", f"{schemas_like}.%")
        self.sql("SET @@default_master_connection = ''")

    def slave_pos(self) -> dict[int, int]:
        return gtid_map(self.sql("SELECT @@gtid_slave_pos")[0][0])

    def errors(self) -> list[str]:
        with self.conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SHOW ALL SLAVES STATUS")
            return [f"{r['Connection_name']}: {r['Last_SQL_Error'] or r['Last_IO_Error']}" for r in cur.fetchall()
                    if r["Last_SQL_Error"] or r["Last_IO_Error"]]

    def wait(self, want: dict[int, int], timeout: float, interval: float = 0.01) -> float:
        """Until ``gtid_slave_pos`` reaches ``want``; the monotonic time it did."""
        deadline = time.monotonic() + timeout
        while not reached(self.slave_pos(), want):
            if time.monotonic() > deadline:
                raise SystemExit(f"native replica ({self.threads} threads) not caught up in {timeout:.0f} s: "
                                 f"{self.slave_pos()} < {want}; {self.errors()}")
            time.sleep(interval)
        return time.monotonic()

    def pid(self) -> int | None:
        return devservices._pid_alive(self.m.pidfile)

    def close(self) -> None:
        try:
            self.sql("STOP ALL SLAVES")
        except pymysql.MySQLError:
            pass
        self.conn.close()
        devservices._stop_pid(f"native replica {self.m.name}", self.m.pidfile)
        shutil.rmtree(self.m.dir, ignore_errors=True)


def proc_cpu(pid: int | None) -> float:
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        p = f.read().rsplit(")", 1)[1].split()
    return (int(p[11]) + int(p[12])) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------ shardmerge
def scrape(addr: str) -> dict[str, float]:
    """``{metric{labels}: value}`` of one worker's /metrics (the worker counters only)."""
    out = {}
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("shardmerge_worker_") and " " in line:
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
    return out


def stages(before: dict, after: dict) -> dict[str, float]:
    """Seconds by batch stage between two scrapes (summed over the worker's subtasks)."""
    out: dict[str, float] = {}
    for k, v in after.items():
        m = re.match(r'shardmerge_worker_batch_seconds_total\{.*stage="([^"]+)"', k)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + v - before.get(k, 0.0)
    return {k: round(v, 2) for k, v in sorted(out.items()) if v > 0.005}


def settled(addr: str, before: dict, timeout: float = 30.0) -> dict[str, float]:
    """The worker's counters once the batch that reached the end has returned: its stage
    seconds are added when a batch ends, while the checkpoints (the bench's clock) move with
    every chunk inside it.  An idle batch after it sets ``lag_seconds`` to 0."""
    deadline = time.monotonic() + timeout
    while True:
        now = scrape(addr)
        idle = any(k.startswith("shardmerge_worker_lag_seconds{") and v == 0 for k, v in now.items())
        if (idle and stages(before, now)) or time.monotonic() > deadline:
            return now
        time.sleep(0.1)


def wait_stage(addr: str, task: str, stage: str, work: Path, timeout: float = 60) -> None:
    """Until ``query-status`` shows every subtask of ``task`` in ``stage``."""
    deadline = time.monotonic() + timeout
    while True:
        st = json.loads(ctl(addr, "query-status", task).stdout or "{}")
        subs = [s.get("stage") for src in st.get("sources", []) for s in src.get("subTaskStatus", [])]
        if len(subs) == 2 and all(s == stage for s in subs):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"subtasks not {stage} after {timeout:.0f} s: {subs}; logs in {work}")
        time.sleep(0.3)


def checkpoints(down, meta: str, task: str) -> dict[str, dict[int, int]]:
    """{source: GTID set of its global checkpoint}."""
    try:
        with down.cursor() as cur:
            cur.execute(f"SELECT id, binlog_gtid FROM `{meta}`.`{task}_syncer_checkpoint` "
                        "WHERE cp_schema = '' AND cp_table = ''")
            return {sid: gtid_map(g) for sid, g in cur.fetchall()}
    except pymysql.err.ProgrammingError:
        return {}


def wait_checkpoints(down, meta: str, task: str, want: dict[str, dict[int, int]], timeout: float,
                     what: str, work: Path, interval: float = 0.02) -> float:
    deadline = time.monotonic() + timeout
    while True:
        have = checkpoints(down, meta, task)
        if all(reached(have.get(sid, {}), w) for sid, w in want.items()):
            return time.monotonic()
        if time.monotonic() > deadline:
            raise SystemExit(f"shardmerge not caught up ({what}) in {timeout:.0f} s: {have} < {want}; logs in {work}")
        time.sleep(interval)


# ------------------------------------------------------------------ the data check
CRC = "COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', id, k, c, pad))), 0)"


def shard_sums(params: dict, schema: str, tables: int) -> dict[str, tuple]:
    with pymysql.connect(**params) as c, c.cursor() as cur:
        out = {}
        for i in range(1, tables + 1):
            cur.execute(f"SELECT {CRC} FROM `{schema}`.`sbtest{i}`")
            out[str(i)] = tuple(int(x) for x in cur.fetchone())
        return out


def merged_sums(params: dict, fq: str) -> dict[tuple[str, str], tuple]:
    with pymysql.connect(**params) as c, c.cursor() as cur:
        cur.execute(f"SELECT c_source, c_table, {CRC} FROM {fq} GROUP BY c_source, c_table")
        return {(s, t): (int(n), int(x)) for s, t, n, x in cur.fetchall()}


# ------------------------------------------------------------------ the steady form
STEADY_P99 = 1.0          # seconds: the lag target of issue 33
SAMPLE_EVERY = 0.05


def steady_step(side: str, rate: int, seconds: float, a, sources: dict, schemas: dict, applied) -> dict:
    """sysbench at ``rate`` txn/s (half a source) for ``seconds`` while ``applied()`` (the side's
    {domain: seq}) is sampled against the sources; until the side has caught up after it."""
    ups = {sid: pymysql.connect(**p, autocommit=True) for sid, p in sources.items()}

    def upstream() -> dict[int, int]:
        out: dict[int, int] = {}
        for c in ups.values():
            with c.cursor() as cur:
                cur.execute("SELECT @@gtid_binlog_pos")
                out.update(gtid_map(cur.fetchone()[0]))
        return out
    procs: dict[str, subprocess.Popen] = {}
    try:
        t0 = time.monotonic()
        procs = sysbench_runs(a, sources, schemas, 100 + rate, f"--rate={max(1, rate // 2)}", "--events=0",
                              f"--time={int(seconds)}")
        samples = []
        deadline = None
        while True:
            up = upstream()
            samples.append((time.monotonic(), up, applied()))
            if deadline is None and all(pr.poll() is not None for pr in procs.values()):
                deadline = time.monotonic() + 120
                final = upstream()
            if deadline is not None:
                if reached(samples[-1][2], final):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"{side} not caught up 120 s after the steady run at {rate} txn/s")
            time.sleep(SAMPLE_EVERY)
        txns = sysbench_done(procs)
    finally:
        for pr in procs.values():
            if pr.poll() is None:
                pr.kill()
        for c in ups.values():
            c.close()
    ls = lags(samples)
    return {"asked": rate, "reached": round(txns / seconds), "p50_ms": round(pct(ls, 0.5) * 1000),
            "p99_ms": round(pct(ls, 0.99) * 1000), "max_ms": round(max(ls) * 1000), "samples": len(ls),
            "drain_s": round(samples[-1][0] - t0 - seconds, 2), "load_average": loadavg()}


def steady(a, sources: dict, schemas: dict, replica: NativeReplica, resume, pause, ours_applied) -> dict:
    """The rate ladder, one side at a time; {side: {"steps": [...], "sustained": R}}."""
    rates = [int(x) for x in a.steady_rates.split(",")]
    out = {}
    for side in ("native", "shardmerge"):
        if side == "native":
            pause()
            replica.sql("START ALL SLAVES")
            replica.wait({d: n for p in sources.values() for d, n in binlog_pos(p).items()}, 600)
            applied = replica.slave_pos
        else:
            replica.sql("STOP ALL SLAVES")
            resume()
            applied = ours_applied
        # a warm-up step, not counted: the first rows after a resume meet a cold subtask (the
        # decoder's first dump, the first chunks) and a cold replica alike
        warm = steady_step(side, rates[0], 5.0, a, sources, schemas, applied)
        log(f"steady {side} warm-up at {rates[0]} txn/s (not counted): lag p99 {warm['p99_ms']} ms, "
            f"max {warm['max_ms']} ms")
        steps, best = [], 0
        for r in rates:
            st = steady_step(side, r, a.steady_seconds, a, sources, schemas, applied)
            steps.append(st)
            ok = st["p99_ms"] <= STEADY_P99 * 1000
            source_limit = st["reached"] < 0.9 * r
            log(f"steady {side} at {r} txn/s asked ({st['reached']} reached): lag p50 {st['p50_ms']} ms, "
                f"p99 {st['p99_ms']} ms, max {st['max_ms']} ms, drained {st['drain_s']} s after; "
                f"load average {st['load_average']}"
                + ("; sysbench could not write this rate (a source limit)" if source_limit else ""))
            if not ok or source_limit:
                break
            best = r
        out[side] = {"steps": steps, "sustained": best}
    n, o = out["native"]["sustained"], out["shardmerge"]["sustained"]
    log(f"steady: highest rate with lag p99 <= {STEADY_P99:g} s: native {n} txn/s, shardmerge {o} txn/s "
        f"(target: shardmerge >= native: {'met' if o >= n and o else 'NOT met'})")
    return out


# ------------------------------------------------------------------ the run
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", choices=WORKLOADS, default="oltp_write_only")
    ap.add_argument("--transactions", type=int, default=20_000, help="backlog, over both sources")
    ap.add_argument("--tables", type=int, default=4, help="sysbench tables on each source")
    ap.add_argument("--table-size", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=4, help="sysbench clients on each source")
    ap.add_argument("--native-threads", default="0,4,16",
                    help="slave_parallel_threads of each native replica (one replica each; the best counts)")
    ap.add_argument("--cores", type=int, default=1, help="Spark local[N] of each worker (two workers)")
    ap.add_argument("--worker-count", type=int, default=0, help="syncer worker-count (default: the task's default)")
    ap.add_argument("--short", action="store_true", help="CI form: 3,000 transactions, one replica (4 threads)")
    ap.add_argument("--steady", action="store_true",
                    help="then the steady form: the highest rate each side sustains with lag p99 <= 1 s")
    ap.add_argument("--steady-rates", default="250,500,1000,2000,4000,8000",
                    help="the rate ladder, transactions/s over both sources")
    ap.add_argument("--steady-seconds", type=float, default=20.0, help="sysbench time at each rate")
    a = ap.parse_args()
    if a.short:
        a.transactions, a.table_size, a.native_threads = 3_000, 2_000, "4"
    threads = [int(x) for x in a.native_threads.split(",")]
    log(f"{a.workload}: {a.transactions} transactions over 2 sources x {a.tables} tables of {a.table_size} rows; "
        f"native replicas with slave_parallel_threads {threads}; load average {loadavg()}")

    cl = BenchCluster("vsnative")
    tag = cl.tag
    sources = {"s1": cl.mysql["source1"], "s2": cl.mysql["source2"]}
    schemas = {sid: f"sbv_{tag}_{sid}" for sid in sources}
    task, meta, target = f"vsn{tag}", f"sbv_meta_{tag}", f"sbv_{tag}_merged"
    down = pymysql.connect(**cl.mysql["downstream"], autocommit=True)
    replicas: list[NativeReplica] = []
    t_all = time.monotonic()
    try:
        # ---- replicas first: they start from the sources' current GTID state and replicate the prepare
        start = []
        for p in sources.values():
            with pymysql.connect(**p) as c, c.cursor() as cur:
                cur.execute("SELECT @@gtid_binlog_pos")
                start.append(cur.fetchone()[0])
        for i, n in enumerate(threads):
            r = NativeReplica(i, tag, n)
            r.setup({"s1": sources["s1"], "s2": sources["s2"]}, ",".join(filter(None, start)), f"sbv\\_{tag}\\_%")
            r.sql("START ALL SLAVES")
            replicas.append(r)
        log(f"{len(replicas)} native replica(s) started ({time.monotonic() - t_all:.1f} s)")

        for sid, p in sources.items():
            with pymysql.connect(**p, autocommit=True) as c, c.cursor() as cur:
                cur.execute(f"CREATE DATABASE `{schemas[sid]}`")
            sysbench(a.workload, "prepare", p, schemas[sid], a)
        prepared = {sid: binlog_pos(p) for sid, p in sources.items()}
        log(f"sysbench prepare done ({time.monotonic() - t_all:.1f} s)")

        # ---- shardmerge: master, two workers, a task-mode `all` task merging the 8 shards
        addr = f"127.0.0.1:{free_port()}"
        metrics = {sid: f"127.0.0.1:{free_port()}" for sid in sources}
        workers = {}
        cl.master("master", addr)
        for sid, p in sources.items():
            cl.source_file(sid, p)
            workers[sid] = cl.worker(sid, "--spark-master", f"local[{a.cores}]", "--metrics-addr", metrics[sid])
        route = {"schema-pattern": f"sbv_{tag}_s*", "table-pattern": "sbtest*", "target-schema": target,
                 "target-table": "sbtest",
                 "extract-source": {"source-regexp": "(.*)", "target-column": "c_source"},
                 "extract-table": {"table-regexp": "sbtest(.*)", "target-column": "c_table"}}
        inst_extra = {"syncer": {"worker-count": a.worker_count}} if a.worker_count else {}
        task_doc = {"name": task, "task-mode": "all", "shard-mode": "optimistic", "meta-schema": meta,
                    "target-database": cl.mysql["downstream"],
                    "block-allow-list": {"only": {"do-dbs": [f"sbv_{tag}_s*"]}}, "routes": {"r": route},
                    "mysql-instances": [{"source-id": sid, "route-rules": ["r"], "block-allow-list": "only",
                                         **inst_extra} for sid in sources]}
        task_file = cl.work / "task.yaml"
        task_file.write_text(json.dumps(task_doc))
        cl.wait_master(addr)
        cl.start_task(addr, str(task_file), wait_registered=90)

        # ---- both sides caught up with the prepared tables, then stopped
        for r in replicas:
            r.wait(prepared["s1"] | prepared["s2"], 300)
            r.sql("STOP ALL SLAVES")
        wait_checkpoints(down, meta, task, prepared, 600, "full load + prepare", cl.work)
        res = ctl(addr, "pause-task", task)
        assert res.returncode == 0, res.stdout + res.stderr
        wait_stage(addr, task, "Paused", cl.work)     # pause is asynchronous: the subtasks stop
        log(f"both sides caught up with the prepare, stopped ({time.monotonic() - t_all:.1f} s)")

        # ---- the backlog: sysbench run on both sources at once
        t0 = time.monotonic()
        txns = sysbench_done(sysbench_runs(a, sources, schemas, 1, f"--events={a.transactions // 2}", "--time=0"))
        write_s = time.monotonic() - t0
        ends = {sid: binlog_pos(p) for sid, p in sources.items()}
        rows = txns * ROWS_PER_TXN[a.workload]
        log(f"backlog: {txns} transactions ({rows} row changes) written in {write_s:.1f} s "
            f"({txns / write_s:.0f} txn/s, sysbench {a.threads} threads a source); load average {loadavg()}")

        # ---- (a) native replicas, one at a time
        native = {}
        for r in replicas:
            cpu0 = proc_cpu(r.pid())
            t0 = time.monotonic()
            r.sql("START ALL SLAVES")
            secs = r.wait(ends["s1"] | ends["s2"], 1800) - t0
            native[r.threads] = {"seconds": round(secs, 2), "txn_per_s": round(txns / secs),
                                 "rows_per_s": round(rows / secs), "cpu_s": round(proc_cpu(r.pid()) - cpu0, 2)}
            r.sql("STOP ALL SLAVES")
            log(f"native replica, slave_parallel_threads={r.threads} (optimistic): caught up in {secs:.2f} s "
                f"({txns / secs:.0f} txn/s, {rows / secs:.0f} rows/s, mariadbd CPU {native[r.threads]['cpu_s']} s); "
                f"load average {loadavg()}")
        best_threads = min(native, key=lambda n: native[n]["seconds"])
        best = native[best_threads]

        # ---- (b) shardmerge
        before = {sid: scrape(m) for sid, m in metrics.items()}
        cpu0 = {sid: session_cpu(w.pid) for sid, w in workers.items()}
        t0 = time.monotonic()
        res = ctl(addr, "resume-task", task)
        resume_s = time.monotonic() - t0
        assert res.returncode == 0, res.stdout + res.stderr
        secs = wait_checkpoints(down, meta, task, ends, 1800, "backlog", cl.work) - t0
        cpu = {sid: round(session_cpu(w.pid) - cpu0[sid], 2) for sid, w in workers.items()}
        after = {sid: settled(m, before[sid]) for sid, m in metrics.items()}
        where = {sid: stages(before[sid], after[sid]) for sid in sources}
        ours = {"seconds": round(secs, 2), "txn_per_s": round(txns / secs), "rows_per_s": round(rows / secs),
                "resume_task_command_s": round(resume_s, 2), "worker_cpu_s": cpu, "stage_seconds": where}
        ratio = best["seconds"] / secs
        log(f"shardmerge: caught up in {secs:.2f} s ({txns / secs:.0f} txn/s, {rows / secs:.0f} rows/s; the "
            f"resume-task command itself {resume_s:.2f} s); worker CPU {cpu} s; load average {loadavg()}")
        for sid in sources:
            log(f"shardmerge {sid} batch seconds by stage: {where[sid]}")
            if not where[sid]:      # e.g. its worker lost its etcd lease on an overloaded machine
                log(f"WARNING: the worker of {sid} replicated nothing: another worker took {sid} over; "
                    "this run is not the two-worker set-up")
        log(f"catch-up speed vs the best native replica ({best_threads} threads): {ratio:.2f}x "
            f"(target >= 1.0x: {'met' if ratio >= 1.0 else 'NOT met'})")

        # ---- the data: every shard upstream = the native replica's copy = its rows of the merged table
        merged = merged_sums(cl.mysql["downstream"], f"`{target}`.`sbtest`")
        bad = []
        for sid, p in sources.items():
            up = shard_sums(p, schemas[sid], a.tables)
            for r in replicas:
                if (got := shard_sums(r.params, schemas[sid], a.tables)) != up:
                    bad.append(f"native({r.threads}) {sid}: {got} != {up}")
            for t, v in up.items():
                if merged.get((sid, t)) != v:
                    bad.append(f"merged {sid}/sbtest{t}: {merged.get((sid, t))} != {v}")
        if bad:
            log("DATA MISMATCH: " + "; ".join(bad))
            return 1
        log(f"data check: {2 * a.tables} shards equal upstream, on every native replica and in the merged table")
        doc = {"workload": a.workload, "transactions": txns, "row_changes": rows,
               "shards": 2 * a.tables, "table_size": a.table_size, "load_average": loadavg(),
               "native": {str(k): v for k, v in native.items()}, "native_best_threads": best_threads,
               "shardmerge": ours, "ratio_to_native": round(ratio, 3)}
        if a.steady:
            def pause() -> None:
                res = ctl(addr, "pause-task", task)
                assert res.returncode == 0, res.stdout + res.stderr
                wait_stage(addr, task, "Paused", cl.work)

            def resume() -> None:
                res = ctl(addr, "resume-task", task)
                assert res.returncode == 0, res.stdout + res.stderr
                wait_checkpoints(down, meta, task, {sid: binlog_pos(p) for sid, p in sources.items()}, 600,
                                 "before the steady form", cl.work)

            def ours_applied() -> dict[int, int]:
                return {d: n for m in checkpoints(down, meta, task).values() for d, n in m.items()}
            best_replica = next(r for r in replicas if r.threads == best_threads)
            doc["steady"] = steady(a, sources, schemas, best_replica, resume, pause, ours_applied)
            merged = merged_sums(cl.mysql["downstream"], f"`{target}`.`sbtest`")
            bad = [f"merged {sid}/sbtest{t}: {merged.get((sid, t))} != {v}" for sid, p in sources.items()
                   for t, v in shard_sums(p, schemas[sid], a.tables).items() if merged.get((sid, t)) != v]
            if bad:
                log("DATA MISMATCH after the steady form: " + "; ".join(bad))
                return 1
            log(f"data check after the steady form: {2 * a.tables} shards equal upstream in the merged table")
        print(json.dumps(doc), flush=True)
        return 0
    finally:
        for r in replicas:
            r.close()
        cl.stop()
        for sid, p in sources.items():
            try:
                with pymysql.connect(**p, autocommit=True) as c, c.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{schemas[sid]}`")
            except pymysql.MySQLError:
                pass
        for db in (target, meta):
            try:
                with down.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
            except pymysql.MySQLError:
                pass
        down.close()


if __name__ == "__main__":
    sys.exit(main())
