"""The Spark binlog reader (``reader="spark"``): the ``mysql-binlog`` data source decodes in an
executor exactly what the default decoder decodes, the segmented reader hands the syncer the
same stream (bounded chunks, End last, cut where one read would stop), and a syncer using it
replicates inserts/updates/deletes across an ADD COLUMN and a crash/restart to an equal
downstream.  The task key ``binlog-reader`` selects it."""
from __future__ import annotations

import pickle

import pytest

from coordinator.config import ConfigError, parse_task
from coordinator.routing import TableMapper
from tests.worker.conftest import make_task
from worker.binlog import (BinlogPrefetch, BinlogReadError, Chunk, DecoderProcess, End, RouteArgs, Statement,
                           decode_range)
from worker.binlog.spark_reader import SparkBinlogReader, load_range
from worker.check import check_task
from worker.events import Position
from worker.sync.hooks import Hooks, SimulatedCrash
from worker.sync.syncer import Syncer
from worker.sync.errors import SyncError
from worker.upstream import master_status


def _flatten(items):
    """Items -> comparable events: one per transaction / statement, then the End position."""
    out = []
    for it in items:
        if isinstance(it, Chunk):
            out += [("txn", pos, [(k, ref, list(rows)) for k, ref, rows in changes]) for pos, changes in it.txns]
        elif isinstance(it, tuple):
            pos, changes = it
            out.append(("txn", pos, [(k, ref, list(rows)) for k, ref, rows in changes]))
        elif isinstance(it, Statement):
            out.append(("stmt", it.query, it.schema, it.start, it.end))
        elif isinstance(it, End):
            out.append(("end", it.pos))
    return out


def _mixed_workload(db, n=60):
    db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT, s VARCHAR(20), d DECIMAL(8,2))")
    db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i}, {i}, 's{i}', {i}.25)" for i in range(n)))
    for k in range(5):
        db.execute(f"UPDATE orders_1 SET v = v + {k} WHERE id % 5 = {k}")
    db.execute("DELETE FROM orders_1 WHERE id % 7 = 0")
    db.execute("ALTER TABLE orders_1 ADD COLUMN note VARCHAR(20) NOT NULL DEFAULT 'n'")
    db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i}, {i}, 'x', 1.5, 'after')" for i in range(n, n + 30)))
    db.execute("UPDATE orders_1 SET note = 'upd', id = id + 1000 WHERE id % 11 = 3")
    db.execute("DELETE FROM orders_1 WHERE id BETWEEN 10 AND 15")


def test_data_source_yields_what_decode_range_decodes(spark, source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    _mixed_workload(source1_db)
    end = master_status(source1_db.params)
    inst, kw = task.instance("s1"), srcs["s1"].db.pymysql_kwargs()
    direct = list(decode_range(kw, TableMapper(inst, task.meta_schema), p1, end))
    rows = load_range(spark, kw, RouteArgs(inst, task.meta_schema), p1, end, source_id="s1", piece_rows=7).collect()
    assert [r.seq for r in rows] == list(range(len(rows)))
    items = [pickle.loads(r.item) for r in rows]
    assert isinstance(items[-1], End) and items[-1].pos.same_point(end) and items[-1].decode_seconds > 0
    assert all(c.rows <= 7 + 60 for c in items if isinstance(c, Chunk))   # whole transactions, ~7 rows
    assert len([c for c in items if isinstance(c, Chunk)]) > 3
    assert _flatten(items) == _flatten(direct)
    assert any(e[0] == "stmt" and "ADD COLUMN note" in e[1] for e in _flatten(items))
    # a limited read stops at the same transaction boundary as the direct decoder
    direct = list(decode_range(kw, TableMapper(inst, task.meta_schema), p1, end, max_events=70))
    rows = load_range(spark, kw, RouteArgs(inst, task.meta_schema), p1, end, max_events=70).collect()
    got = [pickle.loads(r.item) for r in rows]
    assert _flatten(got) == _flatten(direct) and got[-1].pos < end


def _unwritten_gtid(end: Position) -> Position:
    """A start the server refuses at once: a GTID of its domain below its last one that it never
    wrote (one above its last one is waited for; only the stall limit would end that read)."""
    return Position("", 0, end.gtid.split(",")[0].split("-")[0] + "-999-1")


def test_segmented_reader_hands_out_the_prefetch_stream(spark, source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    db = source1_db
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    for k in range(6):
        db.execute("INSERT INTO t VALUES " + ", ".join(f"({k * 10 + i}, {i})" for i in range(10)))
    db.execute("ALTER TABLE t ADD COLUMN w INT")
    for k in range(6, 12):
        db.execute("INSERT INTO t VALUES " + ", ".join(f"({k * 10 + i}, {i}, 0)" for i in range(10)))
    end = master_status(db.params)
    kw, margs = srcs["s1"].db.pymysql_kwargs(), RouteArgs(task.instance("s1"), task.meta_schema)
    decoder = DecoderProcess("s1")
    try:
        for max_events in (0, 55):
            with BinlogPrefetch(decoder, kw, margs, p1, end, max_events=max_events, source_id="s1",
                                max_rows=25, piece_rows=10) as r:
                want = list(r.items())
            # segments of 20 rows: several Spark reads, stitched at transaction boundaries
            with SparkBinlogReader(spark, kw, margs, p1, end, max_events=max_events, source_id="s1",
                                   max_rows=25, piece_rows=10, segment_rows=20) as r:
                got = list(r.items())
            assert r.segments >= 3
            assert _flatten(got) == _flatten(want)
            assert isinstance(got[-1], End) and r.decode_seconds > 0
            assert all(0 < c.rows <= 30 for c in got if isinstance(c, Chunk))
            if not max_events:   # (55 rows stop before the ALTER)
                alter = next(i for i, it in enumerate(got) if isinstance(it, Statement) and "ADD COLUMN" in it.query)
                assert all(c.end <= got[alter].start for c in got[:alter] if isinstance(c, Chunk))
                assert got[-1].pos.same_point(end)
        assert got[-1].pos < end and sum(c.rows for c in got if isinstance(c, Chunk)) == 60
    finally:
        decoder.kill()
    # leaving early cancels the read; a bad position is a typed error naming the source
    with SparkBinlogReader(spark, kw, margs, p1, end, source_id="s1", max_rows=5, piece_rows=5,
                           segment_rows=10) as r:
        assert isinstance(next(r.items()), (Chunk, Statement))
    assert not r._thread.is_alive()
    bad = _unwritten_gtid(end)
    with pytest.raises(BinlogReadError) as ei:
        with SparkBinlogReader(spark, kw, margs, bad, Position(end.file, end.pos + 10**6), source_id="s1") as r:
            list(r.items())
    assert ei.value.context.get("source") == "s1" or "s1" in str(ei.value)
    assert bad.gtid in str(ei.value)


def test_syncer_with_spark_reader_replicates_with_ddl_and_crash(spark, source1_db, source2_db, downstream_db,
                                                                 positions):
    p1, p2 = positions(source1_db, source2_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db, "s2": source2_db}, start={"s1": p1, "s2": p2})
    _mixed_workload(source1_db)
    source2_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT, s VARCHAR(20), d DECIMAL(8,2))")
    source2_db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({5000 + i}, {i}, 'b', 2.5)" for i in range(40)))
    source2_db.execute("ALTER TABLE orders_1 ADD COLUMN note VARCHAR(20) NOT NULL DEFAULT 'n'")
    source2_db.execute("UPDATE orders_1 SET note = 's2' WHERE id % 3 = 0")
    fired = []

    def crash_once(info):
        if not fired and info["rows"]:
            fired.append(info)
            raise SimulatedCrash("apply done, checkpoint not advanced")
    first = Syncer(spark, task, srcs["s1"], hooks=Hooks(after_apply=crash_once), apply_rows=30, reader="spark")
    with pytest.raises(SimulatedCrash):
        first.sync_until_caught_up()
    assert not hasattr(first.binlog, "decoder")   # the spark reader starts no decoder process
    source1_db.execute("UPDATE orders_1 SET s = 'while-down' WHERE id < 30")
    for sid in ("s1", "s2"):
        s = Syncer(spark, task, srcs[sid], reader="spark")
        s.sync_until_caught_up()
        assert not hasattr(s.binlog, "decoder")
    rep = check_task(task, srcs)
    assert rep.equal, rep.to_json()
    assert downstream_db.execute("SELECT COUNT(*) FROM orders WHERE note = 'after'")[0][0] > 0


def test_reader_selection_from_task_config(spark, source1_db, downstream_db):
    task, srcs, text = make_task(downstream_db, {"s1": source1_db})
    assert task.instance("s1").syncer.binlog_reader == "process"
    spark_text = text.replace("safe-mode: false", "safe-mode: false\n    binlog-reader: spark")
    assert "binlog-reader" in spark_text
    t2 = parse_task(spark_text, "<task>")
    assert t2.instance("s1").syncer.binlog_reader == "spark"
    assert Syncer(spark, t2, srcs["s1"]).reader == "spark"
    assert Syncer(spark, t2, srcs["s1"], reader="process").reader == "process"
    with pytest.raises(ConfigError, match=r"binlog-reader.*process or spark"):
        parse_task(text.replace("safe-mode: false", "safe-mode: false\n    binlog-reader: thread"), "<task>")
    with pytest.raises(SyncError, match="reader"):
        Syncer(spark, task, srcs["s1"], reader="threads")


def test_a_position_the_server_refuses_is_a_typed_error_from_every_reader(source1_db, downstream_db, positions):
    """Read directly (a test's or a tool's ``decode_range``), a refused start was pymysql's bare
    ``OperationalError``; it is the reader's ``BinlogReadError`` naming source and position."""
    from worker.binlog import decode_range
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    end = master_status(source1_db.params)
    bad = _unwritten_gtid(end)
    kw, mapper = srcs["s1"].db.pymysql_kwargs(), TableMapper(task.instance("s1"), task.meta_schema)
    with pytest.raises(BinlogReadError) as ei:
        list(decode_range(kw, mapper, bad, Position(end.file, end.pos + 10**6), source_id="s1"))
    assert ei.value.context["source"] == "s1" and "999-1" in str(ei.value), ei.value
