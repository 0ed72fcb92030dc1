"""Large transactions are handed out in pieces (``worker.binlog.contract.Unfinished``) so their
apply starts before the rest is decoded; nothing is lost or applied twice, also when the batch
fails between two pieces (real MariaDB, real Spark session)."""
from __future__ import annotations

import pytest

from coordinator.routing import TableMapper
from worker.binlog import Statement, Unfinished, decode_range
from worker.sync.hooks import Hooks
from worker.sync.syncer import Syncer
from worker.upstream import master_status

from .conftest import make_task

N = 6000      # rows of the big transaction: three pieces at the decoder's smallest split (2,000)


def _big_txn(db) -> None:
    """One transaction of inserts, updates, key changes and deletes on two keyed tables."""
    with db.connect() as c, c.cursor() as cur:
        c.begin()
        cur.executemany("INSERT INTO orders_1 VALUES (%s, %s)", [(i, i) for i in range(N)])
        cur.executemany("INSERT INTO orders_2 VALUES (%s, %s)", [(100_000 + i, i) for i in range(N // 2)])
        cur.execute("UPDATE orders_1 SET v = v * 10 WHERE id % 3 = 0")
        cur.execute("UPDATE orders_1 SET id = id + 500000 WHERE id % 7 = 0")
        cur.execute("DELETE FROM orders_2 WHERE id % 4 = 0")
        c.commit()


def _tables(db) -> None:
    for t in ("orders_1", "orders_2"):
        db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")


def _flat(items):
    """Changes in binlog order, transaction by transaction (pieces joined to their transaction)."""
    out, cur = [], []
    for it in items:
        if isinstance(it, tuple):
            cur += [(k, r.up_table, rows) for k, r, rows in it[1]]
            if type(it[1]) is not Unfinished:
                out.append((str(it[0]), cur))
                cur = []
        elif isinstance(it, Statement):
            out.append(("stmt", it.query))
    assert not cur
    return out


def test_split_read_has_the_same_changes_and_keyless_tables_stay_whole(source1_db, downstream_db, positions):
    (p0,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p0})
    _tables(source1_db)
    source1_db.execute("CREATE TABLE orders_3 (id INT, v INT)")     # no key
    _big_txn(source1_db)
    source1_db.execute("INSERT INTO orders_3 VALUES " + ", ".join(f"({i}, {i})" for i in range(5000)))
    end = master_status(source1_db.params)
    kw, mapper = srcs["s1"].db.pymysql_kwargs(), TableMapper(task.instance("s1"), task.meta_schema)
    whole = list(decode_range(kw, mapper, p0, end))
    split = list(decode_range(kw, mapper, p0, end, split_rows=2000))
    assert not [i for i in whole if isinstance(i, tuple) and type(i[1]) is Unfinished]
    pieces = [i for i in split if isinstance(i, tuple) and type(i[1]) is Unfinished]
    assert len(pieces) >= 3
    assert _flat(split) == _flat(whole)
    # a piece stands with the position before its transaction: the previous boundary
    (big,) = [i for i in whole if isinstance(i, tuple) and sum(len(r) for _, _, r in i[1]) > N]
    assert all(p[0] < big[0] for p in pieces)
    keyless = [i for i in split if isinstance(i, tuple) and any(r.up_table == "orders_3" for _, r, _ in i[1])]
    assert keyless and all(type(i[1]) is not Unfinished for i in keyless)


def _expected(db) -> list:
    return sorted(db.execute("SELECT id, v FROM orders_1") + db.execute("SELECT id, v FROM orders_2"))


@pytest.mark.parametrize("fail_after", [0, 1])
def test_a_batch_failing_between_pieces_is_replayed_exactly(spark, source1_db, downstream_db, positions, fail_after):
    """The syncer applies the big transaction piece by piece (chunks of at most 4,000 rows);
    the batch fails after ``fail_after`` + 1 chunks were committed; a new syncer (as after a
    crash) resumes from the checkpoints in the downstream and ends equal to the upstream."""
    (p0,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p0})
    _tables(source1_db)
    _big_txn(source1_db)
    source1_db.execute("INSERT INTO orders_1 VALUES (999999, 1)")    # a transaction after it
    chunks: list = []

    def boom(info):
        chunks.append(info["rows"])
        if len(chunks) == fail_after + 1:
            raise RuntimeError("injected failure between pieces")
    syncer = Syncer(spark, task, srcs["s1"], apply_rows=4000, local_apply_rows=50, hooks=Hooks(after_apply=boom))
    try:
        with pytest.raises(Exception, match="injected failure"):
            syncer.sync_until_caught_up()
    finally:
        syncer.close()
    assert len(chunks) == fail_after + 1
    # stopped inside the big transaction: part of it is downstream, not all
    got = sorted(downstream_db.execute("SELECT id, v FROM orders"))
    assert got and got != _expected(source1_db)
    again = Syncer(spark, task, srcs["s1"], apply_rows=4000, local_apply_rows=50)
    try:
        again.sync_until_caught_up()
    finally:
        again.close()
    assert sorted(downstream_db.execute("SELECT id, v FROM orders")) == _expected(source1_db)


def test_split_transaction_replicates_in_several_chunks(spark, source1_db, downstream_db, positions):
    (p0,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p0})
    _tables(source1_db)
    _big_txn(source1_db)
    applied: list = []
    syncer = Syncer(spark, task, srcs["s1"], apply_rows=4000, local_apply_rows=50,
                    hooks=Hooks(after_apply=lambda i: applied.append(i["rows"])))
    try:
        syncer.sync_until_caught_up()
    finally:
        syncer.close()
    assert len(applied) >= 3, applied       # one transaction, several chunks
    assert sorted(downstream_db.execute("SELECT id, v FROM orders")) == _expected(source1_db)


def test_a_table_point_at_a_pieces_position_does_not_skip_it():
    """A piece stands with the position BEFORE its transaction: a table whose point is that
    position has not seen the transaction, so the piece is applied; a whole transaction
    committed at that position was seen, so it is skipped."""
    from worker.binlog.contract import RowsTable
    from worker.events import INSERT, Position
    from worker.sync.apply import Partitioner
    ref = RowsTable("up", "orders_1", "down", "orders", ("id", "v"), ("id",))
    b = Position("mysql-bin.000001", 500, "0-1-7")
    piece = (b, Unfinished([(INSERT, ref, [(1, 1)])]))
    done = (b, [(INSERT, ref, [(2, 2)])])
    parts = Partitioner({}, 1).split([done, piece], points={("up", "orders_1"): b})
    assert [ch[3] for p in parts for ch in p] == [(1, 1)]
