"""Real shardmerge processes for tests: one subprocess type and the command lines it runs.

Every suite that starts `shardctl master`/`worker` (e2e, scenarios, chaos, master, api, deploy)
uses these, so a process is started, killed and diagnosed the same way everywhere; how a test
looks at a running process (shardctl, HTTP, waits) is in ``probes.py``.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SHARDCTL = str(ROOT / ".venv" / "bin" / "shardctl")


class Proc:
    """One shardctl subprocess in its own process group (a kill takes its Spark JVM and binlog
    decoder with it, like a killed pod); output appended to ``<log_dir>/<name>.log``."""

    def __init__(self, name: str, args: list[str], log_dir: Path, env: dict | None = None):
        self.name, self.args = name, args
        self.env: dict[str, str] = dict(env or {})   # extra environment (e.g. SHARDMERGE_FAILPOINTS)
        self.log_path = log_dir / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.expected_dead = False     # we killed it (a death we did not cause is a finding)

    def start(self) -> "Proc":
        with open(self.log_path, "ab") as log:
            log.write(f"---- start #{self.starts + 1} {time.strftime('%H:%M:%S')} {' '.join(self.args)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env})
        self.starts += 1
        self.expected_dead = False
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL, timeout: float = 30) -> None:
        """Signal the whole process group; a graceful stop that takes longer than ``timeout``
        (a loaded machine) ends with SIGKILL, and no child of the group is left behind."""
        if self.proc is None:
            return
        self.expected_dead = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        if sig != signal.SIGKILL:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, n: int = 25) -> str:
        return "\n".join(line[:600] for line in self.output().splitlines()[-n:])


def master_args(etcd: str, listen: str, prefix: str, name: str, ttl: int, metrics_addr: str) -> list[str]:
    return [SHARDCTL, "master", "--etcd", etcd, "--listen", listen, "--prefix", prefix, "--name", name,
            "--election-ttl", str(ttl), "--metrics-addr", metrics_addr]


def worker_args(etcd: str, prefix: str, name: str, ttl: int, metrics_addr: str, *, source_file: str | None = None,
                spark_master: str = "local[1]") -> list[str]:
    """A worker bound to ``source_file``'s source, or a free one (``None``) the master may bind."""
    return [SHARDCTL, "worker", "--etcd", etcd, *(["--source", source_file] if source_file else []),
            "--name", name, "--prefix", prefix, "--ttl", str(ttl), "--spark-master", spark_master,
            "--metrics-addr", metrics_addr]


def db_params(params: dict) -> dict:
    return {k: params[k] for k in ("host", "port", "user", "password")}


def write_source_file(path: Path, sid: str, params: dict, flavor: str = "") -> str:
    """A source config (GTID; the flavor detected from the server unless given) for one
    upstream server; returns its path."""
    path.write_text(yaml.safe_dump({"source-id": sid, "enable-gtid": True, "flavor": flavor,
                                    "from": db_params(params)}))
    return str(path)
