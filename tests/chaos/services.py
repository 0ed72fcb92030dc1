"""The chaos test's PRIVATE etcd + MariaDB set (ports shifted, data under ``.services/chaos``),
so killing etcd or the downstream never breaks other suites running on the shared set.

The environment must be set before ``scripts/devservices.py`` is imported (it reads the port
offset and the state directory at import), hence the module-level setup here.  The downstream
runs with a binary log (unlike the shared set's): the harness counts the DDLs the downstream
actually applied from it (a failed statement is never logged, a successful one always is).
"""
from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PORT_OFFSET = int(os.environ.get("SHARDMERGE_CHAOS_PORT_OFFSET", "2000"))
STATE_DIR = Path(os.environ.get("SHARDMERGE_CHAOS_SERVICES_DIR", ROOT / ".services" / "chaos"))


def _load():
    saved = {k: os.environ.get(k) for k in ("SHARDMERGE_SERVICES_PORT_OFFSET", "SHARDMERGE_SERVICES_DIR")}
    os.environ["SHARDMERGE_SERVICES_PORT_OFFSET"] = str(PORT_OFFSET)
    os.environ["SHARDMERGE_SERVICES_DIR"] = str(STATE_DIR)
    try:
        spec = importlib.util.spec_from_file_location("devservices_chaos", ROOT / "scripts" / "devservices.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["devservices_chaos"] = mod   # dataclasses look their module up while defining
        spec.loader.exec_module(mod)
        return mod
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


ds = _load()
SOURCES = {m.name: m for m in ds.MARIADBS if m.binlog}
DOWNSTREAM = ds.MariaDB("downstream", next(m.port for m in ds.MARIADBS if m.name == "downstream"),
                        200, True)


def start() -> dict:
    """Start (or reuse) the private set; returns ``{"etcd": "host:port", "mysql": {name: params}}``."""
    ds.install_missing()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    ds.start_etcd()
    for m in (*SOURCES.values(), DOWNSTREAM):
        ds.start_mariadb(m)
    return {"etcd": f"{ds.HOST}:{ds.ETCD_CLIENT_PORT}",
            "mysql": {m.name: {"host": ds.HOST, "port": m.port, "user": ds.USER, "password": ds.PASSWORD}
                      for m in (*SOURCES.values(), DOWNSTREAM)}}


def stop() -> None:
    for m in (*SOURCES.values(), DOWNSTREAM):
        ds._stop_pid(f"MariaDB {m.name}", m.pidfile)
    ds._stop_pid("etcd", STATE_DIR / "etcd" / "etcd.pid")


def _kill(pidfile: Path) -> int | None:
    pid = ds._pid_alive(pidfile)
    if pid:
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and ds._pid_alive(pidfile):
            try:   # a server this process started is our child: reap it, or it lingers as a zombie
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.05)
    return pid


def kill_etcd() -> int | None:
    """SIGKILL the private etcd (its data survives)."""
    return _kill(STATE_DIR / "etcd" / "etcd.pid")


def start_etcd() -> None:
    ds.start_etcd()


def kill_downstream() -> int | None:
    """SIGKILL the private downstream mariadbd (InnoDB recovers on start)."""
    return _kill(DOWNSTREAM.pidfile)


def start_downstream() -> None:
    ds.start_mariadb(DOWNSTREAM)
