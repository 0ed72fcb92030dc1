"""DM's expression filters on real `shardctl master` / `worker` processes: rows an
`insert-value-expr` matches are not copied by the full load nor replicated, a
`delete-value-expr` keeps the rows it matches downstream, an `update-new-value-expr` drops the
updates it matches; `shardctl check` (which applies `insert-value-expr` to the upstream side)
is EQUAL after the load and the inserts."""
from __future__ import annotations

from pathlib import Path

import yaml

from .conftest import ID_BASE

SHARDS2 = ("orders_01", "orders_02")


def _ids(db, sql: str) -> list[int]:
    return sorted(r[0] for r in db.execute(sql))


def test_expression_filter_on_full_load_and_replication(scenario):
    sc = scenario(mode="all", rows=20, shards=SHARDS2)
    task = yaml.safe_load(Path(sc.task_file).read_text())
    task["expression-filter"] = {}
    for inst in task["mysql-instances"]:
        sid = inst["source-id"]
        inst["expression-filters"] = []
        for t in SHARDS2:
            name = f"{sid}-{t}"
            task["expression-filter"][name] = {"schema": sc.dbs[sid].name, "table": t,
                                               "insert-value-expr": "v % 2 = 1",
                                               "delete-value-expr": "v = 40",
                                               "update-new-value-expr": "v >= 500"}
            inst["expression-filters"].append(name)
    Path(sc.task_file).write_text(yaml.safe_dump(task))
    odd_up = sum(len(_ids(db, f"SELECT id FROM {t} WHERE v % 2 = 1")) for db in sc.dbs.values() for t in SHARDS2)
    assert 0 < odd_up < 80                                     # the data has rows on both sides of the filter
    sc.start()
    sc.wait_equal(timeout=180)                                 # full load without the odd rows
    assert _ids(sc.down, "SELECT id FROM orders WHERE v % 2 = 1") == []
    assert sc.down.execute("SELECT COUNT(*) FROM orders")[0][0] == 80 - odd_up

    base = {sid: ID_BASE[sid] + 900_000 for sid in sc.dbs}
    for sid, db in sc.dbs.items():
        b = base[sid]
        db.execute(f"INSERT INTO orders_01 (id, v) VALUES ({b}, 40), ({b + 1}, 41), ({b + 2}, 42), ({b + 3}, 43)")
        db.execute(f"INSERT INTO orders_02 (id, v) VALUES ({b + 4}, 44), ({b + 5}, 46)")
    sc.wait_equal(timeout=120)                                 # replication: odd v dropped
    for sid, db in sc.dbs.items():
        b = base[sid]
        db.execute(f"DELETE FROM orders_01 WHERE id IN ({b}, {b + 2})")       # v=40 kept downstream, v=42 deleted
        db.execute(f"UPDATE orders_02 SET v = 500 WHERE id = {b + 4}")       # update-new-value-expr: dropped
        db.execute(f"UPDATE orders_02 SET v = 8 WHERE id = {b + 5}")         # replicated
        db.execute(f"INSERT INTO orders_02 (id, v) VALUES ({b + 9}, 2)")                       # marker
    sc.c.wait(lambda: len(_ids(sc.down, f"SELECT id FROM orders WHERE id IN ({base['s1'] + 9}, "
                                        f"{base['s2'] + 9})")) == 2, 120, "markers downstream")
    for sid in sc.dbs:
        b = base[sid]
        assert _ids(sc.down, f"SELECT id FROM orders WHERE id BETWEEN {b} AND {b + 3}") == [b]      # v=40 kept
        assert sc.dbs[sid].execute(f"SELECT v FROM orders_02 WHERE id = {b + 4}")[0][0] == 500
        assert sc.down.execute(f"SELECT v FROM orders WHERE id = {b + 4}")[0][0] == 44       # the update was dropped
        assert sc.down.execute(f"SELECT v FROM orders WHERE id = {b + 5}")[0][0] == 8
    subs = sc.subtasks()
    assert all(st["stage"] == "Running" for st in subs.values()), subs
    sc.stop()


def test_dump_where_limits_the_full_load_only(scenario):
    """`mydumpers.*.where` (mydumper's --where): the full load copies only the rows it selects;
    replication then brings every later change, as in DM."""
    sc = scenario(mode="all", rows=20, shards=SHARDS2)
    task = yaml.safe_load(Path(sc.task_file).read_text())
    task["mydumpers"] = {"global": {"where": "v < 30", "threads": 4}}
    for inst in task["mysql-instances"]:
        inst["mydumper-config-name"] = "global"
    Path(sc.task_file).write_text(yaml.safe_dump(task))
    want = sorted(i for db in sc.dbs.values() for t in SHARDS2 for i in _ids(db, f"SELECT id FROM {t} WHERE v < 30"))
    assert 0 < len(want) < 80
    sc.start()
    # the markers go in after the snapshot: a row written before it is a dump row, and v=77 fails the where
    sc.c.wait(lambda: (st := sc.subtasks()) and all(
        st.get(s, {}).get("unit") == "Sync" and st[s].get("load", {}).get("phase") == "finished" for s in sc.dbs),
        180, "full load finished on every source")
    marker = {sid: ID_BASE[sid] + 900_000 for sid in sc.dbs}
    for sid, db in sc.dbs.items():
        db.execute(f"INSERT INTO orders_01 (id, v) VALUES ({marker[sid]}, 77)")      # replicated whatever its v
    sc.c.wait(lambda: len(_ids(sc.down, f"SELECT id FROM orders WHERE id IN ({marker['s1']}, {marker['s2']})")) == 2,
              120, "markers downstream")
    assert _ids(sc.down, "SELECT id FROM orders") == sorted(want + list(marker.values()))
    sc.stop()
