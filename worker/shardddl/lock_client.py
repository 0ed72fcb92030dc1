"""The worker's side of the etcd protocol for one subtask: put an Info, wait for the Operation
answering it, mark it done.  Thin on purpose: no decisions (``decision``), no schema
(``handler``); what it adds to the raw ``Store`` calls is the waiting discipline:

* only an Operation answering *this* Info's revision counts (dm#2282);
* while waiting long, the Info is checked and re-sent if it vanished or was overwritten, so a
  lock never waits for an Info the worker thinks it sent (dm#628);
* etcd outages are waited out (status says so) and a stopping subtask ends every wait with
  :class:`CoordinationStopped` (nothing executed, nothing checkpointed).
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from coordinator.etcdproto import (EtcdUnavailable, Info, LockKey, Operation, OperationWaitTimeout, Stage,
                                   StaleOperation, Store)
from coordinator.obs import logger

from .errors import CoordinationStopped

_log = logger("worker.shardddl")

Stored = tuple[Info | None, Operation | None] | None    # LockClient.stored: etcd's Info and Operation


def strs(ctx: dict) -> dict:
    return {k: str(v) for k, v in ctx.items() if v not in (None, "")}


class LockClient:
    def __init__(self, store: Store, stop: threading.Event, *, recheck_interval: float = 30.0,
                 on_etcd_down: Callable[[str, dict], None] | None = None):
        """``on_etcd_down(message, ctx)`` is told each time etcd is unreachable (status)."""
        self.store, self.stop = store, stop
        self.recheck_interval = recheck_interval
        self.on_etcd_down = on_etcd_down

    # ------------------------------------------------------------------ Info
    def put_info(self, info: Info, ctx: dict) -> int:
        """Publish ``info``; returns its revision (the one an answer must carry)."""
        while True:
            try:
                rev = self.store.put_info(info)
                _log.info("shard DDL info put", info_revision=rev, ddls=len(info.ddls), **strs(ctx))
                return rev
            except EtcdUnavailable as e:
                self._wait_etcd(e, ctx)

    def stored(self, info: Info) -> Stored:
        """What etcd holds for ``info``'s table now, Info and Operation in one read (None when
        etcd is unreachable: the put that follows waits for it).  Both questions below are
        asked of this one read before every shard DDL."""
        try:
            return self.store.get_info_and_operation(info.lock, info.table)
        except EtcdUnavailable:
            return None

    def stored_info(self, info: Info, stored: Stored, ctx: dict) -> int:
        """The revision of the stored Info when it is exactly ``info`` (a restart or a rewind met
        the same DDL again), else 0.  Waiting on it, instead of sending a new revision, keeps the
        answer the lock already gave (invariant 2, docs/lock-algorithm.md): a new revision would
        be decided again, possibly with another runner.  A redirect (``resolved``) needs the new
        revision: that replay is what the lock answers next."""
        cur, op = stored or (None, None)
        if cur is None or (cur.ddls, cur.before, cur.afters) != (info.ddls, info.before, info.afters):
            return 0
        if op is not None and op.info_revision == cur.revision and op.stage is Stage.RESOLVED:
            return 0
        _log.info("the same DDL's Info is stored; waiting on its answer", info_revision=cur.revision, **strs(ctx))
        return cur.revision

    def unlocked_answer(self, info: Info, stored: Stored, ctx: dict) -> Operation | None:
        """An operator's unlock not yet done that answers exactly this DDL (the stored Info it
        answers has the same statements and schemas): replaying a held table, or a restart
        right after the unlock.  Re-sending the Info would make the lock decide again and could
        undo the operator's ``skip``."""
        cur, op = stored or (None, None)
        if op is None or op.stage is not Stage.UNLOCKED or op.done:
            return None
        if cur is None or cur.revision != op.info_revision:
            return None
        if (cur.ddls, cur.before, cur.afters) != (info.ddls, info.before, info.afters):
            return None
        _log.info("using the operator's unlock for this DDL", action="exec" if op.ddls else "skip",
                  info_revision=op.info_revision, **strs(ctx))
        return op

    # ------------------------------------------------------------------ Operation
    def next_operation(self, info: Info, rev: int, after: int, ctx: dict,
                       interrupt: Callable[[], bool] | None = None,
                       just_put: bool = False) -> tuple[Operation | None, int]:
        """Block until an Operation answering ``info`` (put at ``rev``) newer than revision
        ``after`` exists.  Returns it with the Info revision it answers (a re-sent Info has a
        new one); ``(None, rev)`` as soon as ``interrupt()`` is true (asked about once a second).
        ``just_put``: ``rev`` is this caller's own put (``Store.wait_operation``)."""
        step = self.recheck_interval if interrupt is None else min(1.0, self.recheck_interval)
        last_check = time.monotonic()
        while True:
            if self.stop.is_set():
                raise CoordinationStopped("subtask stopping while waiting for the shard DDL Operation",
                                          info_revision=rev, **ctx)
            etcd_down = False
            try:
                return self.store.wait_operation(info.lock, info.table, rev, after_revision=after,
                                                 timeout=step, stop=self.stop, just_put=just_put), rev
            except OperationWaitTimeout:
                if self.stop.is_set():
                    raise CoordinationStopped("subtask stopping while waiting for the shard DDL Operation",
                                              info_revision=rev, **ctx) from None
            except EtcdUnavailable as e:
                self._wait_etcd(e, ctx)
                etcd_down = True
            just_put = False
            if interrupt is not None and interrupt():
                return None, rev
            if etcd_down or time.monotonic() - last_check >= self.recheck_interval:
                last_check = time.monotonic()
                new = self._recheck_info(info, rev, ctx)
                if new != rev:
                    rev, after = new, 0

    def wait_rewrite(self, info: Info, op: Operation, ctx: dict, cancel: threading.Event,
                     revision: Callable[[], int] | None = None,
                     wake: threading.Event | None = None) -> Operation | None:
        """For a held table: the next Operation for the same Info after ``op``; None when
        ``cancel`` is set (the syncer restarted: the replayed DDL gets a new Info).  ``revision``:
        the Info revision to wait on now (the held table's Info is put again as the stream reads
        past it, and the lock answers the newest); ``wake`` is set when it changes."""
        while not cancel.is_set():
            if wake is not None:
                wake.clear()         # before reading the revision: a put after it wakes the wait
            rev = revision() if revision is not None else op.info_revision
            try:
                return self.store.wait_operation(info.lock, info.table, rev,
                                                 after_revision=op.revision if rev == op.info_revision else 0,
                                                 timeout=min(self.recheck_interval, 5.0), stop=wake or self.stop)
            except OperationWaitTimeout:
                if self.stop.is_set():
                    raise CoordinationStopped("subtask stopping while a table waited for its redirect",
                                              **ctx) from None
            except EtcdUnavailable as e:
                self._wait_etcd(e, ctx)
        return None

    def mark_done(self, op: Operation, ctx: dict, ran: bool = True) -> None:
        """``ran=False``: the statements did not run (the operator skipped the DDL after its
        execution failed): the lock hands a resolution this table was to run to another table."""
        while True:
            try:
                self.store.mark_done(op, ran)
                return
            except StaleOperation as e:
                # Deleted: the lock resolved and was removed - our part is complete.  Replaced:
                # the master re-decided for a newer Info of ours (a recheck re-put): equally final
                # for this event, the newer Info's answer concerns the same statements.
                _log.warning("operation changed before it was marked done", error=str(e), **strs(ctx))
                return
            except EtcdUnavailable as e:
                self._wait_etcd(e, ctx)

    def pending_tables(self, lock: LockKey, owner: str) -> list[str]:
        """Shard tables of the lock whose DDL is not finished (for strict-mode errors)."""
        out = {owner: owner}
        try:
            ops = {str(o.table): o for o in self.store.list_operations(lock.task).items if o.lock == lock}
            for i in self.store.list_infos(lock.task).items:
                o = ops.get(str(i.table))
                if i.lock == lock and not i.departed and (o is None or not o.done):
                    out[str(i.table)] = f"{i.table} ({'; '.join(i.ddls)})"
        except EtcdUnavailable:
            pass
        return sorted(out.values())

    # ------------------------------------------------------------------ internals
    def _recheck_info(self, info: Info, rev: int, ctx: dict) -> int:
        """Make sure the master can still see our Info; re-put it when it is gone or was
        overwritten with something else.  Returns the revision to wait on."""
        try:
            cur = self.store.get_info(info.lock, info.table)
        except EtcdUnavailable as e:
            self._wait_etcd(e, ctx)
            return rev
        if cur is not None and cur.revision == rev:
            return rev
        if cur is not None and cur.to_dict() == info.to_dict():
            return cur.revision   # re-put by an earlier recheck of ours; same content
        _log.warning("shard DDL info missing or replaced while waiting; re-sending it",
                     info_revision=rev, found=bool(cur), **strs(ctx))
        return self.put_info(info, ctx)

    def _wait_etcd(self, e: Exception, ctx: dict) -> None:
        if self.on_etcd_down is not None:
            self.on_etcd_down(f"etcd unreachable ({e}); retrying", ctx)
        if self.stop.wait(1.0):
            raise CoordinationStopped("subtask stopping while etcd was unreachable", **ctx)
