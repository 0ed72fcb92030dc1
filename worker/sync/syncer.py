"""The replication driver of one (task, source): binlog -> Spark apply jobs -> downstream.

Per micro-batch (``run_once``):

1. ``end`` = the upstream's ``SHOW MASTER STATUS``; a background thread decodes ``[read_pos,
   end)`` (at most ``max_batch_events`` changes, cut at a transaction boundary) ahead of the
   apply (the items of ``worker.binlog.contract``, decoded by ``worker.binlog.source``; with
   ``reader="spark"`` a Spark executor decodes them through the ``mysql-binlog`` data source,
   ``worker.binlog.spark_reader``: same items, same order).
2. Before the first change is applied, *safe-until* = ``end`` is stored (checkpoint rule 7).
3. The decoded stream arrives as chunks of whole transactions (up to ``apply_rows`` rows, cut
   at every statement event).  A chunk is split by (target, key hash) in the driver and applied
   by one Spark job, one downstream transaction per task, binlog order kept per partition
   (``worker.sync.apply``).  Table points advance from the tasks' acknowledgements, the global point
   to the chunk's end; flush.
4. At a DDL (all earlier DML is downstream and flushed) ask the :class:`DDLHandler`
   (``worker.sync.ddl_handler`` has the full contract), execute its statements, advance and flush.
   If the DDL created the target or changed its key, the following chunks are split by the new
   key.

Checkpoint rules: ``worker.sync.checkpoint``.  Crash tests inject failures through
``worker.sync.hooks.Hooks``.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field

import pymysql
from prometheus_client import Counter, Gauge

from coordinator.config import SourceConfig, TaskConfig, with_source_filters
from coordinator.errors import ShardMergeError
from coordinator.obs import logger
from coordinator.routing import TableMapper
from coordinator.schema.kinds import StatementKind, parse_ddl
from worker.sync.apply import connect_downstream, resolve_tls
from worker.binlog import READERS, BinlogRange, BinlogReader, Chunk, RouteArgs, Statement, make_reader
from worker.sync.apply_stream import MAX_LIFE
from worker.sync.checkpoint import CheckpointStore
from worker.sync.chunk_apply import ChunkApplier, merge_acks
from worker.sync.hooks import Hooks
from worker.sync.ddl_intent import DDLIntent
from worker.sync.ddl_handler import DDLContext, DDLDecision, DDLHandler, DirectDDLHandler, SkipRequested
from worker.sync.folds import as_combined, fold_at, folded_after, through_folds
from worker.sync.online_ddl import CutOver, OnlineDDL, OnlineDDLStore
from worker.sync.operator_records import OperatorRecords
from worker.sync.statement_route import StatementRouter
from worker.events import DDLEvent, Position
from worker.filters import statement_ignored
from worker.sync.errors import SyncError, SyncPaused
from worker.upstream import UpstreamEnd, check_upstream, master_status, start_position

log = logger("worker.sync.syncer")

# Chunks of at most this many row changes are applied in the driver: a Spark job's scheduling
# (~0.1 s on 2 cores) would dominate them, and a DDL waits for the rows before it.
LOCAL_APPLY_ROWS = 256
# a batch whose binlog range is larger opens the apply stream before its first chunk is decoded
# (a few hundred rows of a narrow table; smaller batches are often trickles applied in the driver)
STREAM_EARLY_BYTES = 64 * 1024

ROWS = Counter("shardmerge_worker_rows_applied_total", "Row changes applied downstream", ["task", "source"])
MISSING = Counter("shardmerge_worker_updates_of_missing_rows_total",
                  "Updates outside safe mode that named a row the downstream does not have (not applied)",
                  ["task", "source"])
DDLS = Counter("shardmerge_worker_ddls_total", "DDL statements handled", ["task", "source", "action"])
BATCHES = Counter("shardmerge_worker_batches_total", "Micro-batches run", ["task", "source"])
LAG = Gauge("shardmerge_worker_lag_bytes", "Upstream binlog bytes not yet read (same file)", ["task", "source"])

@dataclass(frozen=True)
class SendFirst:
    """The lock asks for change ``change`` of the statement to be handed over next."""
    change: int


@dataclass(frozen=True)
class SendCombined:
    """The lock asks for the statement to run with later ones folded in: hand over ``event``."""
    event: DDLEvent


@dataclass
class BatchResult:
    start: Position
    end: Position
    rows: int = 0
    ddls: int = 0
    idle: bool = False
    cut_at_ddl: bool = False          # kept for callers; a key change no longer cuts a batch
    timings: dict = field(default_factory=dict)


class Syncer:
    def __init__(self, spark, task: TaskConfig, source: SourceConfig, handler: DDLHandler | None = None, *,
                 max_batch_events: int = 50_000, parallelism: int | None = None, hooks: Hooks | None = None,
                 apply_rows: int = 20_000, reader: str | None = None, skips=None,
                 local_apply_rows: int = LOCAL_APPLY_ROWS, epoch: int = 0, schema_overrides=None):
        """``skips``: the operator's pending ``binlog skip`` records
        (``worker.sync.binlog_skip.BinlogSkips``); None = no skips (no etcd).  ``epoch``: the
        binding epoch this syncer writes under (``worker.sync.fence``); 0 = not fenced.
        ``schema_overrides(infos) -> infos``: the operator's ``binlog-schema`` structures put into
        the checkpointed table infos at start (``worker.sync.schema_ops.SchemaOverrides``)."""
        self.spark, self.task, self.source = spark, task, source
        self.skips = skips
        self.schema_overrides = schema_overrides
        self.last_upstream_end: Position | None = None    # the upstream's end at the last batch
        inst = task.instance(source.source_id)
        if inst is None:
            raise SyncError(f"task {task.name!r} has no mysql-instances entry for source "
                            f"{source.source_id!r}", task=task.name, source=source.source_id)
        # how the binlog is read: "process" (decoder child process of the driver, the default)
        # or "spark" (the mysql-binlog data source, decoded in an executor); None = task config
        self.reader = reader or inst.syncer.binlog_reader
        if self.reader not in READERS:
            raise SyncError(f"binlog reader {self.reader!r} is unknown; use one of {', '.join(sorted(READERS))} "
                            f"(task key syncer.binlog-reader)", task=task.name, source=source.source_id)
        self.inst = with_source_filters(inst, source)     # DM's source-level `filters` too
        self.mapper = TableMapper(self.inst, task.meta_schema)
        self.handler: DDLHandler = handler or DirectDDLHandler()
        self.up_kwargs = source.db.pymysql_kwargs()
        self.upstream_end = UpstreamEnd(self.up_kwargs)
        self.down_kwargs = task.target.pymysql_kwargs()
        self.max_batch_events = max_batch_events
        self.apply_rows = apply_rows            # rows per Spark apply job (decoding runs ahead)
        # mysql-replication decodes TIMESTAMP columns as UTC wall-clock values (whatever the
        # process's zone), so the apply sessions read them back in UTC
        self.time_zone = "+00:00"
        self.binlog: BinlogReader = make_reader(self.reader, spark, source.source_id)
        self.parallelism = parallelism or self.inst.syncer.worker_count
        self.hooks = hooks or Hooks()
        self.store = CheckpointStore(self.down_kwargs, task.meta_schema, task.name, source.source_id, epoch)
        self.store.keep_connection()     # written at every batch and shard DDL (closed by close())
        # task option online-ddl: pt-osc / gh-ost shadow tables (worker.sync.online_ddl)
        self.online = None if self.mapper.online is None else OnlineDDL(
            self.mapper.online, OnlineDDLStore(self.down_kwargs, task.meta_schema, task.name, source.source_id))
        self.log = log.bind(task=task.name, source=source.source_id)
        self.read_pos: Position | None = None
        self.held: dict[tuple[str, str], DDLEvent] = {}
        self.rows_applied = 0
        self.updates_missing = 0      # updates of rows the downstream does not have (not re-created)
        self.last_error: str | None = None
        self._rewind = threading.Event()
        self._started = False
        self._safe_loaded: Position | None = None     # safe-until loaded at start (rule 7)
        self._rows_skips: dict = {}     # (file, end pos) -> the operator's skip of that rows event
        self.ctx = DDLContext(task.name, source.source_id, self.mapper, self._downstream,
                              lambda: pymysql.connect(**self.up_kwargs, autocommit=True),
                              self.mapper.router.is_sharded)
        # the Spark side of the apply (driver, stream or one job per chunk)
        # (syncer.apply-mode: stream: chunks go to a long-lived apply job; not with the spark reader,
        # whose reads are Spark jobs the apply would wait for)
        streamed = self.inst.syncer.apply_mode == "stream" and self.reader == "process"
        self.applier = ChunkApplier(spark, task=task.name, source=source.source_id, parallelism=self.parallelism,
                                    local_apply_rows=local_apply_rows, streamed=streamed, log=self.log)
        self.route = StatementRouter(source.source_id, self.mapper, self.store, self._is_held, self._count_ddls,
                                     self._read_ahead)
        # the operator's binlog skip / replace / inject records, and the binlog event filter's skips
        self.records = OperatorRecords(skips, task=task.name, source=source.source_id, store=self.store,
                                       mapper=self.mapper, handler=self.handler, ctx=self.ctx, log=self.log,
                                       handle=self._handle_statement, advance=self._advance_global,
                                       held=self._is_held, count=self._count_ddls)
        # DDL statements run downstream at most once (rule 8's intent)
        self.intent = DDLIntent(task=task.name, source=source.source_id, store=self.store, handler=self.handler,
                                log=self.log, connect=self._downstream, refresh_target=self.applier.refresh_target)
        self.handler.attach(self.request_rewind, self.records.find)

    def _downstream(self):
        """A new autocommit connection to the downstream (short-lived: DDLs, key reads)."""
        return connect_downstream(self.down_kwargs, autocommit=True)

    def _count_ddls(self, action: str, n: int = 1) -> None:
        DDLS.labels(self.task.name, self.source.source_id, action).inc(n)

    def _is_held(self, schema: str, table: str) -> bool:
        return (schema, table) in self.held

    def _read_ahead(self, ev: DDLEvent) -> None:
        """A held table's later statement (not one a combined DDL ran or the held one folds in)
        to the handler."""
        held = self.held.get((ev.schema, ev.table or ""))
        if fold_at(self.store, ev) is None and not (held is not None and any(
                Position.from_json(f["at"]).same_point(ev.end) for f in held.folds)):
            self.handler.read_ahead(ev)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Position:
        """(Re)build every piece of in-memory state from the checkpoints (rule 9)."""
        check_upstream(self.up_kwargs, self.source.source_id, self.source.flavor)
        # many short connections follow (checkpoint flushes, DDLs, apply tasks): connect cheaply
        self.up_kwargs = resolve_tls(self.up_kwargs)
        self.upstream_end.close()
        self.upstream_end = UpstreamEnd(self.up_kwargs)
        self.down_kwargs = self.store.db_kwargs = resolve_tls(self.down_kwargs)
        self.store.ensure_table()
        self.store.claim()          # fencing: a newer writer of this source makes this one stop here
        loaded = self.store.load()
        if self.online is not None:
            self.online.store.db_kwargs = self.down_kwargs
            self.online.restore()
        infos = {k: tp.table_info for k, tp in loaded.tables.items()}
        if self.schema_overrides is not None:
            infos = self.schema_overrides(infos)
        read_now = self.handler.restore(infos)
        self.held = {}
        g, su = loaded.global_pos, loaded.safe_until
        self._safe_loaded = su if su is not None and (g is None or su > g) else None
        self.read_pos, came_from = start_position(self.up_kwargs, loaded.global_pos, self.inst.meta,
                                                  self.source.source_id)
        # the operator's skips of rows events the decoder cannot read: handed to every read
        self._rows_skips = self.skips.rows_pending(self.read_pos) if self.skips is not None else {}
        if not came_from:
            self.log.warning("no checkpoint and no meta: starting at the upstream's current position",
                             position=str(self.read_pos))
        for s, t in read_now:
            # stored at once (at the start point, or the table's own later point): a restart
            # before the table's first row would otherwise read it again, ahead of this point
            tp = self.store.tables.get((s, t))
            at = tp.pos if tp is not None and self.read_pos < tp.pos else self.read_pos
            self.store.save_table(s, t, at, self.handler.table_info(s, t))
        if loaded.global_pos is None:
            self.store.save_global(self.read_pos)
        self.store.flush()
        with self._downstream() as c:
            self.applier.load_keys(c)
        self.binlog.prepare()    # e.g. the decoder process, started ahead of the first batch
        self._started = True
        self.log.info("syncer started", position=str(self.read_pos),
                      safe_until=str(loaded.safe_until) if loaded.safe_until else "",
                      tables=len(loaded.tables))
        return self.read_pos

    def close(self) -> None:
        """Stop the apply stream and the binlog decoder process (the decoder also stops when
        the syncer is garbage-collected)."""
        self.applier.close_stream()
        self.binlog.close()
        self.upstream_end.close()
        self.store.close()

    def request_rewind(self) -> None:
        """Restart from the checkpoints before the next batch (held tables replay their DDL)."""
        self._rewind.set()

    def rewind_requested(self) -> bool:
        return self._rewind.is_set()

    def status(self) -> dict:
        return {"read_pos": str(self.read_pos) if self.read_pos else "",
                "checkpoint": str(self.store.global_pos) if self.store.global_pos else "",
                "safe_until": str(self.store.safe_until) if self.store.safe_until else "",
                "held_tables": [f"{s}.{t}" for s, t in self.held],
                "online_ddl": self.online.in_progress() if self.online is not None else [],
                "rows_applied": self.rows_applied, "updates_of_missing_rows": self.updates_missing,
                "last_error": self.last_error}

    def run(self, stop: threading.Event, poll: float = 0.5) -> None:
        """Run batches until ``stop`` is set; errors propagate after being recorded."""
        while not stop.is_set():
            try:
                r = self.run_once()
            except Exception as e:
                self.last_error = str(e)
                raise
            if r.idle:
                stop.wait(poll)

    def sync_until_caught_up(self, max_batches: int = 1000) -> list[BatchResult]:
        """Run batches until the read position reaches the upstream position seen at the call."""
        target = master_status(self.up_kwargs)
        out = []
        for _ in range(max_batches):
            r = self.run_once()
            out.append(r)
            if self._position() >= target:
                self.applier.close_stream(park=True)
                return out
        raise SyncError(f"not caught up after {max_batches} batches", task=self.task.name,
                        source=self.source.source_id, position=str(self.read_pos))

    # ------------------------------------------------------------------ one micro-batch
    def run_once(self) -> BatchResult:
        try:
            r = self._run_batch()
        except BaseException:
            self.applier.close_stream()
            raise
        if r.idle:
            self.applier.close_stream(park=True)     # caught up: another syncer may adopt it, else closed soon
        elif self.applier.stream is not None and self.applier.stream.age > MAX_LIFE:
            self.applier.close_stream()      # long enough: other jobs get the cores now
        return r

    def _run_batch(self) -> BatchResult:
        if not self._started or self._rewind.is_set():
            self._rewind.clear()
            self.start()
        start = self._position()
        tb = time.monotonic()
        end = self.upstream_end.position()
        self.last_upstream_end = end
        if start.file == end.file:
            LAG.labels(self.task.name, self.source.source_id).set(max(0, end.pos - start.pos))
        if start >= end:
            return BatchResult(start, start, idle=True)
        t0 = time.monotonic()
        result = BatchResult(start, start)
        result.timings["master_status"] = t0 - tb
        tm = result.timings
        safe_written = False
        reader = self._open_reader(start, end)
        if self.applier.streamed and (end.file != start.file or end.pos - start.pos > STREAM_EARLY_BYTES):
            session = self.applier.session()
            if session is not None:      # the job starts (~0.1 s) while the first rows decode
                self.applier.open_stream(session, self._apply_kw())
        with reader:
            items = reader.items()
            while True:
                tw = time.monotonic()
                item = next(items)
                tm["wait_read"] = tm.get("wait_read", 0.0) + time.monotonic() - tw
                if isinstance(item, Chunk):
                    if not safe_written:
                        # rule 7: everything up to ``end`` may be downstream if we crash from now on
                        tc = time.monotonic()
                        self.store.write_safe_until(end)
                        tm["checkpoint"] = tm.get("checkpoint", 0.0) + time.monotonic() - tc
                        safe_written = True
                    try:
                        result.rows += self._apply_chunk(item, tm)
                        self._advance_global(item.end, tm)
                    except BaseException:
                        # as after a restart: the chunk may be partly downstream (some partitions
                        # committed), so everything up to ``end`` is replayed in safe mode, and the
                        # next batch rebuilds from the checkpoint rows (rule 9: a keyless table's
                        # committed partition moved its point there, rule 10)
                        cur = self._safe_loaded
                        self._safe_loaded = end if cur is None or end > cur else cur
                        self._started = False
                        raise
                elif isinstance(item, Statement):
                    if self.handler.coordinated:
                        # a shard DDL may wait for other sources, whose applies may need the
                        # cores this stream holds (sources sharing one Spark application)
                        self.applier.close_stream(park=True)
                    self._advance_global(item.start)
                    result.ddls += 1
                    td = time.monotonic()
                    self._handle_ddl_row(item)
                    tm["ddl"] = tm.get("ddl", 0.0) + time.monotonic() - td
                    self.read_pos = max(self._position(), item.end)
                else:
                    self._advance_global(item.pos, tm)
                    break
            tc = time.monotonic()
        tm["close_read"] = time.monotonic() - tc
        tm["decode"] = reader.decode_seconds
        result.end = self._position()
        tm["total"] = time.monotonic() - t0
        if result.ddls:
            self.log.debug("batch with statements", ddls=result.ddls, rows=result.rows,
                           **{f"{k}_ms": round(v * 1000, 1) for k, v in tm.items()})
        BATCHES.labels(self.task.name, self.source.source_id).inc()
        return result

    def _open_reader(self, start: Position, end: Position) -> BinlogRange:
        """The batch's binlog reader: both hand out Chunk/Statement/End the same way."""
        if not self.applier.streamed:      # the spark reader's reads are Spark jobs: no idle stream in their way
            self.applier.free_cores()
        return self.binlog.open(self.up_kwargs, RouteArgs(self.inst, self.task.meta_schema, frozenset(self._rows_skips)),
                                start, end,
                                max_events=self.max_batch_events, source_id=self.source.source_id,
                                max_rows=self.apply_rows)

    def _advance_global(self, pos: Position, tm: dict | None = None) -> None:
        """Everything before ``pos`` is handled: store it as the global point (rule 2)."""
        tc = time.monotonic()
        self.store.save_global(pos)
        self.store.flush()
        if tm is not None:
            tm["checkpoint"] = tm.get("checkpoint", 0.0) + time.monotonic() - tc
        self.hooks.fire("after_flush", {"position": pos})
        self.read_pos = pos if self.read_pos is None else max(self.read_pos, pos)
        if self._rows_skips and self.skips is not None:
            self.skips.rows_passed(self._rows_skips, pos)

    def _position(self) -> Position:
        """The read position; set by :meth:`start`, which every batch runs first."""
        if self.read_pos is None:
            raise SyncError("the syncer has no read position: start() has not run", task=self.task.name,
                            source=self.source.source_id)
        return self.read_pos

    def _apply_chunk(self, chunk: Chunk, tm: dict) -> int:
        """The chunk's changes split by key and applied (``worker.sync.chunk_apply``), then the
        tables' points moved to what the tasks acknowledged."""
        tp = time.monotonic()
        read_pos = self._position()
        points = {k: p.pos for k, p in self.store.tables.items() if p.pos > read_pos}
        parts = self.applier.split(through_folds(self.store, chunk.txns), held=set(self.held), points=points,
                                   safe_until=self._safe_loaded, force_safe=self.inst.syncer.safe_mode)
        ta = time.monotonic()
        tm["plan"] = tm.get("plan", 0.0) + ta - tp
        acks = self.applier.apply(parts, self._apply_kw(), self.read_pos)
        if parts:
            tm["apply"] = tm.get("apply", 0.0) + time.monotonic() - ta
        merged = merge_acks(acks)
        rows = sum(v[3] for v in merged.values())
        self.hooks.fire("after_apply", {"rows": rows, "tables": sorted(merged)})
        for (s, t), (f, p, g, _, gone) in merged.items():
            self.store.save_table(s, t, Position(f, p, g), self.handler.table_info(s, t))
            if gone:
                # the downstream lost rows this table updates (deleted there, or never written):
                # counted for the status and the metric; the apply logged their keys
                self.updates_missing += gone
                MISSING.labels(self.task.name, self.source.source_id).inc(gone)
        self.rows_applied += rows
        ROWS.labels(self.task.name, self.source.source_id).inc(rows)
        return rows

    def _apply_kw(self) -> dict:
        """The apply function's arguments (the same for every chunk until a restart)."""
        return dict(db_kwargs=self.down_kwargs, batch=self.inst.syncer.batch, source_id=self.source.source_id,
                    time_zone=self.time_zone, checkpoint=self.store.fq, epoch=self.store.epoch)

    # ------------------------------------------------------------------ DDL
    def _handle_ddl_row(self, m: Statement) -> None:
        """Handle one statement event (all changes before it are downstream and flushed).  An
        error names the statement: ``position`` = its start (what ``shardctl binlog skip``
        targets), ``statement_end``, ``statement``."""
        try:
            skip = self.records.find(m.start)
            if skip is not None and self.records.use(m, skip):
                return
            if self.mapper.events is not None and statement_ignored(
                    self.mapper.events, parse_ddl(m.query, m.schema or ""), m.schema or "",
                    self.mapper.online.real_of_shadow if self.mapper.online else None) \
                    and self.records.ignore(m):       # binlog event filter: DM's "skip event"
                return
            if not self._handle_statement(m):
                return
        except SkipRequested as sr:       # the operator skipped/replaced the DDL a lock had paused
            self.records.use(m, sr.skip)
            return
        except ShardMergeError as e:
            e.context.update(position=str(m.start), statement_end=str(m.end))
            e.context.setdefault("statement", " ".join(m.query.split())[:200])
            raise
        self._advance_global(m.end)

    def _handle_statement(self, m: Statement) -> bool:
        """Route and hand over each table's DDL; False for a statement that is not a DDL."""
        parsed = parse_ddl(m.query, m.schema or "")
        if parsed.kind is StatementKind.NOT_DDL:
            return False
        if self.online is not None and (seen := self.online.observe(parsed, m.start, m.end)) is not None:
            if not isinstance(seen, CutOver):
                self._count_ddls("online_ddl")
                self.log.debug("online schema change statement: nothing runs downstream", note=seen.note,
                               position=str(m.start))
            elif (ev := self.route.cut_over(seen, m)) is not None:
                self._handle_ddl(ev)
            return True
        for ev in self.route.events(parsed, m):     # (lazy: each table checked just before it is handled)
            self._handle_ddl(ev)
        return True

    def _handle_ddl(self, ev: DDLEvent) -> None:
        """Hand over the statement's changes in order (one, unless the handler coordinates a
        multi-change ALTER change by change); a held change holds the rest of the statement.
        The lock may ask for a later change first (``DDLDecision.first``): the changes of one
        statement have no upstream row between them, so their order is the table's own affair;
        the intent row records the order from then on (``DDLIntent.replay_order``).  A statement a
        combined DDL already ran is passed over; one the lock asked to combine is handed over as
        combined from then on (checkpoint rule 11)."""
        if self._pass_folded(ev):
            return
        todo = self.intent.replay_order(self.handler.changes(as_combined(self.store, ev), self.ctx))
        while todo:
            change = todo[0]
            if change.change is not None:
                change = dataclasses.replace(change, rest=tuple(c.change for c in todo[1:] if c.change is not None))
            out = self._handle_change(change)
            if out is False:
                return
            if out is True:
                todo.pop(0)
                continue
            if isinstance(out, SendCombined):
                todo[0] = out.event
                continue
            j = next((i for i, c in enumerate(todo) if c.change == out.change), None)
            if j is None or j == 0:
                raise SyncError(f"the lock asked for change {out.change} of the statement first, which is not "
                                "one still to come", task=self.task.name, source=self.source.source_id,
                                table=ev.upstream, position=str(ev.start))
            todo.insert(0, todo.pop(j))

    def _pass_folded(self, ev: DDLEvent) -> bool:
        """``ev`` is a statement a combined DDL already ran (rule 11): nothing runs, the tracked
        schema has it already; the table's point passes it and its list loses it together."""
        f = fold_at(self.store, ev)
        if f is None or ev.table is None:
            return False
        tp = self.store.tables[(ev.schema, ev.table)]
        self.store.save_table(ev.schema, ev.table, ev.end, self.handler.table_info(ev.schema, ev.table),
                              folded=[x for x in tp.folded if x is not f])
        self._count_ddls("folded")
        self.log.info("statement ran downstream with an earlier one of its table (combined); passed over",
                      table=ev.upstream, position=str(ev.start), statement=f.get("statement", ""))
        return True

    def _handle_change(self, ev: DDLEvent) -> bool | SendFirst | SendCombined:
        """One change (or whole statement) through the handler; False when its table is held,
        ``SendFirst`` when the lock asks for a later change of the statement first,
        ``SendCombined`` when it asks for later statements to be folded in."""
        if self.intent.resume_finished(ev, self.ctx):
            return True
        decision: DDLDecision = self.handler.handle_ddl(ev, self.ctx)
        if decision.pause:
            DDLS.labels(self.task.name, self.source.source_id, "pause").inc()
            raise SyncPaused(f"paused before DDL: {decision.pause}", task=self.task.name,
                             source=self.source.source_id, table=ev.upstream, position=str(ev.start))
        if decision.first is not None:
            self.log.info("the lock asks for a later change of this ALTER first", table=ev.upstream,
                          position=str(ev.start), change=ev.change, first=decision.first, note=decision.note)
            return SendFirst(decision.first)
        if decision.combine:
            self.log.info("the lock asks for later statements of this table to run with this one", table=ev.upstream,
                          position=str(ev.start), folded=len(decision.combine), note=decision.note)
            return SendCombined(self.intent.record_combine(ev, decision.combine))
        if decision.hold:
            if ev.table is None:     # contract: only a table's DDL is held
                raise SyncError("the DDL handler held a database-level statement", task=self.task.name,
                                source=self.source.source_id, position=str(ev.start))
            self.held[(ev.schema, ev.table)] = ev
            self.store.hold(ev.schema, ev.table, ev.start)
            DDLS.labels(self.task.name, self.source.source_id, "hold").inc()
            self.log.warning("table held on a DDL", table=ev.upstream, position=str(ev.start), note=decision.note,
                             change=ev.change)
            return False
        executed = False
        if decision.execute and not decision.skip:
            executed = self.intent.execute(ev, decision)
        self.intent.record_finished(ev, decision)
        self.handler.ddl_executed(ev, decision, self.ctx)
        self.hooks.fire("after_ddl_execute", {"event": ev, "executed": executed})
        DDLS.labels(self.task.name, self.source.source_id, "execute" if executed else "skip").inc()
        if ev.table is not None and ev.last_change:
            self.store.save_table(ev.schema, ev.table, ev.end, self.handler.table_info(ev.schema, ev.table),
                                  keep_info=False, folded=folded_after(self.store, ev))
        if ev.target_table is None or not executed:
            return True  # the downstream did not change here (a skip, or run before a restart: loaded at start)
        # a DDL may create the target, change its key or its generated columns: later chunks
        # are split by the new key and leave out the new generated columns
        with self._downstream() as c:
            self.applier.refresh_target(c, (ev.target_schema or "", ev.target_table))
        return True
