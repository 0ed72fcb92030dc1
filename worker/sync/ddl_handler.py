"""The seam between the syncer (data path) and whoever decides what a DDL does downstream.

The syncer (``worker.sync.syncer.Syncer``) owns reading, routing, DML apply and checkpoints.  At
every DDL of the binlog it stops and asks a :class:`DDLHandler`.  The contract:

1. **Before** ``handle_ddl`` is called, every change that precedes the DDL in the binlog has
   been applied downstream and the checkpoints are flushed: the global point is the DDL's
   ``event.start`` and each table's point (and its ``table_info`` schema, taken from
   :meth:`DDLHandler.table_info`) is the state *before* the DDL.  A master reading the
   checkpoint of this table therefore sees the schema before the DDL.
2. ``handle_ddl(event, ctx)`` returns a :class:`DDLDecision`.  It may block (e.g. wait for a
   shard-DDL Operation in etcd).  It must also update its own schema state for the table
   (the state :meth:`table_info` returns afterwards is saved with the DDL's checkpoint).
3. The syncer executes ``decision.execute`` downstream in order (errors that mean "already
   applied" are ignored when ``decision.ignorable``), then calls
   ``ddl_executed(event, decision, ctx)`` (e.g. mark the Operation done), and only then
   advances the table point and the global point to ``event.end`` and flushes.
   ``skip=True`` executes nothing but still counts as done (``ddl_executed`` is called).
   ``pause=<reason>`` stops the syncer with :class:`SyncPaused` *before* the DDL (checkpoint
   stays at ``event.start``); a restart handles the same DDL again.  ``hold=True`` executes
   nothing, does not advance this table's point, drops the table's later DML and keeps the
   global point at ``event.start`` until :meth:`worker.sync.syncer.Syncer.request_rewind` makes
   the syncer restart from its checkpoints (the held table then replays from this DDL).
   ``handle_ddl`` may instead raise :class:`SkipRequested` when the operator's ``binlog skip |
   replace`` names the DDL while it waits: the syncer then uses that record as if it had met
   it before the DDL.
4. ``ddl_skipped(event, ctx)`` replaces steps 2-3 for a statement the operator told the syncer
   to skip (``shardctl binlog skip``) or a binlog event filter ignores: nothing is executed
   downstream and nothing is coordinated, but the handler's schema state follows the upstream
   (in DM a skipped DDL left the tracker behind); the syncer then advances the points
   as for a handled DDL.
5. ``attach(rewind, find_skip)`` is called once by the syncer with its ``request_rewind`` (for
   handlers that hold tables, step 3's ``hold``, and must restart the syncer later) and its
   lookup of the operator's records by statement start (asked while a DDL waits on its lock).
6. On (re)start the syncer calls ``restore(table_infos)`` with every table's checkpointed
   schema (``{(up_schema, up_table): json_text_or_None}``) so all in-memory state is rebuilt
   from the checkpoints alone; DDLs at or before a table's point are never handed over again.
   It returns the tables whose schema it read from the upstream instead (none checkpointed):
   the syncer stores those at once, so a restart before their first row or DDL does not read
   them again from an upstream that has moved on (its later ALTERs would then meet columns
   they add already there).
7. ``coordinated`` says whether ``handle_ddl`` may wait on other sources: then the syncer
   parks its apply stream before each DDL (the other sources' applies may need its cores).
8. A DDL a lock answered (``DDLDecision.coordinated``) is recorded finished with
   ``after_info(event)`` once run; a restart that meets it again calls
   ``resume_finished(event, ctx)`` instead of ``handle_ddl`` (checkpoint rule 8b).
9. ``close()`` is called by the handler's owner once no syncer uses it any more.
10. ``changes(event, ctx)`` comes first: the events steps 2-8 take, in order.  A handler that
    coordinates one change at a time returns one event per change of a multi-change ALTER
    (``DDLEvent.change``); the syncer hands each over as above, stops at a hold or pause, and
    moves the table's checkpoint past the statement only with its last change (until then the
    finished record of step 8, with the change's index, says how far the statement got).  A
    decision with ``first`` set asks for that later change to be handed over next (the event's
    ``rest`` then names the changes still to come, in their new order).

A DDL already executed before a crash but not yet checkpointed is handed over again; the
syncer then compares the target's current ``SHOW CREATE TABLE`` with the one it recorded
before executing (``ddl_intent`` in the checkpoint row, ``worker.sync.ddl_intent``) and does
not run it a second time.

:class:`DirectDDLHandler` is the default for tables without shard coordination: it rewrites
the statement for the routed target and executes it as is.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable, Protocol

from coordinator.etcdproto import BinlogSkip
from coordinator.obs import logger
from coordinator.routing import TableMapper
from coordinator.schema.kinds import Direct, StatementKind, Track, parse_ddl
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.model import TableSchema
from coordinator.schema.parse import parse_create_table
from coordinator.sql import quote_table
from worker.events import DDLEvent, Position
from worker.schema_tracker import schema_to_json
from worker.sync.errors import UnreplicableDDL


_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_PARTITION_ONLY = re.compile(
    rf"^ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+{_NAME}(?:\s*\.\s*{_NAME})?\s+"
    r"(?:(?:ADD|DROP|TRUNCATE|COALESCE|REORGANIZE|EXCHANGE|ANALYZE|CHECK|OPTIMIZE|REBUILD|REPAIR|DISCARD|"
    r"IMPORT|CONVERT)\s+PARTITION\b|REMOVE\s+PARTITIONING\b|PARTITION\s+BY\b)", re.I | re.S)


def is_partition_maintenance(sql: str) -> bool:
    """True for an ``ALTER TABLE`` whose only change is partitioning (ADD/DROP/TRUNCATE/...
    PARTITION, PARTITION BY, REMOVE PARTITIONING): columns and indexes stay as they are, so
    a tracked schema needs no change when such a statement is skipped."""
    return bool(_PARTITION_ONLY.match((sql or "").strip()))


SKIP_HINT = "`shardctl binlog skip {task} -s {source}` skips it"


@dataclass
class DDLDecision:
    """The handler's instruction to the syncer for one ``DDLEvent``: what runs downstream, or
    skip / pause / hold (contract steps 2-3).  The last of the decision types on a DDL's way
    (docs/ARCHITECTURE.md); the only one the syncer sees."""
    execute: list[str] = field(default_factory=list)   # downstream statements, in order
    skip: bool = False            # execute nothing; the DDL counts as done
    pause: str | None = None      # stop before the DDL with this reason
    hold: bool = False            # conflict: hold this table (see module docstring)
    ignorable: bool = True        # ignore "already applied" errors on execution
    note: str = ""                # free text for logs/status
    coordinated: bool = False     # answered by a shard-DDL lock: the syncer records it finished
    # a shard table joins its lock (CREATE TABLE): recorded finished too, with its schema, before
    # ``ddl_executed`` lists it in SourceTables, so a master that reads the joining table's
    # checkpoint starts it from this schema, not from the lock's first one
    joins: bool = False
    # the lock asks for this later change of the statement (its index) to be coordinated before
    # this one (``Operation.first``): nothing ran; the syncer sends that change next
    first: int | None = None
    # the lock asks for this held statement to run together with later statements of its table
    # (``Operation.combine``): nothing ran; the syncer records them and sends the combined
    # statement next (checkpoint rule 11), each ``DDLEvent.folds``' form
    combine: list[dict] = field(default_factory=list)


@dataclass
class DDLContext:
    """What a handler may use while deciding."""
    task: str
    source_id: str
    mapper: TableMapper
    downstream: Callable[[], object]          # () -> new pymysql connection to the downstream
    upstream: Callable[[], object]            # () -> new pymysql connection to the upstream
    is_sharded: Callable[[str, str], bool]    # (up_schema, up_table) -> merged target?


# the syncer's lookup of the operator's binlog skip|replace|inject record armed at a statement start
FindSkip = Callable[[Position], BinlogSkip | None]


class SkipRequested(Exception):
    """Not an error: an operator's ``binlog skip|replace`` names the DDL a handler waits on
    (contract step 3).  For a skip the handler has withdrawn what it sent for the table; for a
    replace the replacement will overwrite it.  The syncer then uses the record (``skip``)
    exactly as one met before the DDL."""

    def __init__(self, skip: BinlogSkip):
        super().__init__(f"binlog {getattr(skip, 'op', 'skip')} at {getattr(skip, 'position', skip)}")
        self.skip = skip


class DDLHandler(Protocol):
    """The whole contract, step by step in the module docstring."""

    @property
    def coordinated(self) -> bool:
        """``handle_ddl`` may wait on other sources (step 7)."""
        ...

    def attach(self, rewind: Callable[[], None], find_skip: FindSkip | None = None) -> None: ...

    def restore(self, table_infos: dict[tuple[str, str], str | None]) -> list[tuple[str, str]]: ...

    def changes(self, event: DDLEvent, ctx: DDLContext) -> list[DDLEvent]: ...

    def read_ahead(self, event: DDLEvent) -> None:
        """A later statement of a table held on its lock, read past while it waits (nothing of
        it runs now; the table replays it after its redirect)."""
        ...

    def handle_ddl(self, event: DDLEvent, ctx: DDLContext) -> DDLDecision: ...

    def skip_change(self, event: DDLEvent, ctx: DDLContext) -> dict | None:
        """``binlog skip`` of a statement stopped at one of its changes: the intent record that
        makes the skip cover that change only (the rest are handed over as usual), or None."""
        ...

    def ddl_executed(self, event: DDLEvent, decision: DDLDecision, ctx: DDLContext) -> None: ...

    def ddl_skipped(self, event: DDLEvent, ctx: DDLContext) -> None: ...

    def table_info(self, schema: str, table: str) -> str | None: ...

    def resume_finished(self, event: DDLEvent, ctx: DDLContext) -> None: ...

    def after_info(self, event: DDLEvent) -> str | None: ...

    def close(self) -> None: ...


def rewrite_for_target(event: DDLEvent, ctx: DDLContext) -> list[str]:
    """The upstream statement with every table name replaced by its routed target."""
    parsed = parse_ddl(event.query, event.extra.get("session_schema", event.schema))
    names = []
    for t in parsed.tables:
        tgt = ctx.mapper.target(t.schema, t.table)
        if tgt is None:
            raise UnreplicableDDL(f"statement names filtered table `{t.schema}`.`{t.table}`; "
                                 f"allow it in the block-allow-list, or "
                                 + SKIP_HINT.format(task=ctx.task, source=ctx.source_id),
                                 source=ctx.source_id, table=event.upstream, position=str(event.end))
        names.append(quote_table(tgt.schema, tgt.table))
    if parsed.kind.row.track is Track.CREATE and not has_if_not_exists(event.query):
        names[0] = "IF NOT EXISTS " + names[0]
    return [parsed.rewrite(names)]


def has_if_not_exists(q: str) -> bool:
    """``CREATE TABLE IF NOT EXISTS ...`` (looked for before the column list)."""
    head = q[:q.find("(")] if "(" in q else q
    return "IF NOT EXISTS" in " ".join(head.upper().split())


class DirectDDLHandler:
    """No coordination: run each DDL on its routed target (idempotently).  Keeps each
    upstream table's schema (``coordinator.schema``) for the checkpoint's ``table_info``."""

    # no waiting on other sources: the syncer's apply stream may stay open across its DDLs
    coordinated = False

    def __init__(self) -> None:
        self.schemas: dict[tuple[str, str | None], TableSchema] = {}

    def attach(self, rewind: Callable[[], None], find_skip: FindSkip | None = None) -> None:
        """Nothing to attach: no table is ever held, no DDL waits for an operator's record."""

    def read_ahead(self, event: DDLEvent) -> None:
        """Never called: no table is ever held."""

    def skip_change(self, event: DDLEvent, ctx: DDLContext) -> dict | None:
        """A statement is skipped whole: no change of it was coordinated."""
        return None

    def close(self) -> None:
        """Nothing runs in the background."""

    def changes(self, event: DDLEvent, ctx: DDLContext) -> list[DDLEvent]:
        """A statement runs whole on its target: nothing waits between its changes."""
        return [event]

    def restore(self, table_infos: dict[tuple[str, str], str | None]) -> list[tuple[str, str]]:
        """Only checkpointed schemas: nothing is read from the upstream (none to store)."""
        self.schemas = {}
        for k, text in table_infos.items():
            data = json.loads(text) if text else None
            if data:
                try:
                    self.schemas[k] = TableSchema.from_json(data)
                except Exception:  # an unreadable schema only costs the table_info column
                    pass
        return []

    def table_info(self, schema: str, table: str) -> str | None:
        s = self.schemas.get((schema, table))
        return None if s is None else schema_to_json(s)

    def _follow(self, event: DDLEvent) -> None:
        """Move the table's schema past ``event``; raises when the schema engine cannot model it
        (the callers differ in what they do then)."""
        key = (event.schema, event.table)
        track = StatementKind(event.kind).row.track
        if track is Track.CREATE:
            self.schemas[key] = parse_create_table(event.query)
        elif track is Track.FORGET:
            self.schemas.pop(key, None)
        elif key in self.schemas:
            after = apply_ddl(self.schemas[key], event.query)
            if after is None:
                self.schemas.pop(key, None)
            else:
                self.schemas[key] = after

    def _track(self, event: DDLEvent) -> None:
        try:
            self._follow(event)
        except Exception:  # tracking is best-effort here; coordination uses its own tracker
            self.schemas.pop((event.schema, event.table), None)

    def handle_ddl(self, event: DDLEvent, ctx: DDLContext) -> DDLDecision:
        if event.target_table is not None and StatementKind(event.kind).row.track is not Track.NONE:
            self._track(event)
        return direct_decision(event, ctx)

    def ddl_executed(self, event: DDLEvent, decision: DDLDecision, ctx: DDLContext) -> None:
        """Nothing to report: no lock answered the DDL."""

    def resume_finished(self, event: DDLEvent, ctx: DDLContext) -> None:
        """Direct DDLs are not recorded finished (rule 8's intent covers them)."""

    def after_info(self, event: DDLEvent) -> str | None:
        """Never asked: direct decisions are not ``coordinated``."""
        return None

    def ddl_skipped(self, event: DDLEvent, ctx: DDLContext) -> None:
        """Operator skip: the tracked schema follows the upstream (see :func:`follow_skipped`)."""
        key = (event.schema, event.table)

        def reload():
            conn = ctx.upstream()
            try:
                with conn.cursor() as cur:
                    cur.execute(f"SHOW CREATE TABLE {quote_table(event.schema, event.table)}")
                    sql = cur.fetchone()[1]
            finally:
                conn.close()
            self.schemas[key] = parse_create_table(sql)

        follow_skipped(event, ctx, lambda: self._follow(event), reload, lambda: self.schemas.pop(key, None))


def direct_decision(event: DDLEvent, ctx: DDLContext) -> DDLDecision:
    """What a DDL runs downstream when no lock coordinates it: the statement on its routed
    target, made idempotent; database-level and one-shard DROP/TRUNCATE statements run nothing.
    Read from the kind's row (``coordinator.schema.kinds.KIND_ROWS``: ``direct`` for a one-table
    target, ``direct_sharded`` for a merged one)."""
    row = StatementKind(event.kind).row
    if row.direct is Direct.NOT_REPLICATED:
        return DDLDecision(skip=True, note="not a replicated statement")
    tgt_s, table, tgt_t = event.target_schema, event.table, event.target_table
    if tgt_s is None:
        return DDLDecision(skip=True, note="filtered database")
    if row.direct is Direct.CREATE_DATABASE:
        return DDLDecision([f"CREATE DATABASE IF NOT EXISTS {quote_table(tgt_s)}"])
    if row.direct is Direct.DATABASE_SKIPPED:
        return DDLDecision(skip=True, note="database-level statement not propagated")
    if table is None or tgt_t is None:
        return DDLDecision(skip=True, note="filtered table")
    direct = row.direct_sharded if ctx.is_sharded(event.schema, table) else row.direct
    if direct is Direct.SHARD_SKIPPED:
        return DDLDecision(skip=True, note="DROP/TRUNCATE of one shard is not propagated to the merged table")
    if direct is Direct.REFUSE:
        raise UnreplicableDDL("RENAME TABLE of a sharded table is not supported; rename the merged "
                             "table downstream and update the route rules instead; for pt-online-schema-change / "
                             "gh-ost cut-overs set `online-ddl: true` in the task; or " + SKIP_HINT.format(task=ctx.task, source=ctx.source_id),
                             source=ctx.source_id, table=event.upstream, position=str(event.end))
    if direct is Direct.DROP_TARGET:
        return DDLDecision([f"DROP TABLE IF EXISTS {quote_table(tgt_s, tgt_t)}"])
    return DDLDecision(rewrite_for_target(event, ctx))      # Direct.REWRITE


def follow_skipped(event: DDLEvent, ctx: DDLContext, apply, reload, forget) -> str:
    """Bring a tracked schema past a skipped DDL: ``apply()`` it when the schema engine can;
    else leave it for partition maintenance (no column/index change); else ``reload()`` the
    upstream's current ``SHOW CREATE TABLE`` (warned: it may be ahead of this binlog position);
    when even that fails, ``forget()`` it (re-read on next use).  Returns what was done."""
    log = logger("worker.sync.ddl_handler").bind(task=ctx.task, source=ctx.source_id, table=event.upstream,
                                            position=str(event.start))
    if event.table is None:
        return "none"
    try:
        apply()
        log.info("skipped DDL applied to the tracked schema (it follows the upstream)")
        return "applied"
    except Exception as e:  # noqa: BLE001 — the schema engine could not model it: fall back
        why = str(e)
    if is_partition_maintenance(event.query):
        log.info("skipped DDL only changes partitioning; tracked schema unchanged")
        return "unchanged"
    try:
        reload()
        log.warning("skipped DDL not modelled by the schema engine; tracked schema re-read from the "
                    "upstream's current SHOW CREATE TABLE (it may already include later DDLs)", error=why)
        return "reloaded"
    except Exception as e:  # noqa: BLE001
        forget()
        log.warning("skipped DDL not modelled and the upstream schema could not be read; the table's "
                    "schema is re-read on next use", error=f"{why}; {e}")
        return "forgotten"
