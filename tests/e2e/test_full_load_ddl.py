"""A shard DDL while the full load runs (issue #12 §2.10), with real master and workers: like DM
the task does not stop; the load is from a snapshot with its binlog position and the syncer
replays the ALTER through the optimistic shard-DDL path.  The load is held by a lock, not a
sleep: the test pre-creates the (empty) downstream target and keeps a ``SELECT ... FOR UPDATE``
transaction open on it (the next-key lock on the supremum blocks every INSERT), so every chunk
waits on its first write until the ALTER has run.  (``LOCK TABLES`` would not do: it also blocks
the load's ``CREATE DATABASE IF NOT EXISTS`` of the target/meta schema, i.e. the plan.)"""
from __future__ import annotations

import contextlib

import yaml

from .conftest import ID_BASE, SHARDS


def _units(sc) -> dict:
    return {sid: (s.get("stage"), s.get("unit")) for sid, s in sc.subtasks().items()}


def test_shard_alter_during_the_full_load_is_replayed_and_the_task_reaches_sync(scenario, downstream_db):
    sc = scenario(mode="all", rows=120)
    task = yaml.safe_load(open(sc.task_file).read())
    # small chunks loaded one after the other: chunk 0 of orders_01 is the first in flight
    task["mydumpers"] = {"global": {"rows": 30}}
    task["loaders"] = {"global": {"pool-size": 1}}
    for inst in task["mysql-instances"]:
        inst["mydumper-config-name"] = inst["loader-config-name"] = "global"
    open(sc.task_file, "w").write(yaml.safe_dump(task))

    downstream_db.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")   # the plan's target, as-is
    hold = downstream_db.connect()
    try:
        with hold.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("SELECT * FROM orders FOR UPDATE")           # chunks cannot write until released
        sc.start()
        sc.c.context = f"task {sc.name}: full load held on the downstream target lock"
        sc.c.wait(lambda: (u := _units(sc)) and len(u) == 2 and all(x == ("Running", "Load") for x in u.values()),
                  180, "both sources planned and loading (unit Load, not Sync)")
        # after the plan position, before any chunk of orders_02 (chunk 0 of orders_01 holds only
        # orders_01's metadata lock); a short lock wait turns a mistake into an error, not a hang
        with sc.dbs["s1"].connect() as c, c.cursor() as cur:
            cur.execute("SET SESSION lock_wait_timeout = 60")
            cur.execute("ALTER TABLE orders_02 ADD COLUMN w INT NOT NULL DEFAULT 7")
            cur.execute("UPDATE orders_02 SET w = 5, v = v + 1000 WHERE id < %s", (ID_BASE["s1"] + 100_005,))
            cur.execute("INSERT INTO orders_02 (id, v, w) VALUES (%s, 1, 3)", (ID_BASE["s1"] + 190_000,))
        assert all(u == ("Running", "Load") for u in _units(sc).values())   # still loading: nothing written
    finally:
        with contextlib.suppress(Exception):
            hold.commit()
        hold.close()

    sc.c.context = f"task {sc.name}: load released after the ALTER on s1.orders_02"
    sc.c.wait(lambda: (st := sc.subtasks()) and len(st) == 2 and all(
        s["stage"] == "Running" and s["unit"] == "Sync" and s.get("load", {}).get("phase") == "finished"
        for s in st.values()), 180, "both sources through the load and in Sync")
    # the load saw the altered shard (its chunks all ran after the ALTER) and handed it to the
    # syncer from the plan position, instead of stopping with SchemaChangedDuringLoad
    log = sc.c.workers["s1"].log_path.read_text(errors="replace")
    assert f"{sc.dbs['s1'].name}.orders_02 was altered during the full load" in log
    assert "SchemaChangedDuringLoad" not in log
    # the ALTER reached the downstream through the shard-DDL path (optimistic: one shard's ADD COLUMN)
    sc.c.wait(lambda: "w" in sc.down_columns(), 120, "the replayed ALTER added w downstream")
    assert not any(s.get("error") for s in sc.subtasks().values())
    for sid in sc.dbs:                                   # the other shards follow, as after any load
        for t in SHARDS:
            if (sid, t) != ("s1", "orders_02"):
                sc.dbs[sid].execute(f"ALTER TABLE {t} ADD COLUMN w INT NOT NULL DEFAULT 7")
    sc.wait_equal(columns=["id", "v", "w"])
    got = downstream_db.execute(f"SELECT id, v, w FROM orders WHERE id IN ({ID_BASE['s1'] + 100_000}, "
                                f"{ID_BASE['s1'] + 100_010}, {ID_BASE['s1'] + 190_000}) ORDER BY id")
    first = ID_BASE["s1"] + 100_000
    assert got == [(first, first % 89 + 1000, 5), (first + 10, (first + 10) % 89, 7), (first + 90_000, 1, 3)]
