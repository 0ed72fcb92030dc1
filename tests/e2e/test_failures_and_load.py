"""End to end, real processes: SIGKILL of a worker and of the master in the middle of a shard
DDL lock (both restarted), and a `task-mode: all` task loading existing rows while writes
continue.  Each ends with `shardctl check` equal and the expected downstream schema."""
from __future__ import annotations

import signal

from .conftest import ID_BASE, SHARDS


def _lock(sc) -> dict | None:
    doc = sc.c.ctl_ok("show-ddl-locks", sc.name)
    return next(iter(doc.get("locks") or []), None)


def _waiting_tables(sc) -> set[str]:
    lk = _lock(sc)
    return {w["table"] for w in lk["waiting"]} if lk else set()


def _s1_held(sc):
    """All of s1's shards wait in the lock for the others to change v's type too."""
    up1 = sc.dbs["s1"].name
    return all(f"s1-`{up1}`.`{t}`" in _waiting_tables(sc) for t in SHARDS)


def _change_type_on_s1(sc):
    sc.alter_all("MODIFY v BIGINT UNSIGNED", order=[("s1", t) for t in SHARDS],
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i]))
    sc.c.wait(lambda: _s1_held(sc), 90, "s1's four shards held in the lock (skip-and-wait)")


def _finish(sc, between=None):
    sc.alter_all("MODIFY v BIGINT UNSIGNED", order=[("s2", t) for t in SHARDS], between=between)
    sc.stop_writers()
    sc.wait_equal(columns=["id", "v"])
    sc.c.wait(lambda: sc.down_column_type("v") == "bigint(20) unsigned", 60, "v is BIGINT UNSIGNED downstream")
    sc.c.wait(lambda: _lock(sc) is None, 60, "the lock resolved and removed")
    sc.wait_running()
    sc.stop()


def test_worker_sigkill_while_its_ddl_waits_for_the_other_shards(scenario, cluster):
    sc = scenario()
    sc.start()
    sc.start_writers()
    _change_type_on_s1(sc)
    cluster.context = f"task {sc.name}: SIGKILL worker w-s1 while its 4 shards wait in the lock, restart it"
    cluster.workers["s1"].kill(signal.SIGKILL)
    sc.insert("s1", "orders_02", [ID_BASE["s1"] + 950_000])          # while no worker serves s1
    cluster.restart_worker("s1")
    cluster.wait_bound()
    _finish(sc, between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 960_000 + i]))


def test_master_sigkill_mid_lock_and_restart(scenario, cluster):
    sc = scenario()
    sc.start()
    sc.start_writers()
    _change_type_on_s1(sc)
    cluster.context = f"task {sc.name}: SIGKILL the master while the lock is pending, restart it"
    cluster.master.kill(signal.SIGKILL)
    # Infos sent while no master runs wait in etcd for the next one
    sc.alter_all("MODIFY v BIGINT UNSIGNED", order=[("s2", "orders_01"), ("s2", "orders_02")])
    cluster.restart_master()
    cluster.wait(lambda: _s1_held(sc), 90, "the restarted master rebuilt the lock")
    _finish(sc)


def test_task_mode_all_loads_existing_rows_while_writes_continue(scenario):
    sc = scenario(mode="all", rows=400)
    sc.start_writers()
    sc.start()
    sc.c.wait(lambda: (st := sc.subtasks()) and len(st) == 2 and all(
        s["stage"] == "Running" and s["unit"] == "Sync" and s["load"]["phase"] == "finished" for s in st.values()),
        120, "the full load to finish on both sources")
    sc.insert("s1", "orders_01", [ID_BASE["s1"] + 990_000])
    assert sc.stop_writers() > 0
    sc.wait_equal(columns=["id", "v"])
    sc.stop()
