"""End-to-end harness: a real `shardctl master` and one `shardctl worker` per upstream source as
subprocesses of the installed CLI, driven through `shardctl` commands like a user would.

One cluster (master + 2 workers, private etcd prefix, free ports) per test module: starting a
worker costs a Spark driver, so scenarios share it and each runs its own task on fresh
databases (the ``source1_db``/``source2_db``/``downstream_db`` fixtures), stopped at the end.
Waits poll a condition; a timeout fails with the last value seen, the task's status, its locks
and the tail of every process log.
"""
from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import pytest
import yaml
from tests.support.cluster import ProcessCluster, running
from tests.support.ports import free_port
from tests.support.procs import ROOT, SHARDCTL, Proc, db_params
from tests.support.writer import BackgroundWriter

__all__ = ["ROOT", "SHARDCTL", "Proc", "db_params", "free_port", "running", "Cluster", "Scenario", "Writer"]
SHARDS = ("orders_01", "orders_02", "orders_03", "orders_04")
SOURCES = ("s1", "s2")
ID_BASE = {"s1": 0, "s2": 10_000_000}     # disjoint key ranges per source (one merged key space)


class Cluster(ProcessCluster):
    """The e2e cluster: one master (``e2e-master``), a worker per source of ``sources`` (default
    s1 and s2) and the free workers ``spare``, on the dev services."""

    def __init__(self, services, prefix: str, work: Path, *, sources: dict | None = None, spare=(),
                 spark_master: str = "local[1]"):
        super().__init__(services.etcd, services.mysql, work, prefix, masters=("e2e-master",), sources=sources,
                         spare=spare, spark_master=spark_master)
        self.services = services

    @property
    def master(self) -> Proc:
        return self.masters["e2e-master"]

    @property
    def master_addr(self) -> str:
        return self.grpc_addr["e2e-master"]

    @property
    def mmetrics(self) -> int:
        return int(self.metrics_addr["e2e-master"].rsplit(":", 1)[1])

    def restart_master(self) -> None:
        self.master.start()
        self.wait_leader()

    def restart_worker(self, sid: str) -> None:
        self.workers[sid].start()


@pytest.fixture(scope="module")
def cluster(services, etcd_client, tmp_path_factory):
    with running(lambda prefix, work: Cluster(services, prefix, work), etcd_client, "e2e",
                 tmp_path_factory.mktemp("e2e")) as c:
        yield c


# ----------------------------------------------------------------------------- one scenario
class Writer(BackgroundWriter):
    """Background writes to every shard of one source: inserts, updates, deletes on ``id, v``
    (columns no scenario changes).  Statements refused while a shard is being altered or
    dropped are simply retried on another shard."""

    def __init__(self, db, sid: str, tables, seed: int, base: int = 5_000_000):
        super().__init__(f"writer-{sid}", db.connect, seed)
        self.tables = list(tables)
        self.next_id = ID_BASE[sid] + base

    def step(self, conn) -> None:
        t = self.rng.choice(self.tables)
        op = self.rng.random()
        with conn.cursor() as cur:
            if op < 0.6:
                self.next_id += 1
                cur.execute(f"INSERT INTO {t} (id, v) VALUES (%s, %s)", (self.next_id, self.next_id % 97))
            elif op < 0.85:
                cur.execute(f"UPDATE {t} SET v = v + 1 ORDER BY id DESC LIMIT 2")
            else:
                cur.execute(f"DELETE FROM {t} ORDER BY id LIMIT 1")


class Scenario:
    """One task on fresh databases: 2 sources x 4 shard tables ``orders_0N`` -> ``<down>.orders``."""

    def __init__(self, cluster: Cluster, dbs: dict, down, tmp_path: Path, *, mode: str = "incremental",
                 columns: str = "id INT PRIMARY KEY, v INT", rows: int = 10, shards: tuple | dict = SHARDS,
                 table_options: str = ""):
        """``shards``: the shard tables of every source, or {source: its shard tables}."""
        self.c, self.dbs, self.down, self.tmp = cluster, dbs, down, tmp_path
        self.shards = shards
        self.mode = mode
        self.name = f"e2e_{uuid.uuid4().hex[:8]}"
        self.writers: list[Writer] = []
        self.runs = 0                       # writer runs so far (each gets its own key range)
        start = {sid: _master_status(db) for sid, db in dbs.items()} if mode == "incremental" else {}
        for sid, db in dbs.items():
            for n, t in enumerate(shards.get(sid, ()) if isinstance(shards, dict) else shards):
                db.execute(f"CREATE TABLE {t} ({columns}) {table_options}")
                if rows:
                    self.insert(sid, t, [ID_BASE[sid] + n * 100_000 + i for i in range(rows)])
        self.task_file = str(tmp_path / f"{self.name}.yaml")
        Path(self.task_file).write_text(yaml.safe_dump(self._task(start)))

    def _task(self, start: dict) -> dict:
        routes, insts, bals = {}, [], {}
        for sid, db in self.dbs.items():
            routes[f"shard-{sid}"] = {"schema-pattern": db.name, "table-pattern": "orders_*",
                                      "target-schema": self.down.name, "target-table": "orders"}
            bals[f"bal-{sid}"] = {"do-dbs": [db.name]}
            inst = {"source-id": sid, "route-rules": [f"shard-{sid}"], "block-allow-list": f"bal-{sid}",
                    "syncer": {"worker-count": 2, "batch": 100}}
            if sid in start:
                f, p, g = start[sid]
                inst["meta"] = {"binlog-name": f, "binlog-pos": p, "binlog-gtid": g}
            insts.append(inst)
        return {"name": self.name, "task-mode": self.mode, "shard-mode": "optimistic",
                "meta-schema": self.down.name, "target-database": db_params(self.down.params),
                "routes": routes, "block-allow-list": bals, "mysql-instances": insts}

    # -- upstream
    def insert(self, sid: str, table: str, ids, cols: str = "id, v") -> None:
        ncols = len(cols.split(","))
        vals = ", ".join("(" + ", ".join([str(i)] + [str(i % 89)] * (ncols - 1)) + ")" for i in ids)
        self.dbs[sid].execute(f"INSERT INTO {table} ({cols}) VALUES {vals}")

    def alter_all(self, clause: str, *, between=None, order=None) -> None:
        """``ALTER TABLE t <clause>`` on every shard, one after the other; ``between(sid, t, i)``
        writes after each."""
        for i, (sid, t) in enumerate(order or [(s, t) for s in self.dbs for t in SHARDS]):
            self.c.context = f"task {self.name}: ALTER TABLE {sid}.{t} {clause}"
            self.dbs[sid].execute(f"ALTER TABLE {t} {clause}")
            if between is not None:
                between(sid, t, i)

    def start_writers(self, tables: dict | None = None) -> None:
        """Background writers on every source (``tables``: {source: shard names} to limit them)."""
        self.writers = [Writer(db, sid, (tables or {}).get(sid, SHARDS), seed=n, base=5_000_000 + 100_000 * self.runs)
                        for n, (sid, db) in enumerate(self.dbs.items())]
        for w in self.writers:
            w.start()
        self.runs += 1

    def stop_writers(self) -> int:
        n = sum(w.stop() for w in self.writers)
        self.writers = []
        return n

    # -- the task
    def start(self) -> None:
        self.c.task_name = self.name
        self.c.context = f"start-task {self.name}"
        self.c.ctl_ok("start-task", self.task_file)
        self.wait_running()

    def status(self) -> dict:
        rc, doc = self.c.ctl("query-status", self.name)
        return doc if isinstance(doc, dict) else {}

    def subtasks(self) -> dict:
        """{source: subTaskStatus} from query-status."""
        return {s["sourceStatus"]["source"]: s["subTaskStatus"][0] for s in self.status().get("sources", [])
                if s.get("subTaskStatus")}

    def wait_running(self, timeout: float = 180) -> None:
        self.c.wait(lambda: (st := self.subtasks()) and all(st.get(s, {}).get("stage") == "Running" for s in self.dbs),
                    timeout, f"task {self.name} Running on {', '.join(self.dbs)}")

    def check(self) -> tuple[int, dict]:
        files = [a for sid in self.dbs for a in ("--source-file", self.c.source_files[sid])]
        return self.c.ctl("check", "--task-file", self.task_file, *files)

    def wait_equal(self, timeout: float = 120, columns=None, indexes=None) -> dict:
        """`shardctl check` equal and (optionally) the downstream's columns / secondary indexes."""
        def ok():
            rc, rep = self.check()
            got = {"check_exit": rc, "equal": isinstance(rep, dict) and rep.get("equal")}
            if columns is not None:
                got["columns"] = self.down_columns()
            if indexes is not None:
                got["indexes"] = self.down_indexes()
            good = rc == 0 and got["equal"] and (columns is None or got["columns"] == list(columns)) \
                and (indexes is None or got["indexes"] == indexes)
            if not good:
                got["report"] = rep
            return got if good else _Falsy(got)
        return self.c.wait(ok, timeout, f"check equal (columns={columns}, indexes={indexes})", interval=1.0)

    def stop(self) -> None:
        self.stop_writers()
        self.c.context = f"stop-task {self.name}"
        self.c.ctl_ok("stop-task", self.name)
        self.c.task_name = ""

    # -- downstream schema (SHOW CREATE TABLE)
    def show_create(self) -> str:
        rows = self.down.execute("SHOW CREATE TABLE orders")
        return rows[0][1]

    def down_columns(self) -> list[str]:
        return [r[0] for r in self.down.execute("SHOW COLUMNS FROM orders")]

    def down_column_type(self, col: str) -> str:
        return next(r[1] for r in self.down.execute("SHOW COLUMNS FROM orders") if r[0] == col)

    def down_indexes(self) -> dict:
        """{index name: [columns]} of the downstream target (PRIMARY included)."""
        out: dict[str, list[str]] = {}
        for r in self.down.execute("SHOW INDEX FROM orders"):
            out.setdefault(r[2], []).append(r[4])
        return out


class _Falsy(dict):
    """A wait result that is false but still shows what was seen."""

    def __bool__(self) -> bool:
        return False


def _master_status(db) -> tuple[str, int, str]:
    from worker.upstream import master_status
    pos = master_status(db.params)
    return pos.file, pos.pos, pos.gtid


@pytest.fixture
def scenario(cluster, source1_db, source2_db, downstream_db, tmp_path):
    """Factory: ``scenario(**kw)`` -> a Scenario (its task is stopped at the end)."""
    made: list[Scenario] = []

    def make(**kw) -> Scenario:
        s = Scenario(cluster, {"s1": source1_db, "s2": source2_db}, downstream_db, tmp_path, **kw)
        made.append(s)
        return s
    yield make
    for s in made:
        s.stop_writers()
        with contextlib.suppress(Exception):
            cluster.ctl("stop-task", s.name)
    cluster.task_name = ""
