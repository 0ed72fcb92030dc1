"""Replication throughput vs. the downstream's own ingest limit, measured in one run.

N shard tables (spread over the two local upstream servers) receive M rows in total; a worker
(Syncer on a local Spark session) replicates the backlog into one merged table.  Reported:
rows/s replicated, the downstream ingest limit (the same M rows written by one client with
1,000-row multi-row INSERTs into an identical table), their ratio, the binlog decode limit (the
same binlog ranges decoded by the worker's reader with nothing applied: pure-Python
mysql-replication, single-threaded) and the ratio to it, where the worker's time went (summed
batch timings) and the worker's peak RSS (driver + Spark JVM + Python workers: the whole
process tree, sampled).  The Spark session is warmed up (Python workers started) before the
clock starts, as in a long-running worker.

    .venv/bin/python bench/replication.py            # 4 shards, 200,000 rows
    .venv/bin/python bench/replication.py --short    # CI form: 4 shards, 20,000 rows
Prints one JSON object.  Uses fresh databases on the local services and drops them.
"""
from __future__ import annotations

import argparse
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
from worker.binlog_source import decode_range  # noqa: E402
from worker.syncer import Syncer, master_status  # noqa: E402

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

    @staticmethod
    def _tree_rss(root: int) -> int:
        children: dict[int, list[int]] = {}
        rss: dict[int, int] = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    parts = f.read().rsplit(")", 1)[1].split()
                children.setdefault(int(parts[1]), []).append(int(d))
                rss[int(d)] = int(parts[21]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, IndexError, ValueError):
                continue
        total, todo = 0, [root]
        while todo:
            p = todo.pop()
            total += rss.get(p, 0)
            todo.extend(children.get(p, []))
        return total

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, self._tree_rss(os.getpid()))
            self.stop.wait(self.interval)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--short", action="store_true", help="CI form: 20,000 rows")
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--apply-rows", type=int, default=20_000, help="rows per Spark apply job")
    args = ap.parse_args(argv)
    if args.short:
        args.rows = 20_000
    mysql = _services()
    tag = uuid.uuid4().hex[:8]
    up_names = {"source1": f"bench_up1_{tag}", "source2": f"bench_up2_{tag}"}
    down_name = f"bench_down_{tag}"
    conns = {k: pymysql.connect(**mysql[k], autocommit=False) for k in ("source1", "source2", "downstream")}
    sampler = RssSampler()
    try:
        for k, name in up_names.items():
            with conns[k].cursor() as cur:
                cur.execute(f"CREATE DATABASE `{name}`")
        with conns["downstream"].cursor() as cur:
            cur.execute(f"CREATE DATABASE `{down_name}`")
            cur.execute(f"CREATE TABLE `{down_name}`.`merged` {DDL}")
            cur.execute(f"CREATE TABLE `{down_name}`.`ingest_limit` {DDL}")
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

        # downstream ingest limit: one client, 1,000-row multi-row INSERTs
        t0 = time.monotonic()
        _insert(conns["downstream"], f"`{down_name}`.`ingest_limit`", all_rows)
        ingest_s = time.monotonic() - t0

        task_doc = {
            "name": f"bench{tag}", "task-mode": "incremental", "meta-schema": down_name,
            "target-database": dict(mysql["downstream"]),
            "routes": {f"r{i}": {"schema-pattern": n, "table-pattern": "orders_*", "target-schema": down_name,
                                 "target-table": "merged"} for i, n in enumerate(up_names.values())},
            "block-allow-list": {f"b{i}": {"do-dbs": [n]} for i, n in enumerate(up_names.values())},
            "mysql-instances": [
                {"source-id": sid, "route-rules": [f"r{i}"], "block-allow-list": f"b{i}",
                 "meta": {"binlog-name": start[sid].file, "binlog-pos": start[sid].pos,
                          "binlog-gtid": start[sid].gtid},
                 "syncer": {"worker-count": args.parallelism, "batch": args.batch}}
                for i, sid in enumerate(("s1", "s2"))]}
        task = parse_task(yaml.safe_dump(task_doc), "<bench>")
        srcs = {sid: parse_source(yaml.safe_dump({"source-id": sid, "from": dict(mysql[srv])}), sid)
                for sid, srv in (("s1", "source1"), ("s2", "source2"))}

        from pyspark.sql import SparkSession
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        sampler.start()
        spark = (SparkSession.builder.master(f"local[{args.parallelism}]").appName("shardmerge-bench")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", str(args.parallelism))
                 .config("spark.driver.memory", "1g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        try:
            syncers = [Syncer(spark, task, srcs[s], max_batch_events=100_000, apply_rows=args.apply_rows)
                       for s in ("s1", "s2")]
            for s in syncers:   # session warm-up and checkpoint table creation are not replication
                s.start()
            # Python workers started with the apply module loaded, as in a running worker
            spark.sparkContext.parallelize(range(args.parallelism), args.parallelism) \
                .map(lambda x: bool(__import__("worker.apply"))).collect()
            t0 = time.monotonic()
            results = [s.sync_until_caught_up() for s in syncers]
            repl_s = time.monotonic() - t0
        finally:
            spark.stop()
            sampler.stop.set()
            sampler.join()
        batches = [len(r) for r in results]
        phases: dict = {}
        for r in (b for rs in results for b in rs):
            for k, v in r.timings.items():
                phases[k] = phases.get(k, 0.0) + v
        # decode limit: the same binlog ranges through the worker's decoder, nothing applied
        t0 = time.monotonic()
        decoded = 0
        for sid in ("s1", "s2"):
            mapper = TableMapper(task.instance(sid), task.meta_schema)
            for item in decode_range(srcs[sid].db.pymysql_kwargs(), mapper, start[sid], data_end[sid]):
                if isinstance(item, tuple):
                    decoded += sum(len(rows) for _, _, rows in item[1])
        decode_s = time.monotonic() - t0
        with conns["downstream"].cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM `{down_name}`.`merged`")
            (got,) = cur.fetchone()
        if got != len(all_rows):
            print(json.dumps({"error": f"replicated {got} rows, expected {len(all_rows)}"}))
            return 1
        out = {"shards": args.shards, "rows": len(all_rows), "parallelism": args.parallelism,
               "batches": batches, "replication_seconds": round(repl_s, 2),
               "replicated_rows_per_s": round(len(all_rows) / repl_s),
               "downstream_ingest_rows_per_s": round(len(all_rows) / ingest_s),
               "ratio_to_ingest_limit": round((len(all_rows) / repl_s) / (len(all_rows) / ingest_s), 3),
               "binlog_decode_rows_per_s": round(decoded / decode_s),
               "ratio_to_decode_limit": round((len(all_rows) / repl_s) / (decoded / decode_s), 3),
               "worker_seconds": {k: round(v, 2) for k, v in sorted(phases.items())},
               "worker_peak_rss_mb": round(sampler.peak / 2**20)}
        print(json.dumps(out))
        return 0
    finally:
        for k, name in list(up_names.items()) + [("downstream", down_name)]:
            try:
                with conns[k].cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            except pymysql.MySQLError:
                pass
        for c in conns.values():
            c.close()


if __name__ == "__main__":
    sys.exit(main())
