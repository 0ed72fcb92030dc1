"""Optimistic shard-DDL coordination, worker side.

A DDL on a shard table (one that routes to a merged target) must not be run downstream on the
worker's own authority: other shards, on this or other sources, may not have made the change.
The worker describes the change as an **Info** in etcd (the split, routed statements plus the
tracked schema before and after each one), waits for the master's **Operation** answering that
Info's revision, executes what the Operation says, marks it done, and only then lets the syncer
advance the table checkpoint.  See docs/worker-process.md.

Rules kept here (DM failures not to repeat):
* multi-clause ALTERs are split before the lock sees them (dm#613);
* only an Operation answering *this* Info's revision counts — answers to older Infos are
  ignored (dm#2282);
* the Info is re-sent when it vanished or etcd was unreachable while waiting, and on every
  restart the DDL is re-processed from the checkpoint, so a lock never waits for an Info the
  worker thinks it sent (dm#628); Info, tracker and checkpoint are rebuilt from the same
  checkpoint, so they cannot disagree (dm#859);
* a conflict pauses the subtask with the lock ID, binlog position and message in its status and
  keeps waiting on the Operation key: an operator's unlock (exec/skip) rewrites it and the
  subtask continues by itself; strict mode fails at once naming the conflicting tables.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from coordinator.errors import ShardMergeError, TransientError
from coordinator.etcdproto import (EtcdUnavailable, Info, LockKey, Operation, OperationWaitTimeout,
                                   SourceTables, Stage, StaleOperation, Store, TableRef, lock_id)
from coordinator.obs import logger
from coordinator.retry import is_transient
from coordinator.routing import TableMapper, Target
from coordinator.schema.errors import SchemaError
from coordinator.schema.split import rename_ddl_table, split_ddl
from coordinator.schema.statement import parse_statement

from .schema_tracker import Preview, SchemaTracker, SchemaTrackError, schema_to_json
from .status import StatusReporter

_log = logger("worker.coordination")


# ----------------------------------------------------------------------------- errors
class ShardDDLError(ShardMergeError):
    """A sharded DDL the worker cannot complete; carries lock ID, source, table, position."""


class StrictConflict(ShardDDLError):
    """strict-optimistic-shard-mode: a conflicting DDL fails the subtask at once.  ``tables``
    names the shard tables of the lock with pending (unfinished) DDLs."""

    def __init__(self, message: str, *, tables: list[str] = (), **ctx):
        super().__init__(message, tables=", ".join(tables), **ctx)
        self.tables = list(tables)


class UnsupportedShardDDL(ShardDDLError):
    """A statement optimistic mode cannot coordinate (RENAME TABLE, several tables at once)."""


class DDLExecutionError(ShardDDLError):
    """The downstream refused a DDL with an error that is not in the ignorable list."""


class CoordinationStopped(ShardDDLError, TransientError):
    """The subtask is stopping while a DDL waited for its Operation; nothing was executed or
    checkpointed, the DDL is re-processed on the next start."""


# ----------------------------------------------------------------------------- downstream DDL
# Repeats of the same change by several shards are absorbed by these downstream errors
# (the master returns each shard's own statement; the first one changes the table).
IGNORABLE_DDL_ERRORS = {
    1007: "database exists", 1008: "database doesn't exist (drop)", 1050: "table exists",
    1051: "unknown table (drop)", 1054: "unknown column", 1060: "duplicate column name",
    1061: "duplicate key name", 1068: "multiple primary key defined",
    1091: "can't drop field or key; check that it exists", 1176: "key doesn't exist in table",
    1517: "duplicate partition name", 1507: "error in list of partitions to drop",
}


class DownstreamDDL:
    """Executes DDL downstream with the event's timestamp and the ignorable-error list."""

    def __init__(self, connect):
        """``connect()`` returns a pymysql connection to the downstream (autocommit)."""
        self._connect = connect

    def execute(self, ddls: list[str], *, timestamp: int | None = None, **ctx) -> list[str]:
        """Run ``ddls`` in order; returns the statements the downstream actually applied
        (ignored repeats left out).  ``DDLExecutionError`` on any other error."""
        import pymysql
        applied = []
        if not ddls:
            return applied
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                if timestamp:
                    cur.execute("SET TIMESTAMP = %s", (int(timestamp),))
                for sql in ddls:
                    try:
                        cur.execute(sql)
                        applied.append(sql)
                    except pymysql.MySQLError as e:
                        code = e.args[0] if e.args else None
                        if code in IGNORABLE_DDL_ERRORS:
                            _log.info("downstream DDL already applied; ignored", statement=sql,
                                      reason=IGNORABLE_DDL_ERRORS[code], **_strs(ctx))
                            continue
                        if is_transient(e):   # downstream down / connection lost: retried, not a DDL error
                            raise
                        raise DDLExecutionError(
                            f"downstream refused DDL {sql!r}: {e}; fix the target and `shardctl resume-task`, "
                            f"or `shardctl binlog skip {ctx.get('task', 'TASK')} -s {ctx.get('source', 'SOURCE')}` "
                            f"to skip the statement", **ctx) from e
                if timestamp:
                    cur.execute("SET TIMESTAMP = DEFAULT")
        finally:
            conn.close()
        return applied


def _strs(ctx: dict) -> dict:
    return {k: str(v) for k, v in ctx.items() if v not in (None, "")}


# ----------------------------------------------------------------------------- statements
@dataclass(frozen=True)
class TableDDL:
    """One upstream DDL statement on one table, as read from the binlog."""
    sql: str
    schema: str                 # upstream schema the statement names (or the session default)
    table: str
    kind: str                   # alter / create / drop / truncate / rename / create_index / drop_index
    position: str = ""          # binlog position of the event (text, for status and errors)
    timestamp: int | None = None


def parse_table_ddl(sql: str, default_schema: str, *, position: str = "",
                    timestamp: int | None = None) -> TableDDL | None:
    """The table a DDL statement changes, or None for statements that change no table
    (CREATE/DROP DATABASE, ...): those take the syncer's direct path."""
    try:
        st = parse_statement(sql)
    except SchemaError:
        return None
    if st.table is None:
        return None
    db, name = st.table
    return TableDDL(st.sql, db or default_schema, name, st.kind, position, timestamp)


def route_statement(sql: str, target: Target) -> str:
    """The statement with its table reference replaced by the downstream target."""
    return rename_ddl_table(sql, (target.schema, target.table))


def create_if_not_exists(sql: str) -> str:
    """``CREATE TABLE x`` -> ``CREATE TABLE IF NOT EXISTS x`` (a shard's CREATE of a merged
    target that another shard created first must not fail)."""
    st = parse_statement(sql)
    if st.kind != "create" or st.data.get("if_not_exists"):
        return st.sql
    a, _ = st.table_span
    return st.sql[:a] + "IF NOT EXISTS " + st.sql[a:]


# ----------------------------------------------------------------------------- outcome
@dataclass
class Outcome:
    """One sharded DDL.  ``statements``: what to execute downstream; ``executed``: what the
    downstream applied (``handle`` only); ``schema``: the tracked schema after it (stored with
    the table checkpoint); ``operation``: the master's answer (None for CREATE/DROP TABLE);
    ``hold``: skip-and-wait — nothing executed, the table waits for a redirect."""
    table: TableDDL
    target: Target
    statements: list[str]
    executed: list[str] = field(default_factory=list)
    preview: Preview | None = None
    operation: Operation | None = None
    hold: bool = False
    info: Info | None = None

    @property
    def schema(self):
        return self.preview.after if self.preview else None


# ----------------------------------------------------------------------------- SourceTables
class SourceTablesWriter:
    """Keeps this source's SourceTables record (all upstream tables of the subtask and their
    targets) in etcd: written in full at subtask start, updated on CREATE/DROP TABLE."""

    def __init__(self, store: Store, task: str, source: str, mapper: TableMapper):
        self.store, self.mapper = store, mapper
        self.record = SourceTables(task=task, source=source)
        self._lock = threading.Lock()

    def write_all(self, tables) -> SourceTables:
        st = SourceTables(task=self.record.task, source=self.record.source)
        for schema, table in tables:
            t = self.mapper.target(schema, table)
            if t is not None:
                st.add(schema, table, t.schema, t.table)
        with self._lock:
            self.record = st
            self.store.put_source_tables(st)
        return st

    def add(self, schema: str, table: str) -> bool:
        t = self.mapper.target(schema, table)
        with self._lock:
            if t is None or not self.record.add(schema, table, t.schema, t.table):
                return False
            self.store.put_source_tables(self.record)
        return True

    def remove(self, schema: str, table: str) -> bool:
        t = self.mapper.target(schema, table)
        with self._lock:
            if t is None or not self.record.remove(schema, table, t.schema, t.table):
                return False
            self.store.put_source_tables(self.record)
        return True


def list_upstream_tables(conn, mapper: TableMapper) -> list[tuple[str, str]]:
    """All base tables of the upstream that pass the task's block-allow list."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                    "WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY 1, 2")
        rows = cur.fetchall()
    return [(s, t) for s, t in rows if mapper.target(s, t) is not None]


# ----------------------------------------------------------------------------- coordinator
class ShardDDLCoordinator:
    """Handles DDLs of routed shard tables for one subtask (task + source).

    ``handle(ddl)`` blocks until the DDL is complete (executed or skipped downstream, Operation
    marked done) and returns the ``Outcome``; the caller then stores ``outcome.schema`` with the
    table checkpoint at the DDL's position.  The tracker is updated here (it follows the
    upstream, whatever the downstream executed)."""

    def __init__(self, store: Store, task: str, source: str, mapper: TableMapper,
                 tracker: SchemaTracker, downstream: DownstreamDDL, status: StatusReporter | None = None,
                 *, strict: bool = False, stop: threading.Event | None = None,
                 source_tables: SourceTablesWriter | None = None, recheck_interval: float = 30.0,
                 can_hold: bool = False):
        """``can_hold``: the caller can hold a table on a skip-and-wait answer and replay it
        after the redirect (the syncer can); otherwise skip-and-wait blocks like a conflict."""
        self.store, self.task, self.source = store, task, source
        self.mapper, self.tracker, self.downstream, self.status = mapper, tracker, downstream, status
        self.strict = strict
        self.stop = stop or threading.Event()
        self.source_tables = source_tables or SourceTablesWriter(store, task, source, mapper)
        self.recheck_interval = recheck_interval
        self.can_hold = can_hold

    # ------------------------------------------------------------------ entry points
    def handle(self, ddl: TableDDL) -> Outcome:
        """Decide, execute downstream, complete: the whole DDL in one call."""
        pending = self.decide(ddl)
        if pending.hold:
            return pending
        pending.executed = self.downstream.execute(pending.statements, timestamp=ddl.timestamp,
                                                   **self._ctx(ddl, pending.target))
        self.complete(pending)
        return pending

    def _ctx(self, ddl: TableDDL, target: Target) -> dict:
        return dict(task=self.task, source=self.source, table=f"{ddl.schema}.{ddl.table}",
                    position=ddl.position, lock_id=lock_id(self.task, target.schema, target.table))

    def decide(self, ddl: TableDDL) -> Outcome:
        """Everything before downstream execution: split, track (preview), publish the Info and
        wait for the Operation.  ``outcome.statements`` are what to execute downstream;
        ``outcome.hold`` means skip-and-wait (execute nothing, hold the table until redirect).
        Nothing is committed: call :meth:`complete` after executing."""
        target = self.mapper.target(ddl.schema, ddl.table)
        if target is None:
            raise ShardDDLError("DDL on a filtered table reached the shard-DDL coordinator",
                                task=self.task, source=self.source, table=f"{ddl.schema}.{ddl.table}")
        ctx = self._ctx(ddl, target)
        skip = f"`shardctl binlog skip {self.task} -s {self.source}`"
        if ddl.kind == "rename":
            raise UnsupportedShardDDL("RENAME TABLE of a shard table is not supported in optimistic mode; "
                                      f"{skip} skips it (e.g. an online-DDL cut-over), or rename every shard "
                                      "and the target by hand", **ctx)
        try:
            statements = split_ddl(ddl.sql)
        except SchemaError as e:
            raise UnsupportedShardDDL(f"cannot split DDL {ddl.sql!r}: {e}; run it on the target by hand if "
                                      f"needed, then {skip} skips it here", **ctx) from e
        if ddl.kind == "truncate":
            _log.warning("TRUNCATE of a shard table is not replicated to the merged target", **_strs(ctx))
            return Outcome(ddl, target, [])
        if ddl.kind == "create":
            p = self._preview_create(ddl, statements)
            routed = [create_if_not_exists(route_statement(s, target)) for s in statements]
            return Outcome(ddl, target, routed, preview=p)
        if ddl.kind == "drop":
            # The merged target keeps the other shards' rows: nothing runs downstream; the table
            # leaves the lock (the master sees the SourceTables change).
            p = Preview(ddl.schema, ddl.table, tuple(statements), self.tracker.get(ddl.schema, ddl.table), (None,))
            return Outcome(ddl, target, [], preview=p)
        return self._coordinate(ddl, target, statements, ctx)

    def _preview_create(self, ddl: TableDDL, statements: list[str]) -> Preview:
        """The table as this CREATE TABLE defines it.  A schema the tracker already holds for it
        may have been pre-loaded from the upstream's *current* definition at subtask start
        (table without checkpoint): the statement in the binlog is the truth at this position,
        so it wins — except for ``IF NOT EXISTS`` on a tracked table, a no-op upstream too."""
        from coordinator.schema.ddl import apply_ddl
        cur = self.tracker.get(ddl.schema, ddl.table)
        if len(statements) == 1:
            try:
                st = parse_statement(statements[0])
                if cur is None or not st.data.get("if_not_exists"):
                    after = apply_ddl(None, statements[0])
                    if after is not None:
                        return Preview(ddl.schema, ddl.table, tuple(statements), None,
                                       (after.with_name(ddl.table),))
            except SchemaError:
                pass     # CREATE TABLE ... LIKE / SELECT: not modelled from the text
        try:
            return self.tracker.preview(ddl.schema, ddl.table, statements, position=ddl.position)
        except SchemaTrackError:
            # not modelled from the text; the upstream's definition is the best source left
            after = self.tracker.load_upstream(ddl.schema, ddl.table, position=ddl.position)
            return Preview(ddl.schema, ddl.table, tuple(statements), None, (after,))

    def complete(self, out: Outcome) -> None:
        """After the downstream executed ``out.statements``: mark the Operation done, then make
        the new schema the tracked one (the caller advances the table checkpoint next)."""
        ddl, ctx = out.table, self._ctx(out.table, out.target)
        if out.operation is not None:
            self._mark_done(out.operation, ctx)
        if ddl.kind == "create":
            self.tracker.commit(out.preview)
            self.source_tables.add(ddl.schema, ddl.table)
        elif ddl.kind == "drop":
            self.source_tables.remove(ddl.schema, ddl.table)
            self.tracker.forget(ddl.schema, ddl.table)
        elif out.preview is not None:
            self.tracker.commit(out.preview)
        if out.operation is not None:
            if self.status is not None:
                self.status.running()
            _log.info("shard DDL done", stage=out.operation.stage.value, returned=len(out.statements),
                      **_strs(ctx))

    def _preview(self, ddl, statements, ctx) -> Preview:
        try:
            return self.tracker.preview(ddl.schema, ddl.table, statements, position=ddl.position)
        except SchemaTrackError as e:
            raise ShardDDLError(f"{e.message}; `shardctl binlog skip {self.task} -s {self.source}` skips the "
                                f"statement (the tracked schema then follows the upstream)",
                                **{**ctx, **e.context}) from e

    # ------------------------------------------------------------------ ALTER & co: the lock
    def _coordinate(self, ddl, target, statements, ctx) -> Outcome:
        p = self._preview(ddl, statements, ctx)
        if p.before is None:
            raise ShardDDLError(f"`{ddl.schema}`.`{ddl.table}` is not tracked and not found upstream; "
                                "cannot describe its DDL to the lock", **ctx)
        routed = [route_statement(s, target) for s in statements]
        info = Info(task=self.task, source=self.source, up_schema=ddl.schema, up_table=ddl.table,
                    down_schema=target.schema, down_table=target.table, ddls=routed,
                    before=p.before.to_json(), afters=[a.to_json() for a in p.afters])
        op = self._unlocked_answer(info, ctx)
        if op is None:
            rev = self._put_info(info, ctx)
            op = self._await(info, rev, ddl, ctx)
        if op.stage is Stage.SKIP_AND_WAIT:
            return Outcome(ddl, target, [], preview=p, operation=op, hold=True, info=info)
        return Outcome(ddl, target, list(op.ddls or []), preview=p, operation=op, info=info)

    def wait_redirect(self, out: Outcome, cancel: threading.Event | None = None) -> Operation | None:
        """For a held (skip-and-wait) DDL: block until the master rewrites the table's Operation
        for the same Info (``resolved`` when the other shards caught up, ``unlocked`` by an
        operator, ``none`` on re-decision).  The caller then replays from the DDL.  Returns None
        when ``cancel`` is set (the syncer restarted: the replayed DDL gets a new Info)."""
        info, op = out.info, out.operation
        ctx = self._ctx(out.table, out.target)
        after = op.revision
        while True:
            if cancel is not None and cancel.is_set():
                return None
            try:
                nxt = self.store.wait_operation(info.lock, info.table, op.info_revision, after_revision=after,
                                                timeout=min(self.recheck_interval, 5.0), stop=self.stop)
            except OperationWaitTimeout:
                if self.stop.is_set():
                    raise CoordinationStopped("subtask stopping while a table waited for its redirect",
                                              **ctx) from None
                continue
            except EtcdUnavailable as e:
                self._wait_etcd(e, ctx)
                continue
            if nxt.stage in (Stage.RESOLVED, Stage.UNLOCKED, Stage.NONE):
                _log.info("held table redirected; replaying from its DDL", stage=nxt.stage.value, **_strs(ctx))
                return nxt
            after = nxt.revision

    def _unlocked_answer(self, info: Info, ctx) -> Operation | None:
        """An operator's unlock that is not done yet and answers exactly this DDL (the stored
        Info it answers has the same statements and schemas): replaying a held table, or a
        restart right after the unlock.  Re-sending the Info would make the lock decide again
        and could undo the operator's ``skip``."""
        try:
            op = self.store.get_operation(info.lock, info.table)
            if op is None or op.stage is not Stage.UNLOCKED or op.done:
                return None
            cur = self.store.get_info(info.lock, info.table)
        except EtcdUnavailable:
            return None
        if cur is None or cur.revision != op.info_revision:
            return None
        if (cur.ddls, cur.before, cur.afters) != (info.ddls, info.before, info.afters):
            return None
        _log.info("using the operator's unlock for this DDL", action="exec" if op.ddls else "skip",
                  info_revision=op.info_revision, **_strs(ctx))
        return op

    def _put_info(self, info: Info, ctx) -> int:
        while True:
            try:
                rev = self.store.put_info(info)
                _log.info("shard DDL info put", info_revision=rev, ddls=len(info.ddls), **_strs(ctx))
                return rev
            except EtcdUnavailable as e:
                self._wait_etcd(e, ctx)

    def _wait_etcd(self, e: Exception, ctx) -> None:
        if self.status is not None:
            self.status.waiting(f"etcd unreachable ({e}); retrying", lock_id=ctx["lock_id"])
        if self.stop.wait(1.0):
            raise CoordinationStopped("subtask stopping while etcd was unreachable", **ctx)

    def _await(self, info: Info, rev: int, ddl: TableDDL, ctx) -> Operation:
        """Wait for the Operation answering Info revision ``rev``; handle conflict stages."""
        lock, table = info.lock, info.table
        after = 0
        owner = str(table)
        if self.status is not None:
            self.status.waiting(f"Operation for lock {ctx['lock_id']} (info revision {rev})", lock_id=ctx["lock_id"])
        while True:
            if self.stop.is_set():
                raise CoordinationStopped("subtask stopping while waiting for the shard DDL Operation",
                                          info_revision=rev, **ctx)
            try:
                op = self.store.wait_operation(lock, table, rev, after_revision=after,
                                               timeout=self.recheck_interval, stop=self.stop)
            except OperationWaitTimeout:
                if self.stop.is_set():
                    raise CoordinationStopped("subtask stopping while waiting for the shard DDL Operation",
                                              info_revision=rev, **ctx) from None
                new = self._recheck_info(info, rev, ctx)
                if new != rev:
                    rev, after = new, 0
                continue
            except EtcdUnavailable as e:
                self._wait_etcd(e, ctx)
                new = self._recheck_info(info, rev, ctx)
                if new != rev:
                    rev, after = new, 0
                continue
            if op.stage in (Stage.NONE, Stage.UNLOCKED, Stage.RESOLVED):
                return op
            if op.stage is Stage.SKIP_AND_WAIT and self.can_hold and not self.strict:
                if self.status is not None:
                    self.status.waiting(f"redirect for lock {ctx['lock_id']}: {owner} is held on "
                                        f"{info.ddls} until the other shards make the same change "
                                        f"(other tables keep replicating)", lock_id=ctx["lock_id"])
                return op
            if op.stage in (Stage.DETECTED, Stage.SKIP_AND_WAIT) and self.strict:
                tables = self._pending_tables(lock, owner)
                err = StrictConflict(
                    f"strict optimistic shard mode: conflicting DDL {info.ddls} on {owner}: "
                    f"{op.message or op.stage.value}; conflicting tables: {', '.join(tables)}",
                    tables=tables, stage=op.stage.value, **ctx)
                if self.status is not None:
                    self.status.error(err, lock_id=ctx["lock_id"], position=ddl.position, owner=owner)
                raise err
            # detected / skip-and-wait / error: paused until the lock changes or an operator
            # unlocks; the master rewrites the Operation for this same Info then.
            msg = (f"shard DDL {info.ddls} on {owner} is blocked: {op.stage.value}: {op.message}; "
                   f"run `shardctl shard-ddl-lock unlock {ctx['lock_id']} -s {self.source} -d {ddl.schema} "
                   f"-t {ddl.table} --action skip|exec` or make the other shards' schemas agree")
            _log.warning("shard DDL paused", stage=op.stage.value, info_revision=rev, **_strs(ctx))
            if self.status is not None:
                self.status.paused(ShardDDLError(msg, stage=op.stage.value, info_revision=rev, **ctx),
                                   lock_id=ctx["lock_id"], position=ddl.position, owner=owner,
                                   waiting_for=f"a new Operation for lock {ctx['lock_id']} "
                                               f"(info revision {rev}, after revision {op.revision})")
            after = op.revision

    def _recheck_info(self, info: Info, rev: int, ctx) -> int:
        """While waiting long: make sure the master can still see our Info (dm#628).  Re-put it
        when it is gone or was overwritten with something else; returns the revision to wait on."""
        try:
            cur = self.store.get_info(info.lock, info.table)
        except EtcdUnavailable as e:
            self._wait_etcd(e, ctx)
            return rev
        if cur is not None and cur.revision == rev:
            return rev
        if cur is not None and cur.to_dict() == info.to_dict():
            return cur.revision   # re-put by an earlier recheck of ours; same content
        _log.warning("shard DDL info missing or replaced while waiting; re-sending it",
                     info_revision=rev, found=bool(cur), **_strs(ctx))
        return self._put_info(info, ctx)

    def _mark_done(self, op: Operation, ctx) -> None:
        while True:
            try:
                self.store.mark_done(op)
                return
            except StaleOperation as e:
                # Deleted: the lock resolved and was removed — our part is complete.  Replaced:
                # the master re-decided for a newer Info of ours (a recheck re-put): equally final
                # for this event, the newer Info's answer concerns the same statements.
                _log.warning("operation changed before it was marked done", error=str(e), **_strs(ctx))
                return
            except EtcdUnavailable as e:
                self._wait_etcd(e, ctx)

    def _pending_tables(self, lock: LockKey, owner: str) -> list[str]:
        """Shard tables of the lock whose DDL is not finished (for strict-mode errors)."""
        out = {owner: owner}
        try:
            ops = {str(o.table): o for o in self.store.list_operations(lock.task).items if o.lock == lock}
            for i in self.store.list_infos(lock.task).items:
                o = ops.get(str(i.table))
                if i.lock == lock and (o is None or not o.done):
                    out[str(i.table)] = f"{i.table} ({'; '.join(i.ddls)})"
        except EtcdUnavailable:
            pass
        return sorted(out.values())


# ----------------------------------------------------------------------------- syncer seam
_KIND_FROM_EVENT = {"create_table": "create", "alter_table": "alter", "drop_table": "drop",
                    "truncate_table": "truncate", "rename_table": "rename", "create_index": "create_index",
                    "drop_index": "drop_index"}


class OptimisticDDLHandler:
    """The syncer's ``DDLHandler`` (``worker.ddl_handler``) for a task in optimistic shard mode.

    Shard tables (routed to a merged target) go through :class:`ShardDDLCoordinator`; every
    other DDL takes the direct path of ``DirectDDLHandler``.  The schema tracker follows all
    tables and is what ``table_info`` reports for the checkpoints; ``restore`` rebuilds it and
    drops every pending/held state from the checkpoints alone (tiflow#9588: nothing survives a
    resume that the checkpoints do not say).  ``on_redirect`` (the syncer's
    ``request_rewind``) is called when a held table's conflict is resolved."""

    def __init__(self, coordinator: ShardDDLCoordinator, on_redirect=None):
        from worker.ddl_handler import DirectDDLHandler
        self.coord = coordinator
        self.tracker = coordinator.tracker
        self.direct = DirectDDLHandler()
        self.on_redirect = on_redirect
        coordinator.can_hold = on_redirect is not None
        self._pending: dict[tuple[str, str], Outcome] = {}
        self._waiters: dict[tuple[str, str], threading.Thread] = {}
        self._cancel = threading.Event()

    # -- DDLHandler protocol
    def close(self) -> None:
        """Stop the redirect waiters (the syncer using this handler is gone)."""
        self._cancel.set()

    def restore(self, table_infos: dict) -> None:
        self._cancel.set()             # held-table waiters of an earlier run stop
        self._cancel = threading.Event()
        self._pending.clear()
        self._waiters.clear()
        for (s, t) in self.tracker.tables():
            self.tracker.forget(s, t)
        for (s, t), text in table_infos.items():
            try:
                self.tracker.load_checkpoint(s, t, text)
            except SchemaTrackError as e:   # unreadable: re-read from the upstream on first use
                _log.warning("checkpointed schema unreadable; will reload from upstream",
                             table=f"{s}.{t}", error=str(e))
        self.direct.restore(table_infos)
        # tables without a checkpointed schema: read them now, as close to the start position
        # as we can get, rather than at their first DDL (by then the upstream may have moved on)
        missing = [k for members in self.coord.source_tables.record.targets().values()
                   for k in members if self.tracker.get(*k) is None]
        if missing and self.tracker.can_load:
            try:
                self.tracker.load_all_upstream(sorted(missing))
            except Exception as e:  # noqa: BLE001 — they are loaded on first use instead
                _log.warning(f"could not pre-load upstream schemas: {e}", tables=len(missing))

    def table_info(self, schema: str, table: str) -> str | None:
        ts = self.tracker.get(schema, table)
        return None if ts is None else schema_to_json(ts)

    def handle_ddl(self, event, ctx):
        from worker.ddl_handler import DDLDecision
        kind = _KIND_FROM_EVENT.get(event.kind)
        if event.table is None or kind is None or event.target_table is None \
                or not ctx.is_sharded(event.schema, event.table):
            if event.table is not None and kind is not None and event.target_table is not None:
                self._track_direct(event, kind)
            return self.direct.handle_ddl(event, ctx)
        ddl = TableDDL(event.query, event.schema, event.table, kind, str(event.start), event.timestamp or None)
        out = self.coord.decide(ddl)
        key = (event.schema, event.table)
        if out.hold:
            self._start_waiter(key, out)
            return DDLDecision(hold=True, note=f"skip-and-wait on lock {out.operation.lock_id}")
        self._pending[key] = out
        return DDLDecision(execute=list(out.statements), skip=not out.statements,
                           note=f"lock {lock_id(self.coord.task, out.target.schema, out.target.table)}")

    def ddl_executed(self, event, decision, ctx) -> None:
        out = self._pending.pop((event.schema, event.table), None) if event.table else None
        if out is not None:
            self.coord.complete(out)

    def ddl_skipped(self, event, ctx) -> None:
        """``shardctl binlog skip``: no Info is sent and nothing runs downstream; the tracker
        follows the upstream (``worker.ddl_handler.follow_skipped``) and a skipped CREATE/DROP of
        a shard table still updates this source's SourceTables (the table exists upstream)."""
        from worker.ddl_handler import follow_skipped
        key = (event.schema, event.table)
        self._pending.pop(key, None)
        kind = _KIND_FROM_EVENT.get(event.kind)
        if event.table is None or kind is None:
            return
        tr = self.tracker

        def apply():
            if kind == "drop":
                tr.forget(*key)
            else:
                tr.apply(*key, split_ddl(event.query) if kind == "alter" else [event.query],
                         position=str(event.start))

        def reload():
            if tr.load_upstream(*key, position=str(event.start)) is None:
                tr.forget(*key)      # gone upstream by now

        follow_skipped(event, ctx, apply, reload, lambda: tr.forget(*key))
        if event.target_table is not None and ctx.is_sharded(*key):
            if kind == "create":
                self.coord.source_tables.add(*key)
            elif kind == "drop":
                self.coord.source_tables.remove(*key)
            elif kind != "truncate":
                self._finish_answered(event)

    def _finish_answered(self, event) -> None:
        """A skipped DDL that was already described to the lock and answered "execute" (its
        downstream execution failed, e.g. a unique key the merged rows violate) leaves the lock
        waiting for this table's done mark: give it (the statements did NOT run downstream; a
        warning says which).  Only when the table's current Info is exactly this DDL."""
        try:
            statements = split_ddl(event.query)
        except SchemaError:
            return                               # never described to the lock
        target = self.coord.mapper.target(event.schema, event.table)
        lock = LockKey(self.coord.task, target.schema, target.table)
        ctx = self.coord._ctx(TableDDL(event.query, event.schema, event.table, "alter", str(event.start)), target)
        table = TableRef(self.coord.source, event.schema, event.table)
        info = self.coord.store.get_info(lock, table)
        if info is None or info.ddls != [route_statement(s, target) for s in statements]:
            return
        op = self.coord.store.get_operation(lock, table)
        if op is None or op.done or op.info_revision != info.revision:
            return
        if op.stage not in (Stage.NONE, Stage.UNLOCKED):
            _log.warning("skipped DDL is still pending in its lock; unlock it with `shardctl shard-ddl-lock "
                         "unlock ... --action skip` or remove the table from the lock", stage=op.stage.value,
                         **_strs(ctx))
            return
        self.coord._mark_done(op, ctx)
        _log.warning("skipped DDL's Operation marked done for its lock; its statements did NOT run downstream",
                     ddls="; ".join(op.ddls), **_strs(ctx))

    # -- helpers
    def _track_direct(self, event, kind: str) -> None:
        """Non-coordinated table DDL: follow it in the tracker (best effort — a table whose DDL
        cannot be modelled is re-read from the upstream on next use)."""
        try:
            stmts = split_ddl(event.query) if kind == "alter" else [event.query]
            if kind == "drop":
                self.tracker.forget(event.schema, event.table)
            else:
                self.tracker.apply(event.schema, event.table, stmts, position=str(event.start))
        except (SchemaError, SchemaTrackError) as e:
            _log.warning("DDL not modelled by the schema tracker; table will be re-read from upstream",
                         table=f"{event.schema}.{event.table}", error=str(e))
            self.tracker.forget(event.schema, event.table)

    def _start_waiter(self, key, out: Outcome) -> None:
        cancel = self._cancel

        def run():
            try:
                op = self.coord.wait_redirect(out, cancel)
            except CoordinationStopped:
                return
            except Exception as e:  # noqa: BLE001 — a dying waiter must be visible
                _log.error(f"redirect waiter failed: {e}", table=f"{key[0]}.{key[1]}", error=str(e))
                return
            if op is not None and not cancel.is_set() and self.on_redirect is not None:
                self.on_redirect()

        th = threading.Thread(target=run, name=f"redirect-{key[0]}.{key[1]}", daemon=True)
        self._waiters[key] = th
        th.start()
