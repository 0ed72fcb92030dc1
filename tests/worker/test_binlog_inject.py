"""`shardctl binlog inject` on the worker side, with a real Syncer in optimistic shard mode (real
etcd, MariaDB, Spark): a column added upstream outside the binlog makes the next DDL on it stop the
syncer; an inject record at that DDL runs the missing ADD COLUMN first (coordinated: an Info
answered by the lock), then the DDL.  A crash after the injection and the DDL ran downstream but
before the DDL's checkpoint neither repeats the injection nor skips the DDL on restart (the injected
statement's table point sits just after the DDL's start); the record is then done."""
from __future__ import annotations

import pytest

from coordinator.etcdproto import BinlogSkip, Stage, Store
from tests.worker.conftest import make_task, optimistic_syncer
from tests.worker_coord.conftest import AutoMaster
from worker.shardddl import ShardDDLError
from worker.sync.hooks import Hooks, SimulatedCrash


def _run(syncer):
    try:
        syncer.sync_until_caught_up()
    finally:
        syncer.close()


def test_inject_runs_once_before_the_statement_across_a_crash(spark, etcd_client, etcd_prefix, source1_db,
                                                              downstream_db, positions):
    db, down = source1_db, downstream_db
    for t in ("orders_1", "orders_2"):
        db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
    down.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
    (p0,) = positions(db)
    task, srcs, _ = make_task(down, {"s1": db}, start={"s1": p0})
    store = Store(etcd_client, etcd_prefix)
    master = AutoMaster(store, lambda info: (Stage.NONE, info.ddls))
    try:
        db.execute("INSERT INTO orders_1 VALUES (1, 1)")
        db.execute("INSERT INTO orders_2 VALUES (2, 2)")
        _run(optimistic_syncer(spark, store, task, srcs["s1"]))   # both tables tracked and checkpointed

        with db.connect() as c, c.cursor() as cur:             # the operator's change the binlog never sees
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("ALTER TABLE orders_1 ADD COLUMN d INT")
        (at,) = positions(db)
        db.execute("ALTER TABLE orders_1 ADD INDEX idx_d (d)")
        db.execute("INSERT INTO orders_1 VALUES (3, 3, 30)")
        with pytest.raises(ShardDDLError, match="idx_d"):
            _run(optimistic_syncer(spark, store, task, srcs["s1"]))

        add = f"ALTER TABLE `{db.name}`.orders_1 ADD COLUMN d INT"
        store.put_binlog_skip(master.acting.fence, BinlogSkip(task.name, "s1", at.file, at.pos, gtid=at.gtid,
                                                              op="inject", replace_with=[add]))

        def crash_after_the_index(info):
            if "idx_d" in info["event"].query:
                raise SimulatedCrash("killed after the DDL ran downstream, before its checkpoint")
        with pytest.raises(SimulatedCrash):
            _run(optimistic_syncer(spark, store, task, srcs["s1"],
                                   hooks=Hooks(after_ddl_execute=crash_after_the_index)))
        point = down.execute(f"SELECT binlog_name, binlog_pos FROM `{task.name}_syncer_checkpoint` "
                             "WHERE cp_table = 'orders_1'")[0]
        assert (point[0], int(point[1])) == (at.file, at.pos + 1)      # the injection ran, the DDL not yet
        assert store.get_binlog_skip(task.name, "s1", at.file, at.pos).state == "pending"
        assert "idx_d" in down.execute("SHOW CREATE TABLE orders")[0][1]

        _run(optimistic_syncer(spark, store, task, srcs["s1"]))
        rec = store.get_binlog_skip(task.name, "s1", at.file, at.pos)
        assert rec.state == "done" and "idx_d" in rec.statement and add in rec.note
        added = [i for i, _, _ in master.answered if any("ADD COLUMN `d`" in d for d in i.ddls)]
        assert len(added) == 1                                          # coordinated once, not repeated
        assert [r[0] for r in down.execute("SHOW COLUMNS FROM orders")] == ["id", "v", "d"]
        assert sorted(down.execute("SELECT id, v, d FROM orders")) == [(1, 1, None), (2, 2, None), (3, 3, 30)]
    finally:
        master.close()
