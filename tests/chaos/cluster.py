"""Real shardmerge processes for the chaos test: 2 masters + one worker per source, each a
``shardctl`` subprocess in its own process group (a SIGKILL takes its Spark JVM and binlog
decoder with it, like a killed pod), logs in one directory, and ``shardctl`` calls that try
every live master (a follower forwards writes to the leader)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml
from tests.support.ports import free_port
from tests.support.probes import http_get, shardctl_doc

ROOT = Path(__file__).resolve().parents[2]
SHARDCTL = str(ROOT / ".venv" / "bin" / "shardctl")


class Proc:
    """One shardctl subprocess; output appended to ``<log_dir>/<name>.log``."""

    def __init__(self, name: str, args: list[str], log_dir: Path, env: dict | None = None):
        self.name, self.args, self.env = name, args, env or {}
        self.log_path = log_dir / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.expected_dead = False     # we killed it (a death we did not cause is a finding)

    def start(self) -> "Proc":
        with open(self.log_path, "ab") as log:
            log.write(f"---- start #{self.starts + 1} {time.strftime('%H:%M:%S')}\n".encode())
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
        """Signal the whole process group (the CLI, its JVM, its decoder child)."""
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
        if sig != signal.SIGKILL:       # SIGTERM: make sure the group's children are gone too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def tail(self, n: int = 30) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(line[:500] for line in lines[-n:])


class ChaosCluster:
    """2 masters (``m1``, ``m2``) and workers ``w-s1``, ``w-s2`` on one etcd prefix."""

    def __init__(self, etcd: str, mysql: dict, work: Path, prefix: str, *, election_ttl: int = 3,
                 worker_ttl: int = 3, sources: dict[str, str] | None = None, worker_env: dict | None = None):
        self.etcd, self.mysql, self.work, self.prefix = etcd, mysql, work, prefix
        self.masters: dict[str, Proc] = {}
        self.master_addr: dict[str, str] = {}
        self.metrics_addr: dict[str, str] = {}
        for name in ("m1", "m2"):
            port, mport = free_port(), free_port()
            self.master_addr[name] = f"127.0.0.1:{port}"
            self.metrics_addr[name] = f"127.0.0.1:{mport}"
            self.masters[name] = Proc(name, [
                SHARDCTL, "master", "--etcd", etcd, "--listen", self.master_addr[name], "--name", name,
                "--prefix", prefix, "--election-ttl", str(election_ttl),
                "--metrics-addr", self.metrics_addr[name]], work)
        self.source_files: dict[str, str] = {}
        self.workers: dict[str, Proc] = {}
        for sid, server in (sources or {"s1": "source1", "s2": "source2"}).items():
            p = work / f"{sid}.yaml"
            params = {k: mysql[server][k] for k in ("host", "port", "user", "password")}
            p.write_text(yaml.safe_dump({"source-id": sid, "enable-gtid": True, "flavor": "mariadb",
                                         "from": params}))
            self.source_files[sid] = str(p)
            self.workers[sid] = Proc(f"worker-{sid}", [
                SHARDCTL, "worker", "--etcd", etcd, "--source", str(p), "--name", f"w-{sid}",
                "--prefix", prefix, "--ttl", str(worker_ttl), "--spark-master", "local[1]",
                "--metrics-addr", f"127.0.0.1:{free_port()}"], work, env=worker_env)

    def procs(self) -> list[Proc]:
        return [*self.masters.values(), *self.workers.values()]

    # ------------------------------------------------------------------ masters
    def leader(self) -> str | None:
        """The master that reports itself leader (and ready) on /metrics + /readyz."""
        for name, p in self.masters.items():
            if not p.alive():
                continue
            code, text = http_get(self.metrics_addr[name], "/metrics")
            if code == 200 and any(line.startswith("shardmerge_master_is_leader ") and line.split()[-1] == "1.0"
                                   for line in text.splitlines()):
                if http_get(self.metrics_addr[name], "/readyz")[0] == 200:
                    return name
        return None

    def wait_leader(self, timeout: float = 60, exclude: str | None = None) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lead = self.leader()
            if lead and lead != exclude:
                return lead
            time.sleep(0.2)
        raise TimeoutError(f"no master became leader within {timeout}s\n{self.diagnostics()}")

    # ------------------------------------------------------------------ shardctl
    def ctl(self, *argv: str) -> tuple[int, dict | str]:
        """``shardctl --master-addr <a live master> argv...`` in-process; (exit code, JSON or text).
        Tries the leader first, then every other live master."""
        order = sorted(self.masters, key=lambda n: n != self.leader())
        rc, result = 1, "no live master"
        for name in order:
            if not self.masters[name].alive():
                continue
            rc, result = shardctl_doc(self.master_addr[name], *argv)
            if isinstance(result, dict) or rc == 0:
                return rc, result
        return rc, result

    def diagnostics(self) -> str:
        return "\n".join(f"---- {p.name} (alive={p.alive()}) log tail:\n{p.tail()}" for p in self.procs())

    def start(self) -> None:
        for m in self.masters.values():
            m.start()
        self.wait_leader()
        for w in self.workers.values():
            w.start()

    def stop(self) -> None:
        for p in self.procs():
            if p.alive():
                p.kill(signal.SIGTERM, timeout=20)
