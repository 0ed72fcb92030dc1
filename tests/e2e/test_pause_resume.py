"""End to end, real processes: `shardctl pause-task` stops replication (query-status `Paused`,
upstream writes stay upstream), `resume-task` continues from the checkpoints and `shardctl check`
is equal.  One master + one worker (one source is enough here: a second Spark driver would only
cost time on the 2-core CI machine)."""
from __future__ import annotations

import time
import uuid

import pytest

from .conftest import ID_BASE, Cluster, Scenario


class OneSourceCluster(Cluster):
    """The e2e cluster with only source s1's worker."""

    def __init__(self, services, prefix, work):
        super().__init__(services, prefix, work)
        del self.workers["s2"]

    def wait_bound(self, timeout: float = 90) -> None:
        def bound():
            rc, doc = self.ctl("operate-source", "show")
            return isinstance(doc, dict) and any(s["source"] == "s1" and s["worker"] == "w-s1"
                                                 for s in doc.get("sources", []))
        self.wait(bound, timeout, "source s1 bound to its worker")


@pytest.fixture(scope="module")
def cluster1(services, etcd_client, tmp_path_factory):
    prefix = f"/shardmerge-test/e2e-pause-{uuid.uuid4().hex[:10]}/"
    c = OneSourceCluster(services, prefix, tmp_path_factory.mktemp("e2e-pause"))
    try:
        c.start()
        yield c
    finally:
        c.stop()
        etcd_client.delete_prefix(prefix)


def test_pause_task_holds_rows_and_resume_task_delivers_them(cluster1, source1_db, downstream_db, tmp_path):
    sc = Scenario(cluster1, {"s1": source1_db}, downstream_db, tmp_path, rows=5)
    try:
        sc.start()
        sc.wait_equal()
        doc = cluster1.ctl_ok("pause-task", sc.name)
        assert doc["sources"] == [{"result": True, "msg": "", "source": "s1"}]
        cluster1.wait(lambda: sc.subtasks().get("s1", {}).get("stage") == "Paused", 60, "query-status Paused")
        assert "resume-task" in sc.subtasks()["s1"]["waitingFor"]
        before = downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0]

        sc.insert("s1", "orders_02", [ID_BASE["s1"] + 700_000 + i for i in range(20)])
        time.sleep(3)   # a negative check: give a subtask that did not really stop time to apply
        assert downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] == before
        assert sc.subtasks()["s1"]["stage"] == "Paused"
        rc, doc = cluster1.ctl("pause-task", sc.name)
        assert rc == 0 and "already paused" in doc["msg"]

        cluster1.ctl_ok("resume-task", sc.name)
        sc.wait_running()
        report = sc.wait_equal()
        assert report["equal"] is True
        assert downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] == before + 20
        sc.stop()
    finally:
        sc.stop_writers()
        cluster1.ctl("stop-task", sc.name)
        cluster1.task_name = ""
