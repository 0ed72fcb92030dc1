"""The worker process: registration, bindings, subtasks.

One process serves the sources the master binds to it (normally the one named by its
``--source`` file).  Life cycle:

1. Register ``worker/<name>`` in etcd on a lease (TTL ``ttl``) and keep the lease alive.  When
   etcd says the lease is gone (a refresh answers TTL 0), every subtask is stopped *first* — the
   master may already have moved the binding to another worker, and two writers of one source
   must never run — then the worker registers again.  An unreachable etcd alone does not stop
   them (etcd keeps leases across its restart; a worker that took a source over bumps the
   checkpoint epoch every write here checks), and a subtask is not started while its
   predecessor for the same task and source is still ending.
2. Watch bindings and tasks (plus a periodic full re-read, so a missed event only delays):
   for every task whose ``sources`` include a source bound to this worker and whose desired
   stage for that source is ``running``, run one subtask; stop subtasks whose task, binding or
   stage went away.  A subtask stopped because its source was paused (``pause-task``) reports
   ``Paused``; ``resume-task`` starts it again.  A subtask that a new worker takes over resumes
   from the checkpoints in the downstream.
3. A subtask = :class:`worker.subtask.Subtask`: writes the SourceTables record, builds the syncer (with the
   optimistic shard-DDL handler when ``shard-mode: optimistic``), runs micro-batches and
   reports status to etcd.  An error sets status ``Error``; the subtask is rebuilt from the
   checkpoints and retried with backoff, except for errors a retry cannot fix (config, strict
   conflict, unsupported shard DDL), which wait for the task record to change: any new revision
   of it (``resume-task`` always writes one, as does a new config) restarts a failed subtask.

``/healthz`` is process liveness, ``/readyz`` = registered in etcd, bound, and every subtask
streaming.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path


from coordinator.config import SourceConfig, load_source, parse_source
from coordinator.errors import ConfigError, ShardMergeError
from coordinator.etcd_client import connect
from coordinator.etcdproto import Store, WorkerRegistration
from coordinator.etcdproto.leader import Lease
from coordinator.etcdproto.keys import DEFAULT_PREFIX
from coordinator.obs import ObsServer, logger
from coordinator.retry import RetryExhausted, WaitBoard, retry
from worker.spark_session import SparkStarter
from worker.sync.schema_ops import SchemaOpServer

from worker.subtask import Subtask

from .status import PAUSED, StatusReporter

_log = logger("worker.process")


class WorkerError(ShardMergeError):
    """The worker process cannot start or serve (bad name, etcd unreachable at start)."""


# ----------------------------------------------------------------------------- the process
@dataclass
class WorkerOptions:
    etcd: str
    name: str = ""
    source_file: str | None = None
    prefix: str = DEFAULT_PREFIX
    spark_master: str = ""
    metrics_addr: str = ""
    ttl: int = 10
    resync_interval: float = 5.0
    poll_interval: float = 5.0     # idle: the binlog doorbell wakes the syncer sooner
    etcd_wait: float = 300.0      # how long start() waits for an unreachable etcd


class WorkerProcess:
    def __init__(self, opts: WorkerOptions):
        self.opts = opts
        self.local_source: SourceConfig | None = None
        self.local_source_text = ""
        if opts.source_file:
            self.local_source = load_source(opts.source_file)   # ConfigError names file and key
            self.local_source_text = Path(opts.source_file).read_text()
        default = f"worker-{socket.gethostname()}-{os.getpid()}"
        if self.local_source is not None and not opts.name:
            default = f"worker-{self.local_source.source_id}-{socket.gethostname()}-{os.getpid()}"
        self.name = opts.name or default
        if "/" in self.name or not self.name.strip():
            raise WorkerError(f"worker name {self.name!r} must be non-empty and contain no '/'")
        self.poll_interval = opts.poll_interval
        self.client = connect(opts.etcd)
        self.store = Store(self.client, opts.prefix)
        self.subtasks: dict[tuple[str, str], Subtask] = {}
        self._stopping: dict[tuple[str, str], Subtask] = {}   # stopped, their thread maybe still ending
        self._paused_reported: set[tuple[str, str]] = set()   # paused subtasks whose status says so
        self.lease: Lease | None = None
        self.registered = False
        self.bound: set[str] = set()
        self._stop = threading.Event()
        self._changed = threading.Event()
        self._watch_ids: list = []
        self.spark_starter = SparkStarter(f"shardmerge-{self.name}", opts.spark_master)
        self._threads: list[threading.Thread] = []
        self.obs: ObsServer | None = None
        self.log = _log.bind(worker=self.name)
        self.board = WaitBoard()      # what start-up is waiting for (shown by /readyz)
        self.schema_ops = SchemaOpServer(self)     # binlog-schema requests for the bound sources

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "WorkerProcess":
        """Serve probes, then connect to etcd: an unreachable etcd is waited for (backoff capped
        at 5 s, shown by /readyz) for up to ``etcd_wait`` seconds before giving up."""
        if self.opts.metrics_addr:
            host, _, port = self.opts.metrics_addr.rpartition(":")
            self.obs = ObsServer(host or "127.0.0.1", int(port), ready=self.ready).start()
        what = f"etcd {self.opts.etcd}"
        try:
            retry(self.store.revision, what=what, deadline=self.opts.etcd_wait, board=self.board,
                  worker=self.name)
            retry(self._register, what=what, deadline=self.opts.etcd_wait, board=self.board, worker=self.name)
            retry(self._watch, what=what, deadline=self.opts.etcd_wait, board=self.board, worker=self.name)
        except RetryExhausted as e:
            if self.obs is not None:
                self.obs.stop()
            raise WorkerError(f"etcd at {self.opts.etcd} did not answer within {self.opts.etcd_wait:.0f}s: "
                              f"{e.message}; start etcd or fix --etcd", worker=self.name) from e
        self._changed.set()     # reconcile at once: a restarted worker's binding is already there
        for fn, name in ((self._keepalive_loop, "lease-keepalive"), (self._reconcile_loop, "reconcile")):
            t = threading.Thread(target=fn, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        self.log.info("worker started", source=self.local_source.source_id if self.local_source else "",
                      prefix=self.opts.prefix)
        return self

    def stop(self) -> None:
        """Graceful stop: subtasks first, then the registration (lease revoked at once, so
        the master rebinds without waiting for the TTL)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._changed.set()
        self._stop_all("worker stopping")
        for wid in self._watch_ids:
            try:
                self.client.cancel_watch(wid)
            except Exception:  # noqa: BLE001
                pass
        if self.lease is not None:
            try:
                self.lease.revoke()
            except Exception:  # noqa: BLE001 — etcd may be gone; the TTL expires the key
                pass
        if self.obs is not None:
            self.obs.stop()
        self.log.info("worker stopped")

    def wait(self) -> None:
        while not self._stop.wait(1.0):
            pass

    @property
    def spark_started(self) -> bool:
        return self.spark_starter.started

    def spark(self):
        """One SparkSession per process, waited for (see :meth:`spark_handle`)."""
        return self.spark_starter.get()

    def spark_handle(self) -> SparkStarter:
        """The session being started in the background: a syncer streams before it is up."""
        return self.spark_starter.start()

    def ready(self) -> tuple[bool, str]:
        if not self.registered:
            waits = self.board.summary()
            return False, "not registered in etcd (lease lost or etcd unreachable)" + (f": {waits}" if waits else "")
        if not self.bound:
            return False, "no source bound to this worker yet"
        subs = list(self.subtasks.values())
        bad = [f"{t}/{s}" for (t, s), st in self.subtasks.items() if not st.streaming]
        if bad:
            return False, "subtasks not streaming: " + ", ".join(sorted(bad))
        return True, f"bound to {', '.join(sorted(self.bound))}; {len(subs)} subtask(s) streaming"

    # ------------------------------------------------------------------ registration
    def _register(self) -> None:
        reg = WorkerRegistration(worker=self.name, addr=self.opts.metrics_addr,
                                 started_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        if self.local_source is not None:
            reg.source, reg.source_yaml = self.local_source.source_id, self.local_source_text
        self.lease = self.store.register_worker(reg, ttl=self.opts.ttl)
        self.registered = True
        self.log.info("registered", ttl=self.opts.ttl)

    def _keepalive_loop(self) -> None:
        interval = max(self.opts.ttl / 3.0, 0.5)
        while not self._stop.wait(interval):
            try:
                if not self.registered or self.lease is None:
                    self._register()
                    self._changed.set()
                    continue
                resp = list(self.lease.refresh())
                ttl = resp[0].TTL if resp else 0
                if ttl <= 0:
                    self._lost("lease expired")
                else:
                    self._last_ok_refresh = time.monotonic()
            except Exception as e:  # noqa: BLE001 — etcd unreachable: the lease may expire
                # Only etcd says whether the lease is gone: it keeps leases across its own restart
                # (and extends them), so judging by our clock restarted every subtask on every etcd
                # restart.  Writing on meanwhile is safe: a worker that took the
                # source over bumps the checkpoint epoch, and every write here checks it (fence.py).
                self.log.warning("lease refresh failed; keeping the subtasks until etcd answers",
                                 error=str(e), unreachable_s=round(self._unreachable_for(), 1))

    def _unreachable_for(self) -> float:
        """Seconds since the last refresh etcd answered (for the log)."""
        last = getattr(self, "_last_ok_refresh", None)
        now = time.monotonic()
        if last is None:
            self._last_ok_refresh = now
            return 0.0
        return now - last

    def _lost(self, why: str) -> None:
        """Our registration is gone: the master may rebind our sources. Stop writing first."""
        self.log.error("registration lost; stopping all subtasks before re-registering", reason=why)
        self.registered = False
        self._stop_all(f"registration lost: {why}")
        self.bound = set()

    # ------------------------------------------------------------------ bindings & tasks
    def _watch(self) -> None:
        rev = self.store.revision()
        for kind in ("binding", "task", "schema-op"):
            self._watch_ids.append(self.store.watch(kind, rev + 1, lambda ev: self._changed.set()))

    def _reconcile_loop(self) -> None:
        while not self._stop.is_set():
            self._changed.wait(self.opts.resync_interval)
            self._changed.clear()
            if self._stop.is_set():
                return
            try:
                self.reconcile()
            except Exception as e:  # noqa: BLE001 — etcd hiccup: next round re-reads everything
                self.log.warning("reconcile failed; will retry", error=str(e))

    def reconcile(self) -> None:
        """Make the running subtasks match bindings + tasks in etcd."""
        if not self.registered:
            return
        bindings = self.store.list_bindings().items
        bound = {b.source for b in bindings if b.worker == self.name}
        elsewhere = {b.source for b in bindings if b.worker != self.name}
        tasks = {t.task: t for t in self.store.list_tasks().items}
        want, paused = {}, {}
        for t in tasks.values():
            for s in t.sources:
                if s in bound:
                    stage = t.stage_of(s)
                    if stage == "running":
                        want[(t.task, s)] = t
                    elif stage == "paused":
                        paused[(t.task, s)] = t
        self.bound = bound
        restarted = set()
        for key, sub in list(self.subtasks.items()):
            rec = want.get(key)
            if rec is not None and (rec.revision == sub.revision
                                    or (sub.failed is None and rec.yaml == sub.task_rec.yaml)):
                sub.revision = rec.revision   # a write that does not concern a healthy subtask
                continue
            if rec is not None:
                # a failed subtask (even one stopped for good in Error) or a new config: start over
                final, why = None, "task record changed (resume-task or a new config)"
                restarted.add(key)
            elif key in paused:
                final, why = "paused", "task paused (pause-task)"
            elif key[1] in elsewhere:
                # transfer-source or a re-binding: the new worker owns the status key now; a late
                # "Stopped" from here would overwrite what it reports
                final, why = None, "source bound to another worker (transfer-source or re-binding)"
            elif key[0] in tasks:
                final, why = "stopped", "binding moved or source removed from the task"
            else:
                final, why = None, "task removed"
            self.log.info("stopping subtask", task=key[0], source=key[1], reason=why)
            sub.stop(final=final)
            del self.subtasks[key]
            self._stopping[key] = sub
            if final == "paused":
                self._paused_reported.add(key)
        self._report_paused(paused, want)
        for key, rec in want.items():
            if key in self.subtasks:
                continue
            old = self._stopping.get(key)
            if old is not None and old.thread.is_alive():
                # the previous subtask of this task+source has not ended yet (stop() waits 30 s):
                # starting another would run two writers with the same epoch
                self.log.warning("previous subtask still stopping; starting its successor later",
                                 task=key[0], source=key[1])
                later = threading.Timer(1.0, self._changed.set)
                later.daemon = True
                later.start()
                continue
            self._stopping.pop(key, None)
            src = self._source_config(key[1])
            if src is None:
                continue
            sub = Subtask(self, rec, src, resumed=key in restarted or key in self._paused_reported)
            self._paused_reported.discard(key)
            self.subtasks[key] = sub
            self.log.info("starting subtask", task=key[0], source=key[1], resumed=sub.resumed)
            sub.start()
        self.schema_ops.serve(bound)

    def _report_paused(self, paused: dict, want: dict) -> None:
        """Paused sources bound here without a subtask (this worker started, or took the
        source over, while it was paused): make their status say ``Paused`` once."""
        self._paused_reported &= set(paused) | set(want)
        for key in paused:
            if key in self._paused_reported:
                continue
            cur = next((st for st in self.store.list_status(key[0]).items if st.source == key[1]), None)
            if not (cur is not None and cur.stage == PAUSED and cur.detail.get("paused_by") == "operator"
                    and cur.worker == self.name):
                rep = StatusReporter(self.store, key[0], key[1], self.name)
                if cur is not None:
                    rep.restore(cur)
                if not rep.operator_paused():
                    continue   # etcd write failed: try again next round
            self._paused_reported.add(key)

    def _source_config(self, source: str) -> SourceConfig | None:
        if self.local_source is not None and self.local_source.source_id == source:
            return self.local_source
        rec = self.store.get_source(source)
        if rec is None:
            self.log.error("bound to a source that is not registered", source=source)
            return None
        try:
            return parse_source(rec.yaml, f"<source {source} in etcd>")
        except ConfigError as e:
            self.log.error("bound source config invalid", source=source, error=str(e))
            return None

    def _stop_all(self, why: str) -> None:
        subs = list(self.subtasks.values())
        for sub in subs:
            sub.stop_event.set()
        for sub in subs:
            sub.stop()
        self._stopping.update(self.subtasks)
        self.subtasks.clear()
        if subs:
            self.log.info("subtasks stopped", reason=why, count=len(subs))
