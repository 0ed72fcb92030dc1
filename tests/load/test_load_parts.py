"""The pieces of the full load on the real servers: options from the task YAML, chunk planning
(integer split, index walk, composite keys), exact value round-trip of awkward types, a DDL
during the load, a stop request, and the progress text."""
from __future__ import annotations

import threading

import pymysql
import pytest

from coordinator.errors import ConfigError
from coordinator.routing import TableMapper
from tests.load.conftest import make_load_task
from worker.check import check_task
from worker.load import (LoadHooks, LoadOptions, LoadStopped, SchemaChangedDuringLoad, bar, format_progress,
                         load_options, run_full_load)
from worker.load.plan import bounds, discover, key_where
from worker.load.snapshot import connect_reader
from worker.sync.syncer import Syncer


def test_loader_options_come_from_dm_sections(source1_db, downstream_db):
    task, _, _ = make_load_task(downstream_db, {"s1": source1_db}, rows_per_chunk=123, on_duplicate="replace",
                                pool_size=3)
    assert load_options(task, "s1") == LoadOptions(chunk_rows=123, on_duplicate="replace", pool_size=3)
    # A bad value is refused when the task is parsed (start-task), not later by the loader.
    with pytest.raises(ConfigError) as ei:
        make_load_task(downstream_db, {"s1": source1_db}, on_duplicate="overwrite")
    assert "on-duplicate-logical" in str(ei.value) and "overwrite" in str(ei.value)


def _plan(db, task, table, chunk_rows):
    conn = connect_reader(db.params, streaming=False)
    try:
        t = next(x for x in discover(conn, TableMapper(task.instances[0], task.meta_schema)) if x.table == table)
        edges = bounds(conn, t, chunk_rows)
        sizes = []
        for lo, hi in edges:
            where, args = key_where(t.key, lo, hi)
            with conn.cursor() as cur:
                cur.execute(f"SELECT COUNT(*) FROM `{db.name}`.`{table}` WHERE {where}", args)
                sizes.append(cur.fetchone()[0])
        return t, edges, sizes
    finally:
        conn.close()


def test_chunk_bounds_cover_every_row_exactly_once(source1_db, downstream_db):
    db = source1_db
    db.execute("CREATE TABLE ints (id INT PRIMARY KEY, v INT)")
    db.execute("INSERT INTO ints SELECT seq * 3, seq FROM seq_1_to_1000")
    db.execute("ANALYZE TABLE ints")
    db.execute("CREATE TABLE strs (code VARCHAR(20) NOT NULL, UNIQUE KEY (code), v INT)")
    db.execute("INSERT INTO strs SELECT CONCAT('k', LPAD(seq, 5, '0')), seq FROM seq_1_to_250")
    db.execute("CREATE TABLE comp (a INT, b VARCHAR(5), v INT, PRIMARY KEY (a, b))")
    db.execute("INSERT INTO comp SELECT seq % 7, CONCAT('x', seq), seq FROM seq_1_to_300")
    task, _, _ = make_load_task(downstream_db, {"s1": db})
    t, edges, sizes = _plan(db, task, "ints", 100)
    assert t.key == ["id"] and sum(sizes) == 1000 and 8 <= len(edges) <= 12   # MIN/MAX split
    _, edges, sizes = _plan(db, task, "strs", 60)
    assert sizes == [60, 60, 60, 60, 10] and edges[0][0] is None and edges[-1][1] is None   # index walk
    t, _, sizes = _plan(db, task, "comp", 64)
    assert t.key == ["a", "b"] and sizes == [64, 64, 64, 64, 44]


def test_awkward_values_round_trip_exactly(spark, source1_db, downstream_db):
    db = source1_db
    db.execute("""CREATE TABLE vals (id INT PRIMARY KEY, bt BIT(5), d DATE, dt DATETIME(6), ts TIMESTAMP(3) NULL,
                  tm TIME(2), de DECIMAL(30,10), f FLOAT, dbl DOUBLE, bl BLOB, tx TEXT CHARACTER SET utf8mb4,
                  l1 VARCHAR(10) CHARACTER SET latin1, js JSON, en ENUM('a','b'), st SET('x','y'), yr YEAR,
                  ub BIGINT UNSIGNED, gen INT AS (id * 2) VIRTUAL)""")
    with db.connect() as c, c.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute("""INSERT INTO vals (id, bt, d, dt, ts, tm, de, f, dbl, bl, tx, l1, js, en, st, yr, ub) VALUES
            (1, b'10101', '0000-00-00', '2024-02-29 23:59:59.123456', '2024-03-01 00:00:00.5', '-838:59:59.99',
             '12345678901234567890.0123456789', 1.1, 0.1e0 + 0.2e0, x'00ff00', 'héllo 🎉', 'café', '{"a": [1, 2]}',
             'b', 'x,y', 2155, 18446744073709551615),
            (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
            (3, b'0', '2024-01-01', '1000-01-01 00:00:00', '1970-01-01 00:00:01', '00:00:00', '-0.0000000001',
             -3.4e38, -1.7976931348623157e308, x'27005c0d0a1a', 'it''s \\ back %s %% \0 nul', 'ÿ', 'null',
             'a', '', 1901, 0)""")
    task, srcs, _ = make_load_task(downstream_db, {"s1": db})
    run_full_load(task, srcs["s1"], spark)
    rep = check_task(task, srcs)
    assert rep.equal, rep.to_json()
    cols = "id, bt + 0, d, dt, ts, tm, de, f, dbl, HEX(bl), tx, l1, js, en, st, yr, ub, gen"
    with db.connect() as c, c.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"SELECT {cols} FROM vals ORDER BY id")
        up = cur.fetchall()
    with downstream_db.connect() as c, c.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"SELECT {cols} FROM vals ORDER BY id")
        assert cur.fetchall() == up


def test_ddl_on_a_shard_during_the_load_is_replayed_by_the_syncer(spark, source1_db, downstream_db):
    """Like DM: the load does not stop; the target is created with the schema at the plan
    position and the syncer replays the ALTER (and the rows around it) from the binlog."""
    db = source1_db
    for t in ("orders_01", "orders_02"):
        db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
    db.execute("INSERT INTO orders_01 SELECT seq, seq FROM seq_1_to_100")
    db.execute("INSERT INTO orders_02 SELECT seq, seq FROM seq_1001_to_1100")
    task, srcs, _ = make_load_task(downstream_db, {"s1": db}, rows_per_chunk=25, pool_size=1)
    params, name = dict(db.params), db.name

    def alter_once(result):   # in the Spark task after a chunk committed; chunks run in (chunk, table)
        if result["chunk"] == 0 and result["table"] == "orders_01":   # order: orders_02 has none yet
            with pymysql.connect(**params, database=name, autocommit=True) as c, c.cursor() as cur:
                cur.execute("UPDATE orders_02 SET v = -v WHERE id IN (1003, 1060)")     # before the DDL
                cur.execute("ALTER TABLE orders_02 ADD COLUMN w INT NOT NULL DEFAULT 7")
                cur.execute("UPDATE orders_02 SET w = 5, v = v + 1000 WHERE id <= 1010")
                cur.execute("UPDATE orders_02 SET w = 9 WHERE id = 1090")
                cur.execute("INSERT INTO orders_02 VALUES (1101, 101, 3)")
                cur.execute("DELETE FROM orders_02 WHERE id = 1070")

    res = run_full_load(task, srcs["s1"], spark, hooks=LoadHooks(after_chunk=alter_once))
    altered, other = res.tables[(name, "orders_02")], res.tables[(name, "orders_01")]
    assert altered.schema_changed and altered.position.same_point(res.snapshot)   # replayed from P0
    assert not other.schema_changed
    # the target has the schema of the plan position until the syncer replays the ALTER
    assert [r[0] for r in downstream_db.execute(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND "
        "TABLE_NAME = 'orders' ORDER BY ORDINAL_POSITION")] == ["id", "v"]
    Syncer(spark, task, srcs["s1"]).sync_until_caught_up()
    rep = check_task(task, srcs)
    assert rep.equal, rep.to_json()
    assert downstream_db.execute("SELECT id, v, w FROM orders WHERE id IN (1003, 1060, 1090, 1101) ORDER BY id") == [
        (1003, -1003 + 1000, 5), (1060, -1060, 7), (1090, 1090, 9), (1101, 101, 3)]
    assert downstream_db.execute("SELECT COUNT(*), SUM(w = 7) FROM orders") == [(200, 188)]   # the default


def test_ddl_on_a_keyless_shard_during_the_load_stops_it_clearly(spark, source1_db, downstream_db):
    """Without a key the replay from P0 would duplicate rows: the one case that still stops."""
    db = source1_db
    db.execute("CREATE TABLE orders_02 (id INT, v INT)")
    db.execute("CREATE TABLE orders_01 (id INT PRIMARY KEY, v INT)")
    db.execute("INSERT INTO orders_02 SELECT seq, seq FROM seq_1_to_10")
    db.execute("INSERT INTO orders_01 SELECT seq, seq FROM seq_1_to_100")
    task, srcs, _ = make_load_task(downstream_db, {"s1": db}, rows_per_chunk=25, pool_size=1)
    params, name = dict(db.params), db.name

    def alter_once(result):   # chunks run in (chunk, table) order: orders_01's first, then keyless orders_02
        if result["chunk"] == 0 and result["table"] == "orders_01":
            with pymysql.connect(**params, database=name, autocommit=True) as c, c.cursor() as cur:
                cur.execute("ALTER TABLE orders_02 ADD COLUMN w INT")

    with pytest.raises(SchemaChangedDuringLoad) as ei:
        run_full_load(task, srcs["s1"], spark, hooks=LoadHooks(after_chunk=alter_once))
    assert "altered during the full load" in str(ei.value) and "orders_02" in str(ei.value)
    assert "no primary or NOT NULL unique key" in str(ei.value)


def test_stop_request_cancels_and_a_restart_finishes(spark, source1_db, downstream_db):
    db = source1_db
    db.execute("CREATE TABLE orders_01 (id INT PRIMARY KEY, v INT)")
    db.execute("INSERT INTO orders_01 SELECT seq, seq FROM seq_1_to_200")
    task, srcs, _ = make_load_task(downstream_db, {"s1": db}, rows_per_chunk=20, pool_size=1)
    stop = threading.Event()
    slow = LoadHooks(after_chunk=lambda r: __import__("time").sleep(0.3))

    def on_progress(p):
        if p["chunks_done"] >= 1:
            stop.set()

    with pytest.raises(LoadStopped):
        run_full_load(task, srcs["s1"], spark, hooks=slow, stop=stop, progress=on_progress, progress_interval=0.2)
    r = run_full_load(task, srcs["s1"], spark)
    assert r.chunks_skipped >= 1 and r.chunks_loaded + r.chunks_skipped == 10
    assert downstream_db.execute("SELECT COUNT(*), SUM(v) FROM orders") == [(200, 20100)]


def test_progress_text():
    assert bar(0) == "[" + "." * 30 + "]   0.0%"
    assert bar(50, 10) == "[#####.....]  50.0%"
    assert bar(250, 4) == "[####] 100.0%"
    text = format_progress({"source": "s1", "percent": 25.0, "rows_loaded": 5, "rows_total_est": 20,
                            "chunks_done": 1, "chunks_total": 4, "rows_per_sec": 2.5,
                            "tables": {"db.t_1": {"target": "db.t", "percent": 25.0, "rows_loaded": 5,
                                                  "rows_total_est": 20}}})
    assert text.splitlines()[0].startswith("full load s1 [") and "5/20 rows, 1/4 chunks" in text
    assert "db.t_1 -> db.t:" in text.splitlines()[1]
