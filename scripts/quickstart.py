"""Quick start: a master and two workers on the local services, two sources with two shard
schemas of two tables each merged into ``shop.orders``, writes running while every shard adds a
column, drops a column and adds an index one after the other; ends with ``shardctl check``.

Run through ``scripts/quickstart`` (which first runs ``scripts/bootstrap``).  Re-runnable: it
resets its schemas, its task and its etcd prefix at start, and stops the processes it started
(the local services keep running).  Exit code 0 only when the check reports equal data.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARDCTL = str(ROOT / ".venv" / "bin" / "shardctl")
WORK = ROOT / ".services" / "quickstart"
PREFIX = "/shardmerge-quickstart/"
TASK = "quickstart"
META = "quickstart_meta"
LAYOUT = {"source1": ("shop_01", "shop_02"), "source2": ("shop_03", "shop_04")}
TABLES = ("orders_0", "orders_1")
ROWS_PER_TABLE = 200
CREATE = ("CREATE TABLE {t} (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(10,2) NOT NULL, "
          "status VARCHAR(16) NOT NULL DEFAULT 'new', created_at DATETIME NOT NULL)")


def say(msg: str = "") -> None:
    print(f"[quickstart {time.strftime('%H:%M:%S')}] {msg}" if msg else "", flush=True)


class Failure(Exception):
    pass


# ----------------------------------------------------------------------------- services
def services() -> dict:
    # where scripts/services keeps its state (SHARDMERGE_SERVICES_DIR moves it, as there)
    p = Path(os.environ.get("SHARDMERGE_SERVICES_DIR", ROOT / ".services")) / "addresses.json"
    if not p.exists():
        raise Failure(f"{p} not found: run scripts/bootstrap (or scripts/services start) first")
    return json.loads(p.read_text())


def mysql(params: dict, db: str | None = None):
    import pymysql
    return pymysql.connect(host=params["host"], port=params["port"], user=params["user"],
                           password=params["password"], database=db, autocommit=True, charset="utf8mb4")


def sql(params: dict, *stmts: str, db: str | None = None) -> None:
    with mysql(params, db) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)


def free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise Failure("no free TCP port")


# ----------------------------------------------------------------------------- processes
class Procs:
    """The master and workers this run started; their PIDs are kept in WORK/pids.json so that
    an interrupted earlier run's processes are stopped (by PID) at the next start."""

    def __init__(self):
        self.procs: dict[str, subprocess.Popen] = {}

    @staticmethod
    def stop_leftovers() -> None:
        f = WORK / "pids.json"
        if not f.exists():
            return
        for name, pid in json.loads(f.read_text()).items():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "shardctl" in cmdline and PREFIX in cmdline:
                say(f"stopping {name} (pid {pid}) left over from an earlier run")
                os.kill(pid, signal.SIGTERM)
                for _ in range(100):
                    if not Path(f"/proc/{pid}").exists():
                        break
                    time.sleep(0.1)
                else:
                    os.kill(pid, signal.SIGKILL)
        f.unlink()

    def start(self, name: str, args: list[str]) -> None:
        log = open(WORK / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen([SHARDCTL, *args], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        (WORK / "pids.json").write_text(json.dumps({n: p.pid for n, p in self.procs.items()}))
        say(f"started {name} (pid {self.procs[name].pid}): shardctl {' '.join(args)}")
        say(f"  log: {WORK / (name + '.log')}")

    def check_alive(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise Failure(f"{name} exited with code {p.returncode}; see {WORK / (name + '.log')}")

    def stop(self) -> None:
        for p in reversed(list(self.procs.values())):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in self.procs.items():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
            say(f"stopped {name}")
        (WORK / "pids.json").unlink(missing_ok=True)


# ----------------------------------------------------------------------------- shardctl
class Ctl:
    def __init__(self, master_addr: str):
        self.master_addr = master_addr

    def run(self, *args: str, fmt: str = "json", show: bool = False, quiet_fail: bool = False):
        argv = [SHARDCTL, "--master-addr", self.master_addr, "--format", fmt, *args]
        r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)
        if show:
            say(f"$ shardctl --master-addr {self.master_addr}{' --format table' if fmt == 'table' else ''} "
                f"{' '.join(args)}")
            print(r.stdout.rstrip() or r.stderr.rstrip(), flush=True)
        if r.returncode != 0 and not quiet_fail and not show:
            raise Failure(f"shardctl {' '.join(args)} failed (exit {r.returncode}): {r.stdout}{r.stderr}")
        if fmt == "json":
            try:
                return r.returncode, json.loads(r.stdout)
            except ValueError:
                return r.returncode, {"raw": r.stdout + r.stderr}
        return r.returncode, r.stdout

    def subtasks(self) -> dict:
        rc, doc = self.run("query-status", TASK, quiet_fail=True)
        return {s["sourceStatus"]["source"]: s["subTaskStatus"][0] for s in doc.get("sources", [])
                if s.get("subTaskStatus")}


def wait(cond, timeout: float, what: str, procs: Procs, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        procs.check_alive()
        try:
            last = cond()
        except Failure:
            raise
        except Exception as e:  # noqa: BLE001 — keep polling, report the last failure
            last = e
        if last:
            return last
        time.sleep(interval)
    raise Failure(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


# ----------------------------------------------------------------------------- writers
class Writer(threading.Thread):
    """Inserts, updates and deletes on one source's four shard tables (columns no step changes)."""

    def __init__(self, params: dict, source: str, shard_no: dict[str, int]):
        super().__init__(daemon=True, name=f"writer-{source}")
        self.params, self.source, self.shard_no = params, source, shard_no
        self.stop_event = threading.Event()
        self.counts = {"insert": 0, "update": 0, "delete": 0, "refused": 0}
        self.rng = random.Random(source)
        self.next = {k: 10_000 for k in shard_no}

    def run(self) -> None:
        conn = mysql(self.params)
        targets = [(s, t) for s in self.shard_no for t in TABLES]
        try:
            while not self.stop_event.wait(0.03):
                schema, table = self.rng.choice(targets)
                fq = f"`{schema}`.`{table}`"
                op = self.rng.random()
                try:
                    with conn.cursor() as cur:
                        if op < 0.6:
                            self.next[schema] += 1
                            key = row_id(self.shard_no[schema], TABLES.index(table), self.next[schema])
                            cur.execute(f"INSERT INTO {fq} (id, customer_id, amount, created_at) VALUES "
                                        f"(%s, %s, %s, NOW())", (key, self.rng.randint(1, 500),
                                                                 round(self.rng.uniform(1, 999), 2)))
                            self.counts["insert"] += 1
                        else:
                            n = self.rng.randint(1, max(ROWS_PER_TABLE, self.next[schema] - 10_000 + ROWS_PER_TABLE))
                            n = n if n <= ROWS_PER_TABLE else 10_000 + n - ROWS_PER_TABLE
                            key = row_id(self.shard_no[schema], TABLES.index(table), n)
                            if op < 0.9:
                                cur.execute(f"UPDATE {fq} SET amount = amount + 1, customer_id = customer_id + 1 "
                                            f"WHERE id = %s", (key,))
                                self.counts["update"] += 1
                            else:
                                cur.execute(f"DELETE FROM {fq} WHERE id = %s", (key,))
                                self.counts["delete"] += 1
                except Exception:  # noqa: BLE001 — e.g. a metadata lock timeout while an ALTER runs
                    self.counts["refused"] += 1
        finally:
            conn.close()


def row_id(shard: int, table: int, n: int) -> int:
    """Keys unique across all shards (the merged table's primary key)."""
    return shard * 10_000_000 + table * 1_000_000 + n


# ----------------------------------------------------------------------------- the run
def choose_servers(svc: dict, upstream: str, downstream: str) -> dict:
    """Point the quick start's roles (source1, source2, downstream) at the MySQL servers of
    scripts/services when asked: ``--upstream mysql`` / ``--downstream mysql``."""
    m = dict(svc["mysql"])
    if upstream == "mysql":
        m["source1"], m["source2"] = m["mysql1"], m["mysql2"]
    if downstream == "mysql":
        m["downstream"] = m["mysql-downstream"]
    return {**svc, "mysql": m, "flavor": upstream}


def write_configs(svc: dict) -> tuple[dict, str]:
    files = {}
    for sid in LAYOUT:
        m = svc["mysql"][sid]
        p = WORK / f"{sid}.yaml"
        p.write_text(f"""# DM-compatible source config (quickstart)
source-id: {sid}
flavor: {svc.get("flavor", "mariadb")}
enable-gtid: true
from:
  host: {m['host']}
  port: {m['port']}
  user: {m['user']}
  password: {m['password']}
""")
        files[sid] = str(p)
    d = svc["mysql"]["downstream"]
    inst = "".join(f"""  - source-id: {sid}
    block-allow-list: shop-shards
    route-rules: [shop-schema, shop-orders]
    syncer: {{worker-count: 2, batch: 200}}
""" for sid in LAYOUT)
    task = WORK / "task.yaml"
    task.write_text(f"""# DM-compatible task (quickstart): every shop_NN.orders_N -> shop.orders
name: {TASK}
task-mode: all                 # copy the existing rows, then follow the binlog
shard-mode: optimistic         # shards change their schemas one by one
meta-schema: {META}
target-database:
  host: {d['host']}
  port: {d['port']}
  user: {d['user']}
  password: {d['password']}
block-allow-list:
  shop-shards:
    do-dbs: ["~^shop_[0-9]+$"]
routes:
  shop-schema:
    schema-pattern: "shop_*"
    target-schema: shop
  shop-orders:
    schema-pattern: "shop_*"
    table-pattern: "orders_*"
    target-schema: shop
    target-table: orders
mysql-instances:
{inst}""")
    return files, str(task)


def reset(svc: dict) -> None:
    from coordinator.etcd_client import connect
    client = connect(svc["etcd"])
    try:
        client.delete_prefix(PREFIX)
    finally:
        client.close()
    for sid, schemas in LAYOUT.items():
        sql(svc["mysql"][sid], *[f"DROP DATABASE IF EXISTS `{s}`" for s in schemas])
    sql(svc["mysql"]["downstream"], "DROP DATABASE IF EXISTS shop", f"DROP DATABASE IF EXISTS `{META}`")
    say(f"reset: etcd prefix {PREFIX}, schemas {', '.join(s for v in LAYOUT.values() for s in v)}, "
        f"downstream shop and {META}")


def create_shards(svc: dict) -> dict[str, dict[str, int]]:
    shard_nos = {}
    for sid, schemas in LAYOUT.items():
        shard_nos[sid] = {}
        for schema in schemas:
            n = int(schema.split("_")[1])
            shard_nos[sid][schema] = n
            stmts = [f"CREATE DATABASE `{schema}`"]
            for ti, t in enumerate(TABLES):
                stmts.append(CREATE.format(t=f"`{schema}`.`{t}`"))
                rows = ", ".join(f"({row_id(n, ti, i)}, {i % 97 + 1}, {i}.50, 'new', NOW())"
                                 for i in range(1, ROWS_PER_TABLE + 1))
                stmts.append(f"INSERT INTO `{schema}`.`{t}` (id, customer_id, amount, status, created_at) "
                             f"VALUES {rows}")
            sql(svc["mysql"][sid], *stmts)
    say(f"created {', '.join(f'{s}.{t}' for v in LAYOUT.values() for s in v for t in TABLES)} "
        f"with {ROWS_PER_TABLE} rows each")
    return shard_nos


def staggered(svc: dict, clause: str, pause: float, on_half=None) -> None:
    shards = [(sid, s, t) for sid, schemas in LAYOUT.items() for s in schemas for t in TABLES]
    for i, (sid, schema, table) in enumerate(shards, 1):
        sql(svc["mysql"][sid], f"ALTER TABLE `{schema}`.`{table}` {clause}")
        say(f"  {sid}: ALTER TABLE {schema}.{table} {clause}   ({i}/{len(shards)})")
        if i == len(shards) // 2 and on_half is not None:
            on_half()
        time.sleep(pause)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between two shards' DDLs")
    ap.add_argument("--keep-running", action="store_true", help="leave master and workers running at the end")
    ap.add_argument("--upstream", choices=("mariadb", "mysql"), default="mariadb",
                    help="the upstream servers: the two MariaDB sources or the two MySQL 9.7 ones (default: mariadb)")
    ap.add_argument("--downstream", choices=("mariadb", "mysql"), default="mariadb",
                    help="the merged target's server (default: mariadb)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    WORK.mkdir(parents=True, exist_ok=True)
    procs = Procs()
    writers: list[Writer] = []
    t0 = time.monotonic()
    try:
        svc = choose_servers(services(), args.upstream, args.downstream)
        say(f"upstream: two {args.upstream} sources; downstream: {args.downstream}")
        Procs.stop_leftovers()
        reset(svc)
        files, task_file = write_configs(svc)
        say(f"source configs: {files['source1']}, {files['source2']}")
        say(f"task config:    {task_file}")
        shard_nos = create_shards(svc)

        mport, metrics = free_port(8261), free_port(8262)
        master_addr = f"127.0.0.1:{mport}"
        ctl = Ctl(master_addr)
        procs.start("master", ["master", "--etcd", svc["etcd"], "--listen", master_addr, "--prefix", PREFIX,
                               "--metrics-addr", f"127.0.0.1:{metrics}", "--name", "quickstart-master",
                               "--election-ttl", "5"])

        def ready():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/readyz", timeout=2) as r:
                    return r.status == 200
            except (urllib.error.URLError, OSError):
                return False
        wait(ready, 60, "the master to be ready", procs, 0.3)
        for sid in LAYOUT:
            procs.start(f"worker-{sid}", ["worker", "--etcd", svc["etcd"], "--source", files[sid], "--prefix", PREFIX,
                                          "--name", f"quickstart-{sid}", "--ttl", "5", "--spark-master", "local[1]",
                                          "--metrics-addr", f"127.0.0.1:{free_port(0)}"])

        def bound():
            _, doc = ctl.run("operate-source", "show", quiet_fail=True)
            got = {s["source"]: s["worker"] for s in doc.get("sources", [])}
            return all(got.get(sid) == f"quickstart-{sid}" for sid in LAYOUT)
        wait(bound, 90, "both sources to be bound to their workers", procs)
        ctl.run("operate-source", "show", fmt="table", show=True)

        ctl.run("start-task", task_file, fmt="table", show=True)
        say("task started: full load of the existing rows, then binlog replication; writers start now")
        writers = [Writer(svc["mysql"][sid], sid, shard_nos[sid]) for sid in LAYOUT]
        for w in writers:
            w.start()

        shown = {"at": 0.0}

        def loaded():
            st = ctl.subtasks()
            if time.monotonic() - shown["at"] > 5:
                shown["at"] = time.monotonic()
                for sid, sub in sorted(st.items()):
                    load = sub.get("load") or {}
                    what = f"full load {load.get('bar', '')} {load.get('rows_loaded', 0)} rows" if load \
                        else "starting (Spark driver, load plan)"
                    say(f"  {sid}: {sub['stage']} {sub.get('unit') or ''} {what}")
            return len(st) == 2 and all(s["stage"] == "Running" and s["unit"] == "Sync" for s in st.values())
        wait(loaded, 180, "the full load to finish and both subtasks to replicate the binlog", procs)
        ctl.run("query-status", TASK, fmt="table", show=True)

        def show_locks():
            time.sleep(2)   # let the workers report the first shards' DDLs
            ctl.run("show-ddl-locks", TASK, fmt="table", show=True)
            ctl.run("show-ddl-locks", TASK, show=True)

        say("step 1: ADD COLUMN on every shard, one after the other (writes continue)")
        staggered(svc, "ADD COLUMN note VARCHAR(32) NOT NULL DEFAULT ''", args.pause, on_half=show_locks)
        say("step 2: DROP COLUMN status on every shard, one after the other; the merged table keeps it "
            "until the last shard dropped it")
        staggered(svc, "DROP COLUMN status", args.pause, on_half=show_locks)
        say("step 3: ADD INDEX on every shard")
        staggered(svc, "ADD INDEX idx_customer (customer_id)", args.pause / 2)

        for w in writers:
            w.stop_event.set()
        for w in writers:
            w.join(10)
        total = {k: sum(w.counts[k] for w in writers) for k in writers[0].counts}
        say(f"writers stopped: {total}")

        say("waiting for the workers to catch up (shardctl check until equal)")
        check_args = ["check", "--task-file", task_file, "--source-file", files["source1"],
                      "--source-file", files["source2"]]

        def equal():
            rc, _ = ctl.run(*check_args, quiet_fail=True)
            return rc == 0
        try:
            wait(equal, 120, "shardctl check to report equal", procs, 2.0)
        except Failure as e:
            say(str(e))
        ctl.run("query-status", TASK, fmt="table", show=True)
        ctl.run("show-ddl-locks", TASK, fmt="table", show=True)
        with mysql(svc["mysql"]["downstream"]) as c, c.cursor() as cur:
            cur.execute("SHOW CREATE TABLE shop.orders")
            say("downstream SHOW CREATE TABLE shop.orders:")
            print(cur.fetchone()[1], flush=True)
        rc, _ = ctl.run(*check_args, fmt="table", show=True)
        say(f"finished in {time.monotonic() - t0:.0f}s: check {'EQUAL' if rc == 0 else 'DIFFERENT'}")
        return 0 if rc == 0 else 1
    except Failure as e:
        say(f"FAILED: {e}")
        return 1
    finally:
        for w in writers:
            w.stop_event.set()
        if args.keep_running:
            say(f"master and workers keep running (PIDs in {WORK / 'pids.json'})")
        else:
            procs.stop()


if __name__ == "__main__":
    sys.exit(main())
