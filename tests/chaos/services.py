"""PRIVATE etcd + MariaDB sets for tests that kill servers (ports shifted, data under
``.services/<name>``), so killing etcd or the downstream never breaks other suites running on
the shared set.  The chaos run uses offset 2000 (``.services/chaos``); the targeted recovery
tests use their own set (offset 2100) so both can run at once.  Both are added to
``SHARDMERGE_SERVICES_PORT_OFFSET`` when it is set.

``scripts/devservices.py`` reads the port offset and state directory from the environment at
import, so each set loads its own copy of the module with the environment set for it.  The
downstream runs with a binary log (unlike the shared set's): the chaos harness counts the DDLs
the downstream actually applied from it (a failed statement is never logged, a successful one
always is).
"""
from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(offset: int, state: Path, modname: str):
    saved = {k: os.environ.get(k) for k in ("SHARDMERGE_SERVICES_PORT_OFFSET", "SHARDMERGE_SERVICES_DIR")}
    os.environ["SHARDMERGE_SERVICES_PORT_OFFSET"] = str(offset)
    os.environ["SHARDMERGE_SERVICES_DIR"] = str(state)
    try:
        spec = importlib.util.spec_from_file_location(modname, ROOT / "scripts" / "devservices.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod   # dataclasses look their module up while defining
        spec.loader.exec_module(mod)
        return mod
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class ServiceSet:
    """One private etcd + source1 + source2 + downstream (with binlog)."""

    def __init__(self, name: str, offset: int, state_dir: Path | None = None):
        self.name, self.offset = name, offset
        self.state = Path(state_dir or ROOT / ".services" / name)
        self.ds = _load(offset, self.state, f"devservices_{name.replace('-', '_')}")
        self.sources = {m.name: m for m in self.ds.MARIADBS if m.binlog}
        self.downstream = self.ds.MariaDB("downstream", next(m.port for m in self.ds.MARIADBS
                                                             if m.name == "downstream"), 200, True)

    @property
    def etcd(self) -> str:
        return f"{self.ds.HOST}:{self.ds.ETCD_CLIENT_PORT}"

    def start(self) -> dict:
        """Start (or reuse) the set; ``{"etcd": "host:port", "mysql": {name: params}}``."""
        self.ds.install_missing()
        self.ds.reserve_ports()
        self.state.mkdir(parents=True, exist_ok=True)
        try:
            self.ds.start_etcd()
            for m in (*self.sources.values(), self.downstream):
                self.ds.start_mariadb(m)
        except BaseException:
            self.stop()    # no half-started set left behind to hold the ports of the next run
            raise
        return {"etcd": self.etcd,
                "mysql": {m.name: {"host": self.ds.HOST, "port": m.port, "user": self.ds.USER,
                                   "password": self.ds.PASSWORD} for m in (*self.sources.values(), self.downstream)}}

    def stop(self) -> None:
        for m in (*self.sources.values(), self.downstream):
            self.ds._stop_pid(f"MariaDB {m.name}", m.pidfile)
        self.ds._stop_pid("etcd", self.state / "etcd" / "etcd.pid")

    def _kill(self, pidfile: Path) -> int | None:
        pid = self.ds._pid_alive(pidfile)
        if pid:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self.ds._pid_alive(pidfile):
                try:   # a server this process started is our child: reap it, or it stays a zombie
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
                time.sleep(0.05)
        return pid

    def kill_etcd(self) -> int | None:
        """SIGKILL etcd (its data survives)."""
        return self._kill(self.state / "etcd" / "etcd.pid")

    def start_etcd(self) -> None:
        self.ds.start_etcd()

    def kill_downstream(self) -> int | None:
        """SIGKILL the downstream mariadbd (InnoDB recovers on start)."""
        return self._kill(self.downstream.pidfile)

    def start_downstream(self) -> None:
        self.ds.start_mariadb(self.downstream)


# Relative to the shared set's offset, so a shifted run (a CI rehearsal beside a development
# set) never meets another checkout's private servers on the same ports.
_BASE = int(os.environ.get("SHARDMERGE_SERVICES_PORT_OFFSET", "0") or 0)
CHAOS = ServiceSet("chaos", int(os.environ.get("SHARDMERGE_CHAOS_PORT_OFFSET", str(_BASE + 2000))))
RECOVERY = ServiceSet("chaos-recovery", _BASE + 2100)

# the chaos run's set, as module functions
start, stop = CHAOS.start, CHAOS.stop
kill_etcd, start_etcd = CHAOS.kill_etcd, CHAOS.start_etcd
kill_downstream, start_downstream = CHAOS.kill_downstream, CHAOS.start_downstream
