"""A value of a unique index other than the key, handed from one row to another: the partitions
are split by the key, so the taker could reach the downstream before the giver and fail with
1062, in safe mode too, every time the chunk is replayed (the parts of a small chunk are applied
one after the other in the driver, always in the same order).  Such targets keep all their
changes in one partition, in binlog order."""
from __future__ import annotations

import pytest

from worker.binlog.contract import RowsTable
from worker.downstream import fetch_serial
from worker.events import INSERT, UPDATE, Position
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


def _u_table(downstream_db, rows):
    db = downstream_db.name
    downstream_db.execute("CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(20), UNIQUE KEY uk (email))")
    if rows:
        downstream_db.execute("INSERT INTO u VALUES " + ", ".join(f"({i}, '{e}')" for i, e in rows))
    with downstream_db.connect() as c:
        serial = fetch_serial(c, (db, "u"))
    return RowsTable("up", "u_1", db, "u", ("id", "email"), ("id",)), Partitioner({f"{db}.u": ["id"]}, 4, serial=serial)


@pytest.mark.parametrize("kind", ["insert", "update"])
def test_safe_mode_never_overwrites_another_row_that_holds_a_unique_value(downstream_db, kind, monkeypatch):
    """Safe mode (a replay after a crash, or ``safe-mode: true``) wrote ``REPLACE`` and
    ``INSERT ... ON DUPLICATE KEY UPDATE``: a row taking a unique value another shard's row holds
    deleted that row (REPLACE) or changed it instead of its own (the upsert).  Now it is a
    collision naming both rows, and nothing of the transaction is applied."""
    ref, part = _u_table(downstream_db, [(1, "a"), (2, "x")] if kind == "update" else [(1, "a")])
    if kind == "insert":
        txns = [(_pos(1), [(INSERT, ref, [(3, "a")])])]
    else:
        txns = [(_pos(1), [(UPDATE, ref, [((2, "x"), (2, "a"))])])]
    parts = part.split(txns, force_safe=True)
    assert all(ch[5] for p in parts for ch in p)         # every change in safe mode
    monkeypatch.setattr(apply_mod, "LOCK_RETRIES", 1)
    with pytest.raises(KeyCollision, match=r"1062.*\(id=[23]\).*\(id=1\)"):
        for p in parts:
            apply_changes(p, db_kwargs=resolve_tls(downstream_db.params), batch=10, source_id="s1")
    before = [(1, "a"), (2, "x")] if kind == "update" else [(1, "a")]
    assert sorted(downstream_db.execute("SELECT id, email FROM u")) == before


def test_safe_mode_replays_a_unique_value_that_moves_later_in_the_batch(downstream_db):
    """The replay of a batch the downstream already has: a row first written with a value that a
    later change of the same batch gives to another row meets that row holding it.  The later
    change writes it again, so the replay may move it out of the way: the end state is the
    upstream's, with no error."""
    ref, part = _u_table(downstream_db, [(1, "b"), (2, "a")])
    txns = [(_pos(1), [(INSERT, ref, [(1, "a")])]),                       # 1 takes 'a'
            (_pos(2), [(UPDATE, ref, [((1, "a"), (1, "b"))])]),            # 1 gives it up
            (_pos(3), [(INSERT, ref, [(2, "a")])])]                        # 2 takes it
    for p in part.split(txns, force_safe=True):
        apply_changes(p, db_kwargs=resolve_tls(downstream_db.params), batch=10, source_id="s1")
    assert sorted(downstream_db.execute("SELECT id, email FROM u")) == [(1, "b"), (2, "a")]


def test_a_restart_replay_moves_a_holder_rewritten_only_by_a_later_transaction(downstream_db, caplog):
    """The window a restart replays (safe-until) can span several apply transactions: the row
    holding the value is rewritten by a later one, which the first cannot see.  Stopping there
    would stop for good (every resume replays the same window), so the replay moves the holder
    out of the way as DM's safe mode does, and says so naming both rows."""
    ref, part = _u_table(downstream_db, [(1, "b"), (2, "a")])
    first = [(_pos(1), [(INSERT, ref, [(1, "a")])])]                      # 1 takes 'a'
    second = [(_pos(2), [(UPDATE, ref, [((1, "a"), (1, "b"))])]),         # 1 gives it up
              (_pos(3), [(INSERT, ref, [(2, "a")])])]                     # 2 takes it
    for txns in (first, second):
        for p in part.split(txns, safe_until=_pos(3)):
            assert all(ch[5] == apply_mod.SAFE_REPLAY for ch in p)
            apply_changes(p, db_kwargs=resolve_tls(downstream_db.params), batch=10, source_id="s1")
    assert sorted(downstream_db.execute("SELECT id, email FROM u")) == [(1, "b"), (2, "a")]
    [warned] = [r for r in caplog.records if "safe-mode replay moved a row" in r.getMessage()]
    assert "(id=1)" in str(vars(warned)) and "(id=2)" in str(vars(warned)), vars(warned)
