"""Per task+source status in etcd, the source of ``shardctl query-status``.

The worker is the only writer of its status key.  A stage change (Running -> Paused, ...) and
every change of what the worker waits for is written at once; progress (positions, lag) is
written at most every ``min_interval`` seconds, so a busy stream does not hammer etcd.
A failed write is kept pending and retried with the next update: status is never a reason
to stop replicating.

``detail`` layout (JSON, read by the master's query-status):
  ``error``: {"type", "message", "lock_id", "position", "table", ...} or absent
  ``waiting_for``: text, e.g. "Operation for lock test-`shop`.`orders` (info revision 42)"
  ``lock_id``: the lock the subtask is blocked on (also in ``error`` when paused by it)
  ``synced_position`` / ``checkpoint``: binlog positions (text, GTID or file:pos)
  ``lag_seconds`` / ``lag_events``: how far behind the upstream the applied stream is
  ``paused_by``: "operator" when stage ``Paused`` comes from ``pause-task`` (the subtask is
  stopped until ``resume-task``); absent for a pause that waits on a lock answer
  ``master_binlog`` / ``master_binlog_gtid`` / ``syncer_binlog`` / ``syncer_binlog_gtid`` /
  ``synced`` / ``total_events`` / ``total_tps``: DM's query-status sync fields (``dm_positions``)
  ``unit``: DM's processing unit, ``Dump`` / ``Load`` / ``Sync`` (see ``DUMP``); absent while
  starting.  Stage ``Running`` with unit ``Sync`` means the syncer holds its start position, so
  a client waiting for replication waits for both.
"""
from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

from coordinator.errors import ShardMergeError
from coordinator.etcdproto.errors import EtcdProtoError
from coordinator.etcdproto.status import SubtaskStatus
from coordinator.obs import logger

NEW = "New"            # starting: not replicating yet (no position taken); waiting_for says what
RUNNING = "Running"    # replicating (or loading) from a known position
PAUSED = "Paused"      # blocked on an operator: a lock answer (conflict, error; continues by
                       # itself once answered) or pause-task (detail paused_by=operator)
ERROR = "Error"        # stopped on an error that needs a restart/fix (strict conflict, bad DDL)
STOPPED = "Stopped"
FINISHED = "Finished"
STAGES = (RUNNING, PAUSED, ERROR, STOPPED)

# DM's units.  Our full load is one step per chunk (read + write together), so ``Dump`` is the
# planning part (binlog position, table definitions, targets, chunk bounds) and ``Load`` the
# chunks and the hand-over to the syncer; ``Sync`` once the syncer started (docs/full-load.md).
DUMP = "Dump"
LOAD = "Load"
SYNC = "Sync"
UNITS = (DUMP, LOAD, SYNC)

_log = logger("worker.status")


def dm_positions(master, syncer_pos, total_events: int, seconds: float, caught_up: bool) -> dict:
    """DM's query-status sync fields for the status detail: the upstream's end and the syncer's
    read point as ``(file, pos)`` with their GTID sets, whether they meet, and the events processed
    with their rate since this syncer started."""
    def fmt(p):
        return f"({p.file}, {p.pos})" if p is not None and p.file else ""
    return {"master_binlog": fmt(master), "master_binlog_gtid": master.gtid if master is not None else "",
            "syncer_binlog": fmt(syncer_pos), "syncer_binlog_gtid": syncer_pos.gtid if syncer_pos is not None else "",
            "synced": bool(caught_up and master is not None and syncer_pos is not None
                           and (master.file, master.pos) == (syncer_pos.file, syncer_pos.pos)),
            "total_events": total_events, "total_tps": int(total_events / seconds) if seconds > 0 else 0}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def error_detail(err: BaseException | str, **ctx) -> dict:
    """The ``error`` entry: type, message and context (lock ID, position, table...)."""
    if isinstance(err, ShardMergeError):
        d = {"type": type(err).__name__, "message": err.message,
             **{k: str(v) for k, v in err.context.items()}}
    elif isinstance(err, BaseException):
        d = {"type": type(err).__name__, "message": str(err)}
    else:
        d = {"type": "Message", "message": str(err)}
    d.update({k: str(v) for k, v in ctx.items() if v not in (None, "")})
    return d


class StatusReporter:
    """Writes one subtask's ``SubtaskStatus``; all methods are thread-safe."""

    def __init__(self, store, task: str, source: str, worker: str = "", *, min_interval: float = 1.0):
        self.store = store
        self.min_interval = min_interval
        self._lock = threading.Lock()
        self._st = SubtaskStatus(task=task, source=source, stage=RUNNING, worker=worker)
        self._dirty = True
        self._last_write = 0.0
        self.write_errors = 0
        self._quiet = 0           # token of a deferred wait not written yet (``waiting(after=)``)
        self._tokens = 0
        self._timer: threading.Timer | None = None

    # ------------------------------------------------------------------ state changes (written now)
    def running(self, unit: str | None = None) -> None:
        """Replicating normally: clears error, wait and conflict fields.  ``unit`` (``DUMP``...)
        changes the unit in the same write, so no reader sees ``Running`` with the old unit."""
        with self._lock:
            unseen = self._quiet and unit is None      # the only change was a wait nobody saw
            self._cancel_deferred()
            d = self._st.detail
            if unit is not None:
                d["unit"] = self._check_unit(unit)
            for k in ("error", "waiting_for", "lock_id", "paused_by"):
                d.pop(k, None)
            self._st.stage, self._st.block_ddl_owner, self._st.conflict_msg = RUNNING, "", ""
            if unseen:
                return
        self.flush(force=True)

    def starting(self, what: str) -> None:
        """The subtask is starting up (connecting, first Spark session: 15-60 s): stage ``New``
        with what it is doing, instead of a bare ``New``.  Not ``Running``: no start position
        is taken yet, so a client that waits for Running and then writes must not race it.
        ``running()`` ends it."""
        with self._lock:
            if "error" in self._st.detail:   # a retry: keep what failed and what it waits for visible
                return
            if self._st.stage not in (PAUSED, ERROR):
                self._st.stage = NEW
            self._st.detail["waiting_for"] = f"starting: {what}"
        self.flush(force=True)

    def unit(self, unit: str) -> None:
        """Switch the unit (``Dump`` -> ``Load``) at once, keeping the stage."""
        with self._lock:
            self._st.detail["unit"] = self._check_unit(unit)
        self.flush(force=True)

    @staticmethod
    def _check_unit(unit: str) -> str:
        if unit not in UNITS:
            raise ValueError(f"unknown status unit {unit!r}; expected one of {', '.join(UNITS)}")
        return unit

    def waiting(self, what: str, *, lock_id: str = "", after: float = 0.0) -> None:
        """Still Running, but blocked on something outside (an Operation from the master).
        ``after``: written only if still waiting after that many seconds, and a ``running()``
        before then writes nothing -- a shard DDL's Operation usually comes in a few ms, and
        the two status writes around each wait were ~4 ms of it."""
        with self._lock:
            clean = (self._st.stage == RUNNING
                     and not any(k in self._st.detail for k in ("error", "waiting_for", "lock_id", "paused_by")))
            self._cancel_deferred()
            self._st.detail["waiting_for"] = what
            if lock_id:
                self._st.detail["lock_id"] = lock_id
            if after > 0 and clean:
                self._tokens += 1
                self._quiet = self._tokens
                self._timer = threading.Timer(after, self._write_deferred, args=(self._quiet,))
                self._timer.daemon = True
                self._timer.start()
                return
        self.flush(force=True)

    def _write_deferred(self, token: int) -> None:
        with self._lock:
            if self._quiet != token:
                return
        self.flush(force=True)

    def _cancel_deferred(self) -> None:
        """(under the lock) forget a deferred wait's pending write."""
        self._quiet = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def paused(self, err: BaseException | str, *, lock_id: str = "", position: str = "",
               owner: str = "", waiting_for: str = "") -> None:
        """Blocked until an operator acts (e.g. ``shardctl shard-ddl-lock unlock``); the
        subtask continues by itself once the answer arrives."""
        self._set_problem(PAUSED, err, lock_id, position, owner, waiting_for)

    def retrying(self, err: BaseException | str, waiting_for: str) -> None:
        """A transient failure (a server down, etcd unreachable): no fix needed, the subtask
        retries by itself.  Stage stays ``Running``; ``waiting_for`` says on what, ``error``
        what failed last.  ``running()`` clears both once it streams again."""
        self._set_problem(RUNNING, err, "", "", "", waiting_for)

    def error(self, err: BaseException | str, *, lock_id: str = "", position: str = "",
              owner: str = "") -> None:
        """Stopped: the subtask will not continue without a fix and a restart/resume."""
        self._set_problem(ERROR, err, lock_id, position, owner, "")

    def finished(self) -> None:
        """``task-mode: full`` is done: the load finished, no binlog replication follows."""
        with self._lock:
            self._st.stage = FINISHED
            self._st.detail.pop("waiting_for", None)
        self.flush(force=True)

    def operator_paused(self) -> bool:
        """Stopped by ``pause-task`` (checkpoints flushed); ``resume-task`` starts it again.
        An error it had stopped on stays in ``error``.  Returns whether etcd took the write."""
        with self._lock:
            self._st.stage = PAUSED
            self._st.detail["paused_by"] = "operator"
            self._st.detail["waiting_for"] = (f"paused by pause-task; `shardctl resume-task {self._st.task}` "
                                              f"continues it")
        return self.flush(force=True)

    def resuming(self) -> None:
        """A new subtask replaces a paused or failed one: ``New`` at once (starting up), so
        query-status does not keep showing the old stage while it connects; ``Running`` only
        once the syncer has its position."""
        with self._lock:
            d = self._st.detail
            for k in ("error", "lock_id", "paused_by"):
                d.pop(k, None)
            d["waiting_for"] = "restarting (resume-task or a changed task record): connecting to " \
                               "upstream, downstream and Spark"
            self._st.stage, self._st.block_ddl_owner, self._st.conflict_msg = NEW, "", ""
        self.flush(force=True)

    def restore(self, rec: SubtaskStatus) -> None:
        """Start from a stored record (positions, last error) instead of an empty one."""
        with self._lock:
            self._st.stage, self._st.detail = rec.stage, dict(rec.detail or {})
            self._st.block_ddl_owner, self._st.conflict_msg = rec.block_ddl_owner, rec.conflict_msg

    def stopped(self) -> None:
        with self._lock:
            self._st.stage = STOPPED
            self._st.detail.pop("waiting_for", None)
        self.flush(force=True)

    def _set_problem(self, stage, err, lock_id, position, owner, waiting_for) -> None:
        with self._lock:
            e = error_detail(err, lock_id=lock_id, position=position)
            self._st.stage = stage
            self._st.detail["error"] = e
            if lock_id:
                self._st.detail["lock_id"] = lock_id
            if waiting_for:
                self._st.detail["waiting_for"] = waiting_for
            else:
                self._st.detail.pop("waiting_for", None)
            self._st.block_ddl_owner = owner
            self._st.conflict_msg = e["message"] if lock_id else ""
        self.flush(force=True)

    # ------------------------------------------------------------------ progress (throttled)
    def progress(self, *, synced_position: str | None = None, checkpoint: str | None = None,
                 lag_seconds: float | None = None, lag_events: int | None = None, **extra) -> None:
        with self._lock:
            for k, v in (("synced_position", synced_position), ("checkpoint", checkpoint),
                         ("lag_seconds", lag_seconds), ("lag_events", lag_events), *extra.items()):
                if v is not None and self._st.detail.get(k) != v:
                    self._st.detail[k] = v
                    self._dirty = True
        self.flush()

    # ------------------------------------------------------------------ output
    @property
    def stage(self) -> str:
        with self._lock:
            return self._st.stage

    def snapshot(self) -> SubtaskStatus:
        with self._lock:
            return self._snapshot()

    def flush(self, force: bool = False) -> bool:
        """Write if something changed (now if ``force``, else at most every min_interval)."""
        with self._lock:
            if force:
                self._dirty = True
                self._quiet = 0          # any forced write shows a deferred wait with it
            if not self._dirty:
                return True
            if not force and time.monotonic() - self._last_write < self.min_interval:
                return False
            self._st.updated_at = _now()
            rec = self._snapshot()
            try:
                self.store.put_status(rec)
            except (EtcdProtoError, OSError) as e:
                self.write_errors += 1
                _log.warning("status write failed; will retry with the next update", task=rec.task,
                             source=rec.source, error=str(e))
                return False
            self._dirty = False
            self._quiet = 0              # a deferred wait is visible now
            self._last_write = time.monotonic()
            return True

    def settle(self) -> bool:
        """Write now what a throttled update left pending (before the subtask goes idle: the
        next update may be seconds away, and query-status would show the state before it)."""
        with self._lock:
            pending = self._dirty
        return self.flush(force=True) if pending else True

    def _snapshot(self) -> SubtaskStatus:
        s = self._st
        return SubtaskStatus(task=s.task, source=s.source, stage=s.stage, worker=s.worker,
                             block_ddl_owner=s.block_ddl_owner, conflict_msg=s.conflict_msg,
                             detail=dict(s.detail), updated_at=s.updated_at)
