"""Issue 28 case 5 on real processes: the table told to run an agreed change leaves before its
done mark.  The held tables must not be told "nothing to run" (their rows in the new shape would
then fail downstream): the change is handed over and runs once, and the data end equal.

* the operator's ``binlog skip`` of the runner's DDL after the downstream refused it;
* the runner's table dropped upstream while its worker was dead (killed between its "run it"
  answer and running the change): the restarted worker meets the DDL, then the DROP TABLE.
"""
from __future__ import annotations

import json
import signal
import uuid

from tests.e2e.conftest import ID_BASE, Cluster, Scenario
from tests.e2e.test_crash_mid_lock import FOUR, _locks, _owner_state

ALL = (("s1", "orders_01"), ("s1", "orders_02"), ("s2", "orders_01"), ("s2", "orders_02"))
OUT_OF_INT = 1 << 40        # a downstream-only value the rename's `INT` cannot hold


def _rename_held_on_three(c, sc, n: int) -> int:
    for sid, t in ALL[:3]:
        sc.dbs[sid].execute(f"ALTER TABLE {t} CHANGE b c INT")
        for sid2, t2 in ALL:
            n += 1
            cols = "id, c" if (sid2, t2) in ALL[:ALL.index((sid, t)) + 1] else "id, b"
            sc.dbs[sid2].execute(f"INSERT INTO {t2} ({cols}) VALUES ({ID_BASE[sid2] + n}, {n})")
    c.wait(lambda: "skip-and-wait" in json.dumps(c.ctl("shard-ddl-lock", sc.name)[1]), 90, "the rename held")
    return n


def _write_renamed(sc, n: int, tables=ALL) -> int:
    for sid, t in tables:
        n += 1
        sc.dbs[sid].execute(f"INSERT INTO {t} (id, c) VALUES ({ID_BASE[sid] + n}, {n})")
    return n


def test_runner_skipped_by_the_operator_hands_the_rename_over(services, etcd_client, source1_db, source2_db,
                                                              downstream_db, tmp_path):
    """The runner's ``CHANGE b c INT`` is refused downstream (a downstream-only row holds a value
    out of INT's range: error 1264); the operator removes the row and skips the DDL on the
    runner's source.  The rename must still run downstream (by a held table), once."""
    prefix = f"/shardmerge-test/runskip-{uuid.uuid4().hex[:10]}/"
    c = Cluster(services, prefix, tmp_path)
    try:
        c.start()
        sc = Scenario(c, {"s1": source1_db, "s2": source2_db}, downstream_db, tmp_path, shards=FOUR, rows=0,
                      columns="id INT PRIMARY KEY, b INT")
        sc.start()
        for sid, t in ALL:
            sc.dbs[sid].execute(f"INSERT INTO {t} (id, b) VALUES ({ID_BASE[sid] + 1 + ALL.index((sid, t))}, 1)")
        sc.wait_equal(timeout=120)
        sc.down.execute("ALTER TABLE orders MODIFY b BIGINT")
        sc.down.execute(f"INSERT INTO orders (id, b) VALUES (99999999, {OUT_OF_INT})")
        n = _rename_held_on_three(c, sc, 100)
        sc.dbs["s2"].execute("ALTER TABLE orders_02 CHANGE b c INT")
        st = c.wait(lambda: (s := sc.subtasks().get("s2", {})).get("stage") == "Error" and s, 120,
                    "s2 in Error at the refused rename")
        assert "1264" in st["error"], st
        assert _locks(sc), "the lock must wait for the refused change"
        sc.down.execute("DELETE FROM orders WHERE id = 99999999")
        c.ctl_ok("binlog", "skip", sc.name, "-s", "s2")
        n = _write_renamed(sc, n)
        sc.wait_running(timeout=240)
        sc.wait_equal(timeout=240, columns=["id", "c"])
        c.wait(lambda: _locks(sc) == [], 120, "the lock removed")
        assert sc.subtasks()["s1"]["stage"] == "Running"
        sc.stop()
    finally:
        c.stop()
        etcd_client.delete_prefix(prefix)


def test_runner_table_dropped_while_its_worker_was_dead(services, etcd_client, source1_db, source2_db,
                                                        downstream_db, tmp_path):
    """s2's ``orders_02`` is told to run the rename; its worker dies before running it (failpoint
    ``ddl-before-execute``); meanwhile the table's rows are deleted and the table is dropped
    upstream.  After the restart the rename has run downstream once, the lock is gone and the
    three remaining shards equal the target."""
    prefix = f"/shardmerge-test/rundrop-{uuid.uuid4().hex[:10]}/"
    c = Cluster(services, prefix, tmp_path)
    c.workers["s2"].env = {"SHARDMERGE_FAILPOINTS": "ddl-before-execute=sleep:8"}
    try:
        c.start()
        sc = Scenario(c, {"s1": source1_db, "s2": source2_db}, downstream_db, tmp_path, shards=FOUR, rows=0,
                      columns="id INT PRIMARY KEY, b INT")
        sc.start()
        n = _rename_held_on_three(c, sc, 100)
        sc.dbs["s2"].execute("ALTER TABLE orders_02 CHANGE b c INT")
        c.wait(lambda: _owner_state(sc, "orders_02") == "executing", 60, "s2's orders_02 told to run the rename")
        c.workers["s2"].kill(signal.SIGKILL)
        sc.dbs["s2"].execute("DELETE FROM orders_02")
        sc.dbs["s2"].execute("DROP TABLE orders_02")
        c.workers["s2"].env = {}
        c.restart_worker("s2")
        n = _write_renamed(sc, n, ALL[:3])
        sc.wait_running(timeout=240)
        sc.wait_equal(timeout=240, columns=["id", "c"])
        c.wait(lambda: _locks(sc) == [], 120, "the lock removed")
        out = c.workers["s1"].output()
        assert "Unknown column" not in out, out[-4000:]
        sc.stop()
    finally:
        c.stop()
        etcd_client.delete_prefix(prefix)
