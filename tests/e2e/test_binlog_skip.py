"""End to end, real processes: a shard table's partitioning ALTER (unsupported in optimistic
mode) stops the subtask in Error; `shardctl binlog skip` arms a skip of that statement, the
worker restarts the subtask, skips it (log line + Prometheus counter), the subtask is Running
and `shardctl check` is equal.  One master + one worker, like test_pause_resume."""
from __future__ import annotations

import urllib.request
import uuid

import pytest

from .conftest import ID_BASE, Scenario
from .test_pause_resume import OneSourceCluster


@pytest.fixture(scope="module")
def cluster1(services, etcd_client, tmp_path_factory):
    prefix = f"/shardmerge-test/e2e-skip-{uuid.uuid4().hex[:10]}/"
    c = OneSourceCluster(services, prefix, tmp_path_factory.mktemp("e2e-skip"))
    try:
        c.start()
        yield c
    finally:
        c.stop()
        etcd_client.delete_prefix(prefix)


def _worker_metric(cluster, name: str) -> str:
    args = cluster.workers["s1"].args
    addr = args[args.index("--metrics-addr") + 1]
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
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
