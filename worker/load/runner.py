"""``run_full_load``: dump + load one source on Spark, then hand over to binlog replication.

Order of work (each step is safe to repeat after a crash):

1. **Plan** (once per source; reused on resume): the routed shard tables' metadata locks are
   taken, then the plan position ``P0`` is read and the tables are listed again (a different
   list: start over), so every planned definition is exactly the one at ``P0``; targets created / widened to the join of the shards (``worker.load.targets``);
   chunk bounds.  Stored in the load checkpoint in one transaction.
2. **Load**: one Spark task per pending chunk (``worker.load.chunk``); each reads its own
   consistent snapshot at position ``P_c`` and commits its rows + its "done" mark together.
3. **Hand over**: the syncer checkpoint (``worker.sync.checkpoint``) gets, per shard table, the point
   ``min P_c`` over the table's chunks (``P0`` for a table altered during the load: its changes
   and the DDL are all replayed) and the shard's planned schema as ``table_info``; the
   global point ``P0``; safe-until ``max P_c``.  Then the load is marked finished.

The syncer started afterwards (``Syncer.start``) resumes at ``P0``: changes of a dumped table up
to its point are skipped (they are in every chunk), changes after it up to safe-until are
replayed idempotently (safe mode), so none is lost or duplicated — docs/full-load.md has the
argument, including tables created or altered during the dump.
"""
from __future__ import annotations

import functools
import re
import threading
import time
import uuid
from dataclasses import dataclass, field

import pymysql

from coordinator.config import SourceConfig, TaskConfig
from coordinator.errors import ShardMergeError
from coordinator.obs import logger
from coordinator.routing import TableMapper
from coordinator.schema.parse import parse_create_table
from coordinator.sql import quote_table
from worker.downstream import fetch_keys
from worker.events import Position
from worker.load import chunk as chunkmod
from worker.load.options import LoadOptions, load_options
from worker.load.plan import ShardTable, bounds, discover
from worker.load.progress import Progress
from worker.load.snapshot import connect_reader, fingerprint
from worker.load.store import ChunkRow, LoadStore, fq_name
from coordinator.origin import extend_schema
from worker.load.targets import ensure_target, joined, strip_counter
from worker.schema_tracker import schema_to_json
from worker.sync.apply import connect_downstream, resolve_tls
from worker.sync.apply_stream import free_cores
from worker.sync.checkpoint import CheckpointStore
from worker.upstream import check_upstream, master_status

log = logger("worker.load")


class LoadError(ShardMergeError):
    """The full load cannot continue; names task, source and (when known) table/position."""


class LoadStopped(LoadError):
    """The load was asked to stop; finished chunks stay loaded and a restart resumes."""


@dataclass
class LoadHooks:
    """Test hooks.  ``after_chunk(result)`` runs in the Spark task after a chunk committed."""
    after_chunk: object = None


@dataclass
class TableLoad:
    schema: str
    table: str
    target: str
    rows: int
    chunks: int
    position: Position          # the table checkpoint: min over the chunks' snapshots, or P0
    max_position: Position
    schema_changed: bool = False    # altered during the load: replayed from P0, DDL included

    def to_json(self) -> dict:
        return {"schema": self.schema, "table": self.table, "target": self.target, "rows": self.rows,
                "chunks": self.chunks, "position": self.position.to_json(),
                "max_position": self.max_position.to_json(), "schema_changed": self.schema_changed}

    @classmethod
    def from_json(cls, d: dict) -> "TableLoad":
        return cls(d["schema"], d["table"], d["target"], d["rows"], d["chunks"],
                   Position.from_json(d["position"]), Position.from_json(d["max_position"]),
                   bool(d.get("schema_changed", False)))


@dataclass
class LoadResult:
    snapshot: Position                     # the syncer's start (global checkpoint)
    safe_until: Position                   # the syncer replays idempotently up to here
    tables: dict[tuple[str, str], TableLoad] = field(default_factory=dict)
    rows: int = 0                          # rows in the target from this source's shards
    rows_this_run: int = 0
    chunks_loaded: int = 0                 # by this run
    chunks_skipped: int = 0                # done by an earlier run: not reloaded
    tasks: int = 0                         # Spark tasks of this run's load job
    seconds: float = 0.0
    already_finished: bool = False         # nothing to do: the load had finished before
    timings: dict = field(default_factory=dict)   # seconds per phase of this run: plan, load, hand_over

    def to_json(self) -> dict:
        return {"snapshot": self.snapshot.to_json(), "safe_until": self.safe_until.to_json(),
                "tables": [t.to_json() for t in self.tables.values()], "rows": self.rows,
                "rows_this_run": self.rows_this_run, "chunks_loaded": self.chunks_loaded,
                "chunks_skipped": self.chunks_skipped, "tasks": self.tasks, "seconds": round(self.seconds, 3),
                "timings": {k: round(v, 3) for k, v in self.timings.items()}}

    @classmethod
    def from_json(cls, d: dict, **over) -> "LoadResult":
        tables = {(t["schema"], t["table"]): TableLoad.from_json(t) for t in d.get("tables", [])}
        base = dict(snapshot=Position.from_json(d["snapshot"]), safe_until=Position.from_json(d["safe_until"]),
                    tables=tables, rows=d.get("rows", 0), rows_this_run=d.get("rows_this_run", 0),
                    chunks_loaded=d.get("chunks_loaded", 0), chunks_skipped=d.get("chunks_skipped", 0),
                    tasks=d.get("tasks", 0), seconds=d.get("seconds", 0.0), timings=d.get("timings", {}))
        base.update(over)
        return cls(**base)


def run_full_load(task: TaskConfig, source: SourceConfig, spark, *, progress=None,
                  stop: threading.Event | None = None, options: LoadOptions | None = None,
                  hooks: LoadHooks | None = None, progress_interval: float = 2.0) -> LoadResult:
    """Dump every routed shard table of ``source`` and load it into its merged target, resuming
    a previous run's finished chunks; leaves the syncer checkpoint at the snapshot (see module
    docstring).  ``progress(dict)`` is called every ``progress_interval`` s and at the end."""
    return FullLoad(task, source, spark, options=options, hooks=hooks).run(
        progress=progress, stop=stop, progress_interval=progress_interval)


class FullLoad:
    def __init__(self, task: TaskConfig, source: SourceConfig, spark, *, options: LoadOptions | None = None,
                 hooks: LoadHooks | None = None):
        self.task, self.source, self.spark = task, source, spark
        self.sid = source.source_id
        self.inst = task.instance(self.sid)
        if self.inst is None:
            raise LoadError(f"task {task.name!r} has no mysql-instances entry for source {self.sid!r}",
                            task=task.name, source=self.sid)
        self.opts = options or load_options(task, self.sid)
        self.hooks = hooks or LoadHooks()
        self.mapper = TableMapper(self.inst, task.meta_schema)
        # one TLS probe per server, then plain connections where it offers none (a PyMySQL
        # connect without TLS settings builds an SSL context: ~26 ms, 7 in a plan, 2 a chunk)
        self.up_kwargs = _plain_if_possible(source.db.pymysql_kwargs())
        self.down_kwargs = _plain_if_possible(task.target.pymysql_kwargs())
        self.store = LoadStore(self.down_kwargs, task.meta_schema, task.name, self.sid)
        self.log = log.bind(task=task.name, source=self.sid)

    # ------------------------------------------------------------------ plan
    def _plan(self) -> None:
        cp = CheckpointStore(self.down_kwargs, self.task.meta_schema, self.task.name, self.sid)
        cp.ensure_table()
        if cp.load().global_pos is not None:
            raise LoadError(f"source {self.sid} already has a binlog checkpoint in {cp.fq} (incremental "
                            f"replication ran before) but no finished full load; a new dump would not match "
                            f"it. Remove the task's meta (stop-task --remove-meta) to load from scratch, or "
                            f"run the task with task-mode: incremental", task=self.task.name, source=self.sid)
        if self.task.task_mode == "all":
            check_upstream(self.up_kwargs, self.sid, self.source.flavor)
        conn = connect_reader(self.up_kwargs, streaming=False)
        try:
            plan_pos, tables = self._discover_at_position(conn, master_status)
            by_target: dict[tuple[str, str], list[ShardTable]] = {}
            for t in tables:
                by_target.setdefault(t.target, []).append(t)
            self._prepare_targets(by_target)
            with connect_downstream(self.down_kwargs, autocommit=True) as d:
                keys = fetch_keys(d)
            trows, chunks = {}, []
            for t in tables:
                down_key = keys.get(f"{t.target[0]}.{t.target[1]}", [])
                if t.key and down_key:
                    edges = bounds(conn, t, self.opts.chunk_rows)
                else:
                    edges = [(None, None)]
                    why = "has no primary or NOT NULL unique key" if not t.key else \
                        f"its target {t.target[0]}.{t.target[1]} has no primary or NOT NULL unique key"
                    self.log.warning(f"shard table {t.name} {why}: loading it as one chunk (no parallel read)",
                                     table=t.name)
                t.est_rows = max(t.est_rows, (len(edges) - 1) * self.opts.chunk_rows)
                info = t.to_json()
                info.update(fingerprint=fingerprint(t.create_sql), down_key=down_key, chunks=len(edges),
                            table_info=schema_to_json(parse_create_table(t.create_sql)))
                trows[(t.schema, t.table)] = info
                chunks += [ChunkRow(t.schema, t.table, i, lo, hi) for i, (lo, hi) in enumerate(edges)]
        finally:
            conn.close()
        self.store.save_plan({"plan_pos": plan_pos.to_json(), "chunk_rows": self.opts.chunk_rows}, trows, chunks)
        self.log.info("full load planned", position=str(plan_pos), tables=len(trows), chunks=len(chunks))

    def _discover_at_position(self, conn, master_status, attempts: int = 10) -> tuple[Position, list[ShardTable]]:
        """(P0, routed tables with their definitions at P0).  With the tables' metadata locks held
        no DDL on them can commit, so the definitions read then are the ones at the position read
        then; a table created or dropped meanwhile changes the list and the step starts over."""
        for _ in range(attempts):
            try:
                first = discover(conn, self.mapper)
                with conn.cursor() as cur:
                    cur.execute("START TRANSACTION")
                    for t in first:     # shared metadata lock until COMMIT; DDLs on it wait
                        cur.execute(f"SELECT 1 FROM {quote_table(t.schema, t.table)} LIMIT 1")
                        cur.fetchall()
                plan_pos = master_status(self.up_kwargs)     # tables created later are replayed
                tables = discover(conn, self.mapper)
            except pymysql.err.ProgrammingError as e:
                conn.rollback()
                if e.args and e.args[0] == 1146:    # dropped after it was listed: list again
                    continue
                raise
            finally:
                conn.commit()
            if [t.name for t in tables] == [t.name for t in first]:
                return plan_pos, tables
        raise LoadError(f"the routed tables of source {self.sid} kept changing (CREATE/DROP TABLE) while the "
                        f"full load was planned ({attempts} attempts); retry when they are stable",
                        task=self.task.name, source=self.sid)

    def _prepare_targets(self, by_target: dict[tuple[str, str], list[ShardTable]]) -> None:
        with connect_downstream(self.down_kwargs, autocommit=True) as d:
            for target, shards in sorted(by_target.items()):
                name = f"{target[0]}.{target[1]}"
                schemas = [(f"{self.sid}:{t.name}", strip_counter(parse_create_table(t.create_sql)))
                           for t in shards]
                origin = [c for c, _ in self.mapper.extract(shards[0].schema, shards[0].table)]
                ensure_target(d, target, extend_schema(joined(schemas, name, self.task.name, self.sid), origin),
                              task=self.task.name, source=self.sid)

    # ------------------------------------------------------------------ run
    def run(self, *, progress=None, stop: threading.Event | None = None, progress_interval: float = 2.0) -> LoadResult:
        t0 = time.monotonic()
        self.store.ensure_table()
        st = self.store.load()
        if st.status == "finished" and st.plan and "result" in st.plan:
            res = LoadResult.from_json(st.plan["result"], already_finished=True)
            self.log.info("full load already finished; nothing to reload", position=str(res.snapshot))
            return res
        if st.plan is None:
            self._plan()
            st = self.store.load()
        else:
            self.log.info("resuming the full load from its checkpoint")
            by_target: dict = {}
            for (s, t), info in st.tables.items():
                by_target.setdefault(tuple(info["target"]), []).append(ShardTable.from_json(s, t, info))
            self._prepare_targets(by_target)
        t_plan = time.monotonic()
        done_before = [c for c in st.chunks if c.status == "done"]
        pending = [c for c in st.chunks if c.status != "done"]
        if done_before:
            self.log.info(f"full load resumed: {len(done_before)} of {len(st.chunks)} chunks already loaded, "
                          f"not reloading them", chunks_skipped=len(done_before), chunks_pending=len(pending))
        prog = Progress(self.sid, {k: {"target": "{}.{}".format(*v["target"]), "est_rows": v["est_rows"],
                                       "chunks": v["chunks"]} for k, v in st.tables.items()},
                        self.store.progress_rows())
        if progress:
            progress(prog.snapshot(self.store.progress_rows()))   # phase "load": the plan is done
        results, tasks = self._load(st, pending, prog, progress, stop, progress_interval)
        t_load = time.monotonic()
        st = self.store.load()
        res = self._hand_over(st, results, tasks, len(done_before), t0)
        res.timings = {"plan": t_plan - t0, "load": t_load - t_plan, "hand_over": time.monotonic() - t_load}
        self.store.finish(res.to_json())
        prog.phase = "done"
        final = prog.snapshot(self.store.progress_rows())
        self.log.info("full load finished " + final["bar"], rows=res.rows, rows_this_run=res.rows_this_run,
                      chunks_loaded=res.chunks_loaded, chunks_skipped=res.chunks_skipped, tasks=tasks,
                      seconds=round(res.seconds, 2), snapshot=str(res.snapshot), safe_until=str(res.safe_until))
        if progress:
            progress(final)
        return res

    def _specs(self, st, pending: list[ChunkRow]) -> list[dict]:
        out = []
        for c in pending:
            info = st.tables[(c.up_schema, c.up_table)]
            out.append({"schema": c.up_schema, "table": c.up_table, "chunk": c.chunk, "lo": c.lo, "hi": c.hi,
                        "target": info["target"], "columns": info["columns"], "column_types": info.get("column_types", []), "key": info["key"],
                        "fingerprint": info["fingerprint"], "table_info": info["table_info"],
                        "down_key": info["down_key"],
                        "extract": self.mapper.extract(c.up_schema, c.up_table),     # shard origin columns
                        # expression filters: rows their insert-value-expr matches are not copied
                        "skip_if": self.mapper.exprs.insert_sql(c.up_schema, c.up_table) if self.mapper.exprs else []})
        # interleave tables so concurrent tasks spread over shards (and targets)
        out.sort(key=lambda s: (s["chunk"], s["schema"], s["table"]))
        return out

    def _load(self, st, pending, prog: Progress, progress, stop, interval) -> tuple[list[dict], int]:
        if not pending:
            return [], 0
        specs = self._specs(st, pending)
        n_tasks = min(len(specs), self.opts.pool_size) if self.opts.pool_size else len(specs)
        ctx = {"up": self.up_kwargs, "down": self.down_kwargs, "source_id": self.sid,
               "ckpt": fq_name(self.task.meta_schema, self.task.name), "on_duplicate": self.opts.on_duplicate,
               "batch_rows": self.opts.batch_rows, "after_chunk": self.hooks.after_chunk,
               "where": self.opts.where}
        sc = self.spark.sparkContext
        group = f"shardmerge-load-{self.task.name}-{self.sid}-{uuid.uuid4().hex[:8]}"
        finished = threading.Event()
        stopped = threading.Event()

        def monitor():
            while not finished.wait(interval):
                if stop is not None and stop.is_set() and not stopped.is_set():
                    stopped.set()
                    self.log.warning("stop requested: cancelling the load job (finished chunks stay loaded)")
                    sc.cancelJobGroup(group)
                try:
                    p = prog.snapshot(self.store.progress_rows())
                except ShardMergeError as e:
                    self.log.warning("progress poll failed", error=str(e))
                    continue
                self.log.info("full load progress " + p["bar"], percent=p["percent"], rows=p["rows_loaded"],
                              rows_total_est=p["rows_total_est"], rows_per_sec=p["rows_per_sec"],
                              chunks=f"{p['chunks_done']}/{p['chunks_total']}")
                if progress:
                    progress(p)

        th = threading.Thread(target=monitor, name="full-load-progress", daemon=True)
        self.log.info("full load started", chunks=len(specs), spark_tasks=n_tasks,
                      on_duplicate=self.opts.on_duplicate)
        th.start()
        try:
            free_cores(sc)      # an idle apply stream parked by a syncer holds the cores
            sc.setJobGroup(group, f"shardmerge full load {self.task.name}/{self.sid}", interruptOnCancel=True)
            rdd = sc.parallelize(specs, n_tasks)
            results = rdd.mapPartitions(functools.partial(chunkmod.load_partition, ctx=ctx)).collect()
        except Exception as e:
            if stopped.is_set():
                raise LoadStopped("full load stopped on request; finished chunks are kept and a restart "
                                  "resumes", task=self.task.name, source=self.sid) from e
            raise _translate(e, self.task.name, self.sid) from e
        finally:
            finished.set()
            th.join()
            sc.setLocalProperty("spark.jobGroup.id", None)
        skipped = sum(1 for r in results if r.get("skipped"))
        if skipped:
            self.log.info(f"{skipped} chunk(s) were loaded by another task or process meanwhile; not reloaded")
        conflicts = sum(r.get("conflicts", 0) for r in results)
        if conflicts:
            self.log.warning(f"{conflicts} row(s) collided with rows of other shards and were resolved by "
                             f"on-duplicate-logical: {self.opts.on_duplicate}", conflicts=conflicts)
        return results, n_tasks

    # ------------------------------------------------------------------ hand over
    def _hand_over(self, st, results, tasks, skipped_before, t0) -> LoadResult:
        missing = [c for c in st.chunks if c.status != "done"]
        if missing:
            c = missing[0]
            raise LoadError(f"{len(missing)} chunk(s) are not loaded after the load job (first: chunk {c.chunk} "
                            f"of {c.up_schema}.{c.up_table})", task=self.task.name, source=self.sid)
        plan_pos = Position.from_json(st.plan["plan_pos"])
        tables: dict[tuple[str, str], TableLoad] = {}
        for c in st.chunks:
            k = (c.up_schema, c.up_table)
            tl = tables.get(k)
            if tl is None:
                tables[k] = TableLoad(c.up_schema, c.up_table, "{}.{}".format(*st.tables[k]["target"]),
                                      c.rows, 1, c.pos, c.pos)
            else:
                tl.rows += c.rows
                tl.chunks += 1
                tl.position = min(tl.position, c.pos)
                tl.max_position = max(tl.max_position, c.pos)
            if chunkmod.schema_changed(c.info):
                tables[k].schema_changed = True
        for tl in tables.values():
            if tl.schema_changed:
                # the chunks hold the planned columns at various points after a DDL: replaying the
                # table from P0 (safe mode up to safe-until) rebuilds every row changed since, in
                # binlog order, with the DDL executed by the syncer where it happened
                tl.position = plan_pos
                self.log.warning(f"shard table {tl.schema}.{tl.table} was altered during the full load; the "
                                 f"syncer replays its changes from the plan position {plan_pos}, the DDL "
                                 f"included", table=f"{tl.schema}.{tl.table}", position=str(plan_pos))
        safe_until = max([tl.max_position for tl in tables.values()] + [plan_pos])
        cp = CheckpointStore(self.down_kwargs, self.task.meta_schema, self.task.name, self.sid)
        cp.ensure_table()
        cp.load()
        for (s, t), tl in tables.items():
            cp.save_table(s, t, tl.position, st.tables[(s, t)]["table_info"], keep_info=False)
        cp.save_global(plan_pos)
        cp.flush()
        if safe_until > plan_pos:
            cp.write_safe_until(safe_until)
        this_run = [r for r in results if not r.get("skipped")]
        res = LoadResult(plan_pos, safe_until, tables, rows=sum(tl.rows for tl in tables.values()),
                         rows_this_run=sum(r["rows"] for r in this_run), chunks_loaded=len(this_run),
                         chunks_skipped=skipped_before + len(results) - len(this_run), tasks=tasks,
                         seconds=time.monotonic() - t0)
        return res


_ERRORS = {"KeyCollision": chunkmod.KeyCollision, "SchemaChangedDuringLoad": chunkmod.SchemaChangedDuringLoad,
           "ChunkError": chunkmod.ChunkError}


def _plain_if_possible(kw: dict) -> dict:
    try:
        return resolve_tls(kw)
    except pymysql.MySQLError:
        return kw      # unreachable now: the load's own connection names the error


def _translate(e: BaseException, task: str, source: str) -> ShardMergeError:
    """The typed chunk error raised in a Spark task, rebuilt on the driver from its text."""
    text = str(e)
    best = None
    for name, cls in _ERRORS.items():
        for m in re.finditer(rf"(?:worker\.load\.chunk\.)?{name}: (.*)", text):
            if best is None or m.start() > best[0]:
                best = (m.start(), cls, m.group(1).strip())
    if best is not None:
        return best[1](best[2], task=task)
    if isinstance(e, ShardMergeError):
        return e
    causes = re.findall(r"^\s*([\w.]+(?:Error|Exception): .*)$", text, re.M)
    first = causes[-1][:500] if causes else (text.strip().splitlines()[0][:500] if text.strip() else type(e).__name__)
    return LoadError(f"full load job failed: {first}", task=task, source=source)
