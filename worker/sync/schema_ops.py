"""Worker side of ``shardctl binlog-schema list|update|delete``: answer the master's ``SchemaOp``
requests about the tracked structure of one upstream table of a subtask bound here.

Where the tracked structure lives: a streaming subtask's ``SchemaTracker`` (in memory), rebuilt
at every (re)start from the ``table_info`` of the table's checkpoint row (rule 9), or read from
the upstream for a table without one.  A change is made only while the subtask is not
replicating, as DM requires: Paused or stopped in Error, where it takes effect at the restart
``resume-task`` causes, or Paused on its shard-DDL lock (a conflict), where the waiting
subtask's idle tracker takes it at once (a ``binlog replace|skip`` of the blocked DDL then
uses it, as in DM's runbooks).  Besides:

* ``--flush`` (dmctl's default): written to the checkpoint row (``CheckpointStore.write_table_info``):
  every later start, on any worker, loads it.
* ``--flush=false``: kept in this process (:class:`SchemaOverrides`) and put into the tracker when the
  subtask restores its checkpoints; the syncer then saves it with the table's next checkpoint,
  like DM's tracker whose schema reaches the checkpoint at the next flush.  A worker restart
  before that forgets it.
* ``--sync`` (optimistic mode): an ignore-conflict Info with no DDL carries the structure to the
  table's shard-DDL lock, which takes it as the table's schema and re-joins (DM's behaviour).

The new structure is the request's ``CREATE TABLE``, or read here: ``--from-source`` the
upstream table now, ``--from-target`` the downstream table it is routed to.  ``delete`` forgets
the structure: the subtask reads the table from the upstream at its start,
as for a table it has never seen.
"""
from __future__ import annotations

import json
import threading
from datetime import datetime, timezone

import pymysql
from prometheus_client import Counter

from coordinator.config import TaskConfig, parse_task
from coordinator.errors import ShardMergeError
from coordinator.etcdproto import Info, SchemaOp, Store
from coordinator.obs import logger
from coordinator.routing import TableMapper
from coordinator.schema.errors import NOT_CREATE_TABLE, SchemaError
from coordinator.schema.model import TableSchema
from coordinator.schema.parse import parse_create_table
from coordinator.sql import show_create_table
from worker.schema_tracker import schema_from_json, schema_to_json
from worker.sync.checkpoint import CheckpointStore

SCHEMA_OPS = Counter("shardmerge_worker_binlog_schema_ops_total",
                     "binlog-schema requests answered by this worker", ["task", "source", "op", "result"])

_log = logger("worker.sync.schema_ops")


class SchemaOpError(ShardMergeError):
    """A binlog-schema request this worker cannot carry out; the message is what the operator sees."""


def _same(a: str | None, b: str | None) -> bool:
    """Two ``table_info`` texts name the same structure (``None`` / ``"null"``: none)."""
    try:
        return json.loads(a or "null") == json.loads(b or "null")
    except ValueError:
        return False


class SchemaOverrides:
    """``binlog-schema update|delete`` without ``--flush``: per (task, source) and upstream table,
    the structure to track (JSON text, or None: forget it) and the checkpoint's ``table_info`` it
    replaces.  :meth:`apply` puts it into the table infos a subtask restores from, as long as the
    checkpoint still holds that replaced structure (a later DDL or a flush of the new one ends it)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._items: dict[tuple[str, str], dict[tuple[str, str], tuple[str | None, str | None]]] = {}

    def put(self, task: str, source: str, table: tuple[str, str], base: str | None, new: str | None) -> None:
        with self._lock:
            self._items.setdefault((task, source), {})[table] = (base, new)

    def drop(self, task: str, source: str, table: tuple[str, str]) -> None:
        with self._lock:
            self._items.get((task, source), {}).pop(table, None)

    def get(self, task: str, source: str, table: tuple[str, str]) -> tuple[bool, str | None]:
        """(True, structure) when an override is kept for the table, else (False, None)."""
        with self._lock:
            hit = self._items.get((task, source), {}).get(table)
        return (True, hit[1]) if hit is not None else (False, None)

    def apply(self, task: str, source: str, infos: dict) -> dict:
        """``infos`` ({(schema, table): table_info text or None}, from the checkpoints) with the
        overrides in force put in; overrides the checkpoint has moved past are dropped."""
        out = dict(infos)
        with self._lock:
            items = self._items.get((task, source), {})
            for table, (base, new) in list(items.items()):
                cur = infos.get(table)
                if _same(cur, new):
                    del items[table]          # the checkpoint holds it now
                elif _same(cur, base):
                    out[table] = new
                    _log.info("tracked structure set by binlog-schema applied", task=task, source=source,
                              table=f"{table[0]}.{table[1]}", deleted=new is None)
                else:
                    del items[table]          # a newer structure was checkpointed since (a DDL)
        return out


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class SchemaOpServer:
    """Answers pending requests for sources bound to this worker (called from its reconcile loop)."""

    def __init__(self, worker):
        self.worker = worker
        self.store: Store = worker.store
        self.overrides = SchemaOverrides()

    def serve(self, bound: set[str]) -> None:
        for rec in self.store.list_schema_ops().items:
            if rec.state != "pending" or rec.source not in bound or rec.worker:
                continue
            # taken up first (a new revision): a master that gives up waiting can no longer
            # withdraw it as "nothing changed" while this worker applies it
            taken = self.store.finish_schema_op(rec, "pending", worker=self.worker.name)
            if taken is None:
                continue          # withdrawn or replaced meanwhile
            rec = taken
            state, result = "done", ""
            try:
                result = self._answer(rec)
            except SchemaOpError as e:
                state, result = "failed", e.message
            except Exception as e:  # noqa: BLE001 — the operator must see every failure
                state, result = "failed", f"{type(e).__name__}: {e}"
            SCHEMA_OPS.labels(rec.task, rec.source, rec.op, state).inc()
            log = _log.warning if state == "failed" else _log.info
            log(f"binlog-schema {rec.op} {state}", task=rec.task, source=rec.source,
                table=f"{rec.up_schema}.{rec.up_table}", flush=rec.flush, sync=rec.sync,
                from_source=rec.from_source, from_target=rec.from_target, result=result[:300])
            self.store.finish_schema_op(rec, state, result=result, worker=self.worker.name, done_at=_now())

    # ------------------------------------------------------------------ one request
    def _answer(self, rec: SchemaOp) -> str:
        trec = self.store.get_task(rec.task)
        if trec is None:
            raise SchemaOpError(f"task {rec.task!r} is gone")
        cfg = parse_task(trec.yaml, f"<task {rec.task} in etcd>")
        key = (rec.up_schema, rec.up_table)
        name = f"`{rec.up_schema}`.`{rec.up_table}`"
        sub = self.worker.subtasks.get((rec.task, rec.source))
        streaming = sub is not None and sub.streaming and sub.thread.is_alive()
        if rec.op == "list":
            return self._list(rec, cfg, key, name, sub if streaming else None)
        # replicating or starting (its checkpoints may be read already); one retrying after a
        # failure reads them again at its next attempt
        active = sub is not None and sub.thread.is_alive() and (sub.streaming or sub.failed is None)
        live = self._blocked_tracker(sub) if active else None
        if active and live is None:
            raise SchemaOpError(f"the subtask of task {rec.task!r} on source {rec.source!r} is running; run "
                                f"`shardctl pause-task {rec.task} -s {rec.source}` first")
        new: TableSchema | None = None
        if rec.op == "update":
            sql, where = self._new_structure(rec, cfg)
            try:
                new = parse_create_table(sql).with_name(rec.up_table)
            except (SchemaError, ValueError) as e:
                raise SchemaOpError(f"{where} {NOT_CREATE_TABLE}: {e}") from None
        info = self._sync_info(rec, cfg, new) if rec.sync else None
        store = self._checkpoints(cfg, rec.source)
        new_text = schema_to_json(new) if new is not None else None
        if rec.flush:
            store.ensure_table()
            store.claim()           # this worker holds the binding: its epoch fences the write
            store.write_table_info(rec.up_schema, rec.up_table, new_text)
            self.overrides.drop(rec.task, rec.source, key)
        else:
            base = store.load().tables.get(key)
            self.overrides.put(rec.task, rec.source, key, base.table_info if base is not None else None, new_text)
        if live is not None:
            live.set(rec.up_schema, rec.up_table, new)      # None forgets: re-read from the upstream on use
        if info is not None:
            rev = self.store.put_info(info)
            _log.info("tracked structure sent to the shard-DDL lock", task=rec.task, source=rec.source,
                      table=f"{rec.up_schema}.{rec.up_table}", lock_id=info.lock.id, info_revision=rev)
        kept = ("written to the checkpoint" if rec.flush else
                "kept by the worker until the subtask checkpoints it (a worker restart before that forgets it; "
                "--flush writes it at once)")
        what = "set" if new is not None else "deleted (re-read from the upstream when the subtask starts)"
        then = (f"the subtask waiting on its shard-DDL lock uses it now (e.g. for `shardctl binlog replace|skip "
                f"{rec.task} -s {rec.source}` of the blocked DDL)" if live is not None else
                f"`shardctl resume-task {rec.task} -s {rec.source}` continues with it")
        return f"tracked structure of {name} {what}; {kept}" + ("; sent to its shard-DDL lock" if info else "") \
            + f"; {then}"

    @staticmethod
    def _blocked_tracker(sub):
        """The tracker of a subtask that waits on its shard-DDL lock (Paused by a conflict, its
        thread parked until an Operation or an operator's binlog skip/replace): idle, so the
        operator's structure can go straight into it, as into a paused DM subtask.  None for
        a subtask that is replicating."""
        tracker = getattr(getattr(sub, "handler", None), "tracker", None)
        snap = sub.status.snapshot()
        detail = snap.detail or {}
        if tracker is None or snap.stage != "Paused" or not detail.get("lock_id") \
                or detail.get("paused_by") == "operator":
            return None
        return tracker

    def _new_structure(self, rec: SchemaOp, cfg: TaskConfig) -> tuple[str, str]:
        """The update's CREATE TABLE and what it came from: the request, or ``--from-source``
        (the upstream table now), ``--from-target`` (the downstream target it is routed to)."""
        if not (rec.from_source or rec.from_target):
            return rec.create_sql, "the schema file"
        if rec.from_source:
            src = self.worker._source_config(rec.source)
            if src is None:
                raise SchemaOpError(f"source {rec.source!r} has no configuration on this worker")
            kwargs, (schema, table), where = src.db.pymysql_kwargs(), (rec.up_schema, rec.up_table), "upstream"
        else:
            inst = cfg.instance(rec.source)
            target = TableMapper(inst, cfg.meta_schema).target(rec.up_schema, rec.up_table) if inst else None
            if target is None:
                raise SchemaOpError(f"`{rec.up_schema}`.`{rec.up_table}` is not routed to a downstream table")
            kwargs, (schema, table), where = cfg.target.pymysql_kwargs(), (target.schema, target.table), "downstream"
        try:
            conn = pymysql.connect(**kwargs, connect_timeout=10, charset="utf8mb4")
            try:
                sql = show_create_table(conn, schema, table)
            finally:
                conn.close()
        except pymysql.MySQLError as e:
            raise SchemaOpError(f"cannot read `{schema}`.`{table}` from the {where}: {e}") from None
        if sql is None:
            raise SchemaOpError(f"table `{schema}`.`{table}` does not exist in the {where}")
        return sql, f"the {where} table `{schema}`.`{table}`"

    def _list(self, rec: SchemaOp, cfg: TaskConfig, key, name: str, sub) -> str:
        text: str | None = None
        tracker = getattr(getattr(sub, "handler", None), "tracker", None) if sub is not None else None
        if tracker is not None:
            ts = tracker.get(*key)
            text = schema_to_json(ts) if ts is not None else None
        else:
            found, text = self.overrides.get(rec.task, rec.source, key)
            if not found:
                tp = self._checkpoints(cfg, rec.source).load().tables.get(key)
                text = tp.table_info if tp is not None else None
        ts = schema_from_json(text)
        if ts is None:
            raise SchemaOpError(f"table {name} has no tracked structure on source {rec.source!r}: the worker reads "
                                "it from the upstream when the subtask next needs it")
        return ts.to_create_sql(rec.up_table)

    def _sync_info(self, rec: SchemaOp, cfg: TaskConfig, new: TableSchema | None) -> Info:
        """The Info that gives the lock the table's new structure (DM: ``--sync``)."""
        inst = cfg.instance(rec.source)
        mapper = TableMapper(inst, cfg.meta_schema) if inst is not None else None
        target = mapper.target(rec.up_schema, rec.up_table) if mapper is not None else None
        if cfg.shard_mode != "optimistic" or target is None or new is None or mapper is None \
                or not mapper.router.is_sharded(rec.up_schema, rec.up_table):
            raise SchemaOpError(f"--sync sends the structure to the shard-DDL lock of a merged target; "
                                f"`{rec.up_schema}`.`{rec.up_table}` is not a shard table of task {rec.task!r} in "
                                "optimistic shard mode; run it without --sync")
        doc = new.to_json()
        return Info(task=rec.task, source=rec.source, up_schema=rec.up_schema, up_table=rec.up_table,
                    down_schema=target.schema, down_table=target.table, ddls=[], before=doc, afters=[doc],
                    ignore_conflict=True)

    def _checkpoints(self, cfg: TaskConfig, source: str) -> CheckpointStore:
        epoch = next((int(b.revision or 0) for b in self.store.list_bindings().items
                      if b.source == source and b.worker == self.worker.name), 0)
        if not epoch:
            raise SchemaOpError(f"source {source!r} is not bound to worker {self.worker.name} any more")
        return CheckpointStore(cfg.target.pymysql_kwargs(), cfg.meta_schema, cfg.name, source, epoch)
