"""Issue 7: a worker's replication runs on a real standalone Spark cluster (master + worker JVMs
from the pyspark distribution, on loopback), not local[*]: `shardctl worker --spark-master
spark://...`, driven through a real `shardctl master`; `shardctl check` is equal at the end and
the cluster's master lists the workers' applications and bulk chunks ran as Spark jobs.

A worker starts Spark in the background and applies in its driver until the session is up (so a
restart does not wait ~30 s for Spark), and chunks of at most 256 changes always apply in the
driver: the test waits for both applications, then writes bursts big enough for Spark jobs."""
import json
import re
import sys
import time
import urllib.request

import pytest

from tests.e2e.conftest import ID_BASE, Cluster, Scenario, running


@pytest.fixture
def cluster_on_spark(services, etcd_client, spark_cluster, tmp_path, monkeypatch):
    # Two drivers share a 2-core cluster: each may take one core and a small executor.
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--conf spark.cores.max=1 --conf spark.executor.memory=512m "
                                              "--conf spark.ui.enabled=false pyspark-shell")
    with running(lambda prefix, work: Cluster(services, prefix, work, spark_master=spark_cluster), etcd_client,
                 "sparkcluster", tmp_path) as c:
        yield c


def _apps() -> list[dict]:
    ui = sys.modules["sparkcluster"].MASTER_UI   # loaded by the spark_cluster fixture
    with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
        doc = json.loads(r.read())
    return doc.get("activeapps", []) + doc.get("completedapps", [])


def test_replication_runs_on_standalone_cluster(cluster_on_spark, spark_cluster, source1_db, source2_db,
                                                downstream_db, tmp_path):
    s = Scenario(cluster_on_spark, {"s1": source1_db, "s2": source2_db}, downstream_db, tmp_path)
    s.start()
    s.start_writers()
    s.alter_all("ADD COLUMN note VARCHAR(20) DEFAULT 'x'")
    s.stop_writers()
    s.wait_equal(timeout=180, columns=["id", "v", "note"])
    c = cluster_on_spark
    c.wait(lambda: {"shardmerge-w-s1", "shardmerge-w-s2"} <= {a.get("name") for a in _apps()},
           timeout=180, what="both workers' Spark applications registered with the cluster master")
    # bursts of 2,000 rows per shard table until each worker has applied a chunk as a Spark job
    deadline, burst = time.monotonic() + 180, 0
    while True:
        jobs = {sid: _spark_jobs(c.worker_metrics[sid]) for sid in ("s1", "s2")}
        if all(jobs.values()):
            break
        assert time.monotonic() < deadline, f"no chunk applied as a Spark job: {jobs}\n{c.diagnostics()}"
        for sid in ("s1", "s2"):
            for n, t in enumerate(s.shards):
                s.insert(sid, t, [ID_BASE[sid] + 7_000_000 + burst * 8_000 + n * 2_000 + i for i in range(2_000)])
        burst += 1
        time.sleep(3)
    s.wait_equal(timeout=180, columns=["id", "v", "note"])
    s.stop()


def _spark_jobs(addr: str) -> float:
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(m) for m in re.findall(r"^shardmerge_worker_spark_apply_jobs_total\{[^}]*\} (\S+)$", text, re.M))
