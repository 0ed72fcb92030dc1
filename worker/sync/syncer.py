"""The replication driver of one (task, source): binlog -> Spark apply jobs -> downstream.

Per micro-batch (``run_once``):

1. ``end`` = the upstream's ``SHOW MASTER STATUS``; a background thread decodes ``[read_pos,
   end)`` (at most ``max_batch_events`` changes, cut at a transaction boundary) ahead of the
   apply (``worker.binlog.source``; with ``reader="spark"`` a Spark executor decodes it through
   the ``mysql-binlog`` data source, ``worker.binlog.spark_reader``: same items, same order).
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

Checkpoint rules: ``worker.sync.checkpoint``.  Crash tests inject failures through :class:`Hooks`.
"""
from __future__ import annotations

import dataclasses
import functools
import threading
import time
from dataclasses import dataclass, field

import pymysql
from prometheus_client import Counter, Gauge

from coordinator.config import SourceConfig, TaskConfig, with_source_filters
from coordinator.errors import ShardMergeError
from coordinator.retry import is_transient, refusal_code
from coordinator.obs import logger
from coordinator.routing import TableMapper
from coordinator.schema import kinds as ddlmod
from coordinator.schema.replacement import ReplacementError, plan_replacement
from worker.sync.apply import (KeyCollision, Partitioner, apply_changes, apply_partition, connect_downstream,
                               resolve_tls)
from worker.binlog import READERS, BinlogReader, make_reader
from worker.binlog.source import Chunk, Statement
from worker.sync import apply_stream
from worker.sync.apply_stream import MAX_LIFE, ApplyStream, StreamError
from worker.sync.checkpoint import CheckpointStore
from worker.sync.ddl_exec import run_ddls, server_error
from worker.shardddl.errors import SkipRequested
from worker.sync.ddl_handler import DDLContext, DDLDecision, DDLHandler, DirectDDLHandler, has_if_not_exists
from worker.sync.fence import FencedOut
from worker.sync.online_ddl import CutOver, OnlineDDL, OnlineDDLStore
from worker.downstream import fetch_generated, fetch_keys
from worker.events import DDLEvent, Position
from worker.filters import statement_ignored
from worker.schema_tracker import schema_from_json
from worker.sync.errors import DownstreamDDLRejected, ReplicationKeyCollision, SyncError, SyncPaused
from worker.upstream import (UpstreamEnd, check_checkpoint_on_upstream, check_start_available, check_upstream,
                             gtid_at, master_status, show_create)
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.parse import parse_create_table

log = logger("worker.sync.syncer")

# Chunks of at most this many row changes are applied in the driver: a Spark job's scheduling
# (~0.1 s on 2 cores) would dominate them, and a DDL waits for the rows before it.
LOCAL_APPLY_ROWS = 256
# a batch whose binlog range is larger opens the apply stream before its first chunk is decoded
# (a few hundred rows of a narrow table; smaller batches are often trickles applied in the driver)
STREAM_EARLY_BYTES = 64 * 1024

ROWS = Counter("shardmerge_worker_rows_applied_total", "Row changes applied downstream", ["task", "source"])
DDLS = Counter("shardmerge_worker_ddls_total", "DDL statements handled", ["task", "source", "action"])
BATCHES = Counter("shardmerge_worker_batches_total", "Micro-batches run", ["task", "source"])
SPARK_JOBS = Counter("shardmerge_worker_spark_apply_jobs_total",
                     "Spark jobs started by the apply: one per apply stream (many chunks) or, with "
                     "apply-mode: job, one per chunk (small chunks, and all while Spark starts, apply in the driver)",
                     ["task", "source"])
LAG = Gauge("shardmerge_worker_lag_bytes", "Upstream binlog bytes not yet read (same file)", ["task", "source"])

class SimulatedCrash(Exception):
    """Raised by test hooks to stop the syncer at an exact point, like a killed process."""


@dataclass
class Hooks:
    """Failure-injection points (tests): each is called with a small dict and may raise."""
    after_apply: callable = None        # DML of a segment committed, checkpoint not yet advanced
    after_ddl_execute: callable = None  # DDL executed downstream, checkpoint not yet advanced
    after_flush: callable = None        # a checkpoint flush completed

    def fire(self, name: str, info: dict) -> None:
        fn = getattr(self, name)
        if fn is not None:
            fn(info)


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
        self.local_apply_rows = local_apply_rows
        self.last_upstream_end: Position | None = None    # the upstream's end at the last batch
        self._driver_apply_noted = False
        self.inst = task.instance(source.source_id)
        if self.inst is None:
            raise SyncError(f"task {task.name!r} has no mysql-instances entry for source "
                            f"{source.source_id!r}", task=task.name, source=source.source_id)
        # how the binlog is read: "process" (decoder child process of the driver, the default)
        # or "spark" (the mysql-binlog data source, decoded in an executor); None = task config
        self.reader = reader or self.inst.syncer.binlog_reader
        if self.reader not in READERS:
            raise SyncError(f"binlog reader {self.reader!r} is unknown; use one of {', '.join(sorted(READERS))} "
                            f"(task key syncer.binlog-reader)", task=task.name, source=source.source_id)
        self.inst = with_source_filters(self.inst, source)     # DM's source-level `filters` too
        self.mapper = TableMapper(self.inst, task.meta_schema)
        self.handler: DDLHandler = handler or DirectDDLHandler()
        attach = getattr(self.handler, "attach", None)
        if attach is not None:
            attach(self.request_rewind, lambda pos: self.skips.find(pos) if self.skips is not None else None)
        self.up_kwargs = source.db.pymysql_kwargs()
        self.upstream_end = UpstreamEnd(self.up_kwargs)
        self.down_kwargs = task.target.pymysql_kwargs()
        self.max_batch_events = max_batch_events
        self.apply_rows = apply_rows            # rows per Spark apply job (decoding runs ahead)
        # mysql-replication decodes TIMESTAMP columns as UTC wall-clock values (whatever the
        # process's zone), so the apply sessions read them back in UTC
        self.time_zone = "+00:00"
        self._parts: Partitioner | None = None
        self.binlog: BinlogReader = make_reader(self.reader, spark, source.source_id)
        self._parts_keys = None
        self.parallelism = parallelism or self.inst.syncer.worker_count
        self._stream: ApplyStream | None = None     # the long-lived apply job (syncer.apply-mode: stream)
        self.hooks = hooks or Hooks()
        self.store = CheckpointStore(self.down_kwargs, task.meta_schema, task.name, source.source_id, epoch)
        # task option online-ddl: pt-osc / gh-ost shadow tables (worker.sync.online_ddl)
        self.online = None if self.mapper.online is None else OnlineDDL(
            self.mapper.online, OnlineDDLStore(self.down_kwargs, task.meta_schema, task.name, source.source_id))
        self.log = log.bind(task=task.name, source=source.source_id)
        self.read_pos: Position | None = None
        self.held: dict[tuple[str, str], DDLEvent] = {}
        self.keys: dict[str, list[str]] = {}
        self.generated: dict[str, set[str]] = {}
        self.rows_applied = 0
        self.last_error: str | None = None
        self._rewind = threading.Event()
        self._started = False
        self.ctx = DDLContext(task.name, source.source_id, self.mapper,
                              lambda: connect_downstream(self.down_kwargs, autocommit=True),
                              lambda: pymysql.connect(**self.up_kwargs, autocommit=True),
                              self.mapper.router.is_sharded)

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
        self.handler.restore(infos)
        self.held = {}
        g, su = loaded.global_pos, loaded.safe_until
        self._safe_loaded = su if su is not None and (g is None or su > g) else None
        came_from = ""
        if loaded.global_pos is not None:
            check_checkpoint_on_upstream(self.up_kwargs, loaded.global_pos, self.source.source_id)
            self.read_pos, came_from = loaded.global_pos, "the checkpoint"
        elif self.inst.meta and (self.inst.meta.binlog_name or self.inst.meta.binlog_gtid):
            m, came_from = self.inst.meta, "the task's meta start"
            self.read_pos = Position(m.binlog_name, m.binlog_pos or 4, m.binlog_gtid)
            if not self.read_pos.gtid and self.read_pos.file:
                with pymysql.connect(**self.up_kwargs) as c, c.cursor() as cur:
                    g = gtid_at(cur, self.read_pos.file, self.read_pos.pos)
                self.read_pos = Position(self.read_pos.file, self.read_pos.pos, g)
        else:
            self.read_pos = master_status(self.up_kwargs)
            self.log.warning("no checkpoint and no meta: starting at the upstream's current position",
                             position=str(self.read_pos))
        if came_from:     # a purged start fails every dump: stop once, before the checkpoint is written
            check_start_available(self.up_kwargs, self.read_pos, self.source.source_id, came_from)
        if loaded.global_pos is None:
            self.store.save_global(self.read_pos)
            self.store.flush()
        with connect_downstream(self.down_kwargs, autocommit=True) as c:
            self.keys, self.generated = fetch_keys(c), fetch_generated(c)
        self.binlog.prepare()    # e.g. the decoder process, started ahead of the first batch
        self._started = True
        self.log.info("syncer started", position=str(self.read_pos),
                      safe_until=str(loaded.safe_until) if loaded.safe_until else "",
                      tables=len(loaded.tables))
        return self.read_pos

    def close(self) -> None:
        """Stop the apply stream and the binlog decoder process (the decoder also stops when
        the syncer is garbage-collected)."""
        self.close_stream()
        self.binlog.close()
        self.upstream_end.close()

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
                "rows_applied": self.rows_applied, "last_error": self.last_error}

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
            if self.read_pos >= target:
                self.close_stream(park=True)
                return out
        raise SyncError(f"not caught up after {max_batches} batches", task=self.task.name,
                        source=self.source.source_id, position=str(self.read_pos))

    # ------------------------------------------------------------------ one micro-batch
    def run_once(self) -> BatchResult:
        try:
            r = self._run_batch()
        except BaseException:
            self.close_stream()
            raise
        if r.idle:
            self.close_stream(park=True)     # caught up: another syncer may adopt it, else closed soon
        elif self._stream is not None and self._stream.age > MAX_LIFE:
            self.close_stream()      # long enough: other jobs get the cores now
        return r

    def _run_batch(self) -> BatchResult:
        if not self._started or self._rewind.is_set():
            self._rewind.clear()
            self.start()
        start = self.read_pos
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
        if self._streamed and (end.file != start.file or end.pos - start.pos > STREAM_EARLY_BYTES):
            session = self._session()
            if session is not None:      # the job starts (~0.1 s) while the first rows decode
                self._open_stream(session, self._apply_kw())
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
                        cur = self._safe_at_start
                        self._safe_loaded = end if cur is None or end > cur else cur
                        self._started = False
                        raise
                elif isinstance(item, Statement):
                    if getattr(self.handler, "coordinated", True):
                        # a shard DDL may wait for other sources, whose applies may need the
                        # cores this stream holds (sources sharing one Spark application)
                        self.close_stream(park=True)
                    self._advance_global(item.start)
                    result.ddls += 1
                    td = time.monotonic()
                    self._handle_ddl_row(item)
                    tm["ddl"] = tm.get("ddl", 0.0) + time.monotonic() - td
                    self.read_pos = max(self.read_pos, item.end)
                else:
                    self._advance_global(item.pos, tm)
                    break
            tc = time.monotonic()
        tm["close_read"] = time.monotonic() - tc
        tm["decode"] = reader.decode_seconds
        result.end = self.read_pos
        tm["total"] = time.monotonic() - t0
        if result.ddls:
            self.log.debug("batch with statements", ddls=result.ddls, rows=result.rows,
                           **{f"{k}_ms": round(v * 1000, 1) for k, v in tm.items()})
        BATCHES.labels(self.task.name, self.source.source_id).inc()
        return result

    def _open_reader(self, start: Position, end: Position):
        """The batch's binlog reader: both hand out Chunk/Statement/End the same way."""
        if not self._streamed:      # the spark reader's reads are Spark jobs: no idle stream in their way
            session = self._session()
            if session is not None:
                apply_stream.free_cores(session.sparkContext)
        args = (self.up_kwargs, (self.inst, self.task.meta_schema), start, end)
        kw = dict(max_events=self.max_batch_events, source_id=self.source.source_id, max_rows=self.apply_rows)
        return self.binlog.open(*args, **kw)

    def _advance_global(self, pos: Position, tm: dict | None = None) -> None:
        """Everything before ``pos`` is handled: store it as the global point (rule 2)."""
        tc = time.monotonic()
        self.store.save_global(pos)
        self.store.flush()
        if tm is not None:
            tm["checkpoint"] = tm.get("checkpoint", 0.0) + time.monotonic() - tc
        self.hooks.fire("after_flush", {"position": pos})
        self.read_pos = max(self.read_pos, pos)

    def _partitioner(self) -> Partitioner:
        # the maps themselves, compared by identity: an id() of a freed map can come back
        # for a later one and keep a stale partitioner
        built = self._parts_keys
        if self._parts is None or built[0] is not self.keys or built[1] is not self.generated:
            self._parts = Partitioner(self.keys, self.parallelism, self.generated)
            self._parts_keys = (self.keys, self.generated)
        return self._parts

    def _apply_chunk(self, chunk: Chunk, tm: dict) -> int:
        """One Spark job: the chunk's changes split by key, one downstream transaction per task
        (up to ``local_apply_rows`` changes: the same parts applied in the driver, no job)."""
        tp = time.monotonic()
        read_pos = self.read_pos
        points = {k: p.pos for k, p in self.store.tables.items() if p.pos > read_pos}
        parts = self._partitioner().split(chunk.txns, held=set(self.held), points=points,
                                          safe_until=self._safe_at_start,
                                          force_safe=self.inst.syncer.safe_mode)
        ta = time.monotonic()
        tm["plan"] = tm.get("plan", 0.0) + ta - tp
        acks = []
        kw = self._apply_kw()
        session = self._session() if parts and sum(len(p) for p in parts) > self.local_apply_rows else None
        if parts and session is None:
            # a trickle (a few rows, e.g. before a DDL): scheduling a Spark job costs more than the
            # apply; or the worker's Spark session is still starting.  The same function runs in
            # the driver, one downstream transaction per part
            try:
                acks = [apply_changes(changes, attempt=0, **kw) for changes in parts]
            except FencedOut:
                raise
            except KeyCollision as e:
                raise ReplicationKeyCollision(f"applying changes failed: KeyCollision: {e}", task=self.task.name,
                                              source=self.source.source_id, position=str(self.read_pos)) from e
            except Exception as e:
                raise SyncError(f"applying changes failed: {type(e).__name__}: {e}", task=self.task.name,
                                source=self.source.source_id, position=str(self.read_pos)) from e
            tm["apply"] = tm.get("apply", 0.0) + time.monotonic() - ta
        elif parts:
            try:
                if self._streamed:
                    acks = self._open_stream(session, kw).apply(parts, kw)
                else:
                    apply_stream.free_cores(session.sparkContext)
                    fn = functools.partial(apply_partition, **kw)
                    acks = session.sparkContext.parallelize(parts, len(parts)).mapPartitions(fn).collect()
                    SPARK_JOBS.labels(self.task.name, self.source.source_id).inc()
            except Exception as e:
                self.close_stream()
                cause = _root_apply_error(e.cause if isinstance(e, StreamError) else e)
                cls = ReplicationKeyCollision if cause.startswith("KeyCollision:") else \
                    FencedOut if cause.startswith("FencedOut:") else SyncError
                raise cls(f"applying changes failed: {cause}", task=self.task.name,
                          source=self.source.source_id, position=str(self.read_pos)) from e
            tm["apply"] = tm.get("apply", 0.0) + time.monotonic() - ta
        merged: dict[tuple[str, str], list] = {}
        for ack in acks:
            for k, (f, p, g, n) in ack.items():
                cur = merged.get(k)
                if cur is None or Position(cur[0], cur[1]) <= Position(f, p):
                    merged[k] = [f, p, g, n + (cur[3] if cur else 0)]
                else:
                    cur[3] += n
        rows = sum(v[3] for v in merged.values())
        self.hooks.fire("after_apply", {"rows": rows, "tables": sorted(merged)})
        for (s, t), (f, p, g, _) in merged.items():
            self.store.save_table(s, t, Position(f, p, g), self.handler.table_info(s, t))
        self.rows_applied += rows
        ROWS.labels(self.task.name, self.source.source_id).inc(rows)
        return rows

    def _apply_kw(self) -> dict:
        """The apply function's arguments (the same for every chunk until a restart)."""
        return dict(db_kwargs=self.down_kwargs, batch=self.inst.syncer.batch, source_id=self.source.source_id,
                    time_zone=self.time_zone, checkpoint=self.store.fq, epoch=self.store.epoch)

    @property
    def _streamed(self) -> bool:
        """Chunks go to a long-lived apply job (``worker/sync/apply_stream.py``); not with the
        spark reader, whose reads are Spark jobs the apply waits for."""
        return self.inst.syncer.apply_mode == "stream" and self.reader == "process"

    def _open_stream(self, session, kw: dict) -> ApplyStream:
        """This syncer's stream: its own, the one another syncer parked (the chunks carry the
        apply arguments, ``kw``), or a new Spark job."""
        if self._stream is None:
            self._stream = apply_stream.adopt(session.sparkContext, self.parallelism)
        if self._stream is None:
            group = f"shardmerge-apply-{self.task.name}-{self.source.source_id}-{time.monotonic_ns()}"
            self._stream = ApplyStream(session, self.parallelism, kw, job_group=group)
            SPARK_JOBS.labels(self.task.name, self.source.source_id).inc()
        return self._stream

    def close_stream(self, park: bool = False) -> None:
        """End the apply stream's Spark job (its cores go back to the application); ``park``:
        an idle point, the stream may serve the application's next syncer for a moment
        (``apply_stream.park``)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            session = self._session()
            sc = session.sparkContext if session is not None else None
            if park and sc is not None:
                apply_stream.park(stream, sc)
            else:
                stream.close(sc)

    def _session(self):
        """The Spark session for a job, or None while a background start is still under way
        (``spark`` is a session, or a ``worker.spark_session.SparkStarter``)."""
        if hasattr(self.spark, "sparkContext"):
            return self.spark
        session = self.spark.peek()
        if session is None and not self._driver_apply_noted:
            self._driver_apply_noted = True
            self.log.info("applying in the driver until the Spark session is up")
        return session

    @property
    def _safe_at_start(self) -> Position | None:
        """The safe-until loaded at start (the current batch's own intent does not count)."""
        return getattr(self, "_safe_loaded", None)

    # ------------------------------------------------------------------ DDL
    def _handle_ddl_row(self, m: Statement) -> None:
        """Handle one statement event (all changes before it are downstream and flushed).  An
        error names the statement: ``position`` = its start (what ``shardctl binlog skip``
        targets), ``statement_end``, ``statement``."""
        try:
            skip = self.skips.find(m.start) if self.skips is not None else None
            if skip is not None and self._use_operator_record(m, skip):
                return
            if self.mapper.events is not None and statement_ignored(
                    self.mapper.events, ddlmod.parse_ddl(m.query, m.schema or ""), m.schema or "",
                    self.mapper.online.real_of_shadow if self.mapper.online else None) \
                    and self._skip_statement(m, None):       # binlog event filter: DM's "skip event"
                return
            if not self._handle_statement(m):
                return
        except SkipRequested as sr:       # the operator skipped/replaced the DDL a lock had paused
            self._use_operator_record(m, sr.skip)
            return
        except ShardMergeError as e:
            e.context.update(position=str(m.start), statement_end=str(m.end))
            e.context.setdefault("statement", " ".join(m.query.split())[:200])
            raise
        self._advance_global(m.end)

    @staticmethod
    def _statement_tables(parsed, m: Statement) -> list[tuple[str, str | None, str]]:
        """(upstream schema, table or None for database-level, statement) of one statement."""
        if parsed.kind == ddlmod.DROP_TABLE and len(parsed.tables) > 1:
            return [(t.schema, t.table, f"DROP TABLE {ddlmod.quote(t.schema, t.table)}") for t in parsed.tables]
        if parsed.tables:
            t0 = parsed.tables[0]
            return [(t0.schema, t0.table, m.query)]
        return [(parsed.database or m.schema or "", None, m.query)]

    def _use_operator_record(self, m: Statement, rec) -> bool:
        """``binlog skip``, ``binlog replace`` or ``binlog inject`` armed at ``m``'s start."""
        op = getattr(rec, "op", "skip")
        if op == "inject":
            return self._inject_before(m, rec)
        if op == "replace":
            return self._replace_statement(m, rec)
        return self._skip_statement(m, rec)

    def _inject_before(self, m: Statement, rec) -> bool:
        """``shardctl binlog inject``: handle the operator's statements just before ``m`` (each
        through the normal path: routed, coordinated on its shard-DDL lock, executed), then ``m``
        itself as usual.  Injected statement ``i`` is handled as if it ended at ``m.start + 1 + i``:
        a table point there says it ran (rule 6 skips it when a crash replays ``m``, the record
        still pending) while ``m`` (ending at ``m.end``) is still to run; a point at ``m.start``
        only says the rows before ``m`` are applied.  While a table is held on its lock the record
        stays ``held`` (the table replays from ``m`` after its redirect); then it is marked done."""
        session = m.schema or ""
        try:
            plan = plan_replacement(list(rec.replace_with), session, cmd="binlog inject")
        except ReplacementError as e:
            raise ShardMergeError(f"binlog inject at {rec.position}: {e}; `shardctl binlog revert "
                                  f"{self.task.name} -s {self.source.source_id} -b {rec.position}` removes it",
                                  task=self.task.name, source=self.source.source_id) from None
        if m.start.file != m.end.file or m.start.pos + len(plan) >= m.end.pos:
            raise ShardMergeError(f"binlog inject at {rec.position}: {len(plan)} statements do not fit before the "
                                  f"statement (it ends at {m.end}); inject fewer statements (merge one table's "
                                  "changes into one ALTER TABLE)", task=self.task.name, source=self.source.source_id)
        tables = []
        for i, sql in enumerate(plan):
            parsed = ddlmod.parse_ddl(sql, session)
            tables += [(schema, table) for schema, table, _ in self._statement_tables(parsed, m) if table]
            at = Position(m.start.file, m.start.pos + 1 + i, m.start.gtid)
            self._handle_statement(dataclasses.replace(m, query=sql, end=at))
        self.store.flush()             # the injected statements' points, before the statement runs
        injected = "; ".join(plan)
        still = [f"{s}.{t}" for s, t in tables if (s, t) in self.held]
        self.log.warning("statements injected before a binlog statement on the operator's binlog inject",
                         position=str(m.start), statement=" ".join(m.query.split())[:500], injected=injected,
                         held=",".join(still))
        DDLS.labels(self.task.name, self.source.source_id, "operator_inject").inc(len(plan))
        self._handle_statement(m)      # the statement itself (a held table skips it and replays it)
        self._advance_global(m.end)
        if still:
            self.skips.held(rec, m.query, note=f"injected: {injected}; held on its lock: {', '.join(still)}")
        else:
            self.skips.used(rec, m.query, note=f"injected before it: {injected}")
        return True

    def _replace_statement(self, m: Statement, rec) -> bool:
        """``shardctl binlog replace``: handle the operator's statements in place of ``m``, at
        ``m``'s position, each through the normal path (routed, coordinated on the shard-DDL lock,
        executed, table points moved to ``m.end``).  While a table they change is held on its
        lock the record is kept ``held`` (the table replays ``m`` after its redirect and meets it
        again); once none is, it is marked done.  A failing replacement stops the subtask with
        the record still armed, so fixing the cause and resuming retries it (DM's behaviour)."""
        session = m.schema or ""
        try:
            plan = plan_replacement(list(rec.replace_with), session)
        except ReplacementError as e:
            raise ShardMergeError(f"binlog replace at {rec.position}: {e}; `shardctl binlog revert "
                                  f"{self.task.name} -s {self.source.source_id} -b {rec.position}` removes it",
                                  task=self.task.name, source=self.source.source_id) from None
        tables = []
        for sql in plan:
            parsed = ddlmod.parse_ddl(sql, session)
            tables += [(schema, table) for schema, table, _ in self._statement_tables(parsed, m) if table]
            self._handle_statement(dataclasses.replace(m, query=sql))
        instead = "; ".join(plan)
        still = [f"{s}.{t}" for s, t in tables if (s, t) in self.held]
        if still:
            self.skips.held(rec, m.query, note=f"replaced by: {instead}; held on its lock: {', '.join(still)}")
            self.log.warning("statement replaced on the operator's binlog replace; held on its shard-DDL lock",
                             position=str(m.start), statement=" ".join(m.query.split())[:500], replaced_by=instead,
                             held=",".join(still))
        else:
            DDLS.labels(self.task.name, self.source.source_id, "operator_replace").inc()
            self.log.warning("statement replaced on the operator's binlog replace", position=str(m.start),
                             statement=" ".join(m.query.split())[:500], replaced_by=instead)
        self._advance_global(m.end)
        if not still:
            self.skips.used(rec, m.query, note=f"replaced by: {instead}")
        return True

    def _skip_statement(self, m: Statement, skip) -> bool:
        """``shardctl binlog skip`` (or, with ``skip`` None, a binlog event filter that ignores
        ``m``): do not execute nor coordinate ``m`` (no Info in optimistic
        mode); let the handler's schema state follow the upstream, then advance each routed
        table's point and the global point to ``m.end`` exactly as a handled DDL does and flush
        (rule 2, 3, 6), and only then mark the skip used.  False (skip not consumed) when a
        table it names is held: the held table replays it after its redirect."""
        session = m.schema or ""
        try:
            parsed = ddlmod.parse_ddl(m.query, session)
            events = [] if parsed.kind == ddlmod.NOT_DDL else self._statement_tables(parsed, m)
        except ShardMergeError:
            parsed, events = None, []     # not even tokenizable: nothing to route, skip it whole
        todo, tables = [], []
        for schema, table, query in events:
            if table is None:
                continue
            tgt = self.mapper.target(schema, table)
            if tgt is None:
                continue
            if (schema, table) in self.held:
                self.log.warning("binlog skip waits: the statement's table is held on an earlier DDL",
                                 table=f"{schema}.{table}", position=str(m.start))
                return False
            tables.append(f"{schema}.{table}")
            tp = self.store.table_point(schema, table)
            if tp is not None and m.end <= tp:
                continue  # rule 6: already behind this table's point
            todo.append(DDLEvent(self.source.source_id, schema, table, parsed.kind, query, tgt.schema,
                                 tgt.table, m.start, m.end, int(m.ts or 0), {"session_schema": session}))
        follow = getattr(self.handler, "ddl_skipped", None)
        for ev in todo:
            if follow is not None:
                follow(ev, self.ctx)
            self.store.save_table(ev.schema, ev.table, ev.end, self.handler.table_info(ev.schema, ev.table),
                                  keep_info=False)
        DDLS.labels(self.task.name, self.source.source_id, "filter_ignore" if skip is None else "operator_skip").inc()
        self.log.warning("statement ignored by a binlog event filter (filter-rules)" if skip is None else
                         "statement skipped on the operator's binlog skip: not executed, not coordinated",
                         position=str(m.start), end=str(m.end), statement=" ".join(m.query.split())[:500],
                         tables=",".join(tables))
        self._advance_global(m.end)
        if skip is not None:
            self.skips.used(skip, m.query, note=f"tables: {', '.join(tables)}" if tables else "no routed table")
        return True

    def _handle_statement(self, m: Statement) -> bool:
        """Route and hand over each table's DDL; False for a statement that is not a DDL."""
        start, end = m.start, m.end
        session = m.schema or ""
        parsed = ddlmod.parse_ddl(m.query, session)
        if parsed.kind == ddlmod.NOT_DDL:
            return False
        if self.online is not None and (seen := self.online.observe(parsed, start, end)) is not None:
            if isinstance(seen, CutOver):
                self._cut_over(seen, m)
            else:
                DDLS.labels(self.task.name, self.source.source_id, "online_ddl").inc()
                self.log.debug("online schema change statement: nothing runs downstream", note=seen.note,
                               position=str(start))
            return True
        for schema, table, query in self._statement_tables(parsed, m):
            if table is None:
                if not self.mapper.filter.schema_allowed(schema):
                    continue
                tgt_s, tgt_t = self.mapper.router.route_schema(schema), None
            else:
                tgt = self.mapper.target(schema, table)
                if tgt is None:
                    continue
                tgt_s, tgt_t = tgt.schema, tgt.table
                tp = self.store.table_point(schema, table)
                if tp is not None and end <= tp:
                    DDLS.labels(self.task.name, self.source.source_id, "already_applied").inc()
                    continue  # rule 6
                if (schema, table) in self.held:
                    continue
            ev = DDLEvent(self.source.source_id, schema, table, parsed.kind, query, tgt_s, tgt_t,
                          start, end, int(m.ts or 0), {"session_schema": session})
            self._handle_ddl(ev)
        return True

    def _cut_over(self, c: CutOver, m: Statement) -> None:
        """An online schema change tool swapped its shadow table in: its DDLs are this table's
        DDL at the RENAME's position (the RENAME itself runs nowhere)."""
        tgt = self.mapper.target(c.schema, c.table)
        tp = self.store.table_point(c.schema, c.table)
        if not c.sql or tgt is None or (tp is not None and m.end <= tp) or (c.schema, c.table) in self.held:
            return   # nothing remembered, a filtered table, already applied (rule 6) or held (replays it)
        kind = ddlmod.parse_ddl(c.sql, c.schema).kind
        self._handle_ddl(DDLEvent(self.source.source_id, c.schema, c.table, kind, c.sql, tgt.schema, tgt.table,
                                  m.start, m.end, int(m.ts or 0),
                                  {"session_schema": m.schema or "", "online_ddl_shadow": c.shadow}))

    def _handle_ddl(self, ev: DDLEvent) -> None:
        key = (ev.schema, ev.table)
        tp = self.store.tables.get(key) if ev.table is not None else None
        intent = tp.ddl_intent if tp is not None else None
        if intent and intent.get("finished") and Position.from_json(intent["pos"]).same_point(ev.end):
            # rule 8b: finished before a restart (executed and answered), checkpoint not yet past it
            self.handler.resume_finished(ev, self.ctx)
            self.store.save_table(ev.schema, ev.table, ev.end, self.handler.table_info(ev.schema, ev.table),
                                  keep_info=False)
            self.log.info("DDL finished before a restart; not coordinated again", table=ev.upstream,
                          position=str(ev.end))
            return
        decision: DDLDecision = self.handler.handle_ddl(ev, self.ctx)
        if decision.pause:
            DDLS.labels(self.task.name, self.source.source_id, "pause").inc()
            raise SyncPaused(f"paused before DDL: {decision.pause}", task=self.task.name,
                             source=self.source.source_id, table=ev.upstream, position=str(ev.start))
        if decision.hold:
            self.held[key] = ev
            self.store.hold(ev.schema, ev.table, ev.start)
            DDLS.labels(self.task.name, self.source.source_id, "hold").inc()
            self.log.warning("table held on a DDL", table=ev.upstream, position=str(ev.start), note=decision.note)
            return
        executed = False
        if decision.execute and not decision.skip:
            executed = self._execute_ddl(ev, decision)
        if decision.coordinated and ev.table is not None:
            # rule 8b: finished, recorded before the done mark, so a restart between the mark and the
            # checkpoint does not coordinate the DDL again
            self.store.write_ddl_intent(ev.schema, ev.table, {"pos": ev.end.to_json(), "finished": True,
                                                              "statements": decision.execute,
                                                              "table_info": self.handler.after_info(ev)})
        self.handler.ddl_executed(ev, decision, self.ctx)
        self.hooks.fire("after_ddl_execute", {"event": ev, "executed": executed})
        DDLS.labels(self.task.name, self.source.source_id, "execute" if executed else "skip").inc()
        if ev.table is not None:
            self.store.save_table(ev.schema, ev.table, ev.end, self.handler.table_info(ev.schema, ev.table),
                                  keep_info=False)
        if ev.target_table is None or not executed:
            return      # the downstream did not change here (a skip, or run before a restart: loaded at start)
        # a DDL may create the target, change its key or its generated columns: later chunks
        # are split by the new key and leave out the new generated columns
        with connect_downstream(self.down_kwargs, autocommit=True) as c:
            self._refresh_target(c, (ev.target_schema, ev.target_table))

    def _refresh_target(self, c, target: tuple[str, str]) -> None:
        """Re-read one downstream table's key and generated columns (after a DDL that may have
        changed them, or on a shard's CREATE of a target another source may have made)."""
        name = f"{target[0]}.{target[1]}"
        key, gen = fetch_keys(c, target).get(name), fetch_generated(c, target).get(name)
        if key != self.keys.get(name):      # new maps: the partitioner is rebuilt on identity change
            self.keys = {k: v for k, v in self.keys.items() if k != name} | ({name: key} if key else {})
        if gen != self.generated.get(name):
            self.generated = {k: v for k, v in self.generated.items() if k != name} | ({name: gen} if gen else {})

    def _rename_in_effect(self, e: pymysql.MySQLError, ev: DDLEvent, decision: DDLDecision, conn) -> bool:
        """A rename the downstream refuses with "Unknown column 'old'" (1054) may already have run:
        another shard's table ran the agreed change and this one, told to run it too (e.g. after
        a master restart re-decided the lock), meets it done.  In effect when every column the
        statements touch, going from this shard's schema before the DDL, already looks as they
        would make it downstream (:func:`ddl_in_effect`); then nothing is run and it is logged."""
        if not (e.args and e.args[0] == 1054) or ev.table is None or ev.target_table is None:
            return False
        shard_before = schema_from_json(self.handler.table_info(ev.schema, ev.table))
        now = show_create(conn, ev.target_schema, ev.target_table)
        if shard_before is None or now is None:
            return False
        if not ddl_in_effect(shard_before.to_create_sql(ev.target_table), now, decision.execute):
            return False
        self.log.warning("DDL already in effect downstream (another shard's table ran it); not run again",
                         table=ev.upstream, position=str(ev.start), statements="; ".join(decision.execute),
                         error=server_error(e))
        return True

    def _execute_ddl(self, ev: DDLEvent, decision: DDLDecision) -> bool:
        """Execute with the at-most-once intent of rule 8; False when it had already run."""
        key_s, key_t = ev.schema, ev.table or ""
        with connect_downstream(self.down_kwargs, autocommit=True) as conn:
            before = show_create(conn, ev.target_schema, ev.target_table) if ev.target_table else None
            if before is not None and ev.kind == ddlmod.CREATE_TABLE and decision.execute \
                    and all(has_if_not_exists(s) for s in decision.execute):
                # a new shard of a target that exists: the routed CREATE ... IF NOT EXISTS would
                # change nothing downstream (no intent record, no statement).  The target may be
                # new to this syncer (another source created it): its keys are read on this
                # connection
                self.log.debug("target exists; shard CREATE TABLE changes nothing downstream",
                               table=ev.upstream, target=f"{ev.target_schema}.{ev.target_table}")
                self._refresh_target(conn, (ev.target_schema, ev.target_table))
                return False
            tp = self.store.tables.get((key_s, key_t))
            intent = tp.ddl_intent if tp else None
            if intent and Position.from_json(intent["pos"]).same_point(ev.end) and ev.target_table \
                    and intent.get("before") != before \
                    and ddl_in_effect(intent.get("before"), before, intent.get("statements") or decision.execute):
                self.log.info("DDL already executed before a restart; not running it again",
                              table=ev.upstream, position=str(ev.end))
                return False
            if ev.table is not None:
                self.store.write_ddl_intent(key_s, key_t, {"pos": ev.end.to_json(), "before": before,
                                                           "statements": decision.execute})
            else:
                self.store.check_fence()     # (the intent write checks it for a table's DDL)
            try:
                run_ddls(conn, decision.execute, timestamp=ev.timestamp, ignorable=decision.ignorable,
                         task=self.task.name, source=self.source.source_id, table=ev.upstream)
            except pymysql.MySQLError as e:
                if self._rename_in_effect(e, ev, decision, conn):
                    return False
                failed = getattr(e, "statement", "; ".join(decision.execute))
                if is_transient(e) or refusal_code(e):     # a hiccup, or read_only / full: retried
                    raise SyncError(f"downstream DDL failed: {server_error(e)}; statement: {failed}; retried "
                                    f"until the downstream accepts it", task=self.task.name,
                                    source=self.source.source_id, table=ev.upstream, position=str(ev.end)) from e
                raise DownstreamDDLRejected(f"downstream DDL failed: {server_error(e)}; statement: {failed}; "
                                            f"fix the target and `shardctl resume-task`, or `shardctl binlog skip "
                                            f"{self.task.name} -s {self.source.source_id}` to skip it",
                                            task=self.task.name, source=self.source.source_id, table=ev.upstream,
                                            position=str(ev.end)) from e
        return True


def ddl_in_effect(before_sql: str | None, now_sql: str | None, statements: list[str]) -> bool:
    """Rule 8's test after a restart: did ``statements`` already run on the target?  Only what
    the statements change counts (another source's DDL may have changed the merged target
    meanwhile): every column and index they touch must look as they would make it.  Unknown
    (unparsable, or a statement that touches nothing) means "not in effect": the statements run
    again, with the "already applied" errors ignored."""
    if not before_sql or not now_sql:
        return False
    try:
        before = parse_create_table(before_sql)
        now = parse_create_table(now_sql)
        expected = before
        for sql in statements:
            expected = apply_ddl(expected, sql)
    except Exception:  # noqa: BLE001 — cannot tell: run again (errors meaning "done" are ignored)
        return False
    if expected is None:
        return False

    def col(ts, name):
        c = ts.column(name)
        return None if c is None else (c.type, c.nullable)

    def idx(ts, name):
        i = ts.index(name)
        return None if i is None else (i.kind, tuple(i.columns))

    cols = {c.name.lower() for c in (*before.columns, *expected.columns)}
    idxs = {i.name.lower() for i in (*before.indexes, *expected.indexes)}
    touched_c = [n for n in cols if col(before, n) != col(expected, n)]
    touched_i = [n for n in idxs if idx(before, n) != idx(expected, n)]
    if not touched_c and not touched_i:
        return False
    return all(col(now, n) == col(expected, n) for n in touched_c) and \
        all(idx(now, n) == idx(expected, n) for n in touched_i)


def _root_apply_error(e: BaseException) -> str:
    text = str(e)
    for marker in ("KeyCollision:", "FencedOut:", "ApplyError:", "pymysql.err."):
        i = text.rfind(marker)
        if i >= 0:
            return text[i:].splitlines()[0][:500]
    return text.splitlines()[0][:500] if text else type(e).__name__
