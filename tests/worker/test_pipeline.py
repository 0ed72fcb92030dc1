"""The read-ahead pipeline on the real services: the decoder process hands out bounded chunks
that never cross a statement event, an abandoned read kills and later restarts the decoder,
and one batch with mixed changes of the same keys and a key-changing DDL in the middle
replicates exactly (the rows after the DDL are split by the new key, no batch cut)."""
from __future__ import annotations

from tests.worker.conftest import make_task
from worker.binlog import BinlogPrefetch, Chunk, DecoderProcess, End, RouteArgs, Statement
from worker.check import check_task
from worker.sync.syncer import Syncer
from worker.upstream import master_status


def test_chunks_are_bounded_and_stop_at_statements(source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    db = source1_db
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    for i in range(30):
        db.execute(f"INSERT INTO t VALUES ({i}, {i})")
    db.execute("ALTER TABLE t ADD COLUMN w INT")
    for i in range(30, 60):
        db.execute(f"INSERT INTO t VALUES ({i}, {i}, 0)")
    end = master_status(db.params)
    inst = task.instance("s1")
    decoder = DecoderProcess("s1")
    try:
        with BinlogPrefetch(decoder, srcs["s1"].db.pymysql_kwargs(), RouteArgs(inst, task.meta_schema), p1, end,
                            source_id="s1", max_rows=7, piece_rows=2) as r:
            items = list(r.items())
        assert isinstance(items[-1], End) and items[-1].pos.same_point(end)
        stmts = [i for i, it in enumerate(items) if isinstance(it, Statement)]
        alter = next(i for i in stmts if "ADD COLUMN" in items[i].query)
        chunks = [it for it in items if isinstance(it, Chunk)]
        assert sum(c.rows for c in chunks) == 60 and all(0 < c.rows <= 8 for c in chunks)
        before = [it for it in items[:alter] if isinstance(it, Chunk)]
        assert sum(c.rows for c in before) == 30 and before[-1].end <= items[alter].start
        last = None
        for c in chunks:   # whole transactions, in order, each chunk ending at its last one
            assert c.end.same_point(c.txns[-1][0])
            for pos, _ in c.txns:
                assert last is None or last < pos
                last = pos
        # abandoning a read halfway kills the decoder; the next read starts a new one
        with BinlogPrefetch(decoder, srcs["s1"].db.pymysql_kwargs(), RouteArgs(inst, task.meta_schema), p1, end,
                            source_id="s1", max_rows=2, piece_rows=1) as r:
            first = next(r.items())
        assert first is not None and decoder.proc is None
        with BinlogPrefetch(decoder, srcs["s1"].db.pymysql_kwargs(), RouteArgs(inst, task.meta_schema), p1, end,
                            source_id="s1") as r:
            assert sum(it.rows for it in r.items() if isinstance(it, Chunk)) == 60
        assert decoder.proc is not None and decoder.proc.poll() is None
    finally:
        decoder.kill()


def test_one_batch_with_mixed_changes_and_a_key_changing_ddl(spark, source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1}, batch=3)
    db = source1_db
    db.execute("CREATE TABLE kv (id INT NOT NULL, v INT, s VARCHAR(10))")     # no key: rows match on all columns
    db.execute("INSERT INTO kv VALUES " + ", ".join(f"({i}, {i}, 'a')" for i in range(40)))
    db.execute("UPDATE kv SET v = v + 100 WHERE id < 10")
    db.execute("ALTER TABLE kv ADD PRIMARY KEY (id)")                          # from now on: keyed by id
    with db.connect() as c, c.cursor() as cur:                                 # one transaction, same keys
        c.begin()
        cur.execute("DELETE FROM kv WHERE id = 5")
        cur.execute("INSERT INTO kv VALUES (5, 555, 'again')")
        cur.execute("UPDATE kv SET id = 1005 WHERE id = 5")
        cur.execute("INSERT INTO kv VALUES (5, 5, 'third')")
        cur.execute("UPDATE kv SET s = 'u' WHERE id BETWEEN 20 AND 30")
        c.commit()
    db.execute("DELETE FROM kv WHERE id % 4 = 0")
    db.execute("UPDATE kv SET id = id + 1000 WHERE id BETWEEN 31 AND 35")
    db.execute("INSERT INTO kv VALUES (32, 1, 'reused')")
    syncer = Syncer(spark, task, srcs["s1"], apply_rows=16)
    try:
        results = [r for r in syncer.sync_until_caught_up() if not r.idle]
        assert len(results) == 1 and results[0].ddls == 2 and not results[0].cut_at_ddl
        rep = check_task(task, srcs)
        assert rep.equal, rep.to_json()
        assert downstream_db.execute("SELECT v, s FROM kv WHERE id IN (5, 1005) ORDER BY id") == \
            [(5, "third"), (555, "again")]
        assert downstream_db.execute("SELECT COUNT(*) FROM kv")[0][0] == \
            source1_db.execute("SELECT COUNT(*) FROM kv")[0][0]
    finally:
        syncer.close()
    assert syncer.binlog.decoder.proc is None


def test_timestamps_keep_their_instant_whatever_the_driver_time_zone(spark, source1_db, downstream_db,
                                                                     positions, monkeypatch):
    import time
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE ev (id INT PRIMARY KEY, at TIMESTAMP NULL, local DATETIME)")
    with source1_db.connect() as c, c.cursor() as cur:
        cur.execute("SET time_zone = '+09:00'")
        cur.execute("INSERT INTO ev VALUES (1, '2024-03-01 09:30:00', '2024-03-01 09:30:00'), (2, NULL, NULL)")
        c.commit()
    monkeypatch.setenv("TZ", "America/New_York")   # the driver decodes in a non-UTC zone
    time.tzset()
    try:
        syncer = Syncer(spark, task, srcs["s1"])
        syncer.sync_until_caught_up()
        syncer.close()
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    q = "SELECT id, UNIX_TIMESTAMP(at), local FROM ev ORDER BY id"
    assert downstream_db.execute(q) == source1_db.execute(q)
    assert downstream_db.execute(q)[0][1] == 1709253000   # 2024-03-01 00:30:00 UTC


def test_same_syncer_resumes_after_a_failure_mid_batch(spark, source1_db, downstream_db, positions):
    from worker.sync.hooks import Hooks, SimulatedCrash
    import pytest
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT)")
    for k in range(6):   # several transactions, several chunks: the crash hits the first one
        source1_db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({k * 100 + i}, {i})" for i in range(100)))
    source1_db.execute("UPDATE orders_1 SET v = v + 1 WHERE id % 2 = 0")
    fired = []

    def crash_once(info):
        if not fired and info["rows"]:
            fired.append(info)
            raise SimulatedCrash("apply done, checkpoint not advanced")
    syncer = Syncer(spark, task, srcs["s1"], hooks=Hooks(after_apply=crash_once), apply_rows=100)
    try:
        with pytest.raises(SimulatedCrash):
            syncer.sync_until_caught_up()
        syncer.sync_until_caught_up()               # replays the failed batch in safe mode
        assert check_task(task, srcs).equal
        assert downstream_db.execute("SELECT COUNT(*), SUM(v) FROM orders")[0] == \
            source1_db.execute("SELECT COUNT(*), SUM(v) FROM orders_1")[0]
    finally:
        syncer.close()


def test_master_status_gtid_is_the_state_at_its_position_under_concurrent_writes(source1_db):
    import threading
    source1_db.execute("CREATE TABLE w (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    stop = threading.Event()

    def writer():
        with source1_db.connect() as c, c.cursor() as cur:
            while not stop.is_set():
                cur.execute("INSERT INTO w (v) VALUES (1)")
    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(8):
            p = master_status(source1_db.params)
            exact = source1_db.execute("SELECT BINLOG_GTID_POS(%s, %s)", (p.file, p.pos))[0][0]
            assert p.gtid == exact, (str(p), exact)
    finally:
        stop.set()
        t.join()


def test_mariadb_status_asks_again_before_scanning_the_binlog(source1_db, monkeypatch):
    """A commit between the two ``@@gtid_binlog_pos`` reads is answered by asking again, not by
    ``BINLOG_GTID_POS``'s scan of the binlog file; the scan stays the last resort, and every
    answer is the state at its position."""
    from worker import upstream
    source1_db.execute("CREATE TABLE w (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    writes = {"left": 0}
    scans: list = []
    real_row, real_at = upstream._binlog_status_row, upstream.gtid_at

    def status_row(cur, *a):
        row = real_row(cur, *a)
        if writes["left"]:          # a commit lands between SHOW MASTER STATUS and the second read
            writes["left"] -= 1
            source1_db.execute("INSERT INTO w (v) VALUES (1)")
        return row

    def gtid_at(cur, file, pos):
        scans.append((file, pos))
        return real_at(cur, file, pos)
    monkeypatch.setattr(upstream, "_binlog_status_row", status_row)
    monkeypatch.setattr(upstream, "gtid_at", gtid_at)
    with source1_db.connect() as c, c.cursor() as cur:
        for left, scanned in ((0, 0), (3, 0), (upstream.STATUS_TRIES, 1)):
            writes["left"], before = left, len(scans)
            p = upstream._mariadb_status(cur)
            exact = source1_db.execute("SELECT BINLOG_GTID_POS(%s, %s)", (p.file, p.pos))[0][0]
            assert p.gtid == exact, (left, str(p), exact)
            assert len(scans) - before == scanned, (left, scans)


def test_shards_with_the_same_key_stop_with_a_collision_instead_of_overwriting(spark, source1_db, downstream_db,
                                                                              positions):
    """Two shards insert id 7: DM would let the later row silently replace the earlier one.
    The syncer stops with a typed, non-retryable error naming both the key and the shard."""
    from worker.subtask import _retryable
    from worker.sync.errors import ReplicationKeyCollision
    import pytest
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    for t in ("orders_1", "orders_2"):
        source1_db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
    source1_db.execute("INSERT INTO orders_1 VALUES (7, 1), (8, 1)")
    syncer = Syncer(spark, task, srcs["s1"])
    try:
        syncer.sync_until_caught_up()
        source1_db.execute("INSERT INTO orders_2 VALUES (7, 2)")
        with pytest.raises(ReplicationKeyCollision) as ei:
            syncer.sync_until_caught_up()
        msg = str(ei.value)
        assert "Duplicate entry '7'" in msg and "orders_2" in msg and "source=s1" in msg, msg
        assert "Error 1062 (23000): Duplicate entry '7' for key 'PRIMARY'" in msg, msg   # as DM shows it
        assert not _retryable(ei.value)
        assert sorted(downstream_db.execute("SELECT id, v FROM orders")) == [(7, 1), (8, 1)]
    finally:
        syncer.close()


def test_shards_with_the_same_unique_value_stop_with_a_collision_instead_of_deleting_a_row(
        spark, source1_db, downstream_db, positions):
    """Two shards give the same email to rows with different ids; the merged table has a unique
    index on email.  Before, the partition was re-applied in safe mode with a warning and REPLACE
    deleted the first shard's row.  The syncer stops with a typed error naming both rows."""
    from worker.subtask import _retryable
    from worker.sync.errors import ReplicationKeyCollision
    import pytest
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1}, shard_table="users_*",
                              target_table="users")
    for t in ("users_1", "users_2"):
        source1_db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, email VARCHAR(20), UNIQUE KEY uk_email (email))")
    source1_db.execute("INSERT INTO users_1 VALUES (1, 'a@x'), (3, 'c@x')")
    syncer = Syncer(spark, task, srcs["s1"])
    try:
        syncer.sync_until_caught_up()
        source1_db.execute("INSERT INTO users_2 VALUES (2, 'a@x')")
        with pytest.raises(ReplicationKeyCollision) as ei:
            syncer.sync_until_caught_up()
        msg = str(ei.value)
        assert "Duplicate entry 'a@x' for key 'uk_email'" in msg, msg
        assert "(id=2)" in msg and "users_2" in msg and "(id=1)" in msg and "email='a@x'" in msg, msg
        assert not _retryable(ei.value)
        assert sorted(downstream_db.execute("SELECT id, email FROM users")) == [(1, "a@x"), (3, "c@x")]
    finally:
        syncer.close()


def test_an_update_of_a_row_deleted_downstream_is_counted_not_recreated(spark, source1_db, downstream_db, positions):
    """Someone deleted row 7 in the merged table by hand; the shard then updates it.  The syncer
    does not re-create it (an upsert did): it counts the update in its status and metric."""
    from worker.sync.syncer import MISSING
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT)")
    source1_db.execute("INSERT INTO orders_1 VALUES (7, 1), (8, 1)")
    syncer = Syncer(spark, task, srcs["s1"])
    try:
        syncer.sync_until_caught_up()
        before = MISSING.labels(task.name, "s1")._value.get()
        downstream_db.execute("DELETE FROM orders WHERE id = 7")
        source1_db.execute("UPDATE orders_1 SET v = v + 1")
        syncer.sync_until_caught_up()
        assert sorted(downstream_db.execute("SELECT id, v FROM orders")) == [(8, 2)]
        assert syncer.status()["updates_of_missing_rows"] == 1
        assert MISSING.labels(task.name, "s1")._value.get() == before + 1
    finally:
        syncer.close()
