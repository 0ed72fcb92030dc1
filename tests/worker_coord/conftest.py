"""Fixtures for the worker's shard-DDL coordination tests: the production path (the real
``Syncer`` with Spark, the binlog and downstream checkpoints, and the optimistic DDL handler) on
the real etcd (a private key prefix) and real upstream/downstream MariaDB databases, with the
test acting as the master by writing Operations with the etcdproto helpers."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from coordinator.etcdproto import Info, Operation, Stage, Store, lock_id
from coordinator.routing import TableMapper
from tests.support.probes import wait_for as support_wait_for
from tests.worker.conftest import make_task
from worker.schema_tracker import SchemaTracker
from worker.shardddl import OptimisticDDLHandler, list_upstream_tables
from worker.status import StatusReporter
from worker.sync.syncer import Syncer
from worker.upstream import master_status

TASK = "t1"
SOURCE = "s1"


class ActingMaster:
    """The test in the master's role: reads Infos from etcd, writes fenced Operations."""

    def __init__(self, store: Store):
        self.store = store
        self.fence = store.campaign("test-master", ttl=60)
        assert self.fence is not None

    def wait_info(self, task: str = TASK, *, newer_than: int = 0, timeout: float = 20) -> Info:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            infos = [i for i in self.store.list_infos(task).items if i.revision > newer_than]
            if infos:
                return max(infos, key=lambda i: i.revision)
            time.sleep(0.05)
        raise AssertionError(f"no Info newer than revision {newer_than} within {timeout}s")

    def answer(self, info: Info, stage: Stage = Stage.NONE, ddls=None, message: str = "",
               info_revision: int | None = None, first: str = "", combine=(),
               stale_ok: bool = False) -> Operation | None:
        """``stale_ok``: a worker may put a newer Info between the listing and this answer (a
        restart re-puts); the store then refuses the answer, as it would the real master's, and
        the newer Info is answered on its own.  None in that case."""
        op = Operation(lock_id=lock_id(info.task, info.down_schema, info.down_table), task=info.task,
                       source=info.source, up_schema=info.up_schema, up_table=info.up_table,
                       down_schema=info.down_schema, down_table=info.down_table,
                       info_revision=info.revision if info_revision is None else info_revision,
                       ddls=list(info.ddls if ddls is None else ddls), stage=stage, message=message, first=first,
                       combine=list(combine))
        res = self.store.put_operation(self.fence, op)
        if stale_ok and not res.put and res.reason == "newer-info":
            return None
        assert res.put, res
        return op


def wait_for(cond, timeout=20, what="condition"):
    """The suite's poll-wait with this directory's longer default (in-process workers start Spark)."""
    return support_wait_for(cond, timeout, what, interval=0.05)


@pytest.fixture
def store(etcd_client, etcd_prefix):
    return Store(etcd_client, etcd_prefix)


@pytest.fixture
def master(store):
    m = ActingMaster(store)
    yield m
    store.resign(m.fence)


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=2) as ex:
        yield ex


class Env:
    """One subtask's production path wired to the real services: upstream ``orders_01`` and
    ``orders_02`` route to the downstream ``orders``; the syncer starts after they exist."""

    def __init__(self, spark, store, up, down, *, strict=False, recheck=30.0, start=None):
        """``start``: binlog position to replicate from (default: the upstream's current one)."""
        self.store, self.up, self.down = store, up, down
        self.task, srcs, _ = make_task(down, {SOURCE: up}, start={SOURCE: start or master_status(up.params)},
                                       name=TASK)
        self.mapper = TableMapper(self.task.instance(SOURCE), self.task.meta_schema)
        self.tracker = SchemaTracker(SOURCE, connect=lambda: up.connect(None))
        self.status = StatusReporter(store, TASK, SOURCE, "w1", min_interval=0)
        self.stop = threading.Event()
        self.handler = OptimisticDDLHandler(store, TASK, SOURCE, self.mapper, self.tracker, self.status,
                                            strict=strict, stop=self.stop, recheck_interval=recheck)
        conn = up.connect(None)
        try:   # as the worker process does at subtask start (§7.1)
            self.handler.source_tables.write_all(list_upstream_tables(conn, self.mapper))
        finally:
            conn.close()
        self.syncer = Syncer(spark, self.task, srcs[SOURCE], self.handler)
        self.syncer.start()

    def run(self, pool, sql: str | None = None):
        """Execute ``sql`` upstream, then replicate up to it in the pool (a future)."""
        if sql is not None:
            self.up.execute(sql)
        return pool.submit(self.syncer.sync_until_caught_up)

    def close(self):
        self.stop.set()
        self.handler.close()
        self.syncer.close()

    def status_record(self):
        return self.store._get("status", self.store.keys.key("status", TASK, SOURCE))[0]

    def down_columns(self, table="orders"):
        return [r[0] for r in self.down.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
            "ORDER BY ORDINAL_POSITION", (self.down.name, table))]


@pytest.fixture
def make_env(spark, store, source1_db, downstream_db, pool):
    """Depends on ``pool`` so that stopping the syncers happens before the pool joins."""
    envs = []

    def make(**kw):
        source1_db.execute("CREATE TABLE IF NOT EXISTS orders_01 (id INT PRIMARY KEY, v INT)")
        source1_db.execute("CREATE TABLE IF NOT EXISTS orders_02 (id INT PRIMARY KEY, v INT)")
        downstream_db.execute("CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY, v INT)")
        e = Env(spark, store, source1_db, downstream_db, **kw)
        envs.append(e)
        return e
    yield make
    for e in envs:
        e.close()


class AutoMaster:
    """A background thread in the master's role for syncer-driven tests: answers every new
    Info with ``policy(info) -> (Stage, ddls[, first[, combine]]) | None`` (None = leave it
    unanswered for now).
    ``answered`` records (info, stage, ddls) in order."""

    def __init__(self, store: Store, policy):
        self.acting = ActingMaster(store)
        self.store, self.policy = store, policy
        self.seen: set[int] = set()
        self.answered: list = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="auto-master")
        self.thread.start()

    def _run(self):
        while not self.stop.wait(0.05):
            for info in sorted(self.store.list_infos().items, key=lambda i: i.revision):
                if info.revision in self.seen:
                    continue
                decision = self.policy(info)
                if decision is None:
                    continue
                stage, ddls, *more = decision
                self.seen.add(info.revision)
                if self.acting.answer(info, stage, ddls, first=more[0] if more else "",
                                      combine=more[1] if len(more) > 1 else (), stale_ok=True) is not None:
                    self.answered.append((info, stage, ddls))

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.store.resign(self.acting.fence)
