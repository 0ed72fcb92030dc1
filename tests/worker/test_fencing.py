"""Fenced writers (worker.sync.fence) on the real downstream: once a newer binding claimed the
source, nothing the old writer does lands: apply (in the driver and as a Spark job), checkpoint
flush, safe-until, DDL intent, a restart of the old writer."""
from __future__ import annotations

import pytest

from tests.worker.conftest import make_task
from worker.events import Position
from worker.sync.checkpoint import CheckpointStore
from worker.sync.fence import FencedOut
from worker.sync.syncer import Syncer


def _count(db, table: str) -> int:
    return db.execute(f"SELECT COUNT(*) FROM {table}")[0][0]


@pytest.mark.parametrize("driver", [True, False], ids=["driver-apply", "spark-apply"])
def test_the_old_writer_writes_nothing_once_a_newer_binding_claimed(spark, source1_db, downstream_db, positions,
                                                                   driver):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    local = 10**9 if driver else 0
    source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT)")
    source1_db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i}, 0)" for i in range(300)))
    old = Syncer(spark, task, srcs["s1"], epoch=5, local_apply_rows=local)
    new = None
    try:
        old.sync_until_caught_up()
        assert _count(downstream_db, "orders") == 300
        new = Syncer(spark, task, srcs["s1"], epoch=6, local_apply_rows=local)
        new.start()                                   # claims the source
        source1_db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i}, 1)" for i in range(300, 600)))
        source1_db.execute("UPDATE orders_1 SET v = 7 WHERE id < 10")
        with pytest.raises(FencedOut, match="newer binding"):
            old.sync_until_caught_up()
        assert _count(downstream_db, "orders") == 300      # nothing of the old writer's batch landed
        assert downstream_db.execute("SELECT MAX(v) FROM orders WHERE id < 10")[0][0] == 0
        with pytest.raises(FencedOut):                     # nor after a restart of the old writer
            Syncer(spark, task, srcs["s1"], epoch=5).start()
        new.sync_until_caught_up()
        assert _count(downstream_db, "orders") == 600
        assert downstream_db.execute("SELECT MAX(v) FROM orders WHERE id < 10")[0][0] == 7
    finally:
        old.close()
        if new is not None:
            new.close()


def test_checkpoint_writes_of_the_old_writer_are_refused(downstream_db):
    kw = dict(downstream_db.params)
    old = CheckpointStore(kw, downstream_db.name, "fence_t", "s1", epoch=3)
    old.ensure_table()
    old.claim()
    old.save_global(Position("mysql-bin.000001", 100))
    old.flush()
    new = CheckpointStore(kw, downstream_db.name, "fence_t", "s1", epoch=4)
    new.claim()
    old.save_global(Position("mysql-bin.000001", 900))
    with pytest.raises(FencedOut):
        old.flush()
    with pytest.raises(FencedOut):
        old.write_safe_until(Position("mysql-bin.000001", 950))
    with pytest.raises(FencedOut):
        old.write_ddl_intent("db", "t", {"pos": {}})
    with pytest.raises(FencedOut):
        old.check_fence()
    with pytest.raises(FencedOut):
        old.claim()
    loaded = new.load()
    assert loaded.global_pos == Position("mysql-bin.000001", 100) and loaded.safe_until is None
    assert ("db", "t") not in loaded.tables
    new.check_fence()                                        # the new writer passes
    unfenced = CheckpointStore(kw, downstream_db.name, "fence_t", "s1")   # epoch 0: no fencing (tools)
    unfenced.check_fence()


def test_the_fence_locks_only_the_global_row(downstream_db):
    """The check every apply transaction makes share-locks the source's global row alone.  Before,
    it found that row by ``id`` and ``is_global`` and locked every table row of the source too
    (3,000 tables: 3,001 rows locked per apply)."""
    from worker.sync.fence import check_fence
    kw = dict(downstream_db.params)
    store = CheckpointStore(kw, downstream_db.name, "fence_many", "s1", epoch=5)
    store.ensure_table()
    store.claim()
    rows = ", ".join(f"('s1', 'db', 't{i:04d}', 'null', 0)" for i in range(3000))
    downstream_db.execute(f"INSERT INTO {store.fq} (id, cp_schema, cp_table, table_info, is_global) VALUES {rows}")
    with downstream_db.connect() as conn, conn.cursor() as cur:
        cur.execute("START TRANSACTION")
        check_fence(cur, store.fq, "s1", 5)
        cur.execute("SELECT trx_rows_locked FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()")
        [(locked,)] = cur.fetchall()
        conn.rollback()
    assert locked == 1, locked
