"""Master test helpers: real `shardctl master` subprocesses on free loopback ports, the CLI run
in-process (its output parsed), and an etcdproto Store acting as the workers."""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import grpc
import pytest

from coordinator.etcdproto import Store
from tests.conftest import devservices
from tests.support.ports import free_port
from tests.support import probes
from tests.support.probes import http_get
from tests.support.procs import SHARDCTL, Proc, master_args


def wait_for(cond, timeout: float = 15.0, interval: float = 0.05, what: str = "condition"):
    """The suite's poll-wait, polling fast: these tests wait on elections of 2-second leases."""
    return probes.wait_for(cond, timeout, what, interval=interval)


class MasterProc(Proc):
    """One `shardctl master` subprocess on free loopback ports, with its gRPC stub and HTTP probes."""

    def __init__(self, etcd: str, prefix: str, ttl: int = 2, name: str = "", log_dir: Path | None = None):
        self.port, self.mport = free_port(), free_port()
        self.addr = f"127.0.0.1:{self.port}"
        name = name or f"m{self.port}"
        super().__init__(f"master-{name}", master_args(etcd, self.addr, prefix, name, ttl, f"127.0.0.1:{self.mport}"),
                         log_dir or Path("/tmp"))
        self.name = name

    def stub(self):
        from protos import master_pb2_grpc as pbg
        return pbg.MasterStub(grpc.insecure_channel(self.addr))

    def leader_info(self):
        from protos import master_pb2 as pb
        return self.stub().GetLeader(pb.GetLeaderRequest(), timeout=2)

    def wait_leader_known(self, timeout=15.0):
        return wait_for(lambda: self.leader_info().leader, timeout, what=f"{self.name} to know a leader")

    def readyz(self) -> tuple[int, str]:
        return http_get(f"127.0.0.1:{self.mport}", "/readyz")

    def wait_ready(self, timeout=15.0):
        wait_for(lambda: self.readyz()[0] == 200, timeout, what=f"{self.name} /readyz")
        return self

    def metrics(self) -> str:
        code, text = http_get(f"127.0.0.1:{self.mport}", "/metrics")
        assert code == 200, f"{self.name} /metrics: {code} {text[:200]}"
        return text


@pytest.fixture
def masters(services, etcd_prefix, tmp_path):
    """Factory: ``masters(ttl=2)`` starts one more master on this test's prefix."""
    started: list[MasterProc] = []

    def start(ttl: int = 2, name: str = "") -> MasterProc:
        m = MasterProc(services.etcd, etcd_prefix, ttl, name or f"m{len(started) + 1}", tmp_path).start()
        started.append(m)
        return m
    yield start
    for m in started:
        m.kill(signal.SIGTERM if m.alive() else signal.SIGKILL)


@pytest.fixture
def leader(masters):
    """One master, elected and ready."""
    m = masters()
    m.wait_ready()
    return m


@pytest.fixture
def store(etcd_client, etcd_prefix) -> Store:
    return Store(etcd_client, etcd_prefix)


def run_cli(capsys, master, *argv, fmt: str | None = None) -> tuple[int, dict | str, str]:
    """Run `shardctl --master-addr ADDR argv...` in-process; returns (rc, parsed JSON or text, stderr)."""
    from coordinator.cli import main
    capsys.readouterr()
    pre = ["--master-addr", master.addr if hasattr(master, "addr") else master]
    if fmt:
        pre += ["--format", fmt]
    rc = main(pre + list(argv))
    out, err = capsys.readouterr()
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, out, err


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# the private services' ports (SHARDMERGE_SERVICES_PORT_OFFSET): start-task's precheck connects to
# the sources and the downstream, so the configs must name servers that are really there
SOURCE_PORT = next(m.port for m in devservices.MARIADBS if m.name == "source1")
DOWNSTREAM_PORT = next(m.port for m in devservices.MARIADBS if m.name == "downstream")


def source_yaml(sid: str, port: int = SOURCE_PORT) -> str:
    return f"""source-id: {sid}
flavor: mariadb
enable-gtid: true
from:
  host: 127.0.0.1
  port: {port}
  user: shardmerge
  password: shardmerge
"""


def task_yaml(name: str, sources=("s1", "s2"), extra: str = "") -> str:
    inst = "".join(f"  - source-id: {s}\n    route-rules: [r1]\n" for s in sources)
    return f"""name: {name}
task-mode: incremental
shard-mode: optimistic
target-database:
  host: 127.0.0.1
  port: {DOWNSTREAM_PORT}
  user: shardmerge
  password: shardmerge
routes:
  r1:
    schema-pattern: "shop_*"
    table-pattern: "orders_*"
    target-schema: shop
    target-table: orders
mysql-instances:
{inst}{extra}"""


__all__ = ["SHARDCTL", "MasterProc", "free_port", "wait_for", "run_cli", "write", "source_yaml", "task_yaml", "sys", "os"]
