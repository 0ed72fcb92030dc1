"""End to end with the real master (election, binder, lock engine, gRPC) and two worker
processes: 2 sources x 4 shard tables -> 1 target; staggered ADD COLUMN with writes between;
staggered DROP COLUMN; a conflicting change unlocked with skip; ``worker.check`` is the oracle."""

import grpc

from protos import master_pb2 as pb
from protos import master_pb2_grpc as pbg
from worker.check import check_task

from ..worker.conftest import make_task, positions  # noqa: F401 (fixture)
from .conftest import wait_for
from .test_process import _source_file, _worker

SHARDS = ("orders_01", "orders_02", "orders_03", "orders_04")


def _down_columns(down):
    return [r[0] for r in down.execute("SHOW COLUMNS FROM orders")] if down.execute(
        "SHOW TABLES LIKE 'orders'") else []


_WORKERS = []


def _failures() -> str:
    return "; ".join(f"{w.name} {k}: {sub.failed!r} status={sub.status.snapshot()}" for w in _WORKERS
                     for k, sub in w.subtasks.items() if sub.failed is not None)


def _eventually_equal(task, srcs, timeout=120):
    last = {}

    def ok():
        rep = check_task(task, srcs)
        last["rep"] = rep
        return rep.equal
    try:
        wait_for(ok, timeout=timeout, what="downstream == merge of the shards")
    except AssertionError:
        raise AssertionError(f"not equal: {last['rep'].to_json()}; subtask failures: {_failures()}") from None


def test_two_sources_four_shards_with_the_real_master(spark, services, etcd_prefix, store, source1_db,
                                                       source2_db, downstream_db, positions, tmp_path):
    from coordinator.master.node import MasterNode
    p1, p2 = positions(source1_db, source2_db)
    task, srcs, text = make_task(downstream_db, {"s1": source1_db, "s2": source2_db},
                                 start={"s1": p1, "s2": p2})
    dbs = {"s1": source1_db, "s2": source2_db}
    for sid, db in dbs.items():
        base = 0 if sid == "s1" else 1_000_000
        for n, t in enumerate(SHARDS):
            db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
            db.execute(f"INSERT INTO {t} VALUES " + ", ".join(
                f"({base + n * 10_000 + i}, {i})" for i in range(10)))

    node = MasterNode(services.etcd, "127.0.0.1:0", prefix=etcd_prefix, election_ttl=5, bind_period=1.0).start()
    workers = []
    try:
        wait_for(node.leader_ready, what="master leading", timeout=60)
        stub = pbg.MasterStub(grpc.insecure_channel(node.advertise))
        files = {sid: _source_file(tmp_path, sid, db) for sid, db in dbs.items()}
        r = stub.OperateSource(pb.OperateSourceRequest(
            op="create", configs=[open(files[s]).read() for s in ("s1", "s2")], files=[files["s1"], files["s2"]]))
        assert r.result, r.msg
        workers = [_worker(services, etcd_prefix, f"w-{sid}", files[sid]) for sid in ("s1", "s2")]
        _WORKERS[:] = workers
        r = stub.StartTask(pb.StartTaskRequest(task_yaml=text, file="task.yaml"))
        assert r.result, r.msg
        _eventually_equal(task, srcs)

        # staggered ADD COLUMN c on all 8 shards, with writes between
        k = 50
        for sid, db in dbs.items():
            for t in SHARDS:
                db.execute(f"ALTER TABLE {t} ADD COLUMN c INT DEFAULT 7")
                k += 1
                db.execute(f"INSERT INTO {t} (id, v, c) VALUES ({(0 if sid == 's1' else 1_000_000) + 900 + k}, {k}, {k})")
                other = SHARDS[(SHARDS.index(t) + 1) % 4]
                db.execute(f"UPDATE {other} SET v = v + 1 WHERE v < 3")
        _eventually_equal(task, srcs)
        assert _down_columns(downstream_db) == ["id", "v", "c"]

        # staggered DROP COLUMN c: the target keeps c until the last shard dropped it
        order = [(sid, t) for sid in ("s1", "s2") for t in SHARDS]
        for i, (sid, t) in enumerate(order):
            dbs[sid].execute(f"ALTER TABLE {t} DROP COLUMN c")
            dbs[sid].execute(f"INSERT INTO {t} (id, v) VALUES ({(0 if sid == 's1' else 1_000_000) + 5000 + i}, {i})")
        _eventually_equal(task, srcs)
        wait_for(lambda: _down_columns(downstream_db) == ["id", "v"], timeout=120, what="c dropped downstream")

        # a conflicting change on one shard: blocked, shown in query-status; unlock --action skip
        source1_db.execute("ALTER TABLE orders_01 MODIFY v BIGINT UNSIGNED")
        source1_db.execute("INSERT INTO orders_01 VALUES (7777, '77')")
        source1_db.execute("INSERT INTO orders_02 VALUES (7778, 78)")

        def blocked():
            st = stub.QueryStatus(pb.QueryStatusRequest(name=task.name, sources=["s1"]))
            s = next((x for x in st.subtasks if x.source == "s1"), None)
            return s if s is not None and s.lock_id and (s.stage == "Paused" or "redirect" in s.waiting_for) else None
        s = wait_for(blocked, timeout=180, what="s1 blocked on the lock")
        lock_id = s.lock_id
        assert lock_id == f"{task.name}-`{downstream_db.name}`.`orders`"
        r = stub.UnlockDDLLock(pb.UnlockDDLLockRequest(ID=lock_id, action="skip", source="s1",
                                                       database=source1_db.name, table="orders_01"))
        assert r.result, r.msg
        source1_db.execute("INSERT INTO orders_01 VALUES (7779, '79')")
        source2_db.execute("INSERT INTO orders_03 VALUES (1007780, 80)")
        _eventually_equal(task, srcs)
        wait_for(lambda: (x := stub.QueryStatus(pb.QueryStatusRequest(name=task.name))) and all(
            st.stage == "Running" for st in x.subtasks) and len(x.subtasks) == 2, timeout=60, what="both Running")
    finally:
        for w in workers:
            w.stop()
        node.stop()
