"""Issue 12 §2.2: generated columns are never written by DML.  Real upstream binlog, Spark apply
and downstream MariaDB: a table with a VIRTUAL and a STORED generated column from the start, a
generated column added mid-stream, inserts/updates/deletes before and after (keyed and keyless);
the downstream computes the generated values itself and `check` finds it equal."""
from worker.check import check_task
from worker.syncer import Syncer

from .conftest import make_task


def test_generated_columns_are_never_written(spark, source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE orders_01 (id INT PRIMARY KEY, qty INT, "
                       "dbl INT AS (qty * 2) VIRTUAL, tag VARCHAR(20) AS (CONCAT('q', qty)) STORED)")
    source1_db.execute("CREATE TABLE nokey (a INT, b INT AS (a + 1) STORED)")
    source1_db.execute("INSERT INTO orders_01 (id, qty) VALUES (1, 10), (2, 20), (3, 30)")
    source1_db.execute("INSERT INTO nokey (a) VALUES (1), (2), (2)")
    syncer = Syncer(spark, task, srcs["s1"])
    syncer.start()
    try:
        syncer.sync_until_caught_up()
        assert downstream_db.execute("SELECT id, qty, dbl, tag FROM orders ORDER BY id") == [
            (1, 10, 20, "q10"), (2, 20, 40, "q20"), (3, 30, 60, "q30")]
        source1_db.execute("UPDATE orders_01 SET qty = qty + 1 WHERE id = 2")
        source1_db.execute("DELETE FROM orders_01 WHERE id = 3")
        source1_db.execute("UPDATE nokey SET a = 5 WHERE a = 1")
        source1_db.execute("DELETE FROM nokey WHERE a = 2 LIMIT 1")
        # a generated column added mid-stream, then rows written after it
        source1_db.execute("ALTER TABLE orders_01 ADD COLUMN plus INT AS (id + 2) STORED")
        source1_db.execute("INSERT INTO orders_01 (id, qty) VALUES (4, 40)")
        source1_db.execute("UPDATE orders_01 SET qty = 11 WHERE id = 1")
        syncer.sync_until_caught_up()
    finally:
        syncer.close()
    assert downstream_db.execute("SELECT id, qty, dbl, tag, plus FROM orders ORDER BY id") == [
        (1, 11, 22, "q11", 3), (2, 21, 42, "q21", 4), (4, 40, 80, "q40", 6)]
    assert sorted(downstream_db.execute("SELECT a, b FROM nokey")) == [(2, 3), (5, 6)]
    rep = check_task(task, srcs)
    assert rep.equal, rep.to_json()
