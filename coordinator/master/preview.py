"""``DDLPreview`` on the leader: gather the live state the preview copies, run it, measure the
downstream.  The coordinator thread is held only to copy the lock and the SourceTables; the
checkpoint reads, the simulation and the downstream trial run on the caller's thread."""
from __future__ import annotations

import copy

import pymysql

from coordinator.config import parse_source, parse_task
from coordinator.errors import ShardMergeError
from coordinator.etcdproto import LockKey, Store, TableRef
from coordinator.lock import LockKeeper
from coordinator.precheck.connect import connect
from coordinator.preview import BadPlan, PlanStep, Simulation, TaskNotRunning
from coordinator.preview.cost import DownstreamTrial
from coordinator.preview.plan import RawStep, parse_plan
from coordinator.preview.simulate import copy_keeper
from coordinator.preview.target import parse, resolve_target, shards
from coordinator.schema import SchemaError, TableSchema, parse_create_table
from coordinator.sql import quote_table

from .checkpoint_schema import CheckpointSchemaSource
from .optimist import Optimist


def ddl_preview(store: Store, optimist: Optimist, task: str, sources: list[str], tables: str, sql: str,
                plan: str = "", plan_name: str = "the plan", measure: bool = True) -> dict:
    rec = store.get_task(task)
    if rec is None:
        raise TaskNotRunning(f"task {task!r} is not running (not started, or stopped): ddl-preview reads its live "
                             "lock state; start it with `shardctl start-task TASK.yaml`", task=task)
    if rec.sources and all(rec.stage_of(s) == "paused" for s in rec.sources):
        raise TaskNotRunning(f"task {task!r} is paused on every source ({', '.join(rec.sources)}): its locks do "
                             "not move; `shardctl resume-task` it first", task=task)
    if plan:
        if sql or sources or tables:
            raise BadPlan("give either a statement (with -s/--tables) or --plan, not both", file=plan_name)
        raw = parse_plan(plan, plan_name)
    else:
        raw = [RawStep(parse(sql), tuple(sources), tables)]

    def snapshot():
        live: LockKeeper = optimist.engine.keeper
        sts = [copy.deepcopy(st) for (t, _s), st in sorted(live._source_tables.items()) if t == task]
        if not sts:
            sts = [copy.deepcopy(st) for st in store.list_source_tables(task).items]
        key = resolve_target(raw[0].statement, task, sts)
        return key, sts, copy_keeper(live, key, lambda _k, _t: None)

    key, sts, keeper = optimist.call(snapshot)
    steps: list[PlanStep] = []
    for i, r in enumerate(raw, 1):
        k = resolve_target(r.statement, task, sts)
        if k != key:
            raise BadPlan(f"step {i} of {plan_name} changes {k.down_schema}.{k.down_table} but step 1 changes "
                          f"{key.down_schema}.{key.down_table}; a plan previews one merged table", file=plan_name)
        picked = shards(key, sts, r.sources, r.tables)
        if plan:
            steps.append(PlanStep(r.statement, picked))
        else:
            steps.extend(PlanStep(r.statement, [t]) for t in picked)     # shard by shard
    everyone = shards(key, sts)
    lock = keeper.find(key)
    reader = CheckpointSchemaSource(store, wait=3.0)
    try:
        outside = [t for t in everyone if lock is None or t not in lock.members]
        schemas: dict[TableRef, TableSchema | None] = reader.many(key, outside) if outside else {}
    finally:
        reader.close()
    upstream = _from_upstream(store, [t for t, s in schemas.items() if s is None])
    schemas.update(upstream)
    keeper.schema_source = lambda _k, t: schemas.get(t)
    trial, note = _trial(rec.yaml, task, key) if measure else (None, "not measured")
    try:
        doc = Simulation(keeper, key, schemas, cost=trial).run(steps)
    finally:
        if trial is not None:
            trial.close()
            trial.conn.close()
    doc.update(task=task, target=f"{key.down_schema}.{key.down_table}", cost_note=note,
               shards=[str(t) for t in everyone], schemas_from_upstream=sorted(str(t) for t in upstream),
               unknown_schemas=sorted(str(t) for t, s in schemas.items() if s is None))
    return doc


def _from_upstream(store: Store, tables: list[TableRef]) -> dict[TableRef, TableSchema]:
    """Tables whose worker has checkpointed no structure yet: the upstream's current definition,
    as the worker's tracker loads it when it meets a DDL of an untracked table."""
    out: dict[TableRef, TableSchema] = {}
    for source in sorted({t.source for t in tables}):
        rec = store.get_source(source)
        if rec is None:
            continue
        try:
            conn = connect(parse_source(rec.yaml, f"<registered source {source}>").db)
        except (ShardMergeError, pymysql.MySQLError, OSError):
            continue          # stays unknown; the report names it
        try:
            for t in (t for t in tables if t.source == source):
                try:
                    with conn.cursor() as cur:
                        cur.execute(f"SHOW CREATE TABLE {quote_table(t.schema, t.table)}")
                        out[t] = parse_create_table(cur.fetchone()[1])
                except (pymysql.MySQLError, SchemaError, TypeError):
                    continue
        finally:
            conn.close()
    return out


def _trial(yaml_text: str, task: str, key: LockKey) -> tuple[DownstreamTrial | None, str]:
    try:
        cfg = parse_task(yaml_text, f"<task {task} in etcd>")
        conn = connect(cfg.target)
    except (ShardMergeError, pymysql.MySQLError, OSError) as e:
        return None, f"cost not measured: cannot connect to the downstream of task {task}: {e}"
    trial = DownstreamTrial(conn, key.down_schema, key.down_table)
    if trial.error:
        return trial, f"cost not measured: {trial.error}"
    return trial, (f"measured on {cfg.target.address()} with an empty copy of {key.down_schema}.{key.down_table} "
                   f"({trial.rows} rows{'' if trial.rows_exact else ', estimated'})")

