"""Benchmark: one optimistic lock with N shard tables through the real etcd and the real master.

Every shard table sends ADD COLUMN, then DROP COLUMN.  Default (issue 13's big lock): N tables
over 8 sources; each source is a worker *process* that writes its tables' Infos in batched
transactions, watches its Operations and marks them done in batched transactions, while the
master's real coordinator (``Optimist``: watches, lock engine, batched fenced writes) runs here.
Reported: Infos handled per second (first Info written -> lock resolved and removed), time from
the last Info to resolution, and, as the limit measured in the same run, etcd's own write rate
for the same keys written the same way (8 concurrent clients, transactions of 120 puts; each
Info costs three keys: the Info, its Operation, the done mark), plus the ratio.  etcd's history is
compacted, and the compaction awaited, before each measured phase (``_compact_history``).

``--serial``: the old single-client form (one Info at a time: put, answer, done), for comparison.
Then the pure lock engine's cost per Info at 256, 1,024 and 4,096 tables (it must stay flat).

    .venv/bin/python bench/lock_bench.py [--tables 4096] [--sources 8] [--etcd 127.0.0.1:23790]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import resource
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from etcd3 import etcdrpc  # noqa: E402
from coordinator import gc_tuning  # noqa: E402
from coordinator.etcd_client import connect  # noqa: E402
from coordinator.etcdproto import Info, LockKey, Operation, SourceTables, Stage, Store, TableRef  # noqa: E402
from coordinator.lock import LockKeeper  # noqa: E402
from coordinator.master.optimist import Optimist  # noqa: E402
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


def _compact_history(client, store: Store) -> float:
    """Compact etcd's history up to now and wait until it is physically applied; returns the
    seconds waited.  Each run leaves ~60 MB of superseded values; etcd's periodic compaction
    (every 2 minutes on the dev services) then spends seconds of CPU removing them, and when
    that lands inside the next run's measurement it took 0.6-1.4 extra CPU-s from the machine
    both the limit and the coordinator share.  Done before each measured phase, for both alike;
    only history older than now goes (nothing live watches it here)."""
    t0 = time.time()
    try:
        client.kvstub.Compact(etcdrpc.CompactionRequest(revision=store.revision(), physical=True), 300,
                              credentials=client.call_credentials, metadata=client.metadata)
    except Exception as e:  # noqa: BLE001 — already compacted to here: nothing to wait for
        if "compacted" not in str(e):
            raise
    return time.time() - t0


def _lead_and_publish(store: Store, lock: LockKey, tables: list[TableRef], sources: int):
    """Become the bench's leader and publish every source's SourceTables (what workers do)."""
    fence = store.campaign("bench-master", ttl=60)
    assert fence is not None
    for s in range(sources):
        st = SourceTables(lock.task, f"s{s}")
        for t in tables:
            if t.source == st.source:
                st.add(t.schema, t.table, lock.down_schema, lock.down_table)
        store.put_source_tables(st)
    return fence


def _steps():
    init = parse_create_table(INIT)
    added = apply_ddl(init, "ALTER TABLE t ADD COLUMN c1 INT")
    dropped = apply_ddl(added, "ALTER TABLE t DROP COLUMN c1")
    return [("ALTER TABLE `shop`.`orders` ADD COLUMN c1 INT", init.to_json(), added.to_json()),
            ("ALTER TABLE `shop`.`orders` DROP COLUMN c1", added.to_json(), dropped.to_json())]


def _raw_writer(etcd: str, prefix: str, w: int, keys: int, value: bytes, go, out) -> None:
    """The limit: one client writing ``keys`` keys in transactions of MAX_TXN_OPS puts."""
    from etcd3 import transactions as T
    from coordinator.etcdproto import MAX_TXN_OPS
    client = connect(etcd)
    store = Store(client, prefix)
    go.wait()
    t0 = time.time()
    for i in range(0, keys, MAX_TXN_OPS):
        store._txn("raw", [], [T.Put(f"{prefix}raw/{w}/{j}", value) for j in range(i, min(keys, i + MAX_TXN_OPS))])
    out.put((t0, time.time()))
    client.close()


def _worker(etcd: str, prefix: str, source: str, tables: list[tuple[str, str]], go, out, step_done) -> None:
    """One source's worker: per step, write its tables' Infos (batched), then mark each answer
    done as it arrives (one batched done write per watch response).  The next step waits for
    every source (``step_done``, a barrier): a source that ran ahead would DROP the column while
    a slow one has not added it yet, and the lock rightly holds the slow ADDs behind that running
    DROP -- a redirect this emulated worker does not follow, and not what the bench measures."""
    client = connect(etcd)
    store = Store(client, prefix)
    lock = LockKey("bench", "shop", "orders")
    steps = _steps()
    gc_tuning.tune()     # as a worker process does once started (worker/spark_session.py)
    go.wait()
    cpu0 = time.process_time()
    times, errors = [], []
    for ddl, before, after in steps:
        infos = [Info(task=lock.task, source=source, up_schema=s, up_table=t, down_schema=lock.down_schema,
                      down_table=lock.down_table, ddls=[ddl], before=before, afters=[after]) for s, t in tables]
        q: queue.Queue = queue.Queue()
        start = store.revision() + 1
        wid = client.add_watch_prefix_callback(store.keys.key("operation", lock.task, lock.down_schema,
                                                              lock.down_table, source), q.put, start_revision=start)
        t0 = time.time()
        store.put_infos(infos)
        t1 = time.time()
        want = {(i.up_schema, i.up_table): i.revision for i in infos}
        while want:
            resp = q.get(timeout=120)
            if isinstance(resp, Exception):
                raise resp
            todo = []
            for ev in resp.events:
                kv = ev._event.kv
                if not kv.value:
                    continue
                op = store._decode(Operation, kv.key, kv.value, kv)
                if want.get((op.up_schema, op.up_table)) == op.info_revision:
                    if op.stage is not Stage.NONE:
                        errors.append(f"{op.up_table}: {op.stage.value} {op.message}")
                    todo.append(op)
                    del want[(op.up_schema, op.up_table)]
            if todo:
                errors.extend(str(e) for e in store.mark_done_many(todo))
        client.cancel_watch(wid)
        times.append((t0, t1, time.time()))
        if (ddl, before, after) != steps[-1]:
            step_done.wait(300)
    out.put((source, times, errors, time.process_time() - cpu0))
    client.close()


def _etcd_cpu(etcd: str) -> float | None:
    """CPU seconds used so far by the local etcd serving ``etcd`` (found in /proc by its port),
    so the bench can say where the machine's time went; None when it is not on this machine."""
    port = etcd.rsplit(":", 1)[-1]
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "etcd" not in cmd.split(" ")[0] or f":{port}" not in cmd:
                continue
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    return None


def run_concurrent(n: int, etcd: str, sources: int = 8) -> dict:
    """Issue 13's big lock: ``sources`` worker processes, the real master coordinator here."""
    client = connect(etcd)
    prefix = f"/shardmerge-bench/{uuid.uuid4().hex[:10]}/"
    store = Store(client, prefix)
    lock = LockKey("bench", "shop", "orders")
    tables = [TableRef(f"s{i % sources}", f"shop_{i % sources:02d}", f"orders_{i:05d}") for i in range(n)]
    ctx = mp.get_context("spawn")
    optimist = None
    try:
        fence = _lead_and_publish(store, lock, tables, sources)

        # the limit: the same keys (Info, Operation, done mark per Info and step), same clients
        steps = _steps()
        sample = Info(task=lock.task, source="s0", up_schema="shop_00", up_table="orders_00000",
                      down_schema="shop", down_table="orders", ddls=[steps[0][0]],
                      before=steps[0][1], afters=[steps[0][2]]).encode()
        go, out = ctx.Event(), ctx.Queue()
        per = 3 * len(steps) * n // sources
        compacted = _compact_history(client, store)
        procs = [ctx.Process(target=_raw_writer, args=(etcd, prefix, w, per, sample, go, out)) for w in range(sources)]
        for p in procs:
            p.start()
        time.sleep(3)    # let the processes import and connect
        go.set()
        spans = [out.get(timeout=300) for _ in procs]
        for p in procs:
            p.join()
        raw_keys = per * sources / (max(e for _, e in spans) - min(s for s, _ in spans))
        client.delete_prefix(f"{prefix}raw/")
        compacted += _compact_history(client, store)

        cpu0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        etcd0 = _etcd_cpu(etcd)
        gc_tuning.tune()     # as `shardctl master` does once started (coordinator/cli/master.py)
        optimist = Optimist(store, fence).start()
        while not optimist.ready:
            time.sleep(0.05)
        go, out, step_done = ctx.Event(), ctx.Queue(), ctx.Barrier(sources)
        procs = [ctx.Process(target=_worker, args=(etcd, prefix, f"s{s}",
                                                   [(t.schema, t.table) for t in tables if t.source == f"s{s}"], go, out,
                                                   step_done))
                 for s in range(sources)]
        for p in procs:
            p.start()
        time.sleep(3)
        go.set()
        results = [out.get(timeout=600) for _ in procs]
        errors = [e for _, _, errs, _ in results for e in errs]
        assert not errors, errors[:5]
        # resolved: the master removed the lock (read without going through its queue: a
        # listing of thousands of Infos every few ms would eat the master's CPU)
        while optimist.engine.keeper.find(lock) is not None:
            time.sleep(0.005)
        t_resolved = time.time()
        for p in procs:
            p.join()
        cpu1, kids1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        etcd1 = _etcd_cpu(etcd)
        first = min(t[0][0] for _, t, _, _ in results)
        last_info = max(t[-1][1] for _, t, _, _ in results)
        assert optimist.call(lambda: optimist.engine.keeper.find(lock)) is None
        assert store.list_operations(lock.task).items == []
        handled = len(steps) * n
        rate = handled / (t_resolved - first)
        limit = raw_keys / 3
        return {"tables": n, "sources": sources, "infos_handled": handled,
                "infos_per_sec": round(rate, 1), "time_to_resolve_s": round(t_resolved - first, 2),
                "resolved_after_last_info_s": round(t_resolved - last_info, 2),
                "timeline_s": {f"step{k + 1}": {"infos_written": round(max(t[k][1] for _, t, _, _ in results) - first, 2),
                                                "all_done_marked": round(max(t[k][2] for _, t, _, _ in results) - first, 2)}
                               for k in range(len(steps))},
                "cpu_s": {"master_process": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 2),
                          "workers_while_measured": round(sum(c for _, _, _, c in results), 2),
                          "workers_with_start": round(kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime, 2),
                          "etcd": None if etcd0 is None or etcd1 is None else round(etcd1 - etcd0, 2)},
                "limit_etcd_batched_keys_per_sec": round(raw_keys, 1),
                "limit_infos_per_sec": round(limit, 1), "ratio_vs_limit": round(rate / limit, 3),
                "etcd_history_compacted_before_phases_s": round(compacted, 2),
                "note": "limit = etcd's batched write rate from 8 concurrent clients / 3 keys per Info; "
                        "etcd history is compacted before each phase (not timed)"}
    finally:
        if optimist is not None:
            optimist.close()
        client.delete_prefix(prefix)
        client.close()


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
        fence = _lead_and_publish(store, lock, tables, sources)
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
    p.add_argument("--sources", type=int, default=8, help="worker processes (default 8)")
    p.add_argument("--serial", action="store_true",
                   help="the old single-client form: one Info at a time (put, answer, done)")
    p.add_argument("--engine-sizes", default="256,1024,4096",
                   help="lock sizes for the pure engine's per-Info cost (comma-separated; '' to skip)")
    p.add_argument("--master-log", default=os.devnull,
                   help="where the coordinator's log lines go: they are written at INFO in the master's JSON "
                        "format, as `shardctl master` does, so their cost is counted (default: /dev/null)")
    a = p.parse_args(argv)
    from coordinator.obs import setup_logging
    setup_logging("INFO", stream=open(a.master_log, "a"))  # noqa: SIM115 — open for the whole run
    out = run(a.tables, a.etcd, a.sources) if a.serial else run_concurrent(a.tables, a.etcd, a.sources)
    sizes = [int(x) for x in a.engine_sizes.split(",") if x.strip()]
    if sizes:
        # best of three per size: one pass is noisy on a busy machine (the first also warms up)
        cost = {str(k): round(min(engine_cost_us(k) for _ in range(3)), 1) for k in sizes}
        out["engine_us_per_info"] = cost
        out["engine_growth_largest_vs_smallest"] = round(cost[str(sizes[-1])] / cost[str(sizes[0])], 2)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
