"""Benchmark: master failover with a shard-DDL lock open.

Two masters and one worker (``shardctl`` subprocesses, the local services); one task whose two
shard tables are in the middle of a lock (one of them dropped a column).  Each round SIGKILLs the
leader and measures how long until the other master answers ``shard-ddl-lock TASK`` with the lock
rebuilt; the killed master is started again as the next round's follower.  The limit printed
beside it is one election TTL + 1 s (the dead leader's lease must expire first).

    .venv/bin/python bench/master_failover.py [--rounds 3] [--short] [--election-ttl 3]
"""
from __future__ import annotations

import json
import statistics
import sys
import time

from _procs import BenchCluster, ctl, free_port, round_args


def main() -> int:
    a, rounds = round_args(__doc__, "--election-ttl")
    cl = BenchCluster("failover")
    my, tag, work = cl.mysql, cl.tag, cl.work
    schema, target = f"bfo_{tag}_a", f"bfo_{tag}"
    up, start = cl.upstream_schema(schema, ("t_0", "t_1"), "id INT PRIMARY KEY, v INT, c INT")
    task_name = f"fobench{tag}"
    task_file = cl.task_file(task_name, task_mode="incremental", meta_schema=f"bfo_meta_{tag}",
                             schema_pattern=schema, target=target, starts={"s1": start})
    cl.source_file("s1", my["source1"])
    addrs = [f"127.0.0.1:{free_port()}" for _ in range(2)]

    def master(i):
        return cl.master(f"master{i}", addrs[i], "--election-ttl", str(a.election_ttl), "--name", f"m{i}-{tag}")

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
        r = ctl(addr, "shard-ddl-lock", task_name)
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
        cl.worker("s1")
        cl.wait_master(addrs[0])
        cl.start_task(addrs[0], task_file, wait_registered=60)
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
            cl.kill(f"master{lead}")
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
        cl.stop()


if __name__ == "__main__":
    sys.exit(main())
