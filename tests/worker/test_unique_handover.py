"""A value of a unique index other than the key, handed from one row to another: the partitions
are split by the key, so the taker could reach the downstream before the giver and fail with
1062, in safe mode too, every time the chunk is replayed (the parts of a small chunk are applied
one after the other in the driver, always in the same order).  Such targets keep all their
changes in one partition, in binlog order."""
from __future__ import annotations

import pytest

from worker.binlog.contract import RowsTable
from worker.downstream import fetch_serial
from worker.events import UPDATE, Position
from worker.errors import KeyCollision
from worker.sync import apply as apply_mod
from worker.sync.apply import Partitioner, apply_changes, resolve_tls


def _pos(i: int) -> Position:
    return Position("mysql-bin.000001", 100 * i)


def test_tables_with_another_unique_index_are_serial(downstream_db):
    db = downstream_db.name
    downstream_db.execute("CREATE TABLE pk_only (id INT PRIMARY KEY, v INT)")
    downstream_db.execute("CREATE TABLE pk_uk (id INT PRIMARY KEY, email VARCHAR(20), UNIQUE KEY uk (email))")
    downstream_db.execute("CREATE TABLE uk_only (a INT NOT NULL, b INT, UNIQUE KEY ua (a))")
    downstream_db.execute("CREATE TABLE two_uk (a INT NOT NULL, b INT, UNIQUE KEY ua (a), UNIQUE KEY ub (b))")
    with downstream_db.connect() as c:
        everything = fetch_serial(c)
        assert {t for t in everything if t.startswith(f"{db}.")} == {f"{db}.pk_uk", f"{db}.two_uk"}
        for t in ("pk_only", "pk_uk", "uk_only", "two_uk", "missing"):     # one table: the same answer
            assert fetch_serial(c, (db, t)) == ({f"{db}.{t}"} & everything), t


@pytest.mark.parametrize("swap", [False, True], ids=["handover", "swap-in-one-transaction"])
def test_a_unique_value_handed_between_rows_applies_in_binlog_order(downstream_db, swap, monkeypatch):
    db = downstream_db.name
    downstream_db.execute("CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(20), UNIQUE KEY uk (email))")
    downstream_db.execute("INSERT INTO u VALUES (1, 'a'), (2, 'c')")
    ref = RowsTable("up", "u_1", db, "u", ("id", "email"), ("id",))
    if swap:   # 1: a -> t, 2: c -> a, 1: t -> c (one upstream transaction)
        txns = [(_pos(1), [(UPDATE, ref, [((1, "a"), (1, "t"))]), (UPDATE, ref, [((2, "c"), (2, "a"))]),
                           (UPDATE, ref, [((1, "t"), (1, "c"))])])]
        want = [(1, "c"), (2, "a")]
    else:      # 1 gives up 'a', then 2 takes it
        txns = [(_pos(1), [(UPDATE, ref, [((1, "a"), (1, "b"))])]), (_pos(2), [(UPDATE, ref, [((2, "c"), (2, "a"))])])]
        want = [(1, "b"), (2, "a")]
    with downstream_db.connect() as c:
        serial = fetch_serial(c, (db, "u"))
    parts = Partitioner({f"{db}.u": ["id"]}, 8, serial=serial).split(txns)
    assert len(parts) == 1                      # not split by key: one partition, binlog order
    # split by the key alone (before), the part of row 2 (the taker) applied first fails: row 1 holds
    # the value (a collision naming both rows, after a few tries)
    monkeypatch.setattr(apply_mod, "LOCK_RETRIES", 1)
    split = Partitioner({f"{db}.u": ["id"]}, 8).split(txns)
    assert len(split) == 2
    taker = next(p for p in split if p[0][2][0] == 2)
    with pytest.raises(KeyCollision, match=r"1062.*\(id=2\).*\(id=1\)"):
        apply_changes(taker, db_kwargs=resolve_tls(downstream_db.params), batch=10, source_id="s1")
    assert sorted(downstream_db.execute("SELECT id, email FROM u")) == [(1, "a"), (2, "c")]   # rolled back
    for changes in parts:
        apply_changes(changes, db_kwargs=resolve_tls(downstream_db.params), batch=10, source_id="s1")
    assert sorted(downstream_db.execute("SELECT id, email FROM u")) == want
