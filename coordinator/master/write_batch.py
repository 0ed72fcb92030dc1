"""The leader's pending writes for one burst of watch events, flushed in few fenced transactions.

A big lock (thousands of shard tables) sends its Infos and done marks in bursts; one etcd watch
response carries many of them.  Writing each answer in its own read-then-write round trip caps
the master at a few hundred Infos a second, so ``Optimist`` hands a whole burst to the
engine and ``Locks`` collects the writes here; ``flush`` sends them in transactions of up to
``MAX_TXN_OPS``.  No guarantee changes:

* every transaction is fenced (a deposed master writes nothing);
* every Operation is still guarded on the mod revision of the Info it answers; a chunk whose guard
  fails is retried one answer at a time (``Store.put_operations``), which names the reason;
* within a burst the last answer for a table wins (a table gets at most one Operation per
  flush: the engine's latest decision, which is all a worker could act on anyway);
* the chunks of one flush are written concurrently (etcd commits concurrent transactions in one
  disk sync; one at a time, a 4,096-table burst waited ~1 s of syncs), and the flush returns only
  when all are written;
* a flush runs on a flusher thread (``InFlight``) while the coordinator decides the next burst
  (waiting for each flush was half of a big lock's coordinator time); flushes of distinct keys
  are written concurrently, one that writes a key of a flush in flight waits for it, so a key's
  writes stay in order, and everything that writes or reads outside a burst (lock removal,
  operator commands, a rebuild) waits until none is in flight;
* a crash between chunks leaves some of them written; the next leader's rebuild recomputes every
  answer from the stored Infos and done marks and writes what is missing, never re-issuing a
  done one (test: tests/lock/test_batched_writes.py).

Writes that must be ordered with the batch (lock removal, a table leaving a lock, operator
commands that report what was written) flush it first (``Locks._direct``).
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from etcd3 import transactions as T
from etcd3 import utils as eu

from coordinator.etcdproto import MAX_TXN_OPS, DroppedStage, Fence, LockKey, Operation, PutResult, Store, TableRef

from . import metrics

_R = TypeVar("_R")


def log_put(log: Any, op: Operation, res: PutResult, level: int = logging.INFO) -> None:
    """The log line of an answer the leader writes (batched or not)."""
    log.log(level, "operation written" if res.put else "operation obsolete, not written", lock_id=op.lock_id,
            source=op.source, table=f"{op.up_schema}.{op.up_table}", stage=op.stage.value, ddls=op.ddls,
            info_revision=op.info_revision, reason=res.reason)


SUMMARY_OVER = 8     # more alike answers than this in one flush: one INFO line for them
_NAMED = 5           # tables such a line names


def log_puts(log: Any, written: list[tuple[Operation, PutResult]]) -> None:
    """The log lines of one flush.  Answers alike (same lock, stage, statements and outcome)
    get a line each up to :data:`SUMMARY_OVER` of them, else ONE line with their count, the
    first tables and the Info revisions they answer (each answer at DEBUG): a 4,096-table lock
    wrote 8,192 INFO lines, a third of the leader's CPU, with nothing an operator reads there
    that ``shardctl show-ddl-locks`` does not show better."""
    groups: dict[tuple, list[tuple[Operation, PutResult]]] = {}
    for op, res in written:
        groups.setdefault((op.lock_id, res.put, op.stage.value, tuple(op.ddls)), []).append((op, res))
    debug = log.isEnabledFor(logging.DEBUG)
    for (lock_id, put, stage, ddls), items in groups.items():
        if len(items) <= SUMMARY_OVER:
            for op, res in items:
                log_put(log, op, res)
            continue
        if debug:
            for op, res in items:
                log_put(log, op, res, logging.DEBUG)
        names = [f"{op.source}:{op.up_schema}.{op.up_table}" for op, _ in items[:_NAMED]]
        revs = [op.info_revision for op, _ in items]
        log.info("operations written" if put else "operations obsolete, not written", lock_id=lock_id,
                 count=len(items), stage=stage, ddls=list(ddls),
                 tables=", ".join(names) + f" and {len(items) - _NAMED} more",
                 info_revisions=f"{min(revs)}-{max(revs)}",
                 reasons=sorted({res.reason for _, res in items if res.reason}) or None)


@dataclass
class WriteBatch:
    store: Store
    fence: Fence
    log: Any
    ops: dict[tuple, Operation] = field(default_factory=dict)          # (lock, table) -> latest answer
    started: dict[tuple, float] = field(default_factory=dict)          # (lock, table) -> Info seen at
    dropped: dict[str, Any] = field(default_factory=dict)              # key or prefix -> etcd op (in order)
    clears: set[str] = field(default_factory=set)                      # the prefixes among ``dropped``
    # waits for the flushes in flight: before this batch writes anything itself (see put_dropped)
    settle: Callable[[], None] = lambda: None

    def __bool__(self) -> bool:
        return bool(self.ops or self.dropped)

    def keys(self) -> frozenset:
        """What this batch writes (Operations by lock and table, dropped-column records by key)."""
        return frozenset([*self.ops, *self.dropped])

    def clears_prefixes(self) -> bool:
        """A prefix delete touches keys no list names: such a batch is ordered with every other."""
        return bool(self.clears)

    def put_operation(self, op: Operation, started: float | None = None) -> None:
        k = (op.lock, op.table)
        self.ops.pop(k, None)         # keep arrival order of the latest answers
        self.ops[k] = op
        if started is not None:
            self.started.setdefault(k, started)

    def put_dropped(self, lock: LockKey, table: TableRef, cols: list[str], stage: DroppedStage) -> None:
        for key, put in self.store.dropped_column_puts(lock, table, cols, stage):
            if self.clears and any(key.startswith(p) for p in self.clears):
                self.settle()           # earlier bursts' writes first,
                self._flush_dropped()   # then this one's clear before the put that follows it
            self.dropped.pop(key, None)
            self.dropped[key] = put

    def delete_dropped(self, lock: LockKey, column: str) -> None:
        prefix = self.store.dropped_column_prefix(lock, column)
        for key in [k for k in self.dropped if k.startswith(prefix)]:
            del self.dropped[key]       # superseded by the clear
        self.dropped[prefix] = T.Delete(prefix, eu.prefix_range_end(eu.to_bytes(prefix)))
        self.clears.add(prefix)

    def _flush_dropped(self) -> None:
        if self.dropped:
            items = list(self.dropped.values())
            self.dropped.clear()
            self.clears.clear()
            chunks = [items[i:i + MAX_TXN_OPS] for i in range(0, len(items), MAX_TXN_OPS)]
            _parallel(lambda fence, c: self.store._fenced_chunks(fence, f"recording {len(c)} dropped-column "
                                                                  "changes", c), self.fence, chunks)

    def flush(self) -> None:
        """Write everything pending: Operations first (workers wait on them), then the
        dropped-column records (only a re-add check reads those; rebuild repairs a gap)."""
        if self.ops:
            ops = list(self.ops.values())
            started = self.started
            self.ops, self.started = {}, {}
            per = MAX_TXN_OPS // 2     # an answer is guarded by two compares (Store.put_operations)
            chunks = [ops[i:i + per] for i in range(0, len(ops), per)]
            written: list[tuple[Operation, PutResult]] = []
            for chunk, results in zip(chunks, _parallel(self.store.put_operations, self.fence, chunks)):
                now = time.monotonic()
                for op, res in zip(chunk, results):
                    t0 = started.get((op.lock, op.table))
                    if res.put and t0 is not None:
                        metrics.OPERATION_LATENCY.observe(now - t0)
                    written.append((op, res))
            log_puts(self.log, written)
            metrics.WRITE_BATCH.observe(len(ops))
        self._flush_dropped()


class InFlight:
    """Flushes being written on the flusher threads while the coordinator goes on.

    Writes to one key keep their order: ``submit`` first waits for every flush in flight that
    writes one of the same keys, and a flush that clears dropped-column records by prefix (a
    ``barrier``) waits for, and is waited for by, every other.  Flushes of distinct keys are
    written concurrently, as the chunks of one flush always were (no answer relies on another
    table's key being written first: a worker acts on its own table's Operation only).  At most
    ``DEPTH`` flushes are in flight, so a slow etcd slows the coordinator down instead of
    queueing bursts without bound.  ``wait`` returns when nothing is being written and raises
    the first error of a failed flush; ``on_failed`` runs (on the flusher thread) when one
    fails, so the coordinator learns it without waiting for its next burst."""

    DEPTH = 3

    def __init__(self, on_failed: Callable[[], None] = lambda: None) -> None:
        self._flying: list[tuple[Future, frozenset, bool]] = []
        self._on_failed = on_failed

    def submit(self, fn: Callable[[], None], keys: frozenset = frozenset(), barrier: bool = True) -> None:
        global _FLUSHER
        for f, k, b in list(self._flying):
            if barrier or b or not k.isdisjoint(keys):
                self._finish(f)
        while len(self._flying) >= self.DEPTH:
            self._finish(self._flying[0][0])
        if _FLUSHER is None:
            _FLUSHER = ThreadPoolExecutor(self.DEPTH, thread_name_prefix="master-etcd-flush")
        fut = _FLUSHER.submit(fn)
        fut.add_done_callback(lambda f: f.exception() is not None and self._on_failed())
        self._flying.append((fut, keys, barrier))

    def _finish(self, fut: Future) -> None:
        self._flying = [e for e in self._flying if e[0] is not fut]
        fut.result()

    def wait(self) -> None:
        """Every flush written; the first failure raised (after all have finished)."""
        futs, self._flying = [f for f, _, _ in self._flying], []
        wait(futs)
        for f in futs:
            f.result()

    def abandon(self) -> None:
        """Wait for the flushes and drop their errors (a rebuild re-derives and re-writes their answers)."""
        try:
            self.wait()
        except Exception:  # noqa: BLE001 — the rebuild that follows reads etcd as it is
            pass


_FLUSHER: ThreadPoolExecutor | None = None
_POOL: ThreadPoolExecutor | None = None
_WRITERS = 8   # etcd commits concurrent transactions together; one at a time waits a disk sync each


def _parallel(fn: Callable[[Fence, list], _R], fence: Fence, chunks: list[list]) -> list[_R]:
    """``fn(fence, chunk)`` for every chunk, concurrently; results in order.  The chunks of one
    flush touch distinct keys, so their order does not matter; the flush returns only when all
    are written, so the next burst's writes always follow.  The first error (``Fenced``, etcd
    down) is raised after every chunk has finished."""
    global _POOL
    if len(chunks) <= 1:
        return [fn(fence, c) for c in chunks]
    if _POOL is None:
        _POOL = ThreadPoolExecutor(_WRITERS, thread_name_prefix="master-etcd-write")
    futs = [_POOL.submit(fn, fence, c) for c in chunks]
    wait(futs)
    return [f.result() for f in futs]
