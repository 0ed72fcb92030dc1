"""Replication throughput vs. the downstream's own ingest limit, measured in one run.

N shard tables (spread over the two local upstream servers) receive M rows in total; a worker
(Syncer on a local Spark session) replicates the backlog into one merged table.  Reported:
rows/s replicated, the downstream ingest limit (the same M rows written by one client with
1,000-row multi-row INSERTs into an identical table; the median of three), their ratio, the binlog decode limit (the
same binlog ranges decoded by the worker's reader with nothing applied: pure-Python
mysql-replication, single-threaded) and the ratio to it, where the worker's time went (summed
batch timings) and the worker's peak RSS (driver + Spark JVM + Python workers: the whole
process tree, sampled).  The Spark session is warmed up (Python workers started) before the
clock starts, as in a long-running worker.

With ``--reader both`` (default) the same backlog is replicated twice in one run, into two
downstream databases: once with the decoder child process (``binlog-reader: process``), once
through the ``mysql-binlog`` Spark source (``binlog-reader: spark``); ``readers`` in the output
has one entry per run, each with its ratios to the same ingest and decode limits.

    .venv/bin/python bench/replication.py                    # 4 shards, 200,000 rows, both readers
    .venv/bin/python bench/replication.py --short            # CI form: 4 shards, 20,000 rows
    .venv/bin/python bench/replication.py --reader spark     # one reader only
Prints one JSON object.  Uses fresh databases on the local services and drops them.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pymysql  # noqa: E402
import yaml  # noqa: E402

from coordinator.config import parse_source, parse_task  # noqa: E402
from coordinator.routing import TableMapper  # noqa: E402
from tests.support.proctree import tree_rss  # noqa: E402
from coordinator import gc_tuning  # noqa: E402
from worker.binlog import RouteArgs, decode_range  # noqa: E402
from worker.sync.apply import resolve_tls  # noqa: E402
from worker.binlog.spark_reader import load_range  # noqa: E402
from worker.sync.syncer import Syncer  # noqa: E402
from worker.upstream import master_status  # noqa: E402

DDL = "(id BIGINT PRIMARY KEY, shard INT NOT NULL, item VARCHAR(40), qty INT, price DECIMAL(10,2), note VARCHAR(100))"


def _services() -> dict:
    sys.path.insert(0, str(ROOT / "scripts"))
    import devservices
    return devservices.start()["mysql"]


def _rows(shard: int, lo: int, hi: int):
    return [(shard * 100_000_000 + i, shard, f"item-{i}", i % 97, f"{i % 1000}.{i % 100:02d}", "x" * 40)
            for i in range(lo, hi)]


def _insert(conn, fq: str, rows, chunk: int = 1000) -> None:
    with conn.cursor() as cur:
        for i in range(0, len(rows), chunk):
            part = rows[i:i + chunk]
            cur.execute(f"INSERT INTO {fq} VALUES " + ", ".join(["(%s,%s,%s,%s,%s,%s)"] * len(part)),
                        [v for r in part for v in r])
    conn.commit()


class RssSampler(threading.Thread):
    """Peak resident memory of this process and all its descendants."""

    def __init__(self, interval: float = 0.2):
        super().__init__(daemon=True)
        self.interval, self.peak, self.stop = interval, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, tree_rss(os.getpid()))
            self.stop.wait(self.interval)


def _replicate(spark, mysql, conns, up_names: dict, start: dict, data_end: dict, tag: str, reader: str,
               args, expected: int) -> dict:
    """One replication run of the whole backlog with ``reader`` into its own downstream db."""
    down_name = f"bench_down_{tag}_{reader}"
    with conns["downstream"].cursor() as cur:
        cur.execute(f"CREATE DATABASE `{down_name}`")
        cur.execute(f"CREATE TABLE `{down_name}`.`merged` {DDL}")
    try:
        task_doc = {
            "name": f"bench{tag}{reader}", "task-mode": "incremental", "meta-schema": down_name,
            "target-database": dict(mysql["downstream"]),
            "routes": {f"r{i}": {"schema-pattern": n, "table-pattern": "orders_*", "target-schema": down_name,
                                 "target-table": "merged"} for i, n in enumerate(up_names.values())},
            "block-allow-list": {f"b{i}": {"do-dbs": [n]} for i, n in enumerate(up_names.values())},
            "mysql-instances": [
                {"source-id": sid, "route-rules": [f"r{i}"], "block-allow-list": f"b{i}",
                 "meta": {"binlog-name": start[sid].file, "binlog-pos": start[sid].pos,
                          "binlog-gtid": start[sid].gtid},
                 "syncer": {"worker-count": args.parallelism, "batch": args.batch, "binlog-reader": reader}}
                for i, sid in enumerate(("s1", "s2"))]}
        task = parse_task(yaml.safe_dump(task_doc), "<bench>")
        srcs = {sid: parse_source(yaml.safe_dump({"source-id": sid, "from": dict(mysql[srv])}), sid)
                for sid, srv in (("s1", "source1"), ("s2", "source2"))}
        sampler = RssSampler()
        sampler.start()
        syncers = [Syncer(spark, task, srcs[s], max_batch_events=100_000, apply_rows=args.apply_rows)
                   for s in ("s1", "s2")]
        try:
            for s in syncers:   # checkpoint tables, decoder process / data source registration
                s.start()
            time.sleep(1.0)     # the decoder processes finish starting, as in a running worker
            if reader == "spark":   # the data source's planner and reader processes, as in a running worker
                load_range(spark, srcs["s1"].db.pymysql_kwargs(), RouteArgs(task.instance("s1"), task.meta_schema),
                           data_end["s1"], data_end["s1"], source_id="s1").collect()
            t0 = time.monotonic()
            if not args.concurrent:
                results = [s.sync_until_caught_up() for s in syncers]
            else:     # each source's syncer on its own thread, as each source has its own worker
                with concurrent.futures.ThreadPoolExecutor(len(syncers)) as pool:
                    results = list(pool.map(lambda s: s.sync_until_caught_up(), syncers))
            repl_s = time.monotonic() - t0
        finally:
            for s in syncers:
                s.close()
            sampler.stop.set()
            sampler.join()
        phases: dict = {}
        for r in (b for rs in results for b in rs):
            for k, v in r.timings.items():
                phases[k] = phases.get(k, 0.0) + v
        with conns["downstream"].cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM `{down_name}`.`merged`")
            (got,) = cur.fetchone()
        conns["downstream"].commit()
        if got != expected:
            return {"error": f"replicated {got} rows, expected {expected}"}
        return {"batches": [len(r) for r in results], "replication_seconds": round(repl_s, 2),
                "replicated_rows_per_s": round(expected / repl_s),
                "worker_seconds": {k: round(v, 2) for k, v in sorted(phases.items())},
                "worker_peak_rss_mb": round(sampler.peak / 2**20)}
    finally:
        with conns["downstream"].cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{down_name}`")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--short", action="store_true", help="CI form: 20,000 rows")
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--apply-rows", type=int, default=20_000, help="rows per Spark apply job")
    ap.add_argument("--cores", type=int, default=0,
                    help="local[N] of the Spark session (default: --parallelism)")
    ap.add_argument("--concurrent", action="store_true",
                    help="replicate the two sources at the same time, each syncer on its own thread (as each "
                         "source has its own worker; give it --cores 4 for two workers' cores)")
    ap.add_argument("--reader", choices=("process", "spark", "both"), default="both",
                    help="binlog reader: decoder child process, the mysql-binlog Spark source, or both in one run")
    ap.add_argument("--upstream", choices=("mariadb", "mysql"), default="mariadb",
                    help="the two upstream servers: scripts/services' MariaDB sources or its MySQL 9.7 ones "
                         "(the downstream and the ingest limit stay on the MariaDB downstream)")
    args = ap.parse_args(argv)
    if args.short:
        args.rows = 20_000
    readers = ("process", "spark") if args.reader == "both" else (args.reader,)
    mysql = _services()
    if args.upstream == "mysql":
        mysql = {**mysql, "source1": mysql["mysql1"], "source2": mysql["mysql2"]}
    print(f"upstream: {args.upstream}", flush=True)
    tag = uuid.uuid4().hex[:8]
    up_names = {"source1": f"bench_up1_{tag}", "source2": f"bench_up2_{tag}"}
    ingest_name = f"bench_ingest_{tag}"
    conns = {k: pymysql.connect(**mysql[k], autocommit=False) for k in ("source1", "source2", "downstream")}
    try:
        for k, name in up_names.items():
            with conns[k].cursor() as cur:
                cur.execute(f"CREATE DATABASE `{name}`")
        with conns["downstream"].cursor() as cur:
            cur.execute(f"CREATE DATABASE `{ingest_name}`")
            cur.execute(f"CREATE TABLE `{ingest_name}`.`ingest_limit` {DDL}")
        start = {"s1": master_status(mysql["source1"]), "s2": master_status(mysql["source2"])}
        per = args.rows // args.shards
        all_rows = []
        for sh in range(args.shards):
            server = "source1" if sh % 2 == 0 else "source2"
            fq = f"`{up_names[server]}`.`orders_{sh:03d}`"
            with conns[server].cursor() as cur:
                cur.execute(f"CREATE TABLE {fq} {DDL}")
            rows = _rows(sh, 0, per)
            _insert(conns[server], fq, rows)
            all_rows.extend(rows)
        data_end = {"s1": master_status(mysql["source1"]), "s2": master_status(mysql["source2"])}

        # downstream ingest limit: one client, 1,000-row multi-row INSERTs; the median of three
        # (one 20k-row insert takes ~0.2 s, and a single one moved the short form's ratio by 1.6x)
        times = []
        for _ in range(3):
            with conns["downstream"].cursor() as cur:
                cur.execute(f"TRUNCATE TABLE `{ingest_name}`.`ingest_limit`")
            t0 = time.monotonic()
            _insert(conns["downstream"], f"`{ingest_name}`.`ingest_limit`", all_rows)
            times.append(time.monotonic() - t0)
        ingest_rps = len(all_rows) / sorted(times)[1]

        from worker.spark_session import builder, warm_up
        # the spark reader's read task holds one of these cores during a batch; one more
        # (--cores) measured no better on the 2-core dev machine
        cores = args.cores or args.parallelism
        spark = builder("shardmerge-bench", f"local[{cores}]", spark__sql__shuffle__partitions=str(args.parallelism),
                        spark__driver__memory="1g").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        gc_tuning.tune()     # as the worker does once its session is up (worker/spark_session.py)
        try:
            # Python workers started with the task modules loaded, as the worker's own warm-up does
            warm_up(spark)
            runs = {r: _replicate(spark, mysql, conns, up_names, start, data_end, tag, r, args, len(all_rows))
                    for r in readers}
        finally:
            spark.stop()
        # decode limit: the same binlog ranges through the worker's decoder, nothing applied
        task_stub = parse_task(yaml.safe_dump({
            "name": "benchdecode", "task-mode": "incremental", "meta-schema": ingest_name,
            "target-database": dict(mysql["downstream"]),
            "routes": {f"r{i}": {"schema-pattern": n, "table-pattern": "orders_*", "target-schema": ingest_name,
                                 "target-table": "merged"} for i, n in enumerate(up_names.values())},
            "block-allow-list": {f"b{i}": {"do-dbs": [n]} for i, n in enumerate(up_names.values())},
            "mysql-instances": [{"source-id": sid, "route-rules": [f"r{i}"], "block-allow-list": f"b{i}"}
                                for i, sid in enumerate(("s1", "s2"))]}), "<bench>")
        t0 = time.monotonic()
        decoded = 0
        for sid, srv in (("s1", "source1"), ("s2", "source2")):
            mapper = TableMapper(task_stub.instance(sid), task_stub.meta_schema)
            # the worker's connection settings (one TLS probe, then plain connections)
            for item in decode_range(resolve_tls(dict(mysql[srv])), mapper, start[sid], data_end[sid]):
                if isinstance(item, tuple):
                    decoded += sum(len(rows) for _, _, rows in item[1])
        decode_rps = decoded / (time.monotonic() - t0)
        errors = {r: v["error"] for r, v in runs.items() if "error" in v}
        if errors:
            print(json.dumps({"error": errors}))
            return 1
        for v in runs.values():
            rps = v["replicated_rows_per_s"]
            v["ratio_to_ingest_limit"] = round(rps / ingest_rps, 3)
            v["ratio_to_decode_limit"] = round(rps / decode_rps, 3)
        out = {"shards": args.shards, "rows": len(all_rows), "parallelism": args.parallelism,
               "downstream_ingest_rows_per_s": round(ingest_rps), "binlog_decode_rows_per_s": round(decode_rps),
               "readers": runs}
        print(json.dumps(out))
        return 0
    finally:
        for k, name in list(up_names.items()) + [("downstream", ingest_name)]:
            try:
                with conns[k].cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            except pymysql.MySQLError:
                pass
        for c in conns.values():
            c.close()


if __name__ == "__main__":
    sys.exit(main())
