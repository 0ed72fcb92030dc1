"""The ``shardctl`` processes of the process-level benchmarks (ddl_latency, worker_restart,
master_failover), one copy: the local services, a work dir with the configs and one log a process,
masters and workers each in its own process group (a SIGKILL takes the worker's Spark JVM with it,
like a killed pod), and a teardown that leaves none of them running."""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pymysql

ROOT = Path(__file__).resolve().parent.parent
SHARDCTL = str(ROOT / ".venv" / "bin" / "shardctl")
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))   # tests.support (the shared test helpers)
import devservices  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

__all__ = ["BenchCluster", "ctl", "free_port", "round_args"]


def round_args(doc: str, ttl_flag: str) -> tuple[argparse.Namespace, int]:
    """The command line of a bench that kills a process once a round: ``--rounds N`` (3),
    ``--short`` (the CI form: 1 round) and the lease TTL in seconds whose expiry bounds the
    recovery, ``ttl_flag`` (3).  (the arguments, the number of rounds)"""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--short", action="store_true", help="CI form: 1 round")
    ap.add_argument(ttl_flag, type=int, default=3)
    a = ap.parse_args()
    return a, 1 if a.short else a.rounds


def ctl(addr: str, *args: str) -> subprocess.CompletedProcess:
    """``shardctl --master-addr ADDR args...`` as an operator runs it (a process of its own)."""
    return subprocess.run([SHARDCTL, "--master-addr", addr, *args], capture_output=True, text=True)


class BenchCluster:
    """One bench run: the local services (started if down), a fresh etcd prefix and name tag (runs
    never see each other's keys or databases), the work dir (kept afterwards: the logs say where
    the time went) and the shardctl processes started in it, by name."""

    def __init__(self, kind: str):
        info = devservices.start()
        self.etcd: str = info["etcd"]
        self.mysql: dict = info["mysql"]
        self.tag = uuid.uuid4().hex[:6]
        self.work = Path(tempfile.mkdtemp(prefix=f"sm-{kind}-bench-"))
        self.prefix = f"/shardmerge-bench-{self.tag}/"
        self.procs: dict[str, subprocess.Popen] = {}

    # ------------------------------------------------------------------ configs
    def source_file(self, sid: str, params: dict) -> str:
        """``<work>/<sid>.yaml``: the source config a worker serves (JSON is YAML)."""
        path = self.work / f"{sid}.yaml"
        path.write_text(json.dumps({"source-id": sid, "flavor": "", "from": params}))
        return str(path)

    def task_file(self, name: str, *, task_mode: str, meta_schema: str, schema_pattern: str, target: str,
                  starts: dict[str, tuple[str, int] | None]) -> str:
        """``<work>/task.yaml``: optimistic shard mode, the tables ``t_*`` of the schemas
        ``schema_pattern`` of every source in ``starts`` merged into ``<target>.t`` downstream;
        a source's (binlog file, position) is where its incremental replication starts."""
        instances = []
        for sid, start in starts.items():
            inst: dict = {"source-id": sid, "route-rules": ["r"], "block-allow-list": "only"}
            if start is not None:
                inst["meta"] = {"binlog-name": start[0], "binlog-pos": start[1]}
            instances.append(inst)
        task = {"name": name, "task-mode": task_mode, "shard-mode": "optimistic", "meta-schema": meta_schema,
                "target-database": self.mysql["downstream"], "mysql-instances": instances,
                "block-allow-list": {"only": {"do-dbs": [schema_pattern]}},
                "routes": {"r": {"schema-pattern": schema_pattern, "table-pattern": "t_*",
                                 "target-schema": target, "target-table": "t"}}}
        path = self.work / "task.yaml"
        path.write_text(json.dumps(task))
        return str(path)

    def upstream_schema(self, schema: str, tables: tuple[str, ...], columns: str) -> tuple:
        """Create ``schema`` with ``tables`` (all ``(columns)``) on source1, after noting its binlog
        position: a task that starts there replicates the CREATEs too, so its target exists.
        (an autocommit connection to source1, (binlog file, position))"""
        up = pymysql.connect(**self.mysql["source1"], autocommit=True)
        with up.cursor() as cur:
            from worker.upstream import master_status
            at = master_status(self.mysql["source1"])
            f, p = at.file, at.pos
            cur.execute(f"CREATE DATABASE {schema}")
            for t in tables:
                cur.execute(f"CREATE TABLE {schema}.{t} ({columns})")
        return up, (f, p)

    # ------------------------------------------------------------------ processes
    def spawn(self, name: str, *args: str) -> subprocess.Popen:
        """``shardctl args...`` in a new process group, output appended to ``<work>/<name>.log``.
        Starting a name again replaces the process the caller killed under it."""
        log = open(self.work / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen([SHARDCTL, *args], stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        return self.procs[name]

    def master(self, name: str, addr: str, *extra: str) -> subprocess.Popen:
        return self.spawn(name, "master", "--etcd", self.etcd, "--listen", addr, "--prefix", self.prefix, *extra)

    def worker(self, sid: str, *extra: str) -> subprocess.Popen:
        """The worker of source ``sid`` (config from ``source_file``), always the same name: a
        restarted worker comes back as itself.  One Spark core: the benches share the machine."""
        return self.spawn(f"worker-{sid}", "worker", "--etcd", self.etcd, "--source", str(self.work / f"{sid}.yaml"),
                          "--prefix", self.prefix, "--name", f"bench-{sid}-{self.tag}", "--spark-master", "local[1]",
                          *extra)

    def kill(self, name: str) -> None:
        """SIGKILL the process group of ``name`` (no clean shutdown) and reap it."""
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait()

    def wait_master(self, addr: str, timeout: float = 60, interval: float = 0.3) -> None:
        """Until the master at ``addr`` answers ``list-member``."""
        deadline = time.monotonic() + timeout
        while ctl(addr, "list-member").returncode != 0:
            assert time.monotonic() < deadline, "master did not come up"
            time.sleep(interval)

    def start_task(self, addr: str, task_file: str, wait_registered: float = 0) -> None:
        """``start-task``; retried for up to ``wait_registered`` s while the master says a source
        is "not registered" (a worker registers its source when it starts)."""
        deadline = time.monotonic() + wait_registered
        while (r := ctl(addr, "start-task", task_file)).returncode != 0 \
                and "not registered" in r.stdout and time.monotonic() < deadline:
            time.sleep(0.5)
        assert r.returncode == 0, r.stdout + r.stderr

    def stop(self) -> None:
        """SIGTERM every process group, give each 30 s to shut down cleanly, then SIGKILL; say
        where the logs are."""
        for p in self.procs.values():
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        print(f"[bench] logs in {self.work}", flush=True)
