"""Helpers for the data-path tests: a task that merges shard tables of the per-test upstream
databases into the per-test downstream database (checkpoints live there too, so they are
dropped with it), and source configs for the two upstream servers."""
from __future__ import annotations

import threading
import uuid

import pymysql
import pytest
import yaml

from coordinator.config import parse_source, parse_task
from coordinator.routing import TableMapper
from worker.schema_tracker import SchemaTracker
from worker.shardddl import OptimisticDDLHandler
from worker.sync.binlog_skip import BinlogSkips
from worker.sync.syncer import Syncer
from worker.upstream import master_status


def db_yaml(params: dict) -> dict:
    return {"host": params["host"], "port": params["port"], "user": params["user"],
            "password": params["password"]}


def make_task(down, sources: dict, *, shard_table="orders_*", target_table="orders", safe_mode=False,
              worker_count=2, batch=100, start: dict | None = None, name: str | None = None,
              apply_mode: str | None = None) -> tuple:
    """sources: {source_id: Database}.  Shard tables ``orders_*`` of every source db route to
    ``<down>.orders``; any other table of those dbs maps to ``<down>.<same name>``."""
    routes, instances = {}, []
    for i, (sid, db) in enumerate(sources.items()):
        routes[f"shard{i}"] = {"schema-pattern": db.name, "table-pattern": shard_table,
                               "target-schema": down.name, "target-table": target_table}
        routes[f"plain{i}"] = {"schema-pattern": db.name, "target-schema": down.name}
        inst = {"source-id": sid, "route-rules": [f"shard{i}", f"plain{i}"], "block-allow-list": f"bal{i}",
                "syncer": {"worker-count": worker_count, "batch": batch, "safe-mode": safe_mode}}
        if apply_mode:
            inst["syncer"]["apply-mode"] = apply_mode
        if start and sid in start:
            p = start[sid]
            inst["meta"] = {"binlog-name": p.file, "binlog-pos": p.pos, "binlog-gtid": p.gtid}
        instances.append(inst)
    task = {"name": name or f"tw{uuid.uuid4().hex[:8]}", "task-mode": "incremental", "shard-mode": "optimistic",
            "meta-schema": down.name, "target-database": db_yaml(down.params), "routes": routes,
            "block-allow-list": {f"bal{i}": {"do-dbs": [db.name]} for i, db in enumerate(sources.values())},
            "mysql-instances": instances}
    text = yaml.safe_dump(task)
    srcs = {sid: parse_source(yaml.safe_dump({"source-id": sid, "from": db_yaml(db.params)}), f"<{sid}>")
            for sid, db in sources.items()}
    return parse_task(text, "<task>"), srcs, text


def optimistic_syncer(spark, store, task, src, *, skips_cls=BinlogSkips, hooks=None) -> Syncer:
    """A Syncer of source ``src`` in optimistic shard mode with the operator's binlog skip/inject
    records (``skips_cls``: a subclass can crash on purpose); both shard tables ``orders_1`` and
    ``orders_2`` are already known to the handler, as a started worker pre-loads them."""
    up_kw = src.db.pymysql_kwargs()
    mapper = TableMapper(task.instance(src.source_id), task.meta_schema)
    handler = OptimisticDDLHandler(store, task.name, src.source_id, mapper,
                                   SchemaTracker(src.source_id, connect=lambda: pymysql.connect(**up_kw)),
                                   stop=threading.Event())
    up_db = task.instance(src.source_id).routes[0].schema_pattern
    handler.source_tables.write_all([(up_db, "orders_1"), (up_db, "orders_2")])
    return Syncer(spark, task, src, handler, skips=skips_cls(store, task.name, src.source_id, "w-test"),
                  hooks=hooks)


@pytest.fixture
def positions():
    """Current upstream positions, taken before the test creates anything."""
    def take(*dbs):
        return [master_status(d.params) for d in dbs]
    return take
