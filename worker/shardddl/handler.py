"""The syncer's DDL handler in optimistic shard mode: the one path a shard DDL takes on a worker.

``Syncer`` (all earlier rows applied and flushed) -> :meth:`OptimisticDDLHandler.changes`
splits the statement (dm#613) into its changes, each handed over on its own, in order ->
:meth:`OptimisticDDLHandler.handle_ddl`: preview the change on the tracked schema, publish an
Info, wait for the Operation answering it (``lock_client``), turn the answer into a decision (``decision``) ->
the syncer executes it (``worker.sync.ddl_exec``) -> :meth:`ddl_executed` marks the Operation done
and commits the tracked schema -> the syncer advances the table checkpoint.  A skip-and-wait
answer holds the table; a waiter thread asks the syncer to rewind when the lock redirects it.

Tables that are not shards of a merged target take the direct path
(``worker.sync.ddl_handler.direct_decision``); the schema tracker follows them too.  ``restore``
rebuilds everything from the checkpoints alone (tiflow#9588: nothing survives a resume that the
checkpoints do not say).
"""
from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Callable

from coordinator.etcdproto import Info, LockKey, Operation, Stage, Store, TableRef, lock_id
from coordinator.lock.lock import MAX_AHEAD
from coordinator.obs import logger
from coordinator.routing import TableMapper, Target
from coordinator.schema.canonical import canonical_ddl, tidy_ddl
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.model import TableSchema
from coordinator.schema.errors import SchemaError
from coordinator.schema.kinds import ClauseKind, StatementKind, Track, parse_ddl
from coordinator.shell import shardctl, unlock_choice
from coordinator.sql import quote_table
from coordinator.schema.dialect import executed_text
from coordinator.schema.split import rename_ddl_table, split_ddl
from coordinator.schema.render import render_create_table
from coordinator.schema.statement import create_like_source, parse_statement
from worker.sync.ddl_handler import (DDLContext, DDLDecision, FindSkip, SkipRequested, direct_decision,
                                     follow_skipped)
from worker.events import DDLEvent
from worker.schema_tracker import Preview, SchemaTracker, SchemaTrackError, schema_to_json
from worker.status import StatusReporter

from .decision import (Combine, Execute, Fail, Hold, Pause, Reorder, Replay, Route, TableDDL, on_operation, redirected,
                       route_kind)
from .errors import CoordinationStopped, ShardDDLError, StrictConflict, UnsupportedShardDDL
from .lock_client import LockClient, strs
from .source_tables import SourceTablesWriter

_log = logger("worker.shardddl")

# DM's phrase for a shard DDL its optimistic lock holds (ErrShardDDLOptimismTrySyncFail); DM's
# tests and runbooks grep for it in query-status.  The lock ID and the lock's reason follow it.
TRY_SYNC_FAILED = "fail to try sync the optimistic shard ddl lock"
WAIT_SHOWN_AFTER = 0.5   # s: a wait for an Operation shorter than this is not written to status


def route_statement(sql: str, target: Target) -> str:
    """The statement with its table reference replaced by the downstream target."""
    return rename_ddl_table(sql, (target.schema, target.table))


def routed_ddls(statements: list[str], target: Target) -> list[str]:
    """The single-change statements as the lock, the operator and the downstream see them:
    routed to the target, in canonical text (``ALTER TABLE `db`.`tb` ADD COLUMN `c` INT``)."""
    return [canonical_ddl(route_statement(s, target)) for s in statements]


def _renames_table(sql: str) -> bool:
    """``ALTER TABLE t ..., RENAME [TO] u``: a table rename inside an ALTER (refused like ``RENAME TABLE``)."""
    try:
        return any(c.kind is ClauseKind.RENAME_TABLE for c in parse_statement(sql).clauses)
    except SchemaError:
        return False


def create_if_not_exists(sql: str) -> str:
    """``CREATE TABLE x`` -> ``CREATE TABLE IF NOT EXISTS x`` (a shard's CREATE of a merged
    target that another shard created first must not fail)."""
    st = parse_statement(sql)
    if st.kind.row.track is not Track.CREATE or st.data.get("if_not_exists") or st.table_span is None:
        return st.sql
    a, _ = st.table_span
    return st.sql[:a] + "IF NOT EXISTS " + st.sql[a:]


@dataclass
class _Pending:
    """A shard DDL between its decision and the syncer's ``ddl_executed``."""
    ddl: TableDDL
    target: Target
    statements: list[str]
    preview: Preview | None = None
    operation: Operation | None = None
    info: Info | None = None


@dataclass(frozen=True)
class _First:
    """The lock asks for change ``change`` of the ALTER first (``Operation.first``)."""
    change: int
    message: str


@dataclass(frozen=True)
class _Combine:
    """The lock asks for the held statement to run with later ones folded in (``DDLEvent.folds``)."""
    folds: list[dict]
    message: str


@dataclass
class _Held:
    """A table held on its lock: the Info it waits with, which grows as the stream reads past the
    table (``Info.ahead``) until a statement that cannot be folded in, or ``MAX_AHEAD``."""
    info: Info
    rev: int
    ctx: dict
    target: Target
    closed: bool = False
    # set when the Info is put again: the redirect waiter then waits on the new revision
    wake: threading.Event = field(default_factory=threading.Event)


def column_renames(prev: TableSchema, post: TableSchema) -> list[list[str]]:
    """``[[old, new]]`` when one statement took ``prev`` to ``post`` by renaming one column (the
    names a row written before it carries, and the ones the downstream has after it); else []."""
    pn, qn = {c.name.lower(): c.name for c in prev.columns}, {c.name.lower(): c.name for c in post.columns}
    gone, came = [pn[k] for k in pn if k not in qn], [qn[k] for k in qn if k not in pn]
    return [[gone[0], came[0]]] if len(gone) == 1 and len(came) == 1 else []


class OptimisticDDLHandler:
    """``worker.sync.ddl_handler.DDLHandler`` for a task in optimistic shard mode (one task+source)."""

    # a DDL waits for the lock's answer, i.e. for other sources (the syncer parks its apply stream)
    coordinated = True

    def __init__(self, store: Store, task: str, source: str, mapper: TableMapper, tracker: SchemaTracker,
                 status: StatusReporter | None = None, *, strict: bool = False,
                 stop: threading.Event | None = None, source_tables: SourceTablesWriter | None = None,
                 recheck_interval: float = 30.0, server: str | None = None):
        self.store, self.task, self.source = store, task, source
        # the upstream's version string: which executable comments its statements ran
        # (``coordinator.schema.dialect.executed_text``); None: a MariaDB of any version
        self.server = server
        self.mapper, self.tracker, self.status, self.strict = mapper, tracker, status, strict
        self.stop = stop or threading.Event()
        self.source_tables = source_tables or SourceTablesWriter(store, task, source, mapper)
        self.client = LockClient(store, self.stop, recheck_interval=recheck_interval,
                                 on_etcd_down=self._etcd_down)
        self._rewind: Callable[[], None] | None = None
        self._find_skip: FindSkip | None = None
        self._pending: dict[tuple[str, str], _Pending] = {}
        # a multi-change ALTER part way through: table -> (the statement's end, the changes the
        # tracked schema already has); a skip of the statement applies only the others
        self._partial: dict[tuple[str, str], tuple[str, frozenset[int]]] = {}
        self._waiters: dict[tuple[str, str], threading.Thread] = {}
        self._held: dict[tuple[str, str], _Held] = {}
        self._cancel = threading.Event()

    def _text(self, event: DDLEvent) -> str:
        """The statement as the upstream ran it: executable comments it ran are plain text, the
        ones it skipped are gone, so the tracker, the lock and the downstream all see the change
        the upstream made (``/*M! , ADD c INT */`` on MariaDB)."""
        return executed_text(event.query, self.server)

    # ------------------------------------------------------------------ DDLHandler protocol
    def attach(self, rewind: Callable[[], None], find_skip: FindSkip | None = None) -> None:
        """The syncer gives its ``request_rewind`` (called when a held table is redirected) and
        its lookup of the operator's ``binlog skip`` records by statement start position (asked
        while a DDL is paused on its lock, so the skip takes effect without a restart)."""
        self._rewind, self._find_skip = rewind, find_skip

    def close(self) -> None:
        """Stop the redirect waiters (the syncer using this handler is gone)."""
        self._cancel.set()

    def restore(self, table_infos: dict) -> list[tuple[str, str]]:
        self._cancel.set()             # held-table waiters of an earlier run stop
        self._cancel = threading.Event()
        self._pending.clear()
        self._partial.clear()
        self._waiters.clear()
        self._held.clear()
        for (s, t) in self.tracker.tables():
            self.tracker.forget(s, t)
        for (s, t), text in table_infos.items():
            try:
                self.tracker.load_checkpoint(s, t, text)
            except SchemaTrackError as e:   # unreadable: re-read from the upstream on first use
                _log.warning("checkpointed schema unreadable; will reload from upstream",
                             table=f"{s}.{t}", error=str(e))
        # tables without a checkpointed schema: read them now, as close to the start position
        # as we can get, rather than at their first DDL (by then the upstream may have moved on)
        missing = [k for members in self.source_tables.record.targets().values()
                   for k in members if self.tracker.get(*k) is None]
        if missing and self.tracker.can_load:
            try:
                read = self.tracker.load_all_upstream(sorted(missing))
            except Exception as e:  # noqa: BLE001 — they are loaded on first use instead
                _log.warning(f"could not pre-load upstream schemas: {e}", tables=len(missing))
            else:
                return sorted(k for k, ts in read.items() if ts is not None)
        return []

    def table_info(self, schema: str, table: str) -> str | None:
        ts = self.tracker.get(schema, table)
        return None if ts is None else schema_to_json(ts)

    def changes(self, event: DDLEvent, ctx: DDLContext) -> list[DDLEvent]:
        """A shard ALTER with several changes is coordinated one change at a time: each change
        is its own Info, sent once the previous one is done (docs/lock-algorithm.md, "One change
        at a time").  The lock then only ever decides single changes, so its answer to a change
        is the same live, after a handover, an unlock and a rebuild; no row of the upstream sits
        between two changes of one statement, so nothing is written in the schemas between."""
        kind = StatementKind(event.kind)
        if event.table is None or event.target_table is None or not kind.on_table or event.folds \
                or not ctx.is_sharded(event.schema, event.table):
            return [event]
        text = self._text(event)
        if route_kind(kind, text) is not Route.COORDINATE or _renames_table(text):
            return [event]
        try:
            n = len(split_ddl(text))
        except SchemaError:
            return [event]           # refused with its error when handled
        if n < 2:
            return [event]
        return [dataclasses.replace(event, change=k, changes=n) for k in range(n)]

    def handle_ddl(self, event: DDLEvent, ctx: DDLContext) -> DDLDecision:
        kind = StatementKind(event.kind)
        if event.table is None or not kind.on_table or event.target_table is None \
                or not ctx.is_sharded(event.schema, event.table):
            if event.table is not None and kind.on_table and event.target_table is not None:
                self._track_direct(event, event.table, kind)
            return direct_decision(event, ctx)
        ddl = TableDDL(self._text(event), event.schema, event.table, kind, str(event.start), event.timestamp or None,
                       str(event.end), event.change, event.later, combined=bool(event.folds))
        key = (event.schema, event.table)
        self._held.pop(key, None)
        p = self._decide(ddl, event.start)
        if isinstance(p, Hold):
            return DDLDecision(hold=True, note=p.message)
        if isinstance(p, _First):
            return DDLDecision(first=p.change, note=p.message)
        if isinstance(p, _Combine):
            return DDLDecision(combine=p.folds, note=p.message)
        self._pending[key] = p
        return DDLDecision(execute=list(p.statements), skip=not p.statements,
                           note=f"lock {lock_id(self.task, p.target.schema, p.target.table)}",
                           coordinated=p.operation is not None,
                           joins=ddl.kind.row.route is Route.CREATE and p.preview is not None)

    def ddl_executed(self, event: DDLEvent, decision: DDLDecision, ctx: DDLContext) -> None:
        """After the downstream executed the statements: mark the Operation done, then make the
        new schema the tracked one (the syncer advances the table checkpoint next)."""
        p = self._pending.pop((event.schema, event.table), None) if event.table else None
        if p is None:
            return
        ddl, c = p.ddl, self._ctx(p.ddl, p.target)
        if p.operation is not None:
            self.client.mark_done(p.operation, c)
        route = ddl.kind.row.route      # a CREATE joins the lock's membership, a DROP leaves it
        if route is Route.CREATE and p.preview is not None:
            self.tracker.commit(p.preview)
            self.source_tables.add(ddl.schema, ddl.table)
        elif route is Route.DROP:
            self.source_tables.remove(ddl.schema, ddl.table)
            self.tracker.forget(ddl.schema, ddl.table)
        elif p.preview is not None:
            self.tracker.commit(p.preview)
        self._progress(event)
        if p.operation is not None:
            if self.status is not None:
                self.status.running()
            _log.info("shard DDL done", stage=p.operation.stage.value, returned=len(p.statements), **strs(c))

    def _progress(self, event: DDLEvent) -> None:
        """The tracked schema now has ``event``'s change: remember how far its statement got."""
        key = (event.schema, event.table or "")
        if event.last_change:
            self._partial.pop(key, None)
        else:
            self._partial[key] = (str(event.end), self._applied_changes(event) | {event.change or 0})

    def _applied_changes(self, event: DDLEvent) -> frozenset[int]:
        """The changes of ``event``'s statement the tracked schema already has."""
        at = self._partial.get((event.schema, event.table or ""))
        return at[1] if at is not None and at[0] == str(event.end) else frozenset()

    def after_info(self, event: DDLEvent) -> str | None:
        """The table's schema after the DDL being finished (its pending preview), as the
        checkpoint's ``table_info`` would hold it: the finished intent carries it, so a master
        reading this table's schema for a new lock before the checkpoint moves past the DDL
        does not take the schema from before it (``CheckpointSchemaSource``)."""
        p = self._pending.get((event.schema, event.table)) if event.table else None
        if p is None or p.preview is None or not p.preview.afters or p.preview.afters[-1] is None:
            return None
        return schema_to_json(p.preview.afters[-1])

    def resume_finished(self, event: DDLEvent, ctx: DDLContext) -> None:
        """A restart met a shard DDL its checkpoint row records as finished (executed, or
        answered with nothing to run) but whose checkpoint had not moved past it: it is not
        coordinated again -- a new lock, the old one resolved meanwhile, would decide it afresh
        and could run it twice or hold it forever.  The lock's done mark is given if it still
        waits for it; the tracked schema follows the DDL (invariant 5 of docs/lock-algorithm.md)."""
        if event.table is None or event.target_table is None:
            return
        key = (event.schema, event.table)
        try:
            # a combined statement was described to the lock as one change (``Operation.combine``)
            statements = [self._text(event)] if event.folds else split_ddl(self._text(event))
            if event.change is not None:
                statements = statements[event.change:event.change + 1]
            self.tracker.commit(self.tracker.preview(event.schema, event.table, statements, position=str(event.start)))
        except (SchemaError, SchemaTrackError) as e:
            _log.warning("finished DDL not modelled by the schema tracker; table will be re-read from upstream",
                         table=f"{event.schema}.{event.table}", error=str(e))
            self.tracker.forget(*key)
            statements = []
        self._progress(event)
        target = self.mapper.target(*key)
        if target is None or not statements:
            return
        ctx_ = self._ctx(TableDDL(self._text(event), event.schema, event.table, StatementKind(event.kind),
                                  str(event.start), change=event.change), target)
        lk = LockKey(self.task, target.schema, target.table)
        table = TableRef(self.source, event.schema, event.table)
        info = self.store.get_info(lk, table)
        if info is None or info.ddls != routed_ddls(statements, target):
            return
        op = self.store.get_operation(lk, table)
        if op is not None and not op.done and op.info_revision == info.revision \
                and op.stage in (Stage.NONE, Stage.UNLOCKED):
            self.client.mark_done(op, ctx_)
        _log.info("shard DDL finished before the restart; not coordinated again", **strs(ctx_))

    def ddl_skipped(self, event: DDLEvent, ctx: DDLContext) -> None:
        """``shardctl binlog skip``: no Info is sent and nothing runs downstream; the tracker
        follows the upstream (``worker.sync.ddl_handler.follow_skipped``) and a skipped CREATE/DROP of
        a shard table still updates this source's SourceTables (the table exists upstream)."""
        kind = StatementKind(event.kind)
        if event.table is None or not kind.on_table:
            return
        key = (event.schema, event.table)
        self._pending.pop(key, None)
        tr = self.tracker
        done = self._applied_changes(event)     # a statement skipped part way: the rest only
        self._partial.pop(key, None)
        before = tr.get(*key)

        track, route = kind.row.track, kind.row.route

        def apply():
            if track is Track.FORGET:
                tr.forget(*key)
            else:
                tr.apply(*key, [s for k, s in enumerate(split_ddl(self._text(event))) if k not in done]
                         if track is Track.APPLY_SPLIT else [self._text(event)], position=str(event.start))

        def reload():
            if tr.load_upstream(*key, position=str(event.start)) is None:
                tr.forget(*key)      # gone upstream by now

        follow_skipped(event, ctx, apply, reload, lambda: tr.forget(*key))
        if event.target_table is not None and ctx.is_sharded(*key):
            if route is Route.CREATE:
                self.source_tables.add(*key)
            elif route is Route.DROP:
                self.source_tables.remove(*key)
            elif route is not Route.IGNORE:
                self._finish_answered(event, event.table, done, before)

    # ------------------------------------------------------------------ the decision
    def _ctx(self, ddl: TableDDL, target: Target) -> dict:
        return dict(task=self.task, source=self.source, table=f"{ddl.schema}.{ddl.table}",
                    position=ddl.position, lock_id=lock_id(self.task, target.schema, target.table))

    def _decide(self, ddl: TableDDL, start=None) -> _Pending | Hold | _First | _Combine:
        """Everything before downstream execution; blocks while the lock answers."""
        target = self.mapper.target(ddl.schema, ddl.table)
        if target is None:
            raise ShardDDLError("DDL on a filtered table reached the shard-DDL path",
                                task=self.task, source=self.source, table=f"{ddl.schema}.{ddl.table}")
        ctx = self._ctx(ddl, target)
        skip = f"`shardctl binlog skip {self.task} -s {self.source}`"
        route = route_kind(ddl.kind, ddl.sql)
        renamed = "`RENAME TABLE`" if route is Route.REFUSE else (
            "`ALTER TABLE ... RENAME`" if route is Route.COORDINATE and _renames_table(ddl.sql) else "")
        if renamed:
            raise UnsupportedShardDDL(f"{renamed} statement not supported in optimistic mode: a shard table "
                                      f"cannot be renamed under its merged target; for pt-online-schema-change / "
                                      f"gh-ost cut-overs set `online-ddl: true` in the task; else {skip} skips it, "
                                      "or rename every shard and the target by hand", **ctx)
        if route is Route.PASS_THROUGH:
            # ADD / DROP PARTITION: DM runs it on the merged table as written; no column or index
            # changes, so no lock and no change to the tracked schema (a repeat from another shard
            # is an "already in effect" error, ignored by the executor)
            stmt = tidy_ddl(parse_ddl(ddl.sql, ddl.schema).rewrite([quote_table(target.schema, target.table)]))
            _log.info("partition maintenance on a shard passed through to the merged target", statement=stmt,
                      **strs(ctx))
            return _Pending(ddl, target, [stmt])
        like = route is Route.CREATE and create_like_source(ddl.sql) is not None
        try:
            statements = [ddl.sql] if like or ddl.combined else split_ddl(ddl.sql)
        except SchemaError as e:
            raise UnsupportedShardDDL(f"cannot split DDL {tidy_ddl(ddl.sql)!r}: {e}; run it on the target by hand if "
                                      f"needed, then {skip} skips it here", **ctx) from e
        later: list[tuple[int, str]] = []
        if ddl.change is not None:           # one change of a multi-change ALTER (``changes``)
            later = [(k, statements[k]) for k in ddl.rest if 0 <= k < len(statements)]
            statements = statements[ddl.change:ddl.change + 1]
        if route is Route.IGNORE:
            _log.warning("TRUNCATE of a shard table is not replicated to the merged target", **strs(ctx))
            return _Pending(ddl, target, [])
        if route is Route.CREATE:
            p = self._preview_create(ddl, statements)
            if like and p.after is not None:
                # the model names an upstream table the downstream does not have: create the
                # merged target (if missing) from the new shard's tracked definition instead
                return _Pending(ddl, target, [create_if_not_exists(render_create_table(
                    p.after, (target.schema, target.table)))], preview=p)
            return _Pending(ddl, target, [create_if_not_exists(route_statement(s, target)) for s in statements],
                            preview=p)
        if route is Route.DROP:
            # The merged target keeps the other shards' rows: nothing runs downstream; the table
            # leaves the lock (the master sees the SourceTables change).
            p = Preview(ddl.schema, ddl.table, tuple(statements), self.tracker.get(ddl.schema, ddl.table), (None,))
            return _Pending(ddl, target, [], preview=p)
        return self._coordinate(ddl, target, statements, ctx, start, later)

    def _coordinate(self, ddl: TableDDL, target: Target, statements: list[str], ctx: dict,
                    start=None, later: list[tuple[int, str]] | None = None) -> _Pending | Hold | _First | _Combine:
        p = self._preview(ddl, statements, ctx)
        if p.before is None or any(a is None for a in p.afters):
            raise ShardDDLError(f"`{ddl.schema}`.`{ddl.table}` is not tracked and not found upstream; "
                                "cannot describe its DDL to the lock", **ctx)
        info = Info(task=self.task, source=self.source, up_schema=ddl.schema, up_table=ddl.table,
                    down_schema=target.schema, down_table=target.table,
                    ddls=routed_ddls(statements, target),
                    before=p.before.to_json(), afters=[a.to_json() for a in p.afters if a is not None],
                    timestamp=int(ddl.timestamp or 0),     # the binlog event's time: the lock's column order
                    rest=routed_ddls([s for _, s in later or []], target),
                    # a statement handled whole: the stream reads past it while it is held, and
                    # its later statements can be folded in (``Operation.combine``)
                    reads_ahead=ddl.change is None)
        stored = self.client.stored(info)
        op = self.client.unlocked_answer(info, stored, ctx)
        if op is not None:
            return _Pending(ddl, target, list(op.ddls or []), preview=p, operation=op, info=info)
        rev, after = self.client.stored_info(info, stored, ctx), 0
        if rev and stored is not None and stored[0] is not None:
            info = stored[0]         # with what the stream had read past it (``ahead``) before
        just_put = not rev
        if just_put:
            rev = self.client.put_info(info, ctx)
        owner = str(info.table)
        # shown once the wait is longer than an answer takes (usually a few ms)
        self._waiting(f"Operation for lock {ctx['lock_id']} (info revision {rev})", ctx, after=WAIT_SHOWN_AFTER)
        skip: list = []

        def skip_requested() -> bool:
            found = self._find_skip(start) if self._find_skip is not None and start is not None else None
            skip[:] = [found] if found is not None else []
            return bool(skip)

        paused = False
        while True:
            op, rev = self.client.next_operation(info, rev, after, ctx, interrupt=skip_requested if paused else None,
                                                 just_put=just_put)
            just_put = False
            if op is None:
                if getattr(skip[0], "op", "skip") == "skip":
                    self._withdraw(info, ctx)
                raise SkipRequested(skip[0])
            answer = on_operation(op, strict=self.strict)
            if isinstance(answer, Replay):
                _log.info("redirect is the first answer to this DDL; sending it again", info_revision=rev,
                          **strs(ctx))
                # afresh: a repeat of the stored Info (``extends``) would be given the same redirect
                # again by the lock, which keeps an extended Info's answer
                info = dataclasses.replace(info, ahead=[], ahead_at=[], extends=0)
                rev, after, just_put = self.client.put_info(info, ctx), 0, True
                continue
            if isinstance(answer, Execute):
                return _Pending(ddl, target, list(answer.statements), preview=p, operation=op, info=info)
            if isinstance(answer, Reorder):
                k = next((k for (k, _), r in zip(later or [], info.rest) if r == answer.first), None)
                if k is None:
                    raise ShardDDLError(f"the lock asks for {answer.first!r} first, which is not a later change of "
                                        f"this ALTER ({info.rest}); the master and this worker disagree on the "
                                        f"statement: `{shardctl('binlog', 'skip', self.task, '-s', self.source)}` skips it",
                                        stage=op.stage.value, **ctx)
                _log.info("the lock asks for a later change of this ALTER first", first=answer.first,
                          info_revision=rev, **strs(ctx))
                return _First(k, answer.message)
            if isinstance(answer, Combine):
                return _Combine(self._folds(ddl, info, op, p, ctx), answer.message)
            if isinstance(answer, Hold):
                self._waiting(f"redirect for lock {ctx['lock_id']}: {owner} is held on {info.ddls} until the "
                              "other shards make the same change (other tables keep replicating)", ctx)
                held = self._held[(ddl.schema, ddl.table)] = _Held(info, rev, ctx, target)
                self._start_waiter((ddl.schema, ddl.table), held, op)
                return Hold(f"skip-and-wait on lock {op.lock_id}")
            if isinstance(answer, Fail):
                tables = self.client.pending_tables(info.lock, owner)
                err = StrictConflict(f"strict optimistic shard mode: conflicting DDL {info.ddls} on {owner} stops the task "
                                     f"because schema conflict detected: {TRY_SYNC_FAILED} {ctx['lock_id']}: "
                                     f"{answer.message}; conflicting tables: {', '.join(tables)}",
                                     tables=tables, stage=op.stage.value, **ctx)
                if self.status is not None:
                    self.status.error(err, lock_id=ctx["lock_id"], position=ddl.position, owner=owner)
                raise err
            assert isinstance(answer, Pause)
            self._paused(ddl, info, op, rev, answer.message, ctx)
            after, paused = op.revision, True

    def _withdraw(self, info: Info, ctx: dict) -> None:
        """``binlog skip`` of the DDL this table is paused on: the lock learns the table's schema
        after it (the upstream made the change; the downstream does not) and stops waiting for
        the table, like DM's optimistic handle-error."""
        # not a repeat of the held Info (``extends``): the lock must take it, not keep its answer
        self.client.put_info(dataclasses.replace(info, ignore_conflict=True, ahead=[], ahead_at=[], extends=0), ctx)
        if self.status is not None:
            self.status.running()
        _log.warning("paused shard DDL withdrawn from its lock on the operator's binlog skip",
                     ddls="; ".join(info.ddls), **strs(ctx))

    def _paused(self, ddl: TableDDL, info: Info, op: Operation, rev: int, message: str, ctx: dict) -> None:
        """The lock holds this DDL for the operator (or until the other shards agree)."""
        owner = str(info.table)
        msg = (f"shard DDL {info.ddls} on {owner} is blocked because schema conflict detected "
               f"({op.stage.value}): {TRY_SYNC_FAILED} {ctx['lock_id']}: {message}; "
               f"run {unlock_choice(ctx['lock_id'], self.source, ddl.schema, ddl.table)}, or "
               f"`{shardctl('binlog', 'skip', self.task, '-s', self.source)}` to skip "
               "it on this source, or make the other shards' schemas agree")
        _log.warning("shard DDL paused", stage=op.stage.value, info_revision=rev, **strs(ctx))
        if self.status is not None:
            self.status.paused(ShardDDLError(msg, stage=op.stage.value, info_revision=rev, statement_end=ddl.end,
                                             statement=" ".join(ddl.sql.split())[:200], **ctx),
                               lock_id=ctx["lock_id"], position=ddl.position, owner=owner,
                               waiting_for=f"a new Operation for lock {ctx['lock_id']} "
                                           f"(info revision {rev}, after revision {op.revision})")

    def _preview(self, ddl: TableDDL, statements: list[str], ctx: dict) -> Preview:
        try:
            return self.tracker.preview(ddl.schema, ddl.table, statements, position=ddl.position)
        except SchemaTrackError as e:
            raise ShardDDLError(f"{e.message}; `shardctl binlog skip {self.task} -s {self.source}` skips the "
                                f"statement (the tracked schema then follows the upstream); if the table was "
                                f"changed outside the binlog, `shardctl binlog-schema update {self.task} -s "
                                f"{self.source} {ddl.schema} {ddl.table} FILE` sets its structure, or `shardctl "
                                f"binlog inject {self.task} -s {self.source} \"SQL\"` runs the missing change first",
                                **{**ctx, **e.context}) from e

    def _preview_create(self, ddl: TableDDL, statements: list[str]) -> Preview:
        """The table as this CREATE TABLE defines it.  A schema the tracker already holds for it
        may have been pre-loaded from the upstream's *current* definition at subtask start
        (table without checkpoint): the statement in the binlog is the truth at this position,
        so it wins.  That holds for ``IF NOT EXISTS`` too: MariaDB writes such a statement to
        the binlog only when it created the table."""
        if len(statements) == 1:
            try:
                after = apply_ddl(None, statements[0])
                if after is not None:
                    return Preview(ddl.schema, ddl.table, tuple(statements), None, (after.with_name(ddl.table),))
            except SchemaError:
                pass     # CREATE TABLE ... LIKE / SELECT: not modelled from the text
        try:
            return self.tracker.preview(ddl.schema, ddl.table, statements, position=ddl.position)
        except SchemaTrackError:
            # not modelled from the text; the upstream's definition is the best source left
            after = self.tracker.load_upstream(ddl.schema, ddl.table, position=ddl.position)
            return Preview(ddl.schema, ddl.table, tuple(statements), None, (after,))

    # ------------------------------------------------------------------ held tables
    def _start_waiter(self, key, held: _Held, op: Operation) -> None:
        """Wait in the background for the held table's redirect, then ask the syncer to rewind
        (the held table replays from its DDL; the replay finds the new answer).  The Info waited
        on is the latest one :meth:`read_ahead` put."""
        cancel, info, ctx = self._cancel, held.info, held.ctx

        def run():
            cur = op
            try:
                while True:
                    cur = self.client.wait_rewrite(info, cur, ctx, cancel, revision=lambda: held.rev,
                                                   wake=held.wake)
                    if cur is None or cancel.is_set():
                        return
                    if redirected(cur):
                        _log.info("held table redirected; replaying from its DDL", stage=cur.stage.value,
                                  **strs(ctx))
                        break
            except CoordinationStopped:
                return
            except Exception as e:  # noqa: BLE001 — a dying waiter must be visible
                _log.error(f"redirect waiter failed: {e}", table=f"{key[0]}.{key[1]}", error=str(e))
                return
            if self._rewind is not None:
                self._rewind()

        th = threading.Thread(target=run, name=f"redirect-{key[0]}.{key[1]}", daemon=True)
        self._waiters[key] = th
        th.start()

    def read_ahead(self, event: DDLEvent) -> None:
        """A later statement of a held table, read past while it waits: an ALTER of the table is
        added to the held Info's ``ahead`` (put again, ``extends`` naming the first revision), so
        the lock can ask for it to be folded in (``Operation.combine``) when other tables make
        the same renames in another order.  Anything else (a CREATE or DROP of the table, a
        statement that renames it, one the parser refuses) ends the look-ahead: what follows it
        cannot be folded in before it."""
        h = self._held.get((event.schema, event.table or ""))
        if h is None or h.closed or not h.info.reads_ahead or len(h.info.ahead) >= MAX_AHEAD:
            return
        at = event.end.to_json()
        if at in h.info.ahead_at:
            return          # read again after a restart: the stored Info has it already
        text = self._text(event)
        kind = StatementKind(event.kind)
        try:
            ok = kind is StatementKind.ALTER_TABLE and route_kind(kind, text) is Route.COORDINATE \
                and not _renames_table(text)
            routed = routed_ddls([text], h.target)[0] if ok else ""
        except SchemaError:
            ok = False
        if not ok:
            h.closed = True
            return
        h.info = dataclasses.replace(h.info, ahead=[*h.info.ahead, routed], ahead_at=[*h.info.ahead_at, at],
                                     extends=h.info.extends or h.rev)
        h.rev = self.client.put_info(h.info, h.ctx)
        h.wake.set()
        _log.info("held table's later statement sent as look-ahead", statement=routed, ahead=len(h.info.ahead),
                  info_revision=h.rev, **strs(h.ctx))

    def _folds(self, ddl: TableDDL, info: Info, op: Operation, p: Preview, ctx: dict) -> list[dict]:
        """The later statements an ``Operation.combine`` folds into ``ddl`` (``DDLEvent.folds``),
        each with the renames rows written before it need."""
        want = sorted({int(i) - len(info.rest) for i in op.combine})
        if info.rest or not want or want[0] < 0 or want[-1] >= min(len(info.ahead), len(info.ahead_at)) \
                or p.afters[-1] is None:
            raise ShardDDLError(f"the lock asks to fold changes {op.combine} into {info.ddls}, which are not "
                                f"statements this worker read past ({info.ahead}); the master and this worker "
                                f"disagree on the table's stream: "
                                f"`{shardctl('binlog', 'skip', self.task, '-s', self.source)}` skips the DDL",
                                stage=op.stage.value, **ctx)
        out, prev = [], p.afters[-1]
        for j in range(want[-1] + 1):
            try:
                post = apply_ddl(prev, info.ahead[j])
            except SchemaError as e:
                raise ShardDDLError(f"look-ahead statement {info.ahead[j]!r} does not apply to the table's "
                                    f"schema: {e}", **ctx) from e
            if post is None:
                raise ShardDDLError(f"look-ahead statement {info.ahead[j]!r} drops the table", **ctx)
            if j in want:
                out.append({"at": info.ahead_at[j], "statement": rename_ddl_table(info.ahead[j], (ddl.schema, ddl.table)),
                            "renames": column_renames(prev, post)})
            prev = post
        return out

    # ------------------------------------------------------------------ helpers
    def _waiting(self, what: str, ctx: dict, after: float = 0.0) -> None:
        if self.status is not None:
            self.status.waiting(what, lock_id=ctx["lock_id"], after=after)

    def _etcd_down(self, message: str, ctx: dict) -> None:
        if self.status is not None:
            self.status.waiting(message, lock_id=ctx.get("lock_id") or "")

    def _track_direct(self, event: DDLEvent, table: str, kind: StatementKind) -> None:
        """Non-coordinated table DDL: follow it in the tracker (best effort — a table whose DDL
        cannot be modelled is re-read from the upstream on next use)."""
        try:
            track = kind.row.track
            if track is Track.FORGET:
                self.tracker.forget(event.schema, table)
            else:
                stmts = split_ddl(self._text(event)) if track is Track.APPLY_SPLIT else [self._text(event)]
                self.tracker.apply(event.schema, table, stmts, position=str(event.start))
        except (SchemaError, SchemaTrackError) as e:
            _log.warning("DDL not modelled by the schema tracker; table will be re-read from upstream",
                         table=f"{event.schema}.{table}", error=str(e))
            self.tracker.forget(event.schema, table)

    def skip_change(self, event: DDLEvent, ctx: DDLContext) -> dict | None:
        """``binlog skip`` of a multi-change ALTER whose change the lock had answered "run" and the
        downstream refused, with changes after it the lock has not seen: the skip covers that
        change only.  Its done mark is given (not run: the lock hands a resolution it ran over);
        the intent record returned says it is finished and which changes are still to come, so
        the syncer hands those over as usual (docs/lock-algorithm.md, "One change at a time").
        Skipping them too would change the lock's join with nothing run downstream (an index
        or a widening the merged table then never gets).  None: not such a statement (the
        skip covers the whole statement, :meth:`ddl_skipped`)."""
        if event.table is None or event.folds or not ctx.is_sharded(event.schema, event.table):
            return None
        found = self._answered_change(event, event.table)
        if found is None:
            return None
        info, op, statements, at, target, c = found
        routed = [routed_ddls([x], target)[0] for x in statements]
        unsent = list(dict.fromkeys(k for r in info.rest for k in range(len(statements)) if k != at and routed[k] == r))
        if len(statements) < 2 or not unsent or op is None or op.done \
                or op.info_revision != info.revision or op.stage not in (Stage.NONE, Stage.UNLOCKED):
            return None
        self.client.mark_done(op, c, ran=False)
        _log.warning("skipped change's Operation marked done for its lock; it did NOT run downstream; the "
                     "statement's later changes are coordinated as usual", ddls="; ".join(op.ddls),
                     still_to_come=len(unsent), **strs(c))
        return {"pos": event.end.to_json(), "finished": True, "statements": [], "change": at, "rest": unsent}

    def _answered_change(self, event: DDLEvent, up_table: str):
        """(Info, Operation, the statement's changes, which one the Info is, target, ctx) when the
        table's current Info is ``event``'s statement (``at`` its last change) or one change of
        it; else None."""
        try:
            # a combined statement was described to the lock as one change
            statements = [self._text(event)] if event.folds else split_ddl(self._text(event))
        except SchemaError:
            return None                          # never described to the lock
        target = self.mapper.target(event.schema, up_table)
        if target is None:
            return None
        lock = LockKey(self.task, target.schema, target.table)
        ctx = self._ctx(TableDDL(self._text(event), event.schema, up_table, StatementKind.ALTER_TABLE,
                                 str(event.start)), target)
        table = TableRef(self.source, event.schema, up_table)
        info = self.store.get_info(lock, table)
        if info is None:
            return None
        if info.ddls == routed_ddls(statements, target):
            at = len(statements) - 1
        else:
            one = next((j for j in range(len(statements) - 1, -1, -1)
                        if info.ddls == routed_ddls(statements[j:j + 1], target)), None)
            if one is None or len(statements) < 2:
                return None
            at = one
        return info, self.store.get_operation(lock, table), statements, at, target, ctx

    def _finish_answered(self, event: DDLEvent, up_table: str, done: frozenset[int] = frozenset(),
                         before=None) -> None:
        """A skipped DDL that was already described to the lock and answered "execute" (its
        downstream execution failed, e.g. a unique key the merged rows violate) leaves the lock
        waiting for this table's done mark: give it (the statements did NOT run downstream; a
        warning says which).  Only when the table's current Info is exactly this DDL, or one
        change of it (a multi-change ALTER is coordinated change by change): then the changes
        not finished, which the lock never saw, are told to it as the table's forced schema.
        ``done``: the changes ``before`` (the tracked schema before the skip) already has."""
        found = self._answered_change(event, up_table)
        if found is None:
            return
        info, op, statements, at, target, ctx = found
        if op is not None and not op.done and op.info_revision == info.revision:
            if op.stage not in (Stage.NONE, Stage.UNLOCKED):
                _log.warning("skipped DDL is still pending in its lock; unlock it with `shardctl shard-ddl-lock "
                             "unlock ... --action skip` or remove the table from the lock", stage=op.stage.value,
                             **strs(ctx))
                return
            self.client.mark_done(op, ctx, ran=False)
            _log.warning("skipped DDL's Operation marked done for its lock; its statements did NOT run downstream",
                         ddls="; ".join(op.ddls), **strs(ctx))
        # the changes still to come when the skipped one was sent (its Info's ``rest``: the lock
        # may have had later ones run first); ``before`` lacks the others the tracker has not
        # followed yet (finished before a restart), and the skipped one
        routed = [routed_ddls([x], target)[0] for x in statements]
        unsent = list(dict.fromkeys(k for r in info.rest for k in range(len(statements)) if k != at and routed[k] == r))
        if unsent and before is not None:
            self._tell_rest(info, [x for k, x in enumerate(statements) if k not in done and k not in unsent],
                            [statements[k] for k in unsent], before, target, ctx)

    def _tell_rest(self, info: Info, skipped: list[str], unsent: list[str], before, target: Target,
                   ctx: dict) -> None:
        """The changes ``unsent`` of a skipped statement were never sent to the lock: send them
        as an ignore-conflict Info (the table's schema is forced to the one after the statement,
        as for a ``binlog skip`` of a paused DDL).  ``before`` plus ``skipped`` (the skipped
        change and the finished ones it lacks) is where they start."""
        try:
            cur = before
            for stmt in skipped:
                cur = apply_ddl(cur, stmt)
            first, afters = cur, []
            for stmt in unsent:
                cur = apply_ddl(cur, stmt)
                if cur is None:
                    raise SchemaError(f"{stmt!r} leaves no table")
                afters.append(cur.to_json())
            if first is None:
                raise SchemaError("the statement's earlier changes leave no table")
        except SchemaError as e:
            _log.warning("skipped statement's remaining changes not modelled; the lock learns them from the "
                         "table's next DDL", error=str(e), **strs(ctx))
            return
        rest = dataclasses.replace(info, ddls=routed_ddls(unsent, target), before=first.to_json(),
                                   afters=afters, ignore_conflict=True, rest=[])
        self.client.put_info(rest, ctx)
        _log.warning("skipped statement's changes the lock had not seen are told to it as the table's schema",
                     ddls="; ".join(rest.ddls), **strs(ctx))
