"""One subtask: the replication of one (task, source) on a thread of the worker process.

It writes the source's SourceTables record, builds the syncer (with the optimistic shard-DDL
handler when ``shard-mode: optimistic``), runs the full load when the task asks for one, then
micro-batches from the binlog, and reports status and lag to etcd and Prometheus.  An error sets
status ``Error``; the subtask is rebuilt from the checkpoints and retried with backoff, except
for errors a retry cannot fix (``_retryable``), which wait for the task record to change.  The
process that runs subtasks (bindings, leases, start and stop) is ``worker.process``.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import pymysql
from prometheus_client import Counter, Gauge

from coordinator.config import SourceConfig, parse_task
from coordinator.errors import ConfigError, TransientError
from coordinator.etcdproto import EtcdUnavailable
from coordinator.obs import logger
from coordinator.retry import DOWNSTREAM_REFUSING, refusal_code
from coordinator.routing import TableMapper
from worker import gtid
from worker.binlog.contract import RowDecodeError
from worker.binlog.doorbell import wait_for_binlog
from worker.errors import KeyCollision
from worker.load import SchemaChangedDuringLoad, run_full_load
from worker.lag_probe import LagProbe
from worker.schema_tracker import SchemaTracker
from worker.shardddl import OptimisticDDLHandler, ShardDDLError, SourceTablesWriter, list_upstream_tables
from worker.sync.fence import FencedOut
from worker.sync.binlog_skip import BinlogSkips
from worker.sync.checkpoint import CheckpointStore
from worker.sync.errors import DownstreamDDLRejected, ReplicationKeyCollision, StartUnavailable, UpstreamChanged
from worker.sync.syncer import Syncer

from .status import DUMP, LOAD, SYNC, StatusReporter, dm_positions

if TYPE_CHECKING:
    from worker.process import WorkerProcess

LAG_SECONDS = Gauge("shardmerge_worker_lag_seconds",
                    "Seconds since the subtask last had nothing left to read (upper bound of the delay)",
                    ["task", "source"])
EVENTS_BEHIND = Gauge("shardmerge_worker_events_behind",
                      "Upstream transactions committed past the checkpoint (sum over GTID domains)",
                      ["task", "source"])
BATCH_SECONDS = Counter("shardmerge_worker_batch_seconds_total",
                        "Time spent in micro-batches, by stage (wait_read: waiting for the decoder; "
                        "plan: splitting by key; apply: Spark apply jobs; checkpoint; ddl; decode)",
                        ["task", "source", "stage"])

_log = logger("worker.process")     # the log lines keep the name they had in the process module


def gtid_behind(upstream: str, applied: str) -> int:
    """Transactions in ``upstream``'s GTID set past ``applied`` (summed over MariaDB domains or
    MySQL UUIDs); 0 when either is unreadable."""
    try:
        return sum(gtid.subtract_count(upstream or "", applied or "").values())
    except gtid.GtidError:
        return 0


# ----------------------------------------------------------------------------- one subtask
def _retryable(e: BaseException) -> bool:
    """Errors that a retry cannot fix (bad config, a strict-mode conflict, a DDL the lock
    cannot take) stop the subtask in Error; everything else (connections, etcd, Spark, a
    downstream hiccup) is retried with backoff, status Error meanwhile (resume from checkpoints)."""
    if isinstance(e, TransientError):
        return True
    # SchemaChangedDuringLoad: a routed table dropped (or a keyless one altered) during the load; a
    # retry fails alike (an ALTER during the load is replayed by the syncer, not an error).
    # RowDecodeError: a rows event whose bytes the decoder cannot read fails alike on every retry
    return not isinstance(e, (ConfigError, ShardDDLError, KeyCollision, ReplicationKeyCollision, UpstreamChanged,
                              StartUnavailable, DownstreamDDLRejected, SchemaChangedDuringLoad, RowDecodeError))


class Subtask:
    """Replication of one (task, source) on a thread: syncer + coordination + status."""

    def __init__(self, worker: "WorkerProcess", task_rec, source: SourceConfig, *, resumed: bool = False):
        self.worker, self.task_rec, self.source = worker, task_rec, source
        self.key = (task_rec.task, source.source_id)
        self.revision = task_rec.revision
        self.stop_event = threading.Event()
        self.status = StatusReporter(worker.store, task_rec.task, source.source_id, worker.name)
        self.thread = threading.Thread(target=self._run, name=f"subtask-{task_rec.task}-{source.source_id}",
                                       daemon=True)
        self.streaming = False
        self.failed: BaseException | None = None
        self.syncer: Syncer | None = None
        self.handler: OptimisticDDLHandler | None = None      # the optimistic handler (its tracker answers binlog-schema list)
        # status left behind when stopped: "stopped", "paused" (pause-task) or None (the task is
        # gone with its status key, or a new subtask for the same key takes over)
        self.final_stage: str | None = "stopped"
        self.resumed = resumed           # replaces a paused/failed one: say Running at once
        self.caught_up_at: float | None = None   # when its stream was last caught up (lag's origin)
        self.streamed_since_failure = False

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float = 30, final: str | None = "stopped") -> None:
        """Stop the thread (between micro-batches: checkpoints are flushed after every batch)
        and leave status ``final`` behind (see ``final_stage``)."""
        self.final_stage = final
        self.stop_event.set()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout)
        if self.thread.ident is not None and not self.thread.is_alive():
            self._drop_gauges()          # also for a thread that had returned stopped in Error
        if final == "paused" and self.thread.ident is not None and not self.thread.is_alive():
            # a thread that had stopped in Error returned without a final status: write it here
            # (for one that just ended it is a second, identical write)
            self._write_final_status()

    def _write_final_status(self) -> None:
        try:
            if self.final_stage == "paused":
                self.status.operator_paused()
            elif self.final_stage == "stopped":
                self.status.stopped()
        except Exception:  # noqa: BLE001 — etcd may be gone at shutdown
            pass

    # -- the thread
    def _run(self) -> None:
        log = _log.bind(task=self.key[0], source=self.key[1])
        backoff = 1.0
        attempt = 0
        if self.resumed and not self.stop_event.is_set():
            self.status.resuming()
        while not self.stop_event.is_set():
            self.streamed_since_failure = False
            try:
                self._serve(log)
                break
            except Exception as e:  # noqa: BLE001 — every failure becomes visible status
                if self.streamed_since_failure:      # it worked for a while: start over
                    backoff, attempt = 1.0, 0
                self.streaming = False
                self.failed = e
                retry = _retryable(e)
                attempt += 1
                if self.stop_event.is_set():
                    # e.g. a fenced batch of a worker that lost its source: said, not retried
                    log.warning(f"subtask stopping; its last batch failed: {type(e).__name__}: {e}", error=str(e))
                    break
                ctx = getattr(e, "context", {}) or {}
                waiting = (self._unreachable() or self._refusing(e)) if retry else ""
                if waiting:
                    # a server is down: nothing to fix, keep retrying (capped backoff) and say on what
                    backoff = min(backoff, 10.0)
                    log.warning(f"subtask waiting: {waiting}", error=str(e), attempt=attempt)
                    self.status.retrying(e, f"{waiting}; retry {attempt} in {backoff:.0f}s")
                else:
                    log.error(f"subtask failed: {type(e).__name__}: {e}", error=str(e), retry=retry)
                    self.status.error(e, lock_id=ctx.get("lock_id", ""), position=ctx.get("position", ""))
                if not retry:
                    # stays in Error until the task record changes (resume-task / update); meanwhile
                    # its status and gauges say how far behind it falls, not the last batch's "synced"
                    self._watch_while_stopped()
                    return
                if self.stop_event.wait(backoff):
                    break
                backoff = min(backoff * 2, 10.0 if waiting else 60.0)
        self.streaming = False
        self._drop_gauges()
        self._write_final_status()

    def _watch_while_stopped(self) -> None:
        """A subtask stopped in Error: not synced, and while the upstream moves past its
        checkpoint the lag grows (status and gauge, so the lag alert fires) until the subtask is
        replaced (resume-task, a new config, a transfer); then its gauges go."""
        syncer = self.syncer
        self.status.progress(caught_up=False, synced=False)
        self.status.settle()
        if syncer is None or not syncer.up_kwargs:
            return
        probe = LagProbe(syncer.up_kwargs, lambda: syncer.store.global_pos, self._report_behind,
                         interval=min(2.0, self.worker.poll_interval), caught_up_at=self.caught_up_at).start()
        try:
            self.stop_event.wait()
        finally:
            probe.close()
            self._drop_gauges()

    def _drop_gauges(self) -> None:
        """A stopped subtask (paused, transferred, task removed) exports no lag: a frozen value
        would keep a lag alert firing for a subtask that no longer runs here."""
        for g in (LAG_SECONDS, EVENTS_BEHIND):
            try:
                g.remove(*self.key)
            except KeyError:
                pass

    def _refusing(self, e: BaseException) -> str:
        """After a failure: "downstream H:P refuses writes (...)" when the downstream is read-only
        or full (``coordinator.retry.DOWNSTREAM_REFUSING``); "" otherwise.  Like a server that is
        down, nothing needs fixing in shardmerge: the subtask retries until it accepts writes."""
        code = refusal_code(e)
        if code is None:
            return ""
        try:
            t = parse_task(self.task_rec.yaml, f"<task {self.task_rec.task} in etcd>").target
            where = f"{t.host}:{t.port}"
        except Exception:  # noqa: BLE001 — the failure itself is reported either way
            where = "(unknown)"
        return f"downstream {where} refuses writes ({code}: {DOWNSTREAM_REFUSING[code]})"

    def _unreachable(self) -> str:
        """After a failure: which server this subtask depends on does not answer right now
        (downstream, upstream, etcd), e.g. ``downstream 10.0.0.5:3306 unreachable: ...``; "" if
        all answer (then the failure is not a connectivity problem)."""
        try:
            cfg = parse_task(self.task_rec.yaml, f"<task {self.task_rec.task} in etcd>")
            ends = [("downstream", cfg.target), ("upstream", self.source.db)]
        except Exception:  # noqa: BLE001 — a bad config is reported by the failure itself
            ends = [("upstream", self.source.db)]
        for what, db in ends:
            try:
                kw = db.pymysql_kwargs()
                pymysql.connect(**{**kw, "connect_timeout": 3}).close()
            except pymysql.err.OperationalError as e:
                code = e.args[0] if e.args else 0
                if (hint := db.tls_hint(e)):    # a certificate problem: retried (certs get rotated), said as such
                    return f"{what} {db.host}:{db.port}: {e.args[-1]}{hint}"
                if code in (1040, 1053, 2002, 2003, 2006, 2013):   # down / refusing / too busy
                    return f"{what} {db.host}:{db.port} unreachable ({code}: {e.args[-1]})"
            except Exception:  # noqa: BLE001 — e.g. unreadable password file: not a wait
                pass
        try:
            self.worker.store.revision()
        except EtcdUnavailable as e:
            return f"etcd unreachable ({e.message})"
        except Exception:  # noqa: BLE001
            pass
        return ""

    def _binding_epoch(self) -> int:
        """This worker's binding of the source: its etcd mod revision is the writer epoch that
        fences the downstream writes (``worker.sync.fence``).  Not bound (any more): the binding
        moved, so this subtask must not write at all."""
        b = next((b for b in self.worker.store.list_bindings().items if b.source == self.source.source_id), None)
        if b is None or b.worker != self.worker.name:
            raise FencedOut(f"source {self.source.source_id} is bound to "
                            f"{b.worker if b else 'no worker'}, not to {self.worker.name}: not writing it",
                            task=self.key[0], source=self.source.source_id)
        return int(b.revision or 0)

    def _serve(self, log) -> None:
        cfg = parse_task(self.task_rec.yaml, f"<task {self.task_rec.task} in etcd>")
        inst = cfg.instance(self.source.source_id)
        if inst is None:
            raise ConfigError(f"task {cfg.name!r} has no mysql-instances entry for source "
                              f"{self.source.source_id!r}", task=cfg.name, source=self.source.source_id)
        mapper = TableMapper(inst, cfg.meta_schema)
        up_kwargs = self.source.db.pymysql_kwargs()

        def up():
            return pymysql.connect(**up_kwargs, autocommit=True, charset="utf8mb4")

        self.status.starting(f"reading the upstream tables of {self.source.source_id} and registering them")
        # the master learns every upstream table of this subtask, DDL or not (lock membership)
        st_writer = SourceTablesWriter(self.worker.store, cfg.name, self.source.source_id, mapper)
        conn = up()
        try:
            upstream = list_upstream_tables(conn, mapper)
            server = conn.get_server_info()
        finally:
            conn.close()
        st_writer.write_all(sorted(set(upstream) | set(self._lingering(cfg, mapper, upstream, log))))
        handler = None
        if cfg.shard_mode == "optimistic":
            handler = OptimisticDDLHandler(self.worker.store, cfg.name, self.source.source_id, mapper,
                                           SchemaTracker(self.source.source_id, connect=up), self.status,
                                           strict=cfg.strict_optimistic, stop=self.stop_event,
                                           source_tables=st_writer, server=server)
        self.handler = handler
        try:
            self._stream(log, cfg, handler)
        finally:
            if handler is not None:
                handler.close()

    def _lingering(self, cfg, mapper: TableMapper, upstream, log) -> list[tuple[str, str]]:
        """Tables gone upstream whose checkpoint still tracks them: the replay has yet to meet
        their ``DROP TABLE`` (and the rows and DDLs before it).  They stay lock members until it
        does; leaving at once would let a lock decide without them (a runner
        that leaves before running its change)."""
        if cfg.shard_mode != "optimistic":
            return []
        store = CheckpointStore(cfg.target.pymysql_kwargs(), cfg.meta_schema, cfg.name, self.source.source_id)
        known = set(upstream)
        out = [k for k in store.tracked_tables() if k not in known and mapper.target(*k) is not None]
        for s, t in out:
            log.info("table gone upstream stays a lock member until the replay meets its DROP TABLE",
                     table=f"{s}.{t}")
        return out

    def _stream(self, log, cfg, handler) -> None:
        reader = cfg.instance(self.source.source_id).syncer.binlog_reader
        # the full load and the Spark binlog reader need the session; binlog replication starts
        # at once and applies in the driver until the session is up
        needs_spark = cfg.task_mode in ("all", "full") or reader == "spark"
        if needs_spark and not self.worker.spark_started:
            self.status.starting("starting the Spark session (the worker's first subtask; 15-60 s)")
        spark = self.worker.spark() if needs_spark else self.worker.spark_handle()
        self.status.starting("reading checkpoints and connecting to the binlog")
        if cfg.task_mode in ("all", "full"):
            self._full_load(log, cfg, spark)
            if cfg.task_mode == "full":
                self.status.finished()
                log.info("task-mode full: load finished, no binlog replication")
                self.stop_event.wait()
                return
        syncer = Syncer(spark, cfg, self.source, handler, reader=reader,
                        skips=BinlogSkips(self.worker.store, cfg.name, self.source.source_id, self.worker.name),
                        epoch=self._binding_epoch(),
                        schema_overrides=lambda infos: self.worker.schema_ops.overrides.apply(
                            cfg.name, self.source.source_id, infos))
        self.syncer = syncer
        try:
            syncer.start()
            self.status.running(unit=SYNC)       # only now: the syncer holds its start position
            log.info("subtask streaming")
            self._stream_batches(syncer)
        finally:
            syncer.close()   # the binlog decoder process; a retry builds a new syncer

    def _stream_batches(self, syncer) -> None:
        # a batch blocked on a shard-DDL lock reports nothing: the probe reports the lag meanwhile
        probe = LagProbe(syncer.up_kwargs, lambda: syncer.read_pos, self._report_behind,
                         interval=min(2.0, self.worker.poll_interval), caught_up_at=self.caught_up_at).start()
        try:
            self._stream_loop(syncer, probe)
        finally:
            self.caught_up_at = probe.caught_up_at     # a probe watching it in Error goes on from here
            probe.close()

    def _stream_loop(self, syncer, probe: LagProbe) -> None:
        started = time.monotonic()
        behind: int | None = 0    # upstream transactions not yet checkpointed (None: unknown)
        total_events = 0          # DM's totalEvents / totalTps: events this syncer has processed
        while not self.stop_event.is_set():
            r = syncer.run_once()
            self.streaming = True
            self.streamed_since_failure = True
            self.failed = None
            s = syncer.status()
            probe.batch_done(bool(r.idle))
            behind = 0 if r.idle else self._events_behind(syncer)
            # lag_seconds: time since this subtask last had nothing left to read (an upper bound
            # of the replication delay); lag_events: upstream transactions not yet checkpointed.
            lag = probe.lag()
            total_events += r.rows + r.ddls
            self.status.progress(synced_position=s["read_pos"], checkpoint=s["checkpoint"],
                                 rows_applied=s["rows_applied"], held_tables=s["held_tables"], online_ddl=s["online_ddl"],
                                 updates_of_missing_rows=s["updates_of_missing_rows"] or None,
                                 caught_up=bool(r.idle), lag_seconds=lag, lag_events=behind,
                                 **dm_positions(syncer.last_upstream_end, syncer.read_pos, total_events,
                                                time.monotonic() - started, bool(r.idle)))
            labels = self.key
            LAG_SECONDS.labels(*labels).set(lag)
            if behind is not None:
                EVENTS_BEHIND.labels(*labels).set(behind)
            for stage, secs in r.timings.items():
                if stage != "total" and secs > 0:
                    BATCH_SECONDS.labels(*labels, stage).inc(secs)
            if r.idle:   # until the upstream writes (or a held table's redirect, or the fallback poll)
                self.status.settle()
                wait_for_binlog(syncer.up_kwargs, syncer.read_pos, self.worker.poll_interval,
                                self.stop_event, wake=syncer.rewind_requested)

    def _report_behind(self, lag: float, end) -> None:
        """The stream is blocked (a lock's wait or pause) with the upstream past it: not synced,
        and the lag grows (the gauge too, so the lag alert can fire)."""
        LAG_SECONDS.labels(*self.key).set(lag)
        done = self.syncer.store.global_pos if self.syncer is not None else None
        behind = gtid_behind(end.gtid, done.gtid if done else "") if end.gtid else None
        if behind is not None:
            EVENTS_BEHIND.labels(*self.key).set(behind)
        self.status.progress(lag_seconds=lag, lag_events=behind, caught_up=False, synced=False,
                             master_binlog=f"({end.file}, {end.pos})", master_binlog_gtid=end.gtid)

    def _events_behind(self, syncer) -> int | None:
        """Transactions the upstream has committed past the checkpoint (per GTID domain)."""
        up = syncer.last_upstream_end      # asked by the batch just run: no extra round trip
        if up is None:
            return None
        done = syncer.store.global_pos
        return gtid_behind(up.gtid, done.gtid if done else "")


    def _full_load(self, log, cfg, spark) -> None:
        """Dump + load (worker.load); resumable, so a restarted or rebound subtask continues
        where the load stopped.  The syncer then starts at the snapshot in safe mode."""
        self.status.running(unit=DUMP)          # planning: position, definitions, targets, bounds

        def on_progress(p: dict) -> None:
            if self.status.snapshot().detail.get("unit") != LOAD:
                self.status.unit(LOAD)           # the chunks started
            self.status.progress(load=p)

        res = run_full_load(cfg, self.source, spark, progress=on_progress, stop=self.stop_event)
        # unit stays Load until the syncer has started (then Running + Sync in one write)
        self.status.progress(load={"phase": "finished", "rows_loaded": res.rows,
                                                "chunks_loaded": res.chunks_loaded,
                                                "chunks_skipped": res.chunks_skipped,
                                                "snapshot": str(res.snapshot), "percent": 100.0})
        log.info("full load done; switching to binlog replication", rows=res.rows,
                 snapshot=str(res.snapshot), chunks_skipped=res.chunks_skipped)
