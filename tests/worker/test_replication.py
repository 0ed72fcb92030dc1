"""End-to-end data path on the real services: 2 sources x shard tables -> 1 merged target,
through Spark micro-batches, checked with ``check_task`` as the oracle."""
from __future__ import annotations

import pytest

from tests.worker.conftest import make_task
from worker.check import check_task
from worker.sync.syncer import Syncer


def _shards(db, base: int, n: int = 2, rows: int = 30):
    for k in range(1, n + 1):
        db.execute(f"CREATE TABLE orders_{k:02d} (id INT PRIMARY KEY, item VARCHAR(40), qty INT, "
                   f"price DECIMAL(10,2), note TEXT NULL, created DATETIME)")
        vals = ", ".join(f"({base + k * 1000 + i}, 'item{i}', {i}, {i}.25, NULL, '2024-01-02 03:04:05')"
                         for i in range(rows))
        db.execute(f"INSERT INTO orders_{k:02d} VALUES {vals}")


class _StillStarting:
    """A ``SparkStarter`` whose session is not up yet."""
    def peek(self):
        return None


@pytest.mark.parametrize("local_apply_rows, starting", [(0, False), (10_000, False), (0, True)],
                         ids=["spark_jobs", "driver_for_small_chunks", "driver_while_spark_starts"])
def test_shards_of_two_sources_merge_and_check_equal(spark, source1_db, source2_db, downstream_db, positions,
                                                     local_apply_rows, starting):
    """Every apply path: each chunk as a Spark job; in the driver for trickles (the default); in
    the driver for every chunk while the worker's Spark session is still starting."""
    p1, p2 = positions(source1_db, source2_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db, "s2": source2_db}, start={"s1": p1, "s2": p2})
    _shards(source1_db, 100_000)
    _shards(source2_db, 200_000)
    source1_db.execute("CREATE TABLE items (sku VARCHAR(20) PRIMARY KEY, title VARCHAR(50), data BLOB)")
    source1_db.execute("INSERT INTO items VALUES ('a', 'Alpha', x'00ff10'), ('b', 'Beta', NULL)")
    # updates (incl. a key change), deletes, a multi-statement transaction
    source1_db.execute("UPDATE orders_01 SET qty = qty + 100, note = 'x' WHERE id % 3 = 0")
    source1_db.execute("UPDATE orders_02 SET id = id + 500 WHERE id % 7 = 0")
    source2_db.execute("DELETE FROM orders_02 WHERE id % 5 = 0")
    with source2_db.connect() as c, c.cursor() as cur:
        c.begin()
        cur.execute("INSERT INTO orders_01 VALUES (299999, 'late', 1, 1.00, 'tx', NOW())")
        cur.execute("UPDATE orders_01 SET item = 'changed' WHERE id = 299999")
        cur.execute("DELETE FROM orders_01 WHERE id = 201000")
        c.commit()

    session = _StillStarting() if starting else spark
    syncers = [Syncer(session, task, srcs[s], local_apply_rows=local_apply_rows) for s in ("s1", "s2")]
    for s in syncers:
        s.sync_until_caught_up()
    rep = check_task(task, srcs)
    assert rep.equal, rep.to_json()
    orders = rep.table(f"{downstream_db.name}.orders")
    assert orders.downstream_rows == 4 * 30 - 6 + 1 - 1 and len(orders.shards) == 4
    assert rep.table(f"{downstream_db.name}.items").downstream_rows == 2
    assert downstream_db.execute("SELECT data FROM items WHERE sku = 'a'") == [(b"\x00\xff\x10",)]

    # second round on the running syncers: more changes, incremental batches
    source1_db.execute("DELETE FROM orders_01 WHERE qty > 100")
    source2_db.execute("INSERT INTO orders_02 VALUES (202500, 'n', 2, 2.50, NULL, NULL)")
    source1_db.execute("UPDATE items SET title = 'Alpha2' WHERE sku = 'a'")
    for s in syncers:
        s.sync_until_caught_up()
    rep = check_task(task, srcs)
    assert rep.equal, rep.to_json()


def test_check_lists_first_differing_keys(spark, source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    _shards(source1_db, 0, n=1, rows=10)
    Syncer(spark, task, srcs["s1"]).sync_until_caught_up()
    assert check_task(task, srcs).equal
    # break the downstream behind the syncer's back: one row missing, one extra, one changed
    downstream_db.execute("DELETE FROM orders WHERE id = 1003")
    downstream_db.execute("INSERT INTO orders VALUES (5, 'ghost', 1, 1, NULL, NULL)")
    downstream_db.execute("UPDATE orders SET qty = 77 WHERE id = 1004")
    rep = check_task(task, srcs)
    t = rep.table(f"{downstream_db.name}.orders")
    assert not rep.equal and not t.equal
    assert t.missing_downstream == [[1003]]
    assert t.extra_downstream == [[5]]
    assert t.different == [[1004]]
