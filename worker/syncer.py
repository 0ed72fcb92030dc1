"""The replication driver of one (task, source): binlog -> Spark micro-batches -> downstream.

Per micro-batch (``run_once``):

1. ``end`` = the upstream's ``SHOW MASTER STATUS``; read ``[read_pos, end)`` (at most
   ``max_batch_events`` changes, cut at a transaction boundary) through the ``mysql-binlog``
   Spark source and cache it.
2. Collect the statement events (DDLs) and the ``end`` marker — few rows — to the driver.
3. Store *safe-until* = end of this batch (checkpoint rule 7), then walk the segments between
   statement events: each DML segment is ``repartition(N, key hash).sortWithinPartitions(seq)``
   and applied by Spark tasks, one downstream transaction per task (``worker.apply``).  Table
   points advance from the tasks' acknowledgements, the global point to the segment's end;
   flush.
4. At a DDL (all earlier DML is downstream and flushed) ask the :class:`DDLHandler`
   (``worker.ddl_handler`` has the full contract), execute its statements, advance and flush.
   If the DDL changed a target's key columns the batch stops there (rows after it were hashed
   with the old key) and the next batch starts right after the DDL.

Checkpoint rules: ``worker.checkpoint``.  Crash tests inject failures through :class:`Hooks`.
"""
from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass, field

import pymysql
from prometheus_client import Counter, Gauge

from coordinator.config import SourceConfig, TaskConfig
from coordinator.errors import ShardMergeError
from coordinator.obs import logger
from coordinator.routing import TableMapper
from worker import ddl as ddlmod
from worker.apply import ApplyError, apply_partition, connect_downstream
from worker.binlog_source import FORMAT, read_options, register
from worker.checkpoint import CheckpointStore
from worker.ddl_handler import DDLContext, DDLDecision, DDLHandler, DirectDDLHandler
from worker.events import DDL, DML_KINDS, END, DDLEvent, Position

log = logger("worker.syncer")

ROWS = Counter("shardmerge_worker_rows_applied_total", "Row changes applied downstream", ["task", "source"])
DDLS = Counter("shardmerge_worker_ddls_total", "DDL statements handled", ["task", "source", "action"])
BATCHES = Counter("shardmerge_worker_batches_total", "Micro-batches run", ["task", "source"])
LAG = Gauge("shardmerge_worker_lag_bytes", "Upstream binlog bytes not yet read (same file)", ["task", "source"])

IGNORABLE_DDL_ERRORS = {
    1007,  # database exists
    1050,  # table exists
    1060,  # duplicate column
    1061,  # duplicate key name
    1068,  # multiple primary key
    1091,  # can't drop: does not exist
    1051,  # unknown table (DROP)
}


class SyncError(ShardMergeError):
    """The syncer cannot continue; names task, source and binlog position."""


class SyncPaused(ShardMergeError):
    """The DDL handler asked to stop before a DDL; a restart handles the same DDL again."""


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
    cut_at_ddl: bool = False
    timings: dict = field(default_factory=dict)


def master_status(db_kwargs: dict) -> Position:
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
        if not row:
            raise SyncError("upstream has no binary log (SHOW MASTER STATUS is empty); enable log_bin")
        return Position(row[0], int(row[1]), gtid_at(cur, row[0], int(row[1])))


def gtid_at(cur, file: str, pos: int) -> str:
    """The GTID state exactly at file:pos (MariaDB ``BINLOG_GTID_POS``; "" if unknown)."""
    cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
    (gtid,) = cur.fetchone()
    return gtid or ""


def check_upstream(db_kwargs: dict, source_id: str) -> None:
    """The row images must carry column names and full rows (DML is named from the image)."""
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        cur.execute("SELECT @@binlog_format, @@binlog_row_image, @@binlog_row_metadata")
        fmt, image, meta = cur.fetchone()
    if (fmt, image, meta) != ("ROW", "FULL", "FULL"):
        raise SyncError(f"upstream binlog settings are binlog_format={fmt}, binlog_row_image={image}, "
                        f"binlog_row_metadata={meta}; set them to ROW, FULL, FULL", source=source_id)


def fetch_keys(conn) -> dict[str, list[str]]:
    """{"schema.table": key columns} of every downstream table: the primary key, else the first
    unique key whose columns are all NOT NULL."""
    with conn.cursor() as cur:
        cur.execute("""SELECT s.TABLE_SCHEMA, s.TABLE_NAME, s.INDEX_NAME, s.COLUMN_NAME, c.IS_NULLABLE
                       FROM information_schema.STATISTICS s JOIN information_schema.COLUMNS c
                         ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME
                        AND c.COLUMN_NAME = s.COLUMN_NAME
                       WHERE s.NON_UNIQUE = 0 AND s.TABLE_SCHEMA NOT IN
                         ('mysql', 'information_schema', 'performance_schema', 'sys')
                       ORDER BY s.TABLE_SCHEMA, s.TABLE_NAME, s.INDEX_NAME = 'PRIMARY' DESC,
                                s.INDEX_NAME, s.SEQ_IN_INDEX""")
        idx: dict[str, dict[str, list]] = {}
        for schema, table, index, col, nullable in cur.fetchall():
            idx.setdefault(f"{schema}.{table}", {}).setdefault(index, []).append((col, nullable))
    out = {}
    for t, indexes in idx.items():
        for name, cols in indexes.items():   # PRIMARY first (ORDER BY)
            if all(n == "NO" for _, n in cols):
                out[t] = [c for c, _ in cols]
                break
    return out


def show_create(conn, schema: str, table: str) -> str | None:
    try:
        with conn.cursor() as cur:
            cur.execute(f"SHOW CREATE TABLE {ddlmod.quote(schema, table)}")
            return cur.fetchone()[1]
    except pymysql.MySQLError:
        return None


class Syncer:
    def __init__(self, spark, task: TaskConfig, source: SourceConfig, handler: DDLHandler | None = None, *,
                 max_batch_events: int = 50_000, parallelism: int | None = None, hooks: Hooks | None = None):
        self.spark, self.task, self.source = spark, task, source
        self.inst = task.instance(source.source_id)
        if self.inst is None:
            raise SyncError(f"task {task.name!r} has no mysql-instances entry for source "
                            f"{source.source_id!r}", task=task.name, source=source.source_id)
        self.mapper = TableMapper(self.inst, task.meta_schema)
        self.handler: DDLHandler = handler or DirectDDLHandler()
        self.up_kwargs = source.db.pymysql_kwargs()
        self.down_kwargs = task.target.pymysql_kwargs()
        self.max_batch_events = max_batch_events
        self.parallelism = parallelism or self.inst.syncer.worker_count
        self.hooks = hooks or Hooks()
        self.store = CheckpointStore(self.down_kwargs, task.meta_schema, task.name, source.source_id)
        self.log = log.bind(task=task.name, source=source.source_id)
        self.read_pos: Position | None = None
        self.held: dict[tuple[str, str], DDLEvent] = {}
        self.keys: dict[str, list[str]] = {}
        self.rows_applied = 0
        self.last_error: str | None = None
        self._rewind = threading.Event()
        self._started = False
        self.ctx = DDLContext(task.name, source.source_id, self.mapper,
                              lambda: connect_downstream(self.down_kwargs, autocommit=True),
                              lambda: pymysql.connect(**self.up_kwargs, autocommit=True),
                              self.mapper.router.is_sharded)
        register(spark)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Position:
        """(Re)build every piece of in-memory state from the checkpoints (rule 9)."""
        check_upstream(self.up_kwargs, self.source.source_id)
        self.store.ensure_table()
        loaded = self.store.load()
        self.handler.restore({k: tp.table_info for k, tp in loaded.tables.items()})
        self.held = {}
        g, su = loaded.global_pos, loaded.safe_until
        self._safe_loaded = su if su is not None and (g is None or su > g) else None
        if loaded.global_pos is not None:
            self.read_pos = loaded.global_pos
        elif self.inst.meta and (self.inst.meta.binlog_name or self.inst.meta.binlog_gtid):
            m = self.inst.meta
            self.read_pos = Position(m.binlog_name, m.binlog_pos or 4, m.binlog_gtid)
            if not self.read_pos.gtid and self.read_pos.file:
                with pymysql.connect(**self.up_kwargs) as c, c.cursor() as cur:
                    g = gtid_at(cur, self.read_pos.file, self.read_pos.pos)
                self.read_pos = Position(self.read_pos.file, self.read_pos.pos, g)
        else:
            self.read_pos = master_status(self.up_kwargs)
            self.log.warning("no checkpoint and no meta: starting at the upstream's current position",
                             position=str(self.read_pos))
        if loaded.global_pos is None:
            self.store.save_global(self.read_pos)
            self.store.flush()
        with connect_downstream(self.down_kwargs, autocommit=True) as c:
            self.keys = fetch_keys(c)
        self._started = True
        self.log.info("syncer started", position=str(self.read_pos),
                      safe_until=str(loaded.safe_until) if loaded.safe_until else "",
                      tables=len(loaded.tables))
        return self.read_pos

    def request_rewind(self) -> None:
        """Restart from the checkpoints before the next batch (held tables replay their DDL)."""
        self._rewind.set()

    def status(self) -> dict:
        return {"read_pos": str(self.read_pos) if self.read_pos else "",
                "checkpoint": str(self.store.global_pos) if self.store.global_pos else "",
                "safe_until": str(self.store.safe_until) if self.store.safe_until else "",
                "held_tables": [f"{s}.{t}" for s, t in self.held],
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
                return out
        raise SyncError(f"not caught up after {max_batches} batches", task=self.task.name,
                        source=self.source.source_id, position=str(self.read_pos))

    # ------------------------------------------------------------------ one micro-batch
    def run_once(self) -> BatchResult:
        if not self._started or self._rewind.is_set():
            self._rewind.clear()
            self.start()
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        start = self.read_pos
        end = master_status(self.up_kwargs)
        if start.file == end.file:
            LAG.labels(self.task.name, self.source.source_id).set(max(0, end.pos - start.pos))
        if start >= end:
            return BatchResult(start, start, idle=True)
        t0 = time.monotonic()
        opts = read_options(db_kwargs=self.up_kwargs, source_id=self.source.source_id, instance=self.inst,
                            meta_schema=self.task.meta_schema, start=start, end=end,
                            server_id=0, max_events=self.max_batch_events, keys=self.keys)
        df = self.spark.read.format(FORMAT).options(**opts).load().persist(StorageLevel.MEMORY_AND_DISK)
        try:
            markers = df.filter(F.col("kind").isin(DDL, END)).orderBy("seq").collect()
            t_read = time.monotonic() - t0
            result = BatchResult(start, start, timings={"read": t_read})
            end_row = markers[-1]
            batch_end = Position(end_row.file, end_row.pos, end_row.gtid or "")
            if not batch_end.file:
                batch_end = start
            has_dml = end_row.seq > len(markers)
            if has_dml:
                self.store.write_safe_until(batch_end)
            lo = 1
            for m in markers:
                if m.seq > lo:
                    result.rows += self._apply_segment(df, lo, m.seq)
                seg_end = batch_end
                if m.kind == DDL:
                    seg_end = Position(m.sfile, m.spos, m.sgtid or "") if m.sfile else start
                self.store.save_global(seg_end)
                self.store.flush()
                self.hooks.fire("after_flush", {"position": seg_end})
                self.read_pos = max(self.read_pos, seg_end)
                if m.kind == DDL:
                    result.ddls += 1
                    cut = self._handle_ddl_row(m)
                    self.read_pos = max(self.read_pos, Position(m.file, m.pos, m.gtid or ""))
                    if cut:
                        result.cut_at_ddl = True
                        break
                lo = m.seq + 1
            result.end = self.read_pos
            result.timings["total"] = time.monotonic() - t0
            BATCHES.labels(self.task.name, self.source.source_id).inc()
            return result
        finally:
            df.unpersist()

    def _apply_segment(self, df, lo: int, hi: int) -> int:
        from pyspark.sql import functions as F
        seg = df.filter((F.col("seq") >= lo) & (F.col("seq") < hi) & F.col("kind").isin(*DML_KINDS))
        seg = seg.repartition(self.parallelism, "khash").sortWithinPartitions("seq")
        read_pos = self.read_pos
        points = {k: tp.pos.to_json() for k, tp in self.store.tables.items() if tp.pos > read_pos}
        fn = functools.partial(
            apply_partition, db_kwargs=self.down_kwargs, batch=self.inst.syncer.batch,
            safe_until=self.store_safe_json(), force_safe=self.inst.syncer.safe_mode,
            points=points, held=set(self.held), source_id=self.source.source_id)
        try:
            acks = seg.rdd.mapPartitions(fn).collect()
        except Exception as e:
            cause = _root_apply_error(e)
            raise SyncError(f"applying changes failed: {cause}", task=self.task.name,
                            source=self.source.source_id, position=str(self.read_pos)) from e
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

    def store_safe_json(self) -> dict | None:
        """The safe-until loaded at start (the current batch's own intent does not count)."""
        return self._safe_at_start.to_json() if self._safe_at_start else None

    @property
    def _safe_at_start(self) -> Position | None:
        return getattr(self, "_safe_loaded", None)

    # ------------------------------------------------------------------ DDL
    def _handle_ddl_row(self, m) -> bool:
        """Handle one statement event; True when the batch must stop after it."""
        start = Position(m.sfile, m.spos, m.sgtid or "")
        end = Position(m.file, m.pos, m.gtid or "")
        session = m.up_schema or ""
        parsed = ddlmod.parse_ddl(m.query, session)
        if parsed.kind == ddlmod.NOT_DDL:
            return False
        if parsed.kind == ddlmod.DROP_TABLE and len(parsed.tables) > 1:
            events = [(t.schema, t.table, f"DROP TABLE {ddlmod.quote(t.schema, t.table)}") for t in parsed.tables]
        elif parsed.tables:
            t0 = parsed.tables[0]
            events = [(t0.schema, t0.table, m.query)]
        else:
            events = [(parsed.database or session, None, m.query)]
        cut = False
        for schema, table, query in events:
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
            cut |= self._handle_ddl(ev)
        self.store.save_global(end)
        self.store.flush()
        self.hooks.fire("after_flush", {"position": end})
        return cut

    def _handle_ddl(self, ev: DDLEvent) -> bool:
        decision: DDLDecision = self.handler.handle_ddl(ev, self.ctx)
        key = (ev.schema, ev.table)
        if decision.pause:
            DDLS.labels(self.task.name, self.source.source_id, "pause").inc()
            raise SyncPaused(f"paused before DDL: {decision.pause}", task=self.task.name,
                             source=self.source.source_id, table=ev.upstream, position=str(ev.start))
        if decision.hold:
            self.held[key] = ev
            self.store.hold(ev.schema, ev.table, ev.start)
            DDLS.labels(self.task.name, self.source.source_id, "hold").inc()
            self.log.warning("table held on a DDL", table=ev.upstream, position=str(ev.start), note=decision.note)
            return False
        executed = False
        if decision.execute and not decision.skip:
            executed = self._execute_ddl(ev, decision)
        self.handler.ddl_executed(ev, decision, self.ctx)
        self.hooks.fire("after_ddl_execute", {"event": ev, "executed": executed})
        DDLS.labels(self.task.name, self.source.source_id, "execute" if executed else "skip").inc()
        if ev.table is not None:
            self.store.save_table(ev.schema, ev.table, ev.end, self.handler.table_info(ev.schema, ev.table),
                                  keep_info=False)
        if ev.target_table is None:
            return False
        tname = f"{ev.target_schema}.{ev.target_table}"
        with connect_downstream(self.down_kwargs, autocommit=True) as c:
            new_keys = fetch_keys(c)
        changed = new_keys.get(tname) != self.keys.get(tname)
        self.keys = new_keys
        return changed

    def _execute_ddl(self, ev: DDLEvent, decision: DDLDecision) -> bool:
        """Execute with the at-most-once intent of rule 8; False when it had already run."""
        key_s, key_t = ev.schema, ev.table or ""
        with connect_downstream(self.down_kwargs, autocommit=True) as conn:
            before = show_create(conn, ev.target_schema, ev.target_table) if ev.target_table else None
            tp = self.store.tables.get((key_s, key_t))
            intent = tp.ddl_intent if tp else None
            if intent and Position.from_json(intent["pos"]).same_point(ev.end) and ev.target_table \
                    and intent.get("before") != before:
                self.log.info("DDL already executed before a restart; not running it again",
                              table=ev.upstream, position=str(ev.end))
                return False
            if ev.table is not None:
                self.store.write_ddl_intent(key_s, key_t, {"pos": ev.end.to_json(), "before": before,
                                                           "statements": decision.execute})
            with conn.cursor() as cur:
                if ev.timestamp:
                    cur.execute("SET TIMESTAMP = %s", (ev.timestamp,))
                for sql in decision.execute:
                    try:
                        cur.execute(sql)
                    except pymysql.MySQLError as e:
                        code = e.args[0] if e.args else 0
                        if decision.ignorable and code in IGNORABLE_DDL_ERRORS:
                            self.log.info("DDL already in effect downstream", statement=sql, code=code)
                            continue
                        raise SyncError(f"downstream DDL failed: {e.args[-1] if e.args else e}; "
                                        f"statement: {sql}", task=self.task.name, source=self.source.source_id,
                                        table=ev.upstream, position=str(ev.end)) from e
                cur.execute("SET TIMESTAMP = DEFAULT")
        return True


def _root_apply_error(e: BaseException) -> str:
    text = str(e)
    for marker in ("ApplyError:", "pymysql.err."):
        i = text.rfind(marker)
        if i >= 0:
            return text[i:].splitlines()[0][:500]
    return text.splitlines()[0][:500] if text else type(e).__name__
