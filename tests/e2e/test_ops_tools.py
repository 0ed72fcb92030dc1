"""Issue 15 (operator tools) end to end on real processes: one master, worker ``w-s1`` started
for source s1 and a free worker ``w-spare`` (no ``--source``).

* The master's new gauges show a held shard DDL lock (its age, the tables it waits for) and a
  subtask in Error, scraped from its real /metrics; ``show-ddl-locks`` lists the lock's owner.
* ``transfer-source``: the bad inputs (unknown source, unknown worker, same worker, a worker that
  is not free) exit 1 and change no binding; then s1 moves to w-spare while rows are written,
  rows keep arriving downstream, and ``shardctl check`` is EQUAL.
"""
from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.support.procs import write_source_file

from .conftest import ID_BASE, Cluster, Scenario, running

TWO = {"s1": ("orders_01", "orders_02")}


class SpareWorkerCluster(Cluster):
    """The e2e cluster with s1's worker and a free one (``w-spare``), no s2 worker."""

    def __init__(self, services, prefix, work):
        super().__init__(services, prefix, work, sources={"s1": "source1"}, spare=("spare",))
        # s2's config, for the test that registers a second source on the spare worker
        self.source_files["s2"] = write_source_file(work / "s2.yaml", "s2", services.mysql["source2"])

    def bindings(self) -> dict:
        rc, doc = self.ctl("operate-source", "show")
        return {s["source"]: s["worker"] for s in doc.get("sources", [])} if isinstance(doc, dict) else {}


@pytest.fixture(scope="module")
def ops_cluster(services, etcd_client, tmp_path_factory):
    with running(lambda prefix, work: SpareWorkerCluster(services, prefix, work), etcd_client, "e2e-opstools",
                 tmp_path_factory.mktemp("e2e-opstools")) as c:
        yield c


def scrape(addr: str) -> dict[str, float]:
    """{series with labels: value} of a process's /metrics."""
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out


def series(metrics: dict[str, float], name: str, **labels: str) -> dict[str, float]:
    """The series of ``name`` whose labels include ``labels``."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return {s: v for s, v in metrics.items() if re.match(rf"{name}(\{{|$)", s) and all(w in s for w in want)}


def test_master_metrics_show_a_held_lock_and_a_subtask_in_error(ops_cluster, source1_db, downstream_db, tmp_path):
    c = ops_cluster
    sc = Scenario(c, {"s1": source1_db}, downstream_db, tmp_path, shards=TWO, rows=5)
    master = f"127.0.0.1:{c.mmetrics}"
    try:
        sc.start()
        sc.wait_equal()
        c.wait(lambda: series(scrape(master), "shardmerge_master_subtasks", task=sc.name, source="s1",
                              stage="Running") and True, 30, "subtask gauge Running")

        # a held lock: one of the two shards adds a column, the other has not yet
        c.context = "ADD COLUMN on orders_01 only"
        source1_db.execute("ALTER TABLE orders_01 ADD COLUMN c INT")
        lock_id = f"{sc.name}-`{downstream_db.name}`.`orders`"
        lk = c.wait(lambda: next((x for x in c.ctl("show-ddl-locks", sc.name)[1].get("locks", [])
                                  if x["ID"] == lock_id and x["owners"]
                                  and x["owners"][0]["state"] == "done"), None), 90, "the held lock, owner done")
        (owner,) = lk["owners"]
        assert owner["owner"] == f"s1-`{source1_db.name}`.`orders_01`" and "ADD COLUMN" in owner["DDLs"][0]
        assert lk["unsynced"] == [f"s1-`{source1_db.name}`.`orders_02`"]
        # the lock ages (the gauges are refreshed about once a second)
        c.wait(lambda: any(v >= 2.0 for v in series(scrape(master), "shardmerge_master_lock_age_seconds",
                                                    task=sc.name, lock_id=lock_id).values()), 30, "lock age >= 2 s")
        m = scrape(master)
        (age,) = series(m, "shardmerge_master_lock_age_seconds", task=sc.name, lock_id=lock_id).values()
        assert age >= 2.0 and lock_id in c.ctl("show-ddl-locks", sc.name)[1]["locks"][0]["ID"]
        assert list(series(m, "shardmerge_master_lock_unsynced_tables", lock_id=lock_id).values()) == [1.0]
        assert series(m, "shardmerge_master_oldest_lock_age_seconds")["shardmerge_master_oldest_lock_age_seconds"] >= 2.0
        assert m['shardmerge_master_locks{state="syncing"}'] >= 1.0

        # the other shard follows: the lock resolves and its series go away
        source1_db.execute("ALTER TABLE orders_02 ADD COLUMN c INT")
        c.wait(lambda: not series(scrape(master), "shardmerge_master_lock_age_seconds", lock_id=lock_id), 90,
               "lock series removed after the lock resolved")

        # a subtask in Error: a partitioning ALTER of a shard table cannot be coordinated
        c.context = "partitioning ALTER -> Error"
        source1_db.execute("ALTER TABLE orders_01 PARTITION BY HASH(id) PARTITIONS 2")
        sc.insert("s1", "orders_02", [ID_BASE["s1"] + 900_000 + i for i in range(5)], cols="id, v, c")
        c.wait(lambda: sc.subtasks().get("s1", {}).get("stage") == "Error", 90, "subtask Error")
        c.wait(lambda: series(scrape(master), "shardmerge_master_subtasks", task=sc.name, source="s1",
                              stage="Error") == {
            f'shardmerge_master_subtasks{{source="s1",stage="Error",task="{sc.name}"}}': 1.0}, 30,
               "subtask gauge Error")
        assert not series(scrape(master), "shardmerge_master_subtasks", task=sc.name, stage="Running")

        c.ctl_ok("binlog", "skip", sc.name, "-s", "s1")
        sc.wait_running()
        c.wait(lambda: series(scrape(master), "shardmerge_master_subtasks", task=sc.name, stage="Running")
               and not series(scrape(master), "shardmerge_master_subtasks", task=sc.name, stage="Error"), 30,
               "subtask gauge back to Running")
        assert sc.wait_equal()["equal"] is True
        sc.stop()
        c.wait(lambda: not series(scrape(master), "shardmerge_master_subtasks", task=sc.name), 30,
               "stopped task's series removed")
    finally:
        sc.stop_writers()
        c.ctl("stop-task", sc.name)
        c.task_name = ""


def test_transfer_source_moves_a_replicating_source_to_a_free_worker(ops_cluster, source1_db, source2_db,
                                                                      downstream_db, tmp_path):
    c = ops_cluster
    sc = Scenario(c, {"s1": source1_db}, downstream_db, tmp_path, shards=TWO, rows=20)
    try:
        sc.start()
        sc.wait_equal()
        before = c.bindings()
        assert before == {"s1": "w-s1"}

        # bad input: exit 1, a message naming the input, no binding changed
        for argv, phrase in ((("nope", "w-spare"), "source 'nope' not found"),
                             (("s1", "w-ghost"), "worker 'w-ghost' is not online"),
                             (("s1", "w-s1"), "already bound to worker 'w-s1'")):
            rc, doc = c.ctl("transfer-source", *argv)
            assert rc == 1 and phrase in doc["msg"], (argv, doc)
            assert c.bindings() == before
        rc, out = c.ctl("transfer-source", "s1")
        assert rc == 2 and "WORKER" in out
        # a worker that is not free: register s2, the master binds it to w-spare
        c.ctl_ok("operate-source", "create", c.source_files["s2"])
        c.wait(lambda: c.bindings().get("s2") == "w-spare", 30, "s2 bound to the free worker")
        rc, doc = c.ctl("transfer-source", "s1", "w-spare")
        assert rc == 1 and "worker 'w-spare' is not free" in doc["msg"] and "s2" in doc["msg"], doc
        assert c.bindings()["s1"] == "w-s1"
        c.ctl_ok("operate-source", "stop", "s2")
        c.wait(lambda: c.bindings() == before, 30, "s2 gone, w-spare free again")

        # the transfer, under writes
        sc.start_writers(tables=TWO)
        time.sleep(3)
        c.context = "transfer-source s1 w-spare under writes"
        doc = c.ctl_ok("transfer-source", "s1", "w-spare")
        assert "from w-s1 to w-spare" in doc["msg"]
        assert c.bindings() == {"s1": "w-spare"}
        c.wait(lambda: (st := sc.subtasks().get("s1", {})).get("worker") == "w-spare" and st.get("stage") == "Running",
               120, "w-spare replicating s1")
        count = downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0]
        c.wait(lambda: downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] != count, 60,
               "rows keep arriving through the new worker")
        time.sleep(2)
        written = sc.stop_writers()
        assert written > 0
        report = sc.wait_equal(timeout=180)
        assert report["equal"] is True
        st = sc.subtasks()["s1"]
        assert st["worker"] == "w-spare" and st["stage"] == "Running", st
        old_log = c.workers["s1"].log_path.read_text(errors="replace")
        assert "source bound to another worker" in old_log
        assert "KeyCollision" not in old_log
        assert scrape(f"127.0.0.1:{c.mmetrics}")["shardmerge_master_source_transfers_total"] == 1.0
        # lag is exported by the worker that runs the subtask now, no frozen series on the old one
        assert series(scrape(c.worker_metrics["spare"]), "shardmerge_worker_lag_seconds", task=sc.name, source="s1")
        assert not series(scrape(c.worker_metrics["s1"]), "shardmerge_worker_lag_seconds", task=sc.name)
        sc.stop()
    finally:
        sc.stop_writers()
        c.ctl("stop-task", sc.name)
        c.task_name = ""
