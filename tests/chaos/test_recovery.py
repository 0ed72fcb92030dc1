"""Targeted recovery tests for faults the chaos run injects (on a private etcd + MariaDB set,
offset 2100, so killing servers disturbs no other suite):

* a master keeps serving and is leader again after etcd is SIGKILLed and restarted (python3-etcd3
  used to quarantine the endpoint for 300 s: every call failed with "Trying to use a failed node");
* a worker whose downstream is down stays up, says ``downstream HOST:PORT unreachable`` in
  ``query-status`` and catches up once the downstream is back;
* a worker started while etcd is down waits for it (``/readyz`` says so) instead of exiting.
"""
from __future__ import annotations

import json
import signal
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pytest
import yaml

from tests.support.probes import http_get, shardctl_doc, wait_for

from tests.support.ports import free_port
from tests.support.procs import SHARDCTL, Proc
from .services import RECOVERY


@pytest.fixture(scope="module")
def svc():
    yield RECOVERY.start()
    RECOVERY.stop()          # private servers: do not leave them running after the suite


@pytest.fixture
def prefix(svc):
    p = f"/shardmerge-recovery/{uuid.uuid4().hex[:10]}/"
    yield p
    from coordinator.etcd_client import connect
    RECOVERY.start_etcd()
    c = connect(svc["etcd"])
    c.delete_prefix(p)
    c.close()


def _wait(cond, timeout: float, what: str, procs=()):
    """``wait_for`` every 0.5 s; on timeout the log tails of ``procs``."""
    return wait_for(cond, timeout, what, lambda: "\n".join(
        f"--- {p.name} (alive={p.alive()}):\n{p.tail(25)}" for p in procs), interval=0.5)


def _master(svc, prefix, work: Path, name="m1") -> tuple[Proc, str, str]:
    addr, metrics = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    p = Proc(name, [SHARDCTL, "master", "--etcd", svc["etcd"], "--listen", addr, "--name", name, "--prefix",
                    prefix, "--election-ttl", "3", "--metrics-addr", metrics], work).start()
    return p, addr, metrics


def _is_leader(metrics: str) -> bool:
    code, text = http_get(metrics, "/metrics")
    return code == 200 and "shardmerge_master_is_leader 1.0" in text and http_get(metrics, "/readyz")[0] == 200


def test_master_serves_and_is_leader_again_after_etcd_restart(svc, prefix, tmp_path):
    m, addr, metrics = _master(svc, prefix, tmp_path)
    try:
        _wait(lambda: _is_leader(metrics), 60, "master leader", [m])
        RECOVERY.kill_etcd()
        # etcd down: the master stays up, answers its API with the reason, /readyz says why
        _wait(lambda: http_get(metrics, "/readyz")[0] == 503, 30, "readyz 503 while etcd is down", [m])
        assert "etcd" in http_get(metrics, "/readyz")[1]
        rc, out = shardctl_doc(addr, "query-status")
        assert rc != 0 and "etcd" in str(out), out
        time.sleep(2)
        RECOVERY.start_etcd()
        _wait(lambda: _is_leader(metrics), 30, "master leader again after the etcd restart", [m])
        rc, doc = shardctl_doc(addr, "list-member")
        assert rc == 0 and doc["leader"] == addr and doc["members"][0]["leader"]["addr"] == addr, doc
        assert m.alive(), m.tail()
    finally:
        m.kill(signal.SIGTERM)
        RECOVERY.start_etcd()


def _one_source_task(svc, tmp_path: Path) -> tuple[str, Path, Path]:
    """A database with table ``t`` on source1 and the downstream, a source file and an
    incremental task from the current binlog position: (database, source file, task file)."""
    up, down = svc["mysql"]["source1"], svc["mysql"]["downstream"]
    db = f"rec_{uuid.uuid4().hex[:8]}"
    with pymysql.connect(**up, autocommit=True) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute("SHOW MASTER STATUS")
        f, pos = cur.fetchone()[:2]
        cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    with pymysql.connect(**down, autocommit=True) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
    src = tmp_path / "s1.yaml"
    src.write_text(yaml.safe_dump({"source-id": "s1", "enable-gtid": True, "flavor": "mariadb", "from": up}))
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump({
        "name": db, "task-mode": "incremental", "shard-mode": "optimistic", "meta-schema": f"{db}_meta",
        "target-database": down,
        "block-allow-list": {"b": {"do-dbs": [db]}},
        "mysql-instances": [{"source-id": "s1", "block-allow-list": "b",
                             "meta": {"binlog-name": f, "binlog-pos": int(pos)}}]}))
    return db, src, task


@dataclass
class _Run:
    """One incremental task on source1 replicating table ``t`` through a real master and worker."""
    db: str
    addr: str
    master: Proc
    worker: Proc
    up: dict
    down: dict

    @property
    def procs(self) -> list[Proc]:
        return [self.master, self.worker]

    def rows(self) -> int:
        with pymysql.connect(**self.down, database=self.db, connect_timeout=2) as c, c.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM t")
            return cur.fetchone()[0]

    def insert(self, lo: int, hi: int) -> None:
        with pymysql.connect(**self.up, database=self.db, autocommit=True) as c, c.cursor() as cur:
            cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i) for i in range(lo, hi)])

    def sub(self) -> dict:
        rc, doc = shardctl_doc(self.addr, "query-status", self.db)
        return next((st for s in doc.get("sources", []) for st in s.get("subTaskStatus") or []), {}) \
            if isinstance(doc, dict) else {}


@contextmanager
def _running_task(svc, prefix: str, tmp_path: Path):
    """Master + worker (lease TTL 3 s) running the task, its first 10 rows downstream; stopped and
    dropped afterwards, with every private server started again."""
    up, down = svc["mysql"]["source1"], svc["mysql"]["downstream"]
    db, src, task = _one_source_task(svc, tmp_path)
    m, addr, metrics = _master(svc, prefix, tmp_path)
    w = Proc("worker", [SHARDCTL, "worker", "--etcd", svc["etcd"], "--source", str(src), "--name", "w1",
                        "--prefix", prefix, "--ttl", "3", "--spark-master", "local[1]"], tmp_path)
    run = _Run(db, addr, m, w, up, down)
    try:
        _wait(lambda: _is_leader(metrics), 60, "master leader", run.procs)
        w.start()
        _wait(lambda: shardctl_doc(addr, "operate-source", "show")[0] == 0 and "w1" in json.dumps(
            shardctl_doc(addr, "operate-source", "show")[1]), 90, "s1 bound to w1", run.procs)
        rc, out = shardctl_doc(addr, "start-task", str(task))
        assert rc == 0, out
        run.insert(0, 10)
        _wait(lambda: run.rows() == 10, 180, "first rows downstream", run.procs)
        yield run
    finally:
        RECOVERY.start_downstream()
        RECOVERY.start_etcd()
        shardctl_doc(addr, "stop-task", db)
        for p in run.procs:
            p.kill(signal.SIGTERM)
        for params in (up, down):
            with pymysql.connect(**params, autocommit=True) as c, c.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {db}")
                cur.execute(f"DROP DATABASE IF EXISTS {db}_meta")


def test_worker_reports_waiting_for_downstream_and_catches_up(svc, prefix, tmp_path):
    with _running_task(svc, prefix, tmp_path) as r:
        RECOVERY.kill_downstream()
        r.insert(10, 20)
        want = f"downstream {r.down['host']}:{r.down['port']} unreachable"
        st = _wait(lambda: (s := r.sub()) and want in s.get("waitingFor", "") and s, 120,
                   f"query-status waitingFor '{want}'", r.procs)
        assert st["stage"] == "Running", st          # not an error an operator must fix
        assert r.worker.alive() and r.master.alive()
        RECOVERY.start_downstream()
        _wait(lambda: r.rows() == 20, 120, "rows written while the downstream was down", r.procs)
        _wait(lambda: (s := r.sub()) and s.get("stage") == "Running" and not s.get("waitingFor")
              and not s.get("error"), 60, "status clean again", r.procs)
        assert r.worker.alive() and r.master.alive()


def test_worker_started_while_etcd_is_down_waits_for_it(svc, prefix, tmp_path):
    metrics = f"127.0.0.1:{free_port()}"
    w = Proc("worker", [SHARDCTL, "worker", "--etcd", svc["etcd"], "--name", "w-early", "--prefix", prefix,
                        "--ttl", "3", "--metrics-addr", metrics], tmp_path)
    RECOVERY.kill_etcd()
    try:
        w.start()
        code, text = _wait(lambda: (r := http_get(metrics, "/readyz"))[0] == 503 and svc["etcd"] in r[1] and r, 60,
                           "readyz 503 naming the etcd endpoint it waits for", [w])
        assert "attempt" in text, text
        time.sleep(3)
        assert w.alive(), f"worker exited while etcd was down:\n{w.tail()}"
        RECOVERY.start_etcd()

        def registered():
            from coordinator.etcd_client import connect
            from coordinator.etcdproto import Store
            c = connect(svc["etcd"])
            try:
                return "w-early" in {r.worker for r in Store(c, prefix).list_workers().items}
            finally:
                c.close()
        _wait(registered, 60, "the worker registered once etcd is back", [w])
        assert w.alive()
    finally:
        RECOVERY.start_etcd()
        w.kill(signal.SIGTERM)


def test_an_etcd_restart_longer_than_the_lease_ttl_does_not_restart_subtasks(svc, prefix, tmp_path):
    """Issue 28 case 8: etcd keeps leases across its restart, so a worker must not judge its lease
    lost by its own clock and restart every subtask; rows keep flowing once etcd is back."""
    with _running_task(svc, prefix, tmp_path) as r:
        RECOVERY.kill_etcd()
        r.insert(10, 20)
        time.sleep(8)                       # more than twice the worker's lease TTL (3 s)
        RECOVERY.start_etcd()
        r.insert(20, 30)
        _wait(lambda: r.rows() == 30, 120, "rows written around the etcd restart", r.procs)
        log = r.worker.output()
        assert "registration lost" not in log, log[-3000:]
        assert log.count("starting subtask") == 1, log[-3000:]
        assert r.worker.alive() and r.master.alive()
