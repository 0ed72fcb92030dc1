"""The apply stream (``syncer.apply-mode: stream``, ``worker/sync/apply_stream.py``): one
long-lived Spark job applies chunk after chunk, with the per-chunk job's results and errors
(real Spark session, real MariaDB)."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from prometheus_client import REGISTRY

from worker.events import INSERT, Position
from worker.sync.apply import resolve_tls
from worker.sync.apply_stream import ApplyStream, StreamError
from worker.sync.errors import ReplicationKeyCollision
from worker.sync.syncer import Syncer

from .conftest import make_task


def _jobs(task, source: str = "s1") -> float:
    return REGISTRY.get_sample_value("shardmerge_worker_spark_apply_jobs_total",
                                     {"task": task.name, "source": source}) or 0


def _history(db, n: int) -> None:
    """n rows over two shard tables in transactions of 100, then updates, deletes and an
    ALTER between them (a DDL the direct handler runs while the stream stays open)."""
    for t in ("orders_1", "orders_2"):
        db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT, note VARCHAR(20))")
    with db.connect() as c, c.cursor() as cur:
        for lo in range(0, n, 100):
            c.begin()
            cur.executemany("INSERT INTO orders_1 VALUES (%s, %s, %s)", [(i, i, f"n{i}") for i in range(lo, lo + 100)])
            cur.executemany("INSERT INTO orders_2 VALUES (%s, %s, %s)",
                            [(100_000 + i, i, "m") for i in range(lo, lo + 100)])
            c.commit()
        cur.execute("UPDATE orders_1 SET v = v + 1000 WHERE id % 7 = 0")
        cur.execute("DELETE FROM orders_2 WHERE id % 5 = 0")
        for t in ("orders_1", "orders_2"):
            cur.execute(f"ALTER TABLE {t} ADD COLUMN extra INT DEFAULT 5")
        cur.executemany("INSERT INTO orders_1 VALUES (%s, %s, %s, %s)",
                        [(n + i, i, "late", i) for i in range(600)])
        cur.execute("UPDATE orders_1 SET id = id + 500000 WHERE id % 11 = 0")   # key changes
        c.commit()


def _upstream_rows(db) -> list:
    return sorted(db.execute("SELECT id, v, note, extra FROM orders_1")
                  + db.execute("SELECT id, v, note, extra FROM orders_2"))


@pytest.mark.parametrize("mode", ["stream", "job"])
def test_modes_replicate_the_same_rows(spark, source1_db, downstream_db, positions, mode):
    """Several chunks of more rows than the driver applies itself: the stream uses ONE Spark job
    for all of them (the DDL in between does not end it), the job mode one per chunk; the
    downstream equals the upstream either way."""
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1}, apply_mode=mode)
    _history(source1_db, 2000)
    before = _jobs(task)
    syncer = Syncer(spark, task, srcs["s1"], apply_rows=1000, local_apply_rows=50)
    try:
        results = syncer.sync_until_caught_up()
        assert syncer.applier.stream is None           # caught up: the stream's job ended
    finally:
        syncer.close()
    assert sum(r.ddls for r in results) >= 3
    assert sorted(downstream_db.execute("SELECT id, v, note, extra FROM orders")) == _upstream_rows(source1_db)
    jobs = _jobs(task) - before
    if mode == "stream":
        assert jobs == len(results) == 1, (jobs, len(results))
    else:
        assert jobs >= 2, jobs    # one per chunk: at least the ones the ALTERs cut


def test_collision_in_a_stream_stops_the_syncer_then_replays_in_safe_mode(spark, source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT)")
    source1_db.execute("CREATE TABLE orders_2 (id INT PRIMARY KEY, v INT)")
    source1_db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i}, 1)" for i in range(400)))
    syncer = Syncer(spark, task, srcs["s1"], local_apply_rows=50)
    try:
        syncer.sync_until_caught_up()
        source1_db.execute("INSERT INTO orders_2 VALUES " + ", ".join(f"({i}, 2)" for i in range(390, 800)))
        with pytest.raises(ReplicationKeyCollision) as ei:
            syncer.sync_until_caught_up()
        assert "Duplicate entry" in str(ei.value) and "orders_2" in str(ei.value), str(ei.value)
        assert syncer.applier.stream is None
        # the colliding partition's transaction was rolled back: the first shard's rows are intact
        assert downstream_db.execute("SELECT COUNT(*) FROM orders WHERE v = 1")[0][0] == 400
        downstream_db.execute("DELETE FROM orders WHERE id >= 390")   # the operator lets shard 2 win
        syncer.sync_until_caught_up()      # the failed batch again, in safe mode
        assert downstream_db.execute("SELECT COUNT(*), SUM(v) FROM orders")[0] == (800, 390 + 2 * 410)
    finally:
        syncer.close()


def test_two_syncers_on_one_session_do_not_starve_each_other(spark, source1_db, source2_db, downstream_db,
                                                             positions):
    """Sources sharing one Spark application (as the tests and a worker of several tasks do):
    a stream holds the cores only while its syncer is behind, so both finish, one after the
    other and at the same time."""
    p1, p2 = positions(source1_db, source2_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db, "s2": source2_db}, start={"s1": p1, "s2": p2})
    for i, db in enumerate((source1_db, source2_db)):
        db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT)")
        db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i * 10_000 + k}, {k})" for k in range(1500)))
    syncers = [Syncer(spark, task, srcs[s], apply_rows=500, local_apply_rows=50) for s in ("s1", "s2")]
    try:
        for s in syncers:               # one after the other: the first's stream ends when caught up
            s.sync_until_caught_up()
        assert downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] == 3000
        for i, db in enumerate((source1_db, source2_db)):
            db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i * 10_000 + k}, {k})"
                                                                  for k in range(1500, 3000)))
        errors: list = []

        def run(s):
            try:
                s.sync_until_caught_up()
            except Exception as e:  # noqa: BLE001
                errors.append(e)
        threads = [threading.Thread(target=run, args=(s,), daemon=True) for s in syncers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not [t for t in threads if t.is_alive()], "a syncer is stuck behind the other's stream"
        assert not errors, errors
        assert downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] == 6000
    finally:
        for s in syncers:
            s.close()


def _pid_of_peer(port: int) -> int | None:
    """The local process owning the TCP socket bound to 127.0.0.1:``port`` (the stream task)."""
    want = f"0100007F:{port:04X}"
    inodes = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if parts[1] == want and parts[9] != "0":   # a TIME_WAIT socket of an earlier port user has inode 0
                inodes.add(f"socket:[{parts[9]}]")
    if not inodes:
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return int(pid)
        except OSError:
            continue
    return None


def test_a_lost_task_fails_the_chunk(spark, downstream_db):
    """The task applying a partition dies (its Python worker killed while it waits on a row
    lock): the chunk fails with a StreamError instead of waiting forever, and close() ends."""
    from worker.binlog.contract import RowsTable
    downstream_db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    downstream_db.execute("INSERT INTO t VALUES (1, 0)")
    ref = RowsTable("up", "t", downstream_db.name, "t", ("id", "v"), ("id",))
    meta = (ref.up_schema, ref.up_table, f"`{downstream_db.name}`.`t`", ref.cols, ref.pk)
    change = (INSERT, meta, None, (1, 5), Position("mysql-bin.000001", 100), True)   # safe: REPLACE
    kw = dict(db_kwargs=resolve_tls(downstream_db.params), batch=100, source_id="s1", time_zone="+00:00",
              checkpoint=None, epoch=0)
    stream = ApplyStream(spark, 1, kw, job_group="test-lost-task")
    holder = downstream_db.connect()
    holder.autocommit(False)
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT * FROM t WHERE id = 1 FOR UPDATE")   # the task's REPLACE waits on it
        assert stream.apply([[]]) == [{}]                               # connected and serving
        (task_sock,) = stream._files
        pid = _pid_of_peer(task_sock.getpeername()[1])
        assert pid is not None and pid != os.getpid()
        killer = threading.Timer(1.0, os.kill, (pid, signal.SIGKILL))
        killer.start()
        with pytest.raises(StreamError) as ei:
            stream.apply([[change]])
        assert "apply task lost" in str(ei.value), str(ei.value)
        killer.join()
    finally:
        holder.rollback()
        holder.close()
        stream.close(spark.sparkContext, wait=True)
    assert not stream._thread.is_alive()
    assert downstream_db.execute("SELECT v FROM t")[0][0] == 0


def test_tasks_that_cannot_reach_the_driver_fail_the_chunk_with_a_hint(spark, downstream_db, monkeypatch):
    """Executors that cannot dial the driver's stream port (a network policy): the chunk fails
    naming the address and the way out (apply-mode: job), instead of waiting forever."""
    import worker.sync.apply_stream as st
    monkeypatch.setattr(st, "_driver_address", lambda sc: ("127.0.0.1", "127.0.0.2"))   # nothing listens there
    kw = dict(db_kwargs=resolve_tls(downstream_db.params), batch=100, source_id="s1", time_zone="+00:00",
              checkpoint=None, epoch=0)
    stream = ApplyStream(spark, 2, kw, job_group="test-unreachable")
    try:
        with pytest.raises(StreamError) as ei:
            stream.apply([[], []])
    finally:
        stream.close(spark.sparkContext, wait=True)
    assert "could not connect back to the driver at 127.0.0.2:" in str(ei.value)
    assert "apply-mode: job" in str(ei.value)


def test_a_stream_left_idle_is_adopted_by_the_next_syncer_with_its_own_downstream(
        spark, services, request, source1_db, source2_db, downstream_db, positions, monkeypatch):
    """A caught-up syncer parks its stream; the next syncer of the same Spark application
    adopts it (no new Spark job) and its chunks carry its own apply arguments: its rows land in
    ITS downstream and its keyless table's points (written by the tasks, in the apply's own
    transaction) in ITS checkpoint table, never the first syncer's."""
    from tests.conftest import _drop_db, _fresh_db
    import worker.sync.apply_stream as st
    # the next syncer's start (checkpoints, binlog connection) takes 1.4-1.9 s on a loaded
    # 2-core machine, longer than the 1 s grace: the test is about adoption, not the grace
    monkeypatch.setattr(st, "GRACE", 8.0)
    other_down = _fresh_db(services, "downstream", request)
    try:
        p1, p2 = positions(source1_db, source2_db)
        task_a, srcs_a, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
        task_b, srcs_b, _ = make_task(other_down, {"s2": source2_db}, start={"s2": p2})
        source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT)")
        source2_db.execute("CREATE TABLE orders_1 (id INT, v INT)")      # keyless: points kept by the tasks
        for i, db in enumerate((source1_db, source2_db)):
            db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i * 10_000 + k}, {k})" for k in range(1500)))
        a = Syncer(spark, task_a, srcs_a["s1"], apply_rows=500, local_apply_rows=50)
        b = Syncer(spark, task_b, srcs_b["s2"], apply_rows=500, local_apply_rows=50)
        st.free_cores(spark.sparkContext)      # a stream an earlier test parked is not the one under test
        rows_a = 1500
        try:
            a.sync_until_caught_up()
            assert _jobs(task_a) == 1
            for _ in range(5):
                # parked only whole: a task that could not start on a busy local[2] (an earlier
                # test's job still ending) makes the syncer close it instead; then run A again
                if st._parked:
                    break
                source1_db.execute("INSERT INTO orders_1 VALUES " + ", ".join(
                    f"({k}, {k})" for k in range(rows_a, rows_a + 1500)))
                rows_a += 1500
                a.sync_until_caught_up()
            assert st._parked, "the caught-up syncer's stream was never parked whole"
            b.sync_until_caught_up()
            assert _jobs(task_b, "s2") == 0, "the second syncer started its own Spark job instead of adopting"
            assert downstream_db.execute("SELECT COUNT(*), MIN(id) FROM orders")[0] == (rows_a, 0)
            assert other_down.execute("SELECT COUNT(*), MIN(id) FROM orders")[0] == (1500, 10_000)
            assert downstream_db.execute(f"SELECT COUNT(*) FROM {a.store.fq} WHERE cp_schema = "
                                         f"'{source2_db.name}'")[0][0] == 0
            assert other_down.execute(f"SELECT COUNT(*) FROM {b.store.fq} WHERE cp_schema = "
                                      f"'{source2_db.name}' AND cp_table = 'orders_1'")[0][0] >= 1
        finally:
            a.close()
            b.close()
        # nobody adopts it now: closed after the grace period, its cores free for other jobs
        deadline = time.monotonic() + st.GRACE + 10
        while st._parked and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not st._parked
        assert spark.sparkContext.parallelize(range(2), 2).map(lambda x: x + 1).collect() == [1, 2]
    finally:
        _drop_db(other_down)


def test_a_parked_stream_yields_to_a_stream_waiting_for_cores(spark, downstream_db):
    """``free_cores`` closes a parked stream; a stream parked while another stream of the
    application waits for cores is closed at once (else the waiting one would stall for the
    grace period: local[2] has the cores of one stream)."""
    import worker.sync.apply_stream as st
    kw = dict(db_kwargs=resolve_tls(downstream_db.params), batch=100, source_id="s1", time_zone=None,
              checkpoint=None, epoch=None)

    def whole(stream):
        deadline = time.monotonic() + 60
        while stream.connected < 2 and time.monotonic() < deadline:
            stream.apply([[], []])       # tasks are accepted while a chunk is applied
        return stream.usable
    first = ApplyStream(spark, 2, kw, job_group="test-park-1")
    try:
        assert whole(first)
        st.park(first, spark.sparkContext)
        assert not first._closed and st.adopt(spark.sparkContext, 2) is first     # parked, then adopted
        st.park(first, spark.sparkContext)
        st.free_cores(spark.sparkContext)
        assert first._closed and not st._parked
    finally:
        first.close(spark.sparkContext, wait=True)
    first = ApplyStream(spark, 2, kw, job_group="test-park-2")
    second = None
    try:
        assert whole(first)
        second = ApplyStream(spark, 2, kw, job_group="test-park-3")   # no core for its tasks yet
        st.park(first, spark.sparkContext)
        assert first._closed and not st._parked, "parked while another stream waits for its cores"
        assert whole(second)
    finally:
        first.close(spark.sparkContext, wait=True)
        if second is not None:
            second.close(spark.sparkContext, wait=True)
