"""Checkpoint rules against the real downstream: points never go back (in memory or in the
table, even when a stale second process flushes), the global point is clamped by held DDLs,
and a reload rebuilds the same state."""
from __future__ import annotations

from worker.sync.checkpoint import CheckpointStore
from worker.events import Position


def _store(db, source="s1"):
    s = CheckpointStore(dict(db.params), db.name, "cptest", source)
    s.ensure_table()
    s.load()
    return s


def test_points_never_go_back_and_reload(downstream_db):
    a = _store(downstream_db)
    assert a.save_table("db", "t1", Position("bin.000002", 500, "1-1-9"), '{"x":1}')
    assert a.save_global(Position("bin.000002", 400, "1-1-8"))
    a.flush()
    # older saves are refused in memory
    assert not a.save_table("db", "t1", Position("bin.000002", 100))
    assert not a.save_table("db", "t1", Position("bin.000001", 900))
    assert not a.save_global(Position("bin.000001", 999))
    assert a.rejected == 3
    assert a.table_point("db", "t1") == Position("bin.000002", 500, "1-1-9")
    # a later file wins over a larger offset in an earlier file
    assert a.save_table("db", "t1", Position("bin.000010", 4))
    a.flush()

    # a stale process (loaded before the advance) cannot lower the stored rows
    stale = CheckpointStore(dict(downstream_db.params), downstream_db.name, "cptest", "s1")
    stale.tables = {}
    stale.save_table("db", "t1", Position("bin.000002", 600))
    stale.save_global(Position("bin.000001", 5))
    stale.flush()
    b = _store(downstream_db)
    assert b.table_point("db", "t1") == Position("bin.000010", 4, "")
    assert b.global_pos == Position("bin.000002", 400, "1-1-8")
    assert b.tables[("db", "t1")].table_info == '{"x":1}'
    # other sources' rows are separate
    assert _store(downstream_db, "s2").global_pos is None


def test_global_point_is_clamped_by_held_ddl(downstream_db):
    s = _store(downstream_db)
    s.save_global(Position("bin.000001", 100))
    s.hold("db", "t2", Position("bin.000001", 150))
    s.save_global(Position("bin.000001", 300))
    assert s.global_pos == Position("bin.000001", 150)
    s.release("db", "t2")
    s.save_global(Position("bin.000001", 300))
    assert s.global_pos == Position("bin.000001", 300)


def test_safe_until_only_rises(downstream_db):
    s = _store(downstream_db)
    s.write_safe_until(Position("bin.000001", 700, "1-1-3"))
    s.write_safe_until(Position("bin.000001", 200))
    assert _store(downstream_db).safe_until == Position("bin.000001", 700, "1-1-3")


def test_tracked_tables_are_those_whose_row_holds_a_schema(downstream_db):
    """A table whose replayed DROP TABLE saved its row without a schema is not tracked; one
    whose row holds a schema is, even when it is gone upstream by now (issue 28 case 5)."""
    fresh = CheckpointStore(dict(downstream_db.params), downstream_db.name, "cp_not_made", "s1")
    assert fresh.tracked_tables() == []          # no checkpoint table yet: nothing, no error
    s = _store(downstream_db)
    s.save_table("db", "kept", Position("bin.000001", 100), '{"x":1}')
    s.save_table("db", "dropped", Position("bin.000001", 100), '{"x":1}')
    s.save_table("db", "dropped", Position("bin.000001", 200), None, keep_info=False)
    s.save_global(Position("bin.000001", 200))
    s.flush()
    assert s.tracked_tables() == [("db", "kept")]
    assert _store(downstream_db, "s2").tracked_tables() == []


def test_unchanged_global_point_is_not_written_again(downstream_db):
    """A statement right after a chunk saves the global point the chunk's flush just wrote: that
    save must not cost another downstream transaction (shard DDL latency, issue 33)."""
    import pymysql
    s = _store(downstream_db)
    p = Position("bin.000003", 800, "1-1-20")
    s.save_global(p)
    s.flush()
    # the stored row is changed behind the store's back: a flush that wrote the global row again
    # would put ``p`` back
    with pymysql.connect(**downstream_db.params, database=downstream_db.name, autocommit=True) as c, \
            c.cursor() as cur:
        cur.execute(f"UPDATE {s.fq} SET binlog_pos = 10 WHERE id = 's1' AND is_global = 1")
    assert s.save_global(p)
    assert not s.global_dirty
    s.flush()
    assert _store(downstream_db).global_pos == Position("bin.000003", 10, "1-1-20")
    # a real move is written as before
    assert s.save_global(Position("bin.000003", 900, "1-1-21"))
    s.flush()
    assert _store(downstream_db).global_pos == Position("bin.000003", 900, "1-1-21")


def test_kept_connection_is_reused_survives_a_kill_and_is_not_shared(downstream_db):
    """``keep_connection``: the syncer's store writes on one connection (issue 33: a connect
    per write was ~1.5 ms of each shard DDL); a connection the server dropped is replaced
    before use, and a second thread inside a transaction gets a connection of its own."""
    import threading

    import pymysql

    s = _store(downstream_db)
    s.keep_connection()

    def conn_id() -> int:
        with s._transaction() as cur:
            cur.execute("SELECT CONNECTION_ID()")
            return cur.fetchone()[0]

    first = conn_id()
    assert conn_id() == first
    s.save_global(Position("bin.000003", 10))
    s.flush()
    assert conn_id() == first                      # the checkpoint flush used it too
    with pymysql.connect(**downstream_db.params) as admin, admin.cursor() as cur:
        cur.execute(f"KILL {first}")
    second = conn_id()                             # no error: the dead connection was replaced
    assert second != first and conn_id() == second
    inner: list[int] = []
    with s._transaction() as cur:                  # held by this thread...
        cur.execute("SELECT CONNECTION_ID()")
        assert cur.fetchone()[0] == second
        t = threading.Thread(target=lambda: inner.append(conn_id()))
        t.start()
        t.join(30)
    assert inner and inner[0] != second            # ...so the other thread had its own
    assert conn_id() == second
    s.close()
    assert conn_id() != second                     # closed: the next operation opens one
    assert _store(downstream_db).global_pos == Position("bin.000003", 10)
