"""Benchmark: one optimistic lock with N shard tables through the real etcd.

Every shard table sends ADD COLUMN, then DROP COLUMN.  Per Info the full protocol runs:
worker ``put_info`` -> engine ``handle_info`` -> master fenced ``put_operation`` (+ dropped-column
records) -> worker ``mark_done`` -> engine ``mark_done`` (+ dropped-column updates); at the end
the master removes the resolved lock in one transaction.  Reported: Infos handled per second,
time to resolve, and — as the limit measured in the same run — raw etcd PUT throughput for the
same number of keys (each Info costs at least three etcd writes, so ~0.33 of raw is the ceiling).
Then the pure lock engine's cost per Info at 256, 1,024 and 4,096 tables (it must stay flat).

    .venv/bin/python bench/lock_bench.py [--tables 4096] [--etcd 127.0.0.1:23790]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coordinator.etcd_client import connect  # noqa: E402
from coordinator.etcdproto import Info, LockKey, SourceTables, Stage, Store, TableRef  # noqa: E402
from coordinator.lock import LockKeeper  # noqa: E402
from coordinator.schema.ddl import apply_ddl  # noqa: E402
from coordinator.schema.parse import parse_create_table  # noqa: E402

INIT = "CREATE TABLE t (id BIGINT NOT NULL, v VARCHAR(64) DEFAULT NULL, PRIMARY KEY (id))"


def raw_put_rate(client, prefix: str, n: int, value: bytes) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        client.put(f"{prefix}raw/{i}", value)
    dt = time.perf_counter() - t0
    client.delete_prefix(f"{prefix}raw/")
    return n / dt


def engine_cost_us(n: int, sources: int = 8) -> float:
    """The pure lock engine's cost per Info (handle + done, no etcd) for a lock of ``n`` tables:
    it must not grow with ``n`` (issue 13), so the bench prints it for several sizes."""
    lock = LockKey("bench", "shop", "orders")
    init = parse_create_table(INIT)
    added = apply_ddl(init, "ALTER TABLE t ADD COLUMN c1 INT")
    keeper = LockKeeper()
    sts: dict[str, SourceTables] = {}
    tables = [TableRef(f"s{i % sources}", f"shop_{i % sources:02d}", f"orders_{i:05d}") for i in range(n)]
    for t in tables:
        sts.setdefault(t.source, SourceTables(lock.task, t.source)).add(t.schema, t.table, "shop", "orders")
    for st in sts.values():
        keeper.update_source_tables(st)
    rev, spent = 1, 0.0
    for ddl, before, after in (("ALTER TABLE `shop`.`orders` ADD COLUMN c1 INT", init, added),
                               ("ALTER TABLE `shop`.`orders` DROP COLUMN c1", added,
                                apply_ddl(added, "ALTER TABLE t DROP COLUMN c1"))):
        bj, aj = before.to_json(), after.to_json()
        for t in tables:
            rev += 1
            info = Info(task=lock.task, source=t.source, up_schema=t.schema, up_table=t.table, down_schema="shop",
                        down_table="orders", ddls=[ddl], before=bj, afters=[aj], revision=rev)
            t0 = time.perf_counter()
            op = keeper.handle_info(info).operation
            op.done, op.revision = True, rev + 1
            keeper.mark_done(op)
            spent += time.perf_counter() - t0
            rev += 1
    return spent / (2 * n) * 1e6


def run(n: int, etcd: str, sources: int = 4) -> dict:
    client = connect(etcd)
    prefix = f"/shardmerge-bench/{uuid.uuid4().hex[:10]}/"
    store = Store(client, prefix)
    lock = LockKey("bench", "shop", "orders")
    tables = [TableRef(f"s{i % sources}", f"shop_{i % sources:02d}", f"orders_{i:05d}") for i in range(n)]
    init = parse_create_table(INIT)
    added = apply_ddl(init, "ALTER TABLE t ADD COLUMN c1 INT")
    dropped = apply_ddl(added, "ALTER TABLE t DROP COLUMN c1")
    steps = [("ALTER TABLE `shop`.`orders` ADD COLUMN c1 INT", init, added),
             ("ALTER TABLE `shop`.`orders` DROP COLUMN c1", added, dropped)]
    try:
        fence = store.campaign("bench-master", ttl=60)
        assert fence is not None
        for s in range(sources):
            st = SourceTables(lock.task, f"s{s}")
            for t in tables:
                if t.source == st.source:
                    st.add(t.schema, t.table, lock.down_schema, lock.down_table)
            store.put_source_tables(st)
        keeper = LockKeeper()
        for st in store.list_source_tables(lock.task).items:
            keeper.update_source_tables(st)

        sample = Info(task=lock.task, source="s0", up_schema="shop_00", up_table="orders_00000",
                      down_schema="shop", down_table="orders", ddls=[steps[0][0]],
                      before=init.to_json(), afters=[added.to_json()]).encode()
        raw = raw_put_rate(client, prefix, n, sample)

        handled = 0
        returned = 0
        t_start = time.perf_counter()
        for ddl, before, after in steps:
            for t in tables:
                info = Info(task=lock.task, source=t.source, up_schema=t.schema, up_table=t.table,
                            down_schema=lock.down_schema, down_table=lock.down_table, ddls=[ddl],
                            before=before.to_json(), afters=[after.to_json()])
                store.put_info(info)                                  # worker
                out = keeper.handle_info(info)                        # master: engine
                for tbl, cols, stage in out.dropped_puts:
                    store.put_dropped_columns(fence, lock, tbl, cols, stage)
                for op in out.operations:
                    res = store.put_operation(fence, op)
                    assert res.put, res
                op = out.operation
                assert op.stage is Stage.NONE, op.message
                returned += len(op.ddls)
                store.mark_done(op)                                   # worker
                op.done = True
                done = keeper.mark_done(op)                           # master: done event
                for tbl, cols, stage in done.dropped_puts:
                    store.put_dropped_columns(fence, lock, tbl, cols, stage)
                for col in done.dropped_deletes:
                    store.delete_dropped_column(fence, lock, col)
                handled += 1
        assert done.resolved, keeper.locks()[0].waiting[:3]
        assert store.remove_lock(fence, lock, done.handled_revision)
        keeper.drop_lock(lock)
        t_resolve = time.perf_counter() - t_start
        assert store.list_infos(lock.task).items == [] and store.list_operations(lock.task).items == []
        rate = handled / t_resolve
        return {"tables": n, "infos_handled": handled, "ddls_returned": returned,
                "infos_per_sec": round(rate, 1), "time_to_resolve_s": round(t_resolve, 2),
                "raw_etcd_puts_per_sec": round(raw, 1), "ratio_vs_raw_put": round(rate / raw, 3),
                "note": "each Info = put_info + put_operation txn + mark_done txn (+ reads); ceiling ~0.33"}
    finally:
        client.delete_prefix(prefix)
        client.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", type=int, default=4096, help="shard tables in the lock (default 4096)")
    # default: the local services' etcd (scripts/services, honouring its port offset)
    p.add_argument("--etcd", default=f"127.0.0.1:{23790 + int(os.environ.get('SHARDMERGE_SERVICES_PORT_OFFSET', '0'))}")
    p.add_argument("--sources", type=int, default=4)
    p.add_argument("--engine-sizes", default="256,1024,4096",
                   help="lock sizes for the pure engine's per-Info cost (comma-separated; '' to skip)")
    a = p.parse_args(argv)
    out = run(a.tables, a.etcd, a.sources)
    sizes = [int(x) for x in a.engine_sizes.split(",") if x.strip()]
    if sizes:
        cost = {str(k): round(engine_cost_us(k), 1) for k in sizes}
        out["engine_us_per_info"] = cost
        out["engine_growth_largest_vs_smallest"] = round(cost[str(sizes[-1])] / cost[str(sizes[0])], 2)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
