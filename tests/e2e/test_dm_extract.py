"""Shard origin columns (a route's `extract-table` / `extract-source`) on real `shardctl master` /
`worker` processes: 2 sources x 2 shards whose primary keys are the same (1..10 in every shard)
merge into one table, on the full load and in replication, and `shardctl check` is EQUAL.

Without the origin columns the 40 rows would collide on `id` (the full load stops with a key
collision by default), so the test fails if the columns are not added, filled or keyed."""
from __future__ import annotations

from pathlib import Path

import yaml

SHARDS2 = ("orders_01", "orders_02")


def test_colliding_primary_keys_merge_with_extract_table_and_source(scenario):
    sc = scenario(mode="all", rows=0, shards=SHARDS2)
    for db in sc.dbs.values():
        for t in SHARDS2:
            db.execute(f"INSERT INTO {t} (id, v) VALUES " + ", ".join(f"({i}, {i * 10})" for i in range(1, 11)))
    task = yaml.safe_load(Path(sc.task_file).read_text())
    for r in task["routes"].values():
        r["extract-table"] = {"table-regexp": "orders_(.*)", "target-column": "c_table"}
        r["extract-source"] = {"source-regexp": "(.*)", "target-column": "c_source"}
    Path(sc.task_file).write_text(yaml.safe_dump(task))
    sc.start()
    sc.wait_equal(timeout=180, columns=["id", "v", "c_table", "c_source"])
    assert sc.down_indexes()["PRIMARY"] == ["id", "c_table", "c_source"]
    assert sc.down.execute("SELECT COUNT(*) FROM orders")[0][0] == 40
    assert sorted(sc.down.execute("SELECT c_table, c_source, v FROM orders WHERE id = 3")) == [
        ("01", "s1", 30), ("01", "s2", 30), ("02", "s1", 30), ("02", "s2", 30)]

    # replication: the same key written in every shard, an update and a delete of one shard's row
    for db in sc.dbs.values():
        for t in SHARDS2:
            db.execute(f"INSERT INTO {t} (id, v) VALUES (11, 110)")
    sc.dbs["s1"].execute("UPDATE orders_01 SET v = 999 WHERE id = 1")
    sc.dbs["s2"].execute("DELETE FROM orders_02 WHERE id = 2")
    sc.dbs["s2"].execute("UPDATE orders_02 SET id = 12 WHERE id = 3")       # a key change
    sc.wait_equal(timeout=120)
    assert sc.down.execute("SELECT COUNT(*) FROM orders")[0][0] == 43
    assert sorted(sc.down.execute("SELECT c_table, c_source, v FROM orders WHERE id = 1")) == [
        ("01", "s1", 999), ("01", "s2", 10), ("02", "s1", 10), ("02", "s2", 10)]
    assert sorted(sc.down.execute("SELECT c_table, c_source FROM orders WHERE id = 2")) == [
        ("01", "s1"), ("01", "s2"), ("02", "s1")]
    assert sc.down.execute("SELECT c_table, c_source FROM orders WHERE id = 12") == [("02", "s2")]

    # a shard DDL on every shard goes through the lock as usual; the origin columns stay in the key
    for db in sc.dbs.values():
        for t in SHARDS2:
            db.execute(f"ALTER TABLE {t} ADD COLUMN note VARCHAR(20) DEFAULT 'n'")
            db.execute(f"INSERT INTO {t} (id, v, note) VALUES (20, 200, 'x')")
    sc.wait_equal(timeout=120, columns=["id", "v", "c_table", "c_source", "note"])
    assert sc.down_indexes()["PRIMARY"] == ["id", "c_table", "c_source"]
    assert sc.down.execute("SELECT COUNT(*) FROM orders WHERE id = 20 AND note = 'x'")[0][0] == 4
    subs = sc.subtasks()
    assert all(st["stage"] == "Running" for st in subs.values()), subs
    sc.stop()
