"""``shardctl binlog-schema list|update|delete TASK -s SOURCE DB TABLE [SCHEMA_FILE] [--flush] [--sync]
[--from-source|--from-target]``:
show or override the structure the worker's schema tracker holds for one upstream table (DM's
``binlog-schema`` / ``operate-schema``; the exit when a tracked schema went wrong, e.g. a table
changed upstream with ``sql_log_bin=0``).

The master checks the request (task, source, routed table, a parsable ``CREATE TABLE``, the
subtask Paused or stopped in Error for a change, as DM requires), writes a ``SchemaOp`` record
for the worker bound to the source and waits for its answer (the tracker lives in the worker;
``worker.sync.schema_ops`` applies it).  A request no worker answers in time is withdrawn, so
nothing happens later behind the operator's back.
"""
from __future__ import annotations

import time
import uuid
from datetime import datetime, timezone

from coordinator.config import parse_task
from coordinator.etcdproto import Fence, SchemaOp
from coordinator.etcdproto.schema_op import SCHEMA_OPS
from coordinator.routing import TableMapper
from coordinator.schema.errors import NOT_CREATE_TABLE, SchemaError
from coordinator.schema.parse import parse_create_table

from .cluster import Cluster, CommandResult
from .errors import RequestError

ANSWER_TIMEOUT = 20.0     # seconds the master waits for the worker's answer (below service.FORWARD_TIMEOUT)


def check_create_table(sql: str, what: str) -> None:
    """``sql`` must be one ``CREATE TABLE`` the schema model reads; RequestError names ``what``."""
    if not sql.strip():
        raise RequestError(f"{what} is empty; give the table's CREATE TABLE statement")
    try:
        parse_create_table(sql)
    except (SchemaError, ValueError) as e:
        raise RequestError(f"{what} {NOT_CREATE_TABLE}: {e}") from None


def operate_schema(cluster: Cluster, fence: Fence, task: str, source: str, op: str, database: str, table: str,
                   create_sql: str = "", flush: bool = False, sync: bool = False, *, from_source: bool = False,
                   from_target: bool = False, sync_given: bool = True,
                   timeout: float = ANSWER_TIMEOUT) -> CommandResult:
    """Check the request, hand it to the source's worker and return its answer.  ``sync`` not
    ``sync_given`` is dmctl's default: sent to the lock only where that applies (a shard table
    in optimistic mode); asked for explicitly anywhere else it is refused."""
    cmd = f"binlog-schema {op or '?'}"
    if op not in SCHEMA_OPS:
        raise RequestError(f"binlog-schema operation {op!r} is not supported; use one of {', '.join(SCHEMA_OPS)}")
    if not source:
        raise RequestError(f"{cmd} needs exactly one source: -s SOURCE")
    if not database or not table:
        raise RequestError(f"{cmd} needs the upstream DB and TABLE of the shard table")
    if op != "update" and (create_sql or from_source or from_target or (sync and sync_given)):
        raise RequestError(f"{cmd} takes no schema file, --from-source, --from-target nor --sync "
                           "(only binlog-schema update does)")
    if op == "list" and flush:
        raise RequestError("binlog-schema list takes no --flush (it changes nothing)")
    if op == "update":
        given = [bool(create_sql), from_source, from_target].count(True)
        if given != 1:
            raise RequestError(f"{cmd} takes the new structure from exactly one of: a SCHEMA_FILE, --from-source "
                               f"(the upstream table now), --from-target (the downstream table); got {given}")
        if create_sql:
            check_create_table(create_sql, "the schema file's content")
    cur = cluster._task_for_stage_change(task, [source], cmd)
    cfg = parse_task(cur.yaml, f"<task {task} in etcd>")
    inst = cfg.instance(source)
    mapper = TableMapper(inst, cfg.meta_schema) if inst is not None else None
    name = f"`{database}`.`{table}`"
    if mapper is None or mapper.target(database, table) is None:
        raise RequestError(f"{cmd}: table {name} is not replicated by task {task!r} on source {source!r} "
                           "(filtered out or not matched by its block-allow list); give the upstream shard's "
                           "DB and TABLE names", task=task, source=source)
    known = cluster.store.get_source_tables(task, source)
    if known is not None and not any((database, table) in ups for ups in known.targets().values()):
        raise RequestError(f"{cmd}: table {name} is not an upstream table of task {task!r} on source {source!r} "
                           f"(the worker lists {sum(len(u) for u in known.targets().values())} tables; check "
                           "the names, they are case-sensitive)", task=task, source=source)
    if sync and not (cfg.shard_mode == "optimistic" and mapper.router.is_sharded(database, table)):
        if sync_given:
            raise RequestError(f"{cmd} --sync sends the structure to the shard-DDL lock of a merged target; {name} is "
                               f"not a shard table of task {task!r} in optimistic shard mode; use --sync=false",
                               task=task, source=source)
        sync = False          # dmctl's default: only where it applies
    if op != "list":
        st = next((s for s in cluster.store.list_status(task).items if s.source == source), None)
        stage = st.stage if st is not None else "not reported yet"
        if stage not in ("Paused", "Error"):
            raise RequestError(f"{cmd}: the subtask of task {task!r} on source {source!r} is {stage}; the tracked "
                               f"structure can only be changed while it is Paused or stopped in Error: run "
                               f"`shardctl pause-task {task} -s {source}` first, then `resume-task`",
                               task=task, source=source)
    worker = next((b.worker for b in cluster.store.list_bindings().items if b.source == source), None)
    live = {w.worker for w in cluster.store.list_workers().items}
    if worker is None or worker not in live:
        raise RequestError(f"{cmd}: source {source!r} is not bound to a live worker; the tracked structure lives "
                           "in the worker: start it and try again", task=task, source=source)
    rec = SchemaOp(task, source, database, table, op, uuid.uuid4().hex, create_sql=create_sql, flush=flush,
                   sync=sync, from_source=from_source, from_target=from_target,
                   requested_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    cluster.store.put_schema_op(fence, rec)
    cluster.log.info("binlog-schema request", task=task, source=source, table=f"{database}.{table}", op=op,
                     flush=flush, sync=sync, from_source=from_source, from_target=from_target, worker=worker)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cluster.store.get_schema_op(task, source, database, table)
        if got is None or got.request_id != rec.request_id:
            return CommandResult(False, f"{cmd}: the request was replaced or removed before worker {worker} "
                                        "answered (another binlog-schema command or stop-task?)",
                                 [(source, False, "request replaced")])
        if got.state != "pending":
            ok = got.state == "done"
            return CommandResult(ok, "" if ok else got.result, [(source, ok, got.result)])
        time.sleep(0.2)
    withdrawn = cluster.store.delete_schema_op(fence, rec)     # only if no worker took it up meanwhile
    return CommandResult(False, f"{cmd}: worker {worker} did not answer within {timeout:.0f}s; "
                                + ("the request was withdrawn, nothing changed" if withdrawn else
                                   "it took the request up meanwhile; run `binlog-schema list` to see the "
                                   "structure now"),
                         [(source, False, "no answer")])
