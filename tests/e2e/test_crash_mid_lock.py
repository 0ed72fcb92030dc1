"""DM's DM_RESYNC_NOT_FLUSHED shape, made deterministic: a rename is held (skip-and-wait) on three
shards; the fourth shard's Operation says "run it", and its worker is killed before it runs it
(failpoint ``ddl-before-execute``), with the other worker killed too.  The held tables must not
replay rows in the renamed shape before the rename ran downstream (they met "Unknown column" and,
on the killed table's own source, could never get past them to run it): the lock holds them until
the rename is done, and the data ends equal."""
from __future__ import annotations

import json
import signal
import uuid

from tests.e2e.conftest import ID_BASE, Cluster, Scenario

FOUR = {"s1": ("orders_01", "orders_02"), "s2": ("orders_01", "orders_02")}


def _owner_state(sc, table: str, source: str = "s2") -> str:
    rc, doc = sc.c.ctl("shard-ddl-lock", sc.name)
    for lock in doc.get("locks", []) if isinstance(doc, dict) else []:
        for o in lock.get("owners", []):
            if o["owner"].startswith(f"{source}-") and o["owner"].endswith(f".`{table}`"):
                return o["state"]
    return ""


def _locks(sc) -> list:
    rc, doc = sc.c.ctl("shard-ddl-lock", sc.name)
    return doc.get("locks", []) if isinstance(doc, dict) else [doc]


def _rename_on_three_then_the_fourth_told_to_run(c, sc) -> int:
    """Three shards rename (held); the fourth's Operation says "run it" (its worker then sleeps in
    the failpoint before running it).  Returns the last row number written."""
    n = 100
    for sid, t in (("s1", "orders_01"), ("s1", "orders_02"), ("s2", "orders_01")):
        sc.dbs[sid].execute(f"ALTER TABLE {t} CHANGE b c INT")
        for sid2, t2 in (("s1", "orders_01"), ("s1", "orders_02"), ("s2", "orders_01"), ("s2", "orders_02")):
            n += 1
            sc.dbs[sid2].execute(f"INSERT INTO {t2} VALUES ({ID_BASE[sid2] + n}, {n})")
    c.wait(lambda: "skip-and-wait" in json.dumps(c.ctl("shard-ddl-lock", sc.name)[1]), 90, "the rename held")
    sc.dbs["s2"].execute("ALTER TABLE orders_02 CHANGE b c INT")
    c.wait(lambda: _owner_state(sc, "orders_02") == "executing", 60, "s2's orders_02 told to run the rename")
    return n


def test_leader_killed_while_the_restarted_held_tables_are_held_again(services, etcd_client, source1_db,
                                                                     source2_db, downstream_db, tmp_path):
    """Issue 28 case 3 on real processes: the runner's worker dies before running the rename, the
    held tables' workers restart and re-send their DDL (held again), then the leader is killed.
    The rebuilt master keeps the same runner: the rename runs once downstream (no worker meets it
    already done), no subtask stops in Error, the lock is removed and the data end equal."""
    prefix = f"/shardmerge-test/crashlead-{uuid.uuid4().hex[:10]}/"
    c = Cluster(services, prefix, tmp_path)
    c.workers["s2"].env = {"SHARDMERGE_FAILPOINTS": "ddl-before-execute=sleep:8"}
    try:
        c.start()
        sc = Scenario(c, {"s1": source1_db, "s2": source2_db}, downstream_db, tmp_path, shards=FOUR, rows=0,
                      columns="id INT PRIMARY KEY, b INT")
        sc.start()
        n = _rename_on_three_then_the_fourth_told_to_run(c, sc)
        for sid in ("s1", "s2"):
            c.workers[sid].kill(signal.SIGKILL)
        for sid in ("s1", "s2"):
            c.restart_worker(sid)
        c.wait(lambda: _owner_state(sc, "orders_01", "s1") == "held" and _owner_state(sc, "orders_02", "s1") == "held",
               120, "s1's tables held again after the restart")
        c.master.kill(signal.SIGKILL)
        c.restart_master()
        for sid2, t2 in (("s1", "orders_01"), ("s1", "orders_02"), ("s2", "orders_01"), ("s2", "orders_02")):
            n += 1
            sc.dbs[sid2].execute(f"INSERT INTO {t2} (id, c) VALUES ({ID_BASE[sid2] + n}, {n})")
        sc.wait_running(timeout=240)
        sc.wait_equal(timeout=240, columns=["id", "c"])
        c.wait(lambda: _locks(sc) == [], 120, "the lock removed")
        for sid in ("s1", "s2"):
            out = c.workers[sid].output()
            assert "already in effect downstream" not in out, out[-4000:]   # a second run, absorbed
        sc.stop()
    finally:
        c.stop()
        etcd_client.delete_prefix(prefix)


def test_workers_killed_before_the_last_shard_runs_the_rename(services, etcd_client, source1_db, source2_db,
                                                              downstream_db, tmp_path):
    prefix = f"/shardmerge-test/crashlock-{uuid.uuid4().hex[:10]}/"
    c = Cluster(services, prefix, tmp_path)
    c.workers["s2"].env = {"SHARDMERGE_FAILPOINTS": "ddl-before-execute=sleep:8"}
    try:
        c.start()
        sc = Scenario(c, {"s1": source1_db, "s2": source2_db}, downstream_db, tmp_path, shards=FOUR, rows=0,
                      columns="id INT PRIMARY KEY, b INT")
        sc.start()
        # s2's Operation says "run it"; its worker sleeps in the failpoint before running it: kill both
        n = _rename_on_three_then_the_fourth_told_to_run(c, sc)
        for sid in ("s1", "s2"):
            c.workers[sid].kill(signal.SIGKILL)
        for sid in ("s1", "s2"):
            c.restart_worker(sid)
        for sid2, t2 in (("s1", "orders_01"), ("s1", "orders_02"), ("s2", "orders_01"), ("s2", "orders_02")):
            n += 1
            sc.dbs[sid2].execute(f"INSERT INTO {t2} (id, c) VALUES ({ID_BASE[sid2] + n}, {n})")
        sc.wait_running(timeout=240)
        sc.wait_equal(timeout=240, columns=["id", "c"])
        sc.stop()
    finally:
        c.stop()
        etcd_client.delete_prefix(prefix)
