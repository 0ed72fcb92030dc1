"""Issue 16 part 1: a stale worker can never write.  A real worker is SIGSTOPped past its lease
in the middle of an apply transaction (a failpoint holds each of its applies open for 5 s before
the commit) while rows are written to its source; the master binds the source to the other
worker, which claims it and writes on; then the first worker is SIGCONTed and finishes its
transaction.  Nothing of it lands (it meets the newer writer epoch and rolls back), there is no
key-collision stop, and `shardctl check` is EQUAL."""
from __future__ import annotations

import signal
import time
import uuid

from tests.e2e.conftest import Cluster, Scenario

ONE = {"s1": ("orders_01", "orders_02"), "s2": ("orders_01",)}


def _bound(c: Cluster) -> dict:
    rc, doc = c.ctl("operate-source", "show")
    return {s["source"]: s["worker"] for s in doc.get("sources", [])} if isinstance(doc, dict) else {}


def test_a_stopped_worker_resumed_after_its_source_moved_writes_nothing(services, etcd_client, source1_db,
                                                                        source2_db, downstream_db, tmp_path):
    prefix = f"/shardmerge-test/fence-{uuid.uuid4().hex[:10]}/"
    c = Cluster(services, prefix, tmp_path)
    stopped = None
    try:
        c.workers["s1"].env = {"SHARDMERGE_FAILPOINTS": "apply-before-commit=sleep:5"}
        c.start()
        sc = Scenario(c, {"s1": source1_db, "s2": source2_db}, downstream_db, tmp_path, shards=ONE, rows=100)
        sc.start()
        sc.start_writers(tables=ONE)
        time.sleep(3)                     # writers running; w-s1 inside an apply (5 s before each commit)
        w1 = c.workers["s1"]
        stopped = w1.proc
        stopped.send_signal(signal.SIGSTOP)
        c.wait(lambda: _bound(c).get("s1") == "w-s2", 60, "s1 bound to w-s2 after w-s1's lease expired")
        c.wait(lambda: (st := sc.subtasks().get("s1", {})).get("worker") == "w-s2" and st.get("stage") == "Running",
               90, "w-s2 replicating s1")
        time.sleep(4)                     # the new writer writes on
        stopped.send_signal(signal.SIGCONT)
        stopped = None
        c.wait(lambda: "FencedOut" in w1.log_path.read_text(errors="replace"), 60,
               "the old writer's transaction refused by the fence")
        sc.stop_writers()
        sc.wait_equal(timeout=180)
        st = sc.subtasks()
        assert st["s1"]["worker"] == "w-s2" and st["s1"]["stage"] == "Running", st
        log = w1.log_path.read_text(errors="replace")
        assert "KeyCollision" not in log, log[-3000:]
        sc.stop()
    finally:
        if stopped is not None:
            stopped.send_signal(signal.SIGCONT)
        c.stop()
        etcd_client.delete_prefix(prefix)
