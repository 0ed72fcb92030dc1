"""Full load end to end on the real services: 2 sources x 4 shard tables with rows, writes
continuing during the dump, task-mode all; the syncer continues from the load's checkpoints
and ``check_task`` (the oracle) finds the merge equal."""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.load.conftest import Writer, create_shards, make_load_task
from worker.check import check_task
from worker.sync.checkpoint import CheckpointStore
from worker.load import KeyCollision, LoadHooks, run_full_load
from worker.schema_tracker import schema_from_json
from worker.sync.syncer import Syncer


def test_all_mode_two_sources_with_live_writes_reaches_equal(spark, source1_db, source2_db, downstream_db):
    create_shards(source1_db, 1_000_000, rows=120)
    create_shards(source2_db, 2_000_000, rows=120)
    # a keyless, unsharded table: one chunk, exact (no replay) through its table point
    source1_db.execute("CREATE TABLE events (kind VARCHAR(10), n INT)")
    source1_db.execute("INSERT INTO events VALUES " + ", ".join(f"('e', {i})" for i in range(30)))
    task, srcs, _ = make_load_task(downstream_db, {"s1": source1_db, "s2": source2_db}, rows_per_chunk=40)
    seen = []
    slow = LoadHooks(after_chunk=lambda r: time.sleep(0.05))   # let writes interleave
    with Writer(source1_db, 1_000_000, seed=1) as w1, Writer(source2_db, 2_000_000, seed=2) as w2:
        w1.db.execute("INSERT INTO events VALUES ('live', 1)")
        # two workers (one per source) load at the same time on the shared Spark session
        with ThreadPoolExecutor(2) as ex:
            futs = {sid: ex.submit(run_full_load, task, srcs[sid], spark, hooks=slow, progress=seen.append,
                                   progress_interval=0.3) for sid in ("s1", "s2")}
            results = {sid: f.result() for sid, f in futs.items()}
        source1_db.execute("INSERT INTO events VALUES ('after', 2)")
    assert w1.ops > 0 and w2.ops > 0
    for r in results.values():
        assert r.chunks_loaded >= 4 * 3 and r.chunks_skipped == 0 and r.tasks == r.chunks_loaded
        # chunks were read at different positions: the writes really overlapped the dump
        assert r.safe_until > r.snapshot
        assert any(t.max_position > t.position for t in r.tables.values())
    r1 = results["s1"]
    assert r1.tables[(source1_db.name, "events")].chunks == 1
    # each shard's checkpoint row carries its snapshot schema for the lock engine
    cp = CheckpointStore(task.target.pymysql_kwargs(), task.meta_schema, task.name, "s1")
    loaded = cp.load()
    assert loaded.global_pos.same_point(r1.snapshot) and loaded.safe_until.same_point(r1.safe_until)
    tp = loaded.tables[(source1_db.name, "orders_02")]
    assert tp.pos.same_point(r1.tables[(source1_db.name, "orders_02")].position)
    assert [c.name for c in schema_from_json(tp.table_info).columns][:3] == ["id", "item", "qty"]
    # progress: per-table dicts, and a final 100 %
    final = [p for p in seen if p["phase"] == "done"]
    assert len(final) == 2 and all(p["percent"] == 100.0 for p in final)
    assert {p["source"]: p["rows_loaded"] for p in final} == {sid: r.rows for sid, r in results.items()}
    assert all("rows_per_sec" in t and "rows_total_est" in t for t in final[0]["tables"].values())
    assert any(0 < p["percent"] < 100 for p in seen)

    t0 = time.monotonic()
    syncers = [Syncer(spark, task, srcs[s]) for s in ("s1", "s2")]
    for s in syncers:
        s.sync_until_caught_up()
    print("sync seconds", time.monotonic() - t0, [s.rows_applied for s in syncers])
    rep = check_task(task, srcs)
    assert rep.equal, json.dumps(rep.to_json(), default=str)[:3000]
    assert rep.table(f"{downstream_db.name}.events").downstream_rows == 32
    # a second run of the full load does nothing
    again = run_full_load(task, srcs["s1"], spark)
    assert again.already_finished and again.rows == r1.rows


def test_shard_key_collision_is_reported_with_keys_unless_resolved(spark, source1_db, downstream_db):
    for k in (1, 2):
        source1_db.execute(f"CREATE TABLE orders_{k:02d} (id INT PRIMARY KEY, v VARCHAR(10))")
    source1_db.execute("INSERT INTO orders_01 VALUES " + ", ".join(f"({i}, 'a')" for i in range(1, 21)))
    source1_db.execute("INSERT INTO orders_02 VALUES " + ", ".join(f"({i}, 'b')" for i in range(18, 31)))
    task, srcs, _ = make_load_task(downstream_db, {"s1": source1_db}, rows_per_chunk=1000, pool_size=1)
    with pytest.raises(KeyCollision) as ei:
        run_full_load(task, srcs["s1"], spark)
    msg = str(ei.value)
    assert "[18, 19, 20]" in msg and "on-duplicate-logical" in msg and "orders_0" in msg
    # nothing half-loaded: the failed chunk rolled back with its checkpoint
    assert downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] in (20, 13)

    # same task with on-duplicate ignore: keeps one row per key, loads the rest
    task2, srcs2, _ = make_load_task(downstream_db, {"s1": source1_db}, rows_per_chunk=1000, on_duplicate="ignore")
    r = run_full_load(task2, srcs2["s1"], spark)
    assert downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] == 30
    assert r.rows == 33 and r.chunks_loaded == 2


def test_target_is_created_from_the_join_of_shard_schemas(spark, source1_db, source2_db, downstream_db):
    source1_db.execute("CREATE TABLE orders_01 (id INT PRIMARY KEY, v VARCHAR(10), a INT)")
    source2_db.execute("CREATE TABLE orders_01 (id INT PRIMARY KEY, v VARCHAR(30), b DATE)")
    source1_db.execute("INSERT INTO orders_01 VALUES (1, 'x', 5)")
    source2_db.execute("INSERT INTO orders_01 VALUES (2, 'yyyyyyyyyyyyyyyyyyyyyyyy', '2024-02-03')")
    task, srcs, _ = make_load_task(downstream_db, {"s1": source1_db, "s2": source2_db})
    for sid in ("s1", "s2"):
        run_full_load(task, srcs[sid], spark)
    cols = downstream_db.execute("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE "
                                 "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orders' ORDER BY ORDINAL_POSITION")
    assert dict(cols) == {"id": "int(11)", "v": "varchar(30)", "a": "int(11)", "b": "date"}
    assert downstream_db.execute("SELECT id, v, a, b FROM orders ORDER BY id") == [
        (1, "x", 5, None), (2, "yyyyyyyyyyyyyyyyyyyyyyyy", None, __import__("datetime").date(2024, 2, 3))]
