"""Helpers for the data-path tests: a task that merges shard tables of the per-test upstream
databases into the per-test downstream database (checkpoints live there too, so they are
dropped with it), and source configs for the two upstream servers."""
from __future__ import annotations

import uuid

import pytest
import yaml

from coordinator.config import parse_source, parse_task
from worker.upstream import master_status


def db_yaml(params: dict) -> dict:
    return {"host": params["host"], "port": params["port"], "user": params["user"],
            "password": params["password"]}


def make_task(down, sources: dict, *, shard_table="orders_*", target_table="orders", safe_mode=False,
              worker_count=2, batch=100, start: dict | None = None, name: str | None = None) -> tuple:
    """sources: {source_id: Database}.  Shard tables ``orders_*`` of every source db route to
    ``<down>.orders``; any other table of those dbs maps to ``<down>.<same name>``."""
    routes, instances = {}, []
    for i, (sid, db) in enumerate(sources.items()):
        routes[f"shard{i}"] = {"schema-pattern": db.name, "table-pattern": shard_table,
                               "target-schema": down.name, "target-table": target_table}
        routes[f"plain{i}"] = {"schema-pattern": db.name, "target-schema": down.name}
        inst = {"source-id": sid, "route-rules": [f"shard{i}", f"plain{i}"], "block-allow-list": f"bal{i}",
                "syncer": {"worker-count": worker_count, "batch": batch, "safe-mode": safe_mode}}
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


@pytest.fixture
def positions():
    """Current upstream positions, taken before the test creates anything."""
    def take(*dbs):
        return [master_status(d.params) for d in dbs]
    return take
