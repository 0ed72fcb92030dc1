"""The worker process: lease registration, binding + task pickup, replication, failover."""
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from coordinator.etcdproto import SourceBinding, Stage, TaskRecord
from worker.check import check_task
from worker.process import WorkerOptions, WorkerProcess

from ..worker.conftest import db_yaml, make_task, positions  # noqa: F401 (fixture)
from .conftest import AutoMaster, wait_for
from tests.support.ports import free_port as _free_port

ROOT = Path(__file__).resolve().parents[2]


def _http(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _source_file(tmp_path, sid, db) -> str:
    p = tmp_path / f"{sid}.yaml"
    p.write_text(yaml.safe_dump({"source-id": sid, "enable-gtid": True, "flavor": "mariadb",
                                 "from": db_yaml(db.params)}))
    return str(p)


def test_registers_with_lease_and_key_vanishes_after_sigkill(services, store, etcd_prefix, source1_db, tmp_path):
    port = _free_port()
    cmd = [sys.executable, "-m", "coordinator.cli", "worker", "--etcd", services.etcd, "--prefix", etcd_prefix,
           "--name", "w-kill", "--ttl", "2", "--source", _source_file(tmp_path, "s1", source1_db),
           "--metrics-addr", f"127.0.0.1:{port}", "--log-level", "WARNING"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        reg = wait_for(lambda: next((w for w in store.list_workers().items if w.worker == "w-kill"), None),
                       what="worker registration")
        assert reg.started_at
        wait_for(lambda: _http(f"http://127.0.0.1:{port}/healthz") == 200, what="/healthz")
        assert _http(f"http://127.0.0.1:{port}/readyz") == 503          # registered but not bound
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # no goodbye: the key disappears only when the lease's TTL runs out
        wait_for(lambda: not any(w.worker == "w-kill" for w in store.list_workers().items),
                 timeout=15, what="registration to expire")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_bad_source_file_is_named(services, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("source-id: s1\nfrom: {host: h, port: notaport}\n")
    r = subprocess.run([sys.executable, "-m", "coordinator.cli", "worker", "--etcd", services.etcd, "--source", str(bad)],
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert "bad.yaml" in r.stderr and "from.port" in r.stderr


def _worker(services, etcd_prefix, name, src_file):
    return WorkerProcess(WorkerOptions(etcd=services.etcd, name=name, source_file=src_file, prefix=etcd_prefix,
                                       ttl=3, resync_interval=1.0, poll_interval=0.2)).start()


def test_binding_and_task_pickup_replication_and_failover(spark, services, store, etcd_prefix, source1_db,
                                                          downstream_db, positions, tmp_path):
    (p1,) = positions(source1_db)
    task, srcs, text = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    for t in ("orders_01", "orders_02"):
        source1_db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
    source1_db.execute("INSERT INTO orders_01 VALUES (1, 1), (2, 2)")
    source1_db.execute("INSERT INTO orders_02 VALUES (11, 1)")
    master = AutoMaster(store, lambda info: (Stage.NONE, info.ddls))
    src_file = _source_file(tmp_path, "s1", source1_db)
    a = _worker(services, etcd_prefix, "w-a", src_file)
    b = None
    try:
        assert a.ready()[0] is False
        fence = master.acting.fence
        store.put_binding(fence, SourceBinding("s1", "w-a"))
        store.put_task(fence, TaskRecord(task=task.name, yaml=text, sources=["s1"]))
        st = wait_for(lambda: store.get_source_tables(task.name, "s1"), what="SourceTables", timeout=60)
        assert st.members(downstream_db.name, "orders") == {(source1_db.name, "orders_01"),
                                                            (source1_db.name, "orders_02")}
        wait_for(lambda: downstream_db.execute(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_NAME='orders'",
            (downstream_db.name,))[0][0] == 1 and downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] == 3,
            timeout=120, what="rows replicated")
        wait_for(lambda: a.ready()[0], what="ready", timeout=30)
        # a shard DDL goes through the (acting) master
        source1_db.execute("ALTER TABLE orders_01 ADD COLUMN c INT DEFAULT 3")
        source1_db.execute("INSERT INTO orders_01 VALUES (3, 3, 4)")
        wait_for(lambda: downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] == 4, timeout=120,
                 what="row after DDL")
        status = wait_for(lambda: (s := store.list_status(task.name).items) and s[0].detail.get("checkpoint")
                          and s[0], what="status with progress")
        assert status.worker == "w-a" and status.stage == "Running"

        # worker a dies (its subtasks stop, lease gone); the binding moves to b, which resumes
        a._stop_all("simulated death")
        a.lease.revoke()
        a._stop.set()
        source1_db.execute("INSERT INTO orders_02 VALUES (12, 2), (13, 3)")
        source1_db.execute("UPDATE orders_01 SET v = v + 100")
        b = _worker(services, etcd_prefix, "w-b", src_file)
        store.put_binding(fence, SourceBinding("s1", "w-b"))
        wait_for(lambda: downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] == 6, timeout=120,
                 what="rows replicated by the new worker")
        wait_for(lambda: check_task(task, srcs).equal, timeout=60, what="check equal")
        assert store.list_status(task.name).items[0].worker == "w-b"

        # task removed: the subtask stops
        store.delete_task_config(fence, task.name)
        wait_for(lambda: not b.subtasks, what="subtask stopped")
    finally:
        master.close()
        for w in (a, b):
            if w is not None:
                w.stop()


def test_lost_lease_is_noticed_and_worker_registers_again(services, store, etcd_prefix, etcd_client,
                                                           source1_db, tmp_path):
    w = _worker(services, etcd_prefix, "w-lease", _source_file(tmp_path, "s1", source1_db))
    try:
        first = w.lease.id
        etcd_client.revoke_lease(first)       # what an etcd partition longer than the TTL does
        wait_for(lambda: w.lease.id != first and w.registered, timeout=30, what="re-registration")
        assert any(x.worker == "w-lease" for x in store.list_workers().items)
    finally:
        w.stop()
    wait_for(lambda: not any(x.worker == "w-lease" for x in store.list_workers().items), timeout=5,
             what="registration revoked on stop")
