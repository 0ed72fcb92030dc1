"""The leader's shard-DDL coordinator: glue between etcd and the pure lock engine.

On election it rebuilds every lock from etcd (SourceTables, then Infos in revision order, then
done Operations) and watches SourceTables, Infos and the workers' done marks from the revisions
it read (not Operations: those are its own writes).  All events, manual unlocks and metadata
removals run on ONE thread (``_loop``), so the engine never sees concurrent calls.  A lost or
compacted watch triggers a full rebuild (retried every 0.5 s) — the same path as a master
restart, so there is only one recovery code path to get right.

A record that cannot be decoded, or an Info the engine rejects, marks only its lock ``error``
(with the reason, visible in shard-ddl-lock) and never stops the master (DM's does).
Operations always carry the revision of the Info they answer, so a worker never takes an
answer to an older Info for its current one.
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable

from coordinator.etcdproto import (DoneMark, Fence, Fenced, Info, Operation, RecordEvent, SourceTables, Store, TableRef,
                                   parse_lock_id)
from coordinator.master.locks import Locks
from coordinator.obs import logger

from . import metrics
from .errors import RequestError
from .gauges import LockGauges



# What the coordinator thread's queue carries: one type per kind of work.
@dataclass(frozen=True)
class _Rebuild:
    """Rebuild every lock from etcd (start, a broken watch, an event that failed)."""


@dataclass(frozen=True)
class _Stop:
    """The thread ends (leadership lost or the master closing)."""


@dataclass(frozen=True)
class _WriteFailed:
    """A background flush of ``engine``'s answers failed: settle it on the thread (raises)."""
    engine: Locks


@dataclass(frozen=True)
class _Call:
    """An API call run on the thread, serialised with the events; its result goes to ``future``."""
    future: Future
    fn: Callable
    args: tuple


@dataclass(frozen=True)
class _Events:
    """One watch response (or the watch's error) of watch generation ``gen``: a rebuild starts a
    new generation, and events of older ones are dropped."""
    gen: int
    events: list | Exception


_REBUILD, _STOP = _Rebuild(), _Stop()


class Optimist:
    def __init__(self, store: Store, fence: Fence, on_fenced: Callable[[], None] = lambda: None):
        self.store, self.fence, self.on_fenced = store, fence, on_fenced
        self.log = logger("master.optimist", fence=fence.revision)
        self.ready = False
        self.closed = False
        self.engine: Locks | None = None      # built by the thread's first item, a rebuild
        self.gauges = LockGauges()
        self._q: queue.Queue = queue.Queue()
        self._watches: list[int] = []
        self._gen = 0                      # watch generation; events of older generations are dropped
        self._next = None                  # an item drained by a burst, handled before the queue
        self._thread = threading.Thread(target=self._loop, name="master-optimist", daemon=True)
        self.bad: dict[str, str] = {}      # lock ID -> reason, for records that cannot be read at all

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "Optimist":
        self._q.put(_REBUILD)
        self._thread.start()
        return self

    def close(self) -> None:
        self.closed = True
        self.ready = False
        self._cancel_watches()
        while True:   # fail pending API calls instead of letting them time out
            try:
                item, self._next = (self._next, None) if self._next is not None else (self._q.get_nowait(), None)
            except queue.Empty:
                break
            if isinstance(item, _Call):
                item.future.set_exception(RequestError("this master lost leadership; retry (the new leader answers)"))
        self._q.put(_STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        self.gauges.clear()      # a follower exports no lock series

    def call(self, fn, *args, timeout: float = 30.0):
        """Run ``fn(*args)`` on the coordinator thread (serialised with events); return its result."""
        if self.closed:
            raise RequestError("this master is no longer the leader")
        fut: Future = Future()
        self._q.put(_Call(fut, fn, args))
        return fut.result(timeout=timeout)

    def _loop(self) -> None:
        while True:
            try:
                item, self._next = (self._next, None) if self._next is not None else (self._q.get(timeout=1.0), None)
            except queue.Empty:
                if self.closed:
                    return
                self._update_gauges()
                continue
            if isinstance(item, _Stop) or self.closed:
                return
            try:
                if isinstance(item, _Rebuild):
                    self._rebuild_until_ok()
                elif isinstance(item, _WriteFailed):
                    if self.engine is not None and item.engine is self.engine:
                        self.engine.settle()     # raises the failed flush's error
                elif isinstance(item, _Call):
                    fut, fn, args = item.future, item.fn, item.args
                    try:
                        if self.engine is not None:
                            self.engine.settle()  # the call sees (and orders after) every written answer
                    except BaseException as e:
                        fut.set_exception(RequestError(f"the leader's lock writes failed ({e}); retry"))
                        raise
                    try:
                        fut.set_result(fn(*args))
                    except BaseException as e:  # noqa: BLE001 — handed to the caller
                        fut.set_exception(e)
                else:
                    assert isinstance(item, _Events), item
                    self._burst(item)
            except Fenced as e:
                self.log.warning("write fenced: this master is no longer the leader", error=str(e))
                self.closed = True
                self.on_fenced()
                return
            except Exception as e:  # noqa: BLE001 — one bad event never stops coordination
                self.log.error("coordinator event failed; rebuilding", error=str(e))
                if self.engine is not None:
                    self.engine.batch = None   # the rebuild re-derives the burst's answers
                self._q.put(_REBUILD)
            self._update_gauges()

    # ------------------------------------------------------------------ rebuild + watches
    def _rebuild_until_ok(self) -> None:
        while not self.closed:
            try:
                self._rebuild()
                return
            except Fenced:
                raise
            except Exception as e:  # noqa: BLE001 — etcd down etc.: retry
                self.log.warning("rebuild failed; retrying in 0.5s", error=str(e))
                time.sleep(0.5)

    def _cancel_watches(self) -> None:
        for w in self._watches:
            try:
                self.store.client.cancel_watch(w)
            except Exception:  # noqa: BLE001
                pass
        self._watches = []

    def _rebuild(self) -> None:
        t0 = time.monotonic()
        self._cancel_watches()
        self._gen += 1
        gen = self._gen
        if self.engine is not None:
            self.engine.writing.abandon()   # the listing below must see the old engine's writes
        # drop queued events of the old generation lazily (their gen no longer matches)

        def write_failed() -> None:
            self._q.put(_WriteFailed(engine))

        engine = Locks(self.store, self.fence, self.log, on_write_failed=write_failed)
        self.engine = engine
        sts = self.store.list_source_tables()
        infos = self.store.list_infos()
        ops = self.store.list_operations()
        dcs = self.store.list_dropped_columns()
        rems = self.store.list_remnants()
        stats = engine.rebuild(sts, infos, ops, dcs, rems)
        metrics.REBUILDS.inc()

        def forward(ev) -> None:
            self._q.put(_Events(gen, ev))

        for kind, listing in (("source-tables", sts), ("info", infos), ("done", ops)):
            self._watches.append(self.store.watch(kind, listing.revision + 1, forward,
                                                  # deleted Infos and done marks mean nothing to it
                                                  deletes=kind == "source-tables", prev=False, many=True))
        self.ready = True
        self.log.info("locks rebuilt", took_ms=int((time.monotonic() - t0) * 1000), **stats)

    def _burst(self, first: _Events) -> None:
        """Hand ``first`` and every event already queued behind it (up to ``BURST``) to the
        engine, then write their answers together (master/write_batch.py).  A non-event item
        drained on the way (an operator call, a rebuild) is kept in ``_next``, handled next."""
        engine = self.locks
        engine.begin()
        item, n = first, 0
        while True:
            gen, evs = item.gen, item.events
            if gen == self._gen:
                for ev in evs if isinstance(evs, list) else (evs,):   # a watch response, or its error
                    self._dispatch(ev)
                    if self.engine is not engine:
                        break
            n += len(evs) if isinstance(evs, list) else 1
            if n >= self.BURST or self.engine is not engine:   # a rebuild replaced the engine
                break
            try:
                nxt = self._q.get_nowait()
            except queue.Empty:
                break
            if not isinstance(nxt, _Events):
                self._next = nxt
                break
            item = nxt
        if self.engine is engine:
            engine.flush()
        else:
            engine.batch = None   # answers of the replaced engine: the rebuild re-derived them

    BURST = 2048   # events handled before their writes are flushed (bounds the answer latency)

    def _dispatch(self, ev) -> None:
        if isinstance(ev, Exception):
            self.log.warning("watch broke; rebuilding from etcd", error=f"{type(ev).__name__}: {ev}")
            self._rebuild_until_ok()
            return
        assert isinstance(ev, RecordEvent)
        if ev.error is not None:
            metrics.BAD_RECORDS.inc()
            self.locks.bad_record(ev.error)
            return
        rec = ev.record      # the kind's record type (the watch decodes it), None when deleted
        if ev.kind == "info":
            if not ev.deleted and isinstance(rec, Info):
                self.locks.on_info(rec)
        elif ev.kind == "done":
            if not ev.deleted and isinstance(rec, (Operation, DoneMark)):
                self.locks.on_done(rec)
        elif ev.kind == "source-tables":
            if ev.deleted:
                p = ev.parts
                if p.get("task") and p.get("source"):
                    self.locks.on_source_tables(SourceTables(p["task"], p["source"], {}), deleted=True)
            elif isinstance(rec, SourceTables):
                self.locks.on_source_tables(rec, deleted=False)

    @property
    def locks(self) -> Locks:
        """The current lock engine (the thread's first item builds it, before any event or call)."""
        if self.engine is None:
            raise RequestError("the lock engine is not built yet; retry")
        return self.engine

    _gauges_at = 0.0

    def _update_gauges(self) -> None:
        """Lock gauges (at most once a second: a view walks every member table)."""
        if self.engine is None or time.monotonic() - self._gauges_at < 1.0:
            return
        self._gauges_at = time.monotonic()
        self.gauges.update(self.engine.keeper.summaries())

    # ------------------------------------------------------------------ API (serialised)
    def show_locks(self, task: str, sources: list[str]):
        return self.call(lambda: self.locks.show(task, sources))

    def unlock(self, fence: Fence, req) -> str:
        try:
            lock = parse_lock_id(req.ID)
        except Exception as e:  # noqa: BLE001 — BadKey names the input
            raise RequestError(str(e)) from None
        if req.force_remove:
            return self.call(lambda: self.locks.force_remove(lock, req.ID, no_check=req.no_check))
        table = TableRef(req.source, req.database, req.table)
        if req.remove_table:
            return self.call(lambda: self.locks.remove_table(lock, req.ID, table))
        return self.call(lambda: self.locks.unlock(lock, req.ID, table, req.action or "skip"))

    def remove_task_meta(self, fence: Fence, task: str, sources: list[str] | None) -> int:
        """stop-task / start-task --remove-meta: forget the task's locks and delete its shard-DDL
        metadata in etcd.  Returns how many locks were dropped."""
        return self.call(lambda: self.locks.remove_task(task, sources))
