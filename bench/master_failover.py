"""Benchmark: master failover with a shard-DDL lock open.

Two masters and one worker (``shardctl`` subprocesses, the local services); one task whose two
shard tables are in the middle of a lock (one of them dropped a column).  Each round SIGKILLs the
leader and measures how long until the other master answers ``shard-ddl-lock TASK`` with the lock
rebuilt; the killed master is started again as the next round's follower.  The limit printed
beside it is one election TTL + 1 s (the dead leader's lease must expire first).

    .venv/bin/python bench/master_failover.py [--rounds 3] [--short] [--election-ttl 3]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
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
sys.path.insert(0, str(ROOT / "bench"))
import devservices  # noqa: E402
from ddl_latency import free_port  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--short", action="store_true", help="CI form: 1 round")
    ap.add_argument("--election-ttl", type=int, default=3)
    a = ap.parse_args()
    rounds = 1 if a.short else a.rounds
    info = devservices.start()
    my = info["mysql"]
    tag = uuid.uuid4().hex[:6]
    work = Path(tempfile.mkdtemp(prefix="sm-failover-bench-"))
    prefix = f"/shardmerge-bench-{tag}/"
    schema, target = f"bfo_{tag}_a", f"bfo_{tag}"
    up = pymysql.connect(**my["source1"], autocommit=True)
    with up.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        f, p = cur.fetchone()[:2]
        cur.execute(f"CREATE DATABASE {schema}")
        for t in ("t_0", "t_1"):
            cur.execute(f"CREATE TABLE {schema}.{t} (id INT PRIMARY KEY, v INT, c INT)")
    task = {"name": f"fobench{tag}", "task-mode": "incremental", "shard-mode": "optimistic",
            "meta-schema": f"bfo_meta_{tag}", "target-database": my["downstream"],
            "mysql-instances": [{"source-id": "s1", "route-rules": ["r"], "block-allow-list": "only",
                                 "meta": {"binlog-name": f, "binlog-pos": p}}],
            "block-allow-list": {"only": {"do-dbs": [schema]}},
            "routes": {"r": {"schema-pattern": schema, "table-pattern": "t_*", "target-schema": target,
                             "target-table": "t"}}}
    (work / "task.yaml").write_text(json.dumps(task))
    (work / "s1.yaml").write_text(json.dumps({"source-id": "s1", "flavor": "mariadb", "from": my["source1"]}))
    addrs = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    procs: dict[str, subprocess.Popen] = {}

    def spawn(name, *args):
        log = open(work / f"{name}.log", "ab")
        procs[name] = subprocess.Popen([SHARDCTL, *args], stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        return procs[name]

    def master(i):
        return spawn(f"master{i}", "master", "--etcd", info["etcd"], "--listen", addrs[i], "--prefix", prefix,
                     "--election-ttl", str(a.election_ttl), "--name", f"m{i}-{tag}")

    def ctl(addr, *args):
        return subprocess.run([SHARDCTL, "--master-addr", addr, *args], capture_output=True, text=True)

    def leader() -> int | None:
        for addr in addrs:
            r = ctl(addr, "list-member")
            try:
                lead = json.loads(r.stdout).get("leader")
            except ValueError:
                continue
            if lead in addrs:
                return addrs.index(lead)
        return None

    def locks(addr) -> list:
        r = ctl(addr, "shard-ddl-lock", task["name"])
        if r.returncode != 0:
            return []
        try:
            return json.loads(r.stdout).get("locks", [])
        except ValueError:
            return []

    try:
        master(0)
        time.sleep(1.0)
        master(1)
        spawn("worker", "worker", "--etcd", info["etcd"], "--source", str(work / "s1.yaml"), "--prefix", prefix,
              "--name", f"bench-s1-{tag}", "--spark-master", "local[1]")
        deadline = time.monotonic() + 60
        while ctl(addrs[0], "list-member").returncode != 0:
            assert time.monotonic() < deadline, "masters did not come up"
            time.sleep(0.3)
        # the worker registers its source when it starts: until then start-task says "not registered"
        deadline = time.monotonic() + 60
        while (r := ctl(addrs[0], "start-task", str(work / "task.yaml"))).returncode != 0 \
                and "not registered" in r.stdout and time.monotonic() < deadline:
            time.sleep(0.5)
        assert r.returncode == 0, r.stdout + r.stderr
        with up.cursor() as cur:      # one shard drops a column: the lock waits for the other
            cur.execute(f"ALTER TABLE {schema}.t_0 DROP COLUMN c")
        deadline = time.monotonic() + 120
        while len(locks(addrs[0])) != 1 and len(locks(addrs[1])) != 1:
            assert time.monotonic() < deadline, f"no lock after 120 s; logs in {work}"
            time.sleep(0.2)
        took = []
        for i in range(rounds):
            lead = None
            while lead is None:
                lead = leader()
                time.sleep(0.1)
            other = 1 - lead
            os.killpg(procs[f"master{lead}"].pid, signal.SIGKILL)
            procs[f"master{lead}"].wait()
            t0 = time.monotonic()
            while len(locks(addrs[other])) != 1:
                assert time.monotonic() - t0 < 120, f"no leader with the lock after 120 s; logs in {work}"
                time.sleep(0.05)
            took.append(time.monotonic() - t0)
            print(f"[bench] round {i + 1}: leader m{lead} killed -> m{other} answers with the lock "
                  f"{took[-1]:.2f} s", flush=True)
            master(lead)               # back as the follower of the next round
            time.sleep(1.0)
        limit = a.election_ttl + 1
        print(f"master failover over {rounds} round(s): SIGKILL of the leader -> the other master answers "
              f"shard-ddl-lock with the rebuilt lock p50 {statistics.median(took):.2f} s, max {max(took):.2f} s; "
              f"limit election TTL + 1 s = {limit} s (ratio {statistics.median(took) / limit:.2f})")
        return 0
    finally:
        for p in procs.values():
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        print(f"[bench] logs in {work}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
