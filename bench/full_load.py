"""Benchmark: full load of one source's shard tables into one merged target on Spark.

Creates ``--shards`` tables of ``--rows`` rows in total on the upstream (MariaDB sequence
engine, seconds), runs ``worker.load.run_full_load`` (consistent-snapshot chunks read and
written by Spark tasks), and reports rows per second.  As the limit measured in the same run:
the same rows (already in memory) written by ONE client as 1,000-row multi-row INSERTs into an
identical downstream table — the downstream ingest rate of a single writer.  ``ratio`` > 1 means
the parallel load beats a single writer; on a 2-core box where upstream, downstream, Spark and
the benchmark share the CPUs, expect about 1 or less.  ``--short`` (20k rows) mostly measures the
fixed cost of a load (plan, Spark job, hand-over: about a second), so its ratio is low.

    .venv/bin/python bench/full_load.py [--rows 400000] [--short] [--shards 4] [--chunk-rows 20000]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pymysql  # noqa: E402
import yaml  # noqa: E402

from coordinator.config import parse_source, parse_task  # noqa: E402

COLS = "id BIGINT PRIMARY KEY, item VARCHAR(40), qty INT, price DECIMAL(12,2), note VARCHAR(100), created DATETIME"


def _db(host: str, port: int, user: str, password: str) -> dict:
    return {"host": host, "port": port, "user": user, "password": password}


def _exec(params: dict, *sql: str) -> None:
    with pymysql.connect(**params, autocommit=True) as c, c.cursor() as cur:
        for s in sql:
            cur.execute(s)


def ingest_limit(up: dict, down: dict, up_db: str, down_db: str, shards: int, batch: int = 1000) -> tuple[int, float]:
    """Rows/s of one client writing the same rows as 1,000-row INSERTs (rows read beforehand)."""
    rows = []
    with pymysql.connect(**up, database=up_db) as c, c.cursor() as cur:
        for k in range(1, shards + 1):
            cur.execute(f"SELECT id, item, qty, price, note, created FROM orders_{k:02d}")
            rows += cur.fetchall()
    _exec(down, f"CREATE TABLE `{down_db}`.ingest ({COLS})")
    sql = "INSERT INTO ingest (id, item, qty, price, note, created) VALUES (%s, %s, %s, %s, %s, %s)"
    with pymysql.connect(**down, database=down_db, charset="utf8mb4") as c, c.cursor() as cur:
        t0 = time.perf_counter()
        for i in range(0, len(rows), batch):
            cur.executemany(sql, rows[i:i + batch])
            c.commit()
        dt = time.perf_counter() - t0
    return len(rows), dt


def run(a) -> dict:
    from worker.spark_session import builder, warm_up

    from worker.load import LoadOptions, run_full_load
    up, down = _db(a.host, a.source_port, a.user, a.password), _db(a.host, a.downstream_port, a.user, a.password)
    tag = uuid.uuid4().hex[:8]
    up_db, down_db = f"bench_up_{tag}", f"bench_down_{tag}"
    per = a.rows // a.shards
    _exec(up, f"CREATE DATABASE {up_db}")
    _exec(down, f"CREATE DATABASE {down_db}")
    try:
        for k in range(1, a.shards + 1):
            _exec(up, f"USE {up_db}", f"CREATE TABLE {up_db}.orders_{k:02d} ({COLS})",
                  f"INSERT INTO {up_db}.orders_{k:02d} SELECT {k} * 1000000000 + seq, CONCAT('item', seq), "
                  f"seq % 100, (seq % 1000) / 4, REPEAT('n', seq % 50), '2024-01-02 03:04:05' + INTERVAL seq "
                  f"SECOND FROM seq_1_to_{per}",
                  f"ANALYZE TABLE {up_db}.orders_{k:02d}")
        task = parse_task(yaml.safe_dump({
            "name": f"bench{tag}", "task-mode": "full", "meta-schema": down_db, "target-database": down,
            "routes": {"r": {"schema-pattern": up_db, "table-pattern": "orders_*", "target-schema": down_db,
                             "target-table": "orders"}},
            "block-allow-list": {"only": {"do-dbs": [up_db]}},
            "mysql-instances": [{"source-id": "b1", "route-rules": ["r"], "block-allow-list": "only"}]}))
        source = parse_source(yaml.safe_dump({"source-id": "b1", "from": up}))
        spark = builder("full-load-bench", a.master).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        # the worker's own warm-up once its session is up (Python workers started, task modules
        # imported), so the figure is the load, not the session start
        warm_up(spark)
        opts = LoadOptions(chunk_rows=a.chunk_rows, pool_size=a.pool_size)
        res = run_full_load(task, source, spark, options=opts, progress_interval=5.0)
        load_rate = res.rows_this_run / res.seconds
        n, dt = ingest_limit(up, down, up_db, down_db, a.shards)
        limit = n / dt
        out = {"rows": res.rows_this_run, "shards": a.shards, "chunks": res.chunks_loaded,
               "spark_tasks": res.tasks, "spark_cores": spark.sparkContext.defaultParallelism,
               "load_seconds": round(res.seconds, 2), "phases": res.to_json()["timings"],
               "load_rows_per_sec": round(load_rate),
               "ingest_limit_rows": n, "ingest_limit_seconds": round(dt, 2),
               "ingest_limit_rows_per_sec": round(limit), "ratio": round(load_rate / limit, 3)}
        spark.stop()
        return out
    finally:
        _exec(up, f"DROP DATABASE IF EXISTS {up_db}")
        _exec(down, f"DROP DATABASE IF EXISTS {down_db}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=400_000, help="rows in total over all shards (default 400000)")
    p.add_argument("--short", action="store_true", help="CI size: 20000 rows, 5000-row chunks")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--chunk-rows", type=int, default=20_000)
    p.add_argument("--pool-size", type=int, default=0, help="max concurrent chunk tasks (0: one task per chunk)")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--source-port", type=int, default=33061)
    p.add_argument("--downstream-port", type=int, default=33063)
    p.add_argument("--user", default="shardmerge")
    p.add_argument("--password", default="shardmerge")
    a = p.parse_args()
    if a.short:
        a.rows, a.chunk_rows = min(a.rows, 20_000), min(a.chunk_rows, 5_000)
    print(json.dumps(run(a), indent=2))


if __name__ == "__main__":
    main()
