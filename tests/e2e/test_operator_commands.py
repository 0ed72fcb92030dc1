"""End to end, real processes, the operator's commands on one master + one worker (one source is
enough here: a second Spark driver would only cost time on the 2-core CI machine; both tests
share the cluster):

* `shardctl pause-task` stops replication (query-status `Paused`, upstream writes stay
  upstream), `resume-task` continues from the checkpoints and `shardctl check` is equal;
* a shard table's partitioning ALTER (unsupported in optimistic mode) stops the subtask in
  Error; `shardctl binlog skip` arms a skip of that statement, the worker restarts the subtask,
  skips it (log line + Prometheus counter), the subtask is Running and `shardctl check` is equal;
* a rows event whose values cannot be decoded stops the subtask in Error naming the table and
  where the event ends; `binlog replace` is refused there, `binlog skip` passes over exactly that
  event (the other rows of its transaction and the later ones arrive) and `binlog list` shows it.
"""
from __future__ import annotations

import time
import urllib.request

import pytest

from .conftest import ID_BASE, Cluster, Scenario, running


def one_source_cluster(services, prefix, work) -> Cluster:
    """The e2e cluster with only source s1's worker."""
    return Cluster(services, prefix, work, sources={"s1": "source1"})


@pytest.fixture(scope="module")
def cluster1(services, etcd_client, tmp_path_factory):
    with running(lambda prefix, work: one_source_cluster(services, prefix, work), etcd_client, "e2e-ops",
                 tmp_path_factory.mktemp("e2e-ops")) as c:
        yield c


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


def _worker_metric(cluster, name: str) -> str:
    with urllib.request.urlopen(f"http://{cluster.worker_metrics['s1']}/metrics", timeout=5) as r:
        return "\n".join(line for line in r.read().decode().splitlines() if line.startswith(name))


def test_binlog_skip_gets_a_subtask_out_of_error(cluster1, source1_db, downstream_db, tmp_path):
    sc = Scenario(cluster1, {"s1": source1_db}, downstream_db, tmp_path, rows=5)
    try:
        sc.start()
        sc.wait_equal()
        rc, doc = cluster1.ctl("binlog", "skip", sc.name, "-s", "s1")
        assert rc == 1 and "not stopped in Error" in doc["msg"]

        source1_db.execute("ALTER TABLE orders_01 PARTITION BY HASH(id) PARTITIONS 2")
        sc.insert("s1", "orders_02", [ID_BASE["s1"] + 800_000 + i for i in range(10)])
        st = cluster1.wait(lambda: (s := sc.subtasks().get("s1", {})).get("stage") == "Error" and s, 90,
                           "subtask Error at the partitioning ALTER")
        assert "binlog skip" in st["error"] and st["sync"]["errorBinlog"]
        # stopped in Error with rows waiting: not synced, and the lag grows (status and gauge)
        import time
        first = cluster1.wait(lambda: (s := sc.subtasks()["s1"]) and s["sync"].get("secondsBehindMaster", 0) > 0
                              and s, 30, "s1's lag reported while in Error")
        assert first["stage"] == "Error" and first["sync"]["synced"] is False, first["sync"]
        gauge1 = float(_worker_metric(cluster1, "shardmerge_worker_lag_seconds").split()[-1])
        time.sleep(4)
        later = cluster1.wait(lambda: (s := sc.subtasks()["s1"]) and s["sync"]["secondsBehindMaster"]
                              > first["sync"]["secondsBehindMaster"] and s, 30, "s1's lag growing in Error")
        gauge2 = float(_worker_metric(cluster1, "shardmerge_worker_lag_seconds").split()[-1])
        assert later["stage"] == "Error" and gauge2 > gauge1 > 0, (first["sync"], later["sync"], gauge1, gauge2)

        doc = cluster1.ctl_ok("binlog", "skip", sc.name, "-s", "s1")
        assert "PARTITION BY HASH" in doc["msg"]
        sc.wait_running()
        report = sc.wait_equal()
        assert report["equal"] is True
        st = sc.subtasks()["s1"]
        assert st["stage"] == "Running" and not st["error"]
        cluster1.wait(lambda: "statement skipped on the operator's binlog skip" in
                      cluster1.workers["s1"].log_path.read_text(errors="replace"), 30, "the skip's log line")
        assert _worker_metric(cluster1, "shardmerge_worker_binlog_skips_total").endswith(" 1.0")
        sc.stop()
    finally:
        sc.stop_writers()
        cluster1.ctl("stop-task", sc.name)
        cluster1.task_name = ""


def test_binlog_skip_passes_over_a_rows_event_that_cannot_be_decoded(cluster1, source1_db, downstream_db, tmp_path):
    sc = Scenario(cluster1, {"s1": source1_db}, downstream_db, tmp_path, rows=3,
                  columns="id INT PRIMARY KEY, v INT, note VARCHAR(5) CHARACTER SET tis620")
    base = ID_BASE["s1"] + 900_000
    try:
        sc.start()
        sc.wait_equal()
        # tis620 leaves 0xDB undefined, yet MariaDB stores it from a hex literal
        with source1_db.connect() as c, c.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO orders_01 (id, v, note) VALUES ({base}, 1, X'41DB')")
            cur.execute(f"INSERT INTO orders_02 (id, v, note) VALUES ({base + 1}, 2, 'ok')")
            cur.execute("COMMIT")
        sc.insert("s1", "orders_03", [base + 2, base + 3])
        st = cluster1.wait(lambda: (s := sc.subtasks().get("s1", {})).get("stage") == "Error" and s, 90,
                           "subtask Error at the undecodable rows event")
        assert "orders_01" in st["error"] and "binlog skip" in st["error"], st["error"]
        rc, doc = cluster1.ctl("binlog", "replace", sc.name, "-s", "s1", "ALTER TABLE orders_01 ADD x INT")
        assert rc == 1 and "only `binlog skip` applies" in doc["msg"], doc

        doc = cluster1.ctl_ok("binlog", "skip", sc.name, "-s", "s1")
        assert "rows event ending at" in doc["msg"] and "orders_01" in doc["msg"], doc
        sc.wait_running()
        want = {base + 1, base + 2, base + 3}
        cluster1.wait(lambda: want <= {r[0] for r in downstream_db.execute(f"SELECT id FROM orders WHERE id >= {base}")},
                      60, "the rows around the skipped event downstream")
        assert not downstream_db.execute(f"SELECT id FROM orders WHERE id = {base}")
        listed = cluster1.ctl_ok("binlog", "list", sc.name, "-s", "s1")["msg"]
        assert "skip rows event done" in listed, listed
        cluster1.wait(lambda: "rows event skipped on the operator's binlog skip" in
                      cluster1.workers["s1"].log_path.read_text(errors="replace"), 30, "the skip's log line")
        assert sc.subtasks()["s1"]["stage"] == "Running"
        sc.stop()
    finally:
        cluster1.ctl("stop-task", sc.name)
        cluster1.task_name = ""
