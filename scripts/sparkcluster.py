#!/usr/bin/env python3
"""A real standalone Spark cluster on loopback (one master, one worker) from the pyspark
distribution in the venv, for running a shardmerge worker on a cluster instead of local[*].

    scripts/spark-cluster start|stop|status

Master at spark://127.0.0.1:17077 (web UI 18080), worker web UI 18081; state and logs
under .services/spark/.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("SHARDMERGE_SERVICES_DIR", ROOT / ".services")) / "spark"
_OFFSET = int(os.environ.get("SHARDMERGE_SERVICES_PORT_OFFSET", "0"))
HOST = "127.0.0.1"
MASTER_PORT, MASTER_UI, WORKER_UI = 17077 + _OFFSET, 18080 + _OFFSET, 18081 + _OFFSET
MASTER_URL = f"spark://{HOST}:{MASTER_PORT}"


class ClusterError(RuntimeError):
    pass


def spark_home(python: str) -> str:
    out = subprocess.run([python, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise ClusterError(f"pyspark is not importable with {python}: {out.stderr.strip()}")
    return out.stdout.strip()


def _master_state() -> dict | None:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{MASTER_UI}/json/", timeout=1) as r:
            return json.loads(r.read())
    except Exception:
        return None


def _alive(pidfile: Path) -> int | None:
    try:
        pid = int(pidfile.read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _launch(name: str, home: str, python: str, args: list[str]) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SPARK_HOME=home, PYSPARK_PYTHON=python, SPARK_LOCAL_IP=HOST,
               SPARK_WORKER_DIR=str(STATE / "work"), SPARK_LOG_DIR=str(STATE))
    with open(STATE / f"{name}.log", "ab") as out:
        p = subprocess.Popen([f"{home}/bin/spark-class", *args], stdout=out, stderr=out,
                             stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    (STATE / f"{name}.pid").write_text(str(p.pid))


def _wait(what, check, timeout, log):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise ClusterError(f"{what} not up within {timeout}s; log {log}:\n{tail}")


def start(python: str, cores: int = 2, memory: str = "2g") -> str:
    home = spark_home(python)
    if not (_alive(STATE / "master.pid") and _master_state()):
        _launch("master", home, python, ["org.apache.spark.deploy.master.Master", "--host", HOST,
                                         "--port", str(MASTER_PORT), "--webui-port", str(MASTER_UI)])
        _wait("Spark master", lambda: _master_state() is not None, 60, STATE / "master.log")
    state = _master_state() or {}
    if not any(w.get("state") == "ALIVE" for w in state.get("workers", [])):
        if not _alive(STATE / "worker.pid"):
            _launch("worker", home, python, ["org.apache.spark.deploy.worker.Worker", MASTER_URL,
                                             "--host", HOST, "--cores", str(cores), "--memory", memory,
                                             "--webui-port", str(WORKER_UI)])
        _wait("Spark worker registration", lambda: any(
            w.get("state") == "ALIVE" for w in (_master_state() or {}).get("workers", [])), 60,
            STATE / "worker.log")
    return MASTER_URL


def stop() -> None:
    for name in ("worker", "master"):
        pid = _alive(STATE / f"{name}.pid")
        if pid:
            os.killpg(pid, signal.SIGTERM)
            for _ in range(50):
                if not _alive(STATE / f"{name}.pid"):
                    break
                time.sleep(0.2)
        (STATE / f"{name}.pid").unlink(missing_ok=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/spark-cluster")
    ap.add_argument("command", choices=["start", "stop", "status"])
    ap.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    a = ap.parse_args(argv)
    try:
        if a.command == "start":
            print(start(a.python))
        elif a.command == "stop":
            stop()
        else:
            st = _master_state()
            print(json.dumps({"url": MASTER_URL, "up": bool(st),
                              "workers": [w.get("state") for w in (st or {}).get("workers", [])]}))
            return 0 if st else 3
    except ClusterError as e:
        print(f"[spark-cluster] error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
