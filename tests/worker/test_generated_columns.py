"""Issue 12 §2.2: generated columns are never written by DML.  Real upstream binlog, Spark apply
and downstream MariaDB: a table with a VIRTUAL and a STORED generated column from the start, a
generated column added mid-stream, inserts/updates/deletes before and after (keyed and keyless);
the downstream computes the generated values itself and `check` finds it equal."""
from worker.sync.apply import Literals, Partitioner, _statements, apply_changes, connect_downstream, resolve_tls
from worker.binlog.contract import RowsTable
from worker.check import check_task
from worker.events import DELETE, INSERT, UPDATE, Position
from worker.sync.syncer import Syncer
from worker.downstream import fetch_generated, fetch_keys

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


def test_a_target_another_source_created_after_start_has_its_generated_columns_left_out(
        spark, source1_db, source2_db, downstream_db, positions):
    """Source 2's syncer started before the merged target existed; source 1 created it with a
    generated column.  Source 2's shard CREATE runs nothing downstream (the target exists) but
    must still learn the target's generated columns, else its rows name one and are refused."""
    p1, p2 = positions(source1_db, source2_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db, "s2": source2_db}, start={"s1": p1, "s2": p2})
    ddl = "CREATE TABLE orders_01 (id INT PRIMARY KEY, qty INT, dbl INT AS (qty * 2) VIRTUAL)"
    second = Syncer(spark, task, srcs["s2"])
    second.start()
    try:
        source1_db.execute(ddl)
        source1_db.execute("INSERT INTO orders_01 (id, qty) VALUES (1, 10)")
        first = Syncer(spark, task, srcs["s1"])
        try:
            first.sync_until_caught_up()
        finally:
            first.close()
        source2_db.execute(ddl)
        source2_db.execute("INSERT INTO orders_01 (id, qty) VALUES (10001, 5)")
        second.sync_until_caught_up()
    finally:
        second.close()
    assert downstream_db.execute("SELECT id, qty, dbl FROM orders ORDER BY id") == [(1, 10, 20), (10001, 5, 10)]


def test_safe_mode_replay_and_keyless_matching_leave_generated_columns_out(downstream_db):
    """The binlog's FULL row image carries the generated values; the statements built from it
    (REPLACE of safe mode, INSERT .. ON DUPLICATE KEY UPDATE, keyless DELETE .. LIMIT 1
    matching) never name them, and a replay of the same changes is idempotent."""
    down = downstream_db.name
    downstream_db.execute("CREATE TABLE orders (id INT PRIMARY KEY, qty INT, dbl INT AS (qty * 2) VIRTUAL, "
                          "tag VARCHAR(20) AS (CONCAT('q', qty)) STORED)")
    downstream_db.execute("CREATE TABLE nokey (a INT, b INT AS (a + 1) STORED)")
    orders = RowsTable("up", "orders_01", down, "orders", ("id", "qty", "dbl", "tag"), ("id",))
    nokey = RowsTable("up", "nokey", down, "nokey", ("a", "b"), ())
    pos = [Position("mysql-bin.000001", 1000 + i) for i in range(4)]
    txns = [(pos[1], [(INSERT, orders, [(1, 10, 20, "q10"), (2, 20, 40, "q20")]),
                      (INSERT, nokey, [(1, 2), (2, 3), (2, 3)])]),
            (pos[2], [(UPDATE, orders, [((2, 20, 40, "q20"), (2, 21, 42, "q21"))]),
                      (UPDATE, nokey, [((1, 2), (5, 6))])]),
            (pos[3], [(DELETE, orders, [(1, 10, 20, "q10")]), (DELETE, nokey, [(2, 3)])])]
    kw = resolve_tls(downstream_db.params)
    with connect_downstream(kw, autocommit=True) as conn:
        keys, generated = fetch_keys(conn), fetch_generated(conn)
        lit = Literals(conn)
    assert generated[f"{down}.orders"] == {"dbl", "tag"} and generated[f"{down}.nokey"] == {"b"}
    # applied, then the keyed table's changes replayed twice in safe mode (a keyless table has
    # no idempotent replay: its rows are not identifiable)
    keyed = [(p, [e for e in evs if e[1] is orders]) for p, evs in txns]
    for safe, changes in ((False, txns), (True, keyed), (True, keyed)):
        parts = Partitioner(keys, 2, generated).split(changes, force_safe=safe)
        sqls = [sql for p in parts for ch in p for sql in _statements([ch], safe, lit)]
        assert sqls and not [s for s in sqls if any(f"`{c}`" in s for c in ("dbl", "tag", "b"))], sqls
        assert any(s.startswith("REPLACE") for s in sqls) == safe
        for p in parts:
            apply_changes(p, db_kwargs=kw, batch=10, source_id="s1")
        assert downstream_db.execute("SELECT id, qty, dbl, tag FROM orders") == [(2, 21, 42, "q21")]
        assert sorted(downstream_db.execute("SELECT a, b FROM nokey")) == [(2, 3), (5, 6)]
