"""Worker side of ``shardctl binlog skip|replace``: which statement events an operator told this
(task, source) to skip, or to handle other statements in place of.

The master writes a ``pending`` BinlogSkip record naming the *start* position of one statement
event.  The syncer asks :meth:`BinlogSkips.find` at every statement event (one etcd read; DDLs
are rare), and when the start matches it does not execute nor coordinate the statement: it moves
the checkpoints past it like a handled DDL, and only then calls :meth:`BinlogSkips.used`.  A
crash between the checkpoint flush and that mark cannot skip another statement: the record
names one exact position, which the restarted stream (resuming after it) never meets again; the
next statement's :meth:`find` marks such a left-over record ``passed``.

A record for a *rows* event (``event`` "rows": one the decoder cannot read) names where that event
ends; the syncer reads those at start (:meth:`rows_pending`), hands the positions to its decoder,
which passes over exactly that event, and marks each ``done`` once its checkpoint is past it
(:meth:`rows_passed`).
"""
from __future__ import annotations

from datetime import datetime, timezone

from prometheus_client import Counter

from coordinator.etcdproto import BinlogSkip, Store
from coordinator.obs import logger
from worker.events import Position, PositionError, parse_gtid_set

SKIPPED = Counter("shardmerge_worker_binlog_skips_total",
                  "Binlog events (statements, undecodable rows events) skipped on an operator's `shardctl binlog skip`",
                  ["task", "source"])

_log = logger("worker.sync.binlog_skip")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def same_gtid_state(a: str, b: str) -> bool:
    """Unknown on either side, or equal in every GTID domain both name (the formats of a
    checkpoint's and a server's GTID state may list different domains)."""
    if not a or not b:
        return True
    try:
        da, db = parse_gtid_set(a), parse_gtid_set(b)
    except PositionError:
        return True
    return all(da[d] == db[d] for d in set(da) & set(db))


class BinlogSkips:
    """Pending skips of one (task, source) in etcd (``coordinator.etcdproto.BinlogSkip``)."""

    def __init__(self, store: Store, task: str, source: str, worker: str = ""):
        self.store, self.task, self.source, self.worker = store, task, source, worker

    def find(self, start: Position) -> BinlogSkip | None:
        """The pending skip of the statement starting at ``start`` (same file:pos, and the same
        GTID state when the record has one).  Pending skips for earlier positions, or for this
        one with another GTID state, are marked ``passed``: the stream is beyond them
        (statements come in binlog order and the checkpoint never goes back), so they can never
        be used.  etcd errors
        propagate (``EtcdUnavailable`` is transient: the batch is retried, nothing is skipped
        on a guess)."""
        hit = None
        for rec in self.store.list_binlog_skips(self.task, self.source).items:
            if rec.state not in ("pending", "held") or rec.event == "rows":
                continue
            at = Position(rec.file, rec.pos)
            if at.same_point(start) and same_gtid_state(rec.gtid, start.gtid):
                hit = rec
                continue
            if rec.state == "held":
                continue      # a held table replays its statement after the redirect
            if at.same_point(start):
                note = (f"a statement starts at {rec.position}, but the GTID state there is {start.gtid!r}, "
                        f"not {rec.gtid!r} as when the skip was armed (another server's binlog?)")
            elif at < start:
                note = f"the stream passed {rec.position} without a statement starting there"
            else:
                continue
            if self.store.finish_binlog_skip(rec, "passed", done_at=_now(), worker=self.worker, note=note):
                _log.warning("binlog skip not used: " + note, task=self.task, source=self.source,
                             position=rec.position)
        return hit

    def rows_pending(self, checkpoint: Position | None) -> dict[tuple[str, int], BinlogSkip]:
        """The pending skips of rows events ahead of ``checkpoint``, by (file, end pos); those at or
        behind it are marked ``passed`` (the stream resumes after them and never reads them)."""
        out = {}
        for rec in self.store.list_binlog_skips(self.task, self.source).items:
            if rec.state != "pending" or rec.event != "rows":
                continue
            if checkpoint is not None and Position(rec.file, rec.pos) <= checkpoint:
                note = f"the checkpoint ({checkpoint}) was already past the rows event ending at {rec.position}"
                if self.store.finish_binlog_skip(rec, "passed", done_at=_now(), worker=self.worker, note=note):
                    _log.warning("binlog skip not used: " + note, task=self.task, source=self.source,
                                 position=rec.position)
                continue
            out[(rec.file, rec.pos)] = rec
        return out

    def rows_passed(self, pending: dict[tuple[str, int], BinlogSkip], checkpoint: Position) -> None:
        """The checkpoint moved to ``checkpoint``: the skipped rows events behind it are done
        (removed from ``pending``).  The decoder passed over them: the record names the exact end
        of an event the subtask stopped on, and the stream read through that point."""
        for key in [k for k in pending if Position(*k) <= checkpoint]:
            rec = pending.pop(key)
            _log.warning("rows event skipped on the operator's binlog skip: its rows were not applied",
                         task=self.task, source=self.source, position=rec.position, rows=rec.statement)
            self.used(rec, rec.statement, note=f"rows event skipped; checkpoint now {checkpoint}")

    def held(self, rec: BinlogSkip, statement: str, note: str = "") -> BinlogSkip:
        """A replacement waits on its shard-DDL lock (its table is held): keep the record for the
        table's replay of the statement after the redirect, and out of :meth:`find`'s
        ``passed`` marking meanwhile."""
        if rec.state == "held":
            return rec
        stored = self.store.finish_binlog_skip(rec, "held", statement=statement[:1000], worker=self.worker,
                                               note=note)
        return stored if stored is not None else rec

    def used(self, rec: BinlogSkip, statement: str, note: str = "") -> None:
        """The statement at ``rec`` was skipped and the checkpoint is past it: mark it done."""
        SKIPPED.labels(self.task, self.source).inc()
        stored = self.store.finish_binlog_skip(rec, "done", statement=statement[:1000], done_at=_now(),
                                               worker=self.worker, note=note)
        if stored is None:
            _log.warning("binlog skip record changed or was reverted while it was being used; the statement "
                         "was skipped", task=self.task, source=self.source, position=rec.position)
