"""Persisting the lock engine's decisions: ``coordinator.lock.LockKeeper`` <-> etcd.

Every engine call returns an ``LockChange``; ``_persist`` writes it with the leader's fence
(Operations guarded by the revision of the Info they answer, dropped-column records, removed
tables) and removes a resolved or empty lock in one guarded transaction before forgetting it.
Only the optimist thread calls into this class.
"""
from __future__ import annotations

import functools
import time
from typing import Callable

from coordinator.etcdproto import (DoneMark, Fence, Info, Listing, LockKey, Operation, RecordError, SourceTables, Store, TableRef)
from coordinator.lock import LockError, LockKeeper, LockView, LockChange
from protos import master_pb2 as pb

from coordinator.schema import SchemaError

from . import metrics
from .checkpoint_schema import CheckpointSchemaSource, DownstreamUnknown, DownstreamUnreachable
from .errors import RequestError
from .schema_check import check as check_schema
from .write_batch import InFlight, WriteBatch, log_put

_ALL = 1 << 62   # "every revision": an unguarded lock removal (force-remove)


class Locks:
    def __init__(self, store: Store, fence: Fence, log, on_write_failed: Callable[[], None] = lambda: None):
        self.store, self.fence, self.log = store, fence, log
        self.schema_source = CheckpointSchemaSource(store)
        self.keeper = LockKeeper(schema_source=self.schema_source)
        self.batch: WriteBatch | None = None    # set between begin() and flush(): a burst of events
        self.writing = InFlight(on_write_failed)  # earlier bursts' flushes, still being written

    # ------------------------------------------------------------------ bursts (write_batch.py)
    def begin(self) -> None:
        """Collect the writes of the following events until ``flush``."""
        if self.batch is None:
            self.batch = WriteBatch(self.store, self.fence, self.log, settle=self.writing.wait)

    def flush(self) -> None:
        """Hand the burst's writes to the flusher thread and return: the next burst is decided
        while they are written (``InFlight``)."""
        batch, self.batch = self.batch, None
        if batch:
            self.writing.submit(batch.flush, batch.keys(), barrier=batch.clears_prefixes())

    def settle(self) -> None:
        """Wait until every handed-over write is in etcd; raise the first write's error (``Fenced``,
        etcd down).  Before anything that reads or writes etcd outside a burst."""
        self.writing.wait()

    def _direct(self) -> None:
        """Before a write that must follow the pending ones (lock removal, a table leaving)."""
        self.writing.wait()
        if self.batch:
            self.batch.flush()

    # ------------------------------------------------------------------ rebuild
    def rebuild(self, sts: Listing, infos: Listing, ops: Listing, dcs: Listing, rems: Listing | None = None) -> dict:
        """Replay etcd into a fresh keeper and re-persist what the replay decided.  Stored
        Operations that already carry the same answer are left alone, so a restarted master
        writes no duplicate Operation and a done one is never re-issued (docs/lock-algorithm.md, rebuild)."""
        bad = [*sts.bad, *infos.bad, *ops.bad, *dcs.bad, *(rems.bad if rems is not None else [])]
        for e in bad:
            metrics.BAD_RECORDS.inc()
            self.log.error("unreadable record; its lock is marked error", etcd_key=e.etcd_key, error=e.message)
        r = LockKeeper.rebuild(infos.items, ops.items, sts.items, dcs.items, bad=bad,
                               schema_source=self.schema_source, remnants=rems.items if rems is not None else ())
        self.keeper = r.keeper
        for err in r.errors:
            self.log.error("rebuild problem", error=err)
        stored = {(op.lock, op.table): op for op in ops.items}
        written = kept = 0
        for op in r.operations:
            cur = stored.get((op.lock, op.table))
            if cur is not None and cur.same_answer(op):
                kept += 1
                continue
            res = self.store.put_operation(self.fence, op, skip_done=True)
            written += res.put
            self.log.info("operation re-written at rebuild" if res.put else "operation not re-written at rebuild",
                          lock_id=op.lock_id, source=op.source, table=f"{op.up_schema}.{op.up_table}",
                          stage=op.stage.value, info_revision=op.info_revision, reason=res.reason)
        for lk, t, col, stage in r.dropped_puts:
            self.store.put_dropped_columns(self.fence, lk, t, [col], stage)
        for lk, col in r.dropped_deletes:
            self.store.delete_dropped_column(self.fence, lk, col)
        for lk, t in r.removed_tables:     # left while no leader watched: as remove_table
            self.store.depart_table(self.fence, lk, t, self.keeper.departed_json(lk, t))
        removed = 0
        for lk in r.resolved:
            found = self.keeper.find(lk)
            removed += self._remove(lk, found.handled_revision if found else 0)
        return {"locks": len(self.keeper.lock_keys()), "infos": len(infos.items), "operations_rewritten": written,
                "operations_kept": kept, "resolved_removed": removed, "bad_records": len(bad)}

    # ------------------------------------------------------------------ events
    def on_info(self, info: Info) -> None:
        t0 = time.monotonic()
        if not self.keeper.targets(info.lock):
            # the SourceTables watch may lag behind the Info watch: read them directly
            for st in self.store.list_source_tables(info.task).items:
                for o in self.keeper.update_source_tables(st):
                    self._persist(o)
        out = self.keeper.handle_info(info)
        if out.ignored:
            self.log.info("info ignored", lock_id=info.lock.id, source=info.source,
                          table=f"{info.up_schema}.{info.up_table}", reason=out.ignored)
        self._persist(out, started=t0)
        if out.operation is not None:
            _infos_counter(out.operation.stage.value).inc()

    def on_done(self, op: Operation | DoneMark) -> None:
        out = self.keeper.mark_done(op)
        if out.ignored:
            self.log.info("done mark ignored", lock_id=op.lock_id, source=op.source,
                          table=f"{op.up_schema}.{op.up_table}", reason=out.ignored)
        self._persist(out)

    def on_source_tables(self, st: SourceTables, deleted: bool) -> None:
        for out in self.keeper.update_source_tables(st, deleted=deleted):
            self._persist(out)

    def bad_record(self, e: RecordError) -> None:
        p = e.parts
        self.log.error("unreadable record", etcd_key=e.etcd_key, error=e.message)
        if {"task", "down_schema", "down_table"} <= set(p):
            t = TableRef(p["source"], p["up_schema"], p["up_table"]) if "up_table" in p else None
            self.keeper.mark_error(LockKey(p["task"], p["down_schema"], p["down_table"]),
                                   f"unreadable record {e.etcd_key}: {e.message}", t)

    # ------------------------------------------------------------------ persisting
    def _persist(self, out: LockChange, started: float | None = None) -> dict:
        """Write ``out`` (into the burst's batch when one is open); returns ``{"operation":
        PutResult of out.operation or None, "removed": True/False when the lock was resolved
        (removal done / deferred), else None}`` so operator commands can report what really
        happened.  ``started``: when the Info arrived (operation latency metric)."""
        lk = out.lock      # None only for a call that changed nothing (no table or column changes)
        done: dict = {"operation": None, "removed": None}
        if self.batch is not None:
            for op in out.operations:
                self.batch.put_operation(op, started if op is out.operation else None)
            if lk is not None:
                for t, cols, stage in out.dropped_puts:
                    self.batch.put_dropped(lk, t, cols, stage)
                for col in out.dropped_deletes:
                    self.batch.delete_dropped(lk, col)
            if out.removed_tables or (lk is not None and (out.resolved or out.empty)):
                self._direct()
        else:
            self._write_now(out, done, started)
        if lk is None:
            return done
        for t in out.removed_tables:
            self.store.depart_table(self.fence, lk, t, out.departed.get(t))
            self.log.info("table removed from lock", lock_id=lk.id, source=t.source, table=f"{t.schema}.{t.table}")
        if out.resolved or out.empty:
            done["removed"] = bool(self._remove(lk, out.handled_revision))
        return done

    def _write_now(self, out: LockChange, done: dict, started: float | None) -> None:
        self.writing.wait()
        lk = out.lock
        for op in out.operations:
            res = self.store.put_operation(self.fence, op)
            if op is out.operation:
                done["operation"] = res
            log_put(self.log, op, res)
            if res.put and started is not None and op is out.operation:
                metrics.OPERATION_LATENCY.observe(time.monotonic() - started)
        if lk is None:
            return
        for t, cols, stage in out.dropped_puts:
            self.store.put_dropped_columns(self.fence, lk, t, cols, stage)
        for col in out.dropped_deletes:
            self.store.delete_dropped_column(self.fence, lk, col)

    def _remove(self, lk: LockKey, handled_revision: int) -> int:
        self._write_remnants(lk)
        if self.store.remove_lock(self.fence, lk, handled_revision):
            self.keeper.drop_lock(lk)
            self.log.info("lock resolved and removed", lock_id=lk.id)
            return 1
        self.log.info("lock removal deferred: a newer Info arrived", lock_id=lk.id)
        return 0

    def _write_remnants(self, lk: LockKey) -> None:
        """Before a lock's records go: the tables that left it stay known to the target's next
        lock (``Remnant``)."""
        puts, deletes = self.keeper.remnant_writes(lk)
        if puts or deletes:
            self.store.put_remnants(self.fence, lk, puts, deletes)
            self.log.info("remnants recorded", lock_id=lk.id, tables=sorted(str(r.table) for r in puts),
                          forgotten=sorted(str(t) for t in deletes))

    # ------------------------------------------------------------------ views and operator exits
    def states(self) -> list[str]:
        return [v.state for v in self.keeper.locks()]

    def views(self) -> list[LockView]:
        return self.keeper.locks()

    def show(self, task: str, sources: list[str]) -> tuple[list, str]:
        return [_to_pb(v) for v in self.keeper.locks(task or None, sources or None)], ""

    def unlock(self, lock: LockKey, lock_id: str, table: TableRef, action: str) -> str:
        if not table.source or not table.schema or not table.table:
            raise RequestError("unlock needs the shard table: -s SOURCE -d DATABASE -t TABLE", lock_id=lock_id)
        try:
            out = self.keeper.unlock(lock, table.source, table.schema, table.table, action)
        except LockError as e:
            raise RequestError(str(e)) from None
        op = out.operation
        res = self._persist(out)["operation"]
        if op is None or res is None or not res.put:
            why = {"info-gone": "the table's DDL Info is gone (the table left the lock or its task was stopped)",
                   "done": "the answer was already done"}.get(
                res.reason if res else "", "a newer DDL from that table arrived after this unlock was decided "
                                            "(its Info changed), so this answer would be obsolete")
            self.log.warning("operator unlock not written", lock_id=lock_id, source=table.source,
                             table=f"{table.schema}.{table.table}", action=action,
                             reason=res.reason if res else "no operation")
            raise RequestError(f"unlock of {table} in lock {lock_id} was NOT applied: {why}. Look at "
                               f"`shardctl shard-ddl-lock {lock.task}` again and unlock the table's new DDL "
                               "if it is blocked", lock_id=lock_id, table=str(table))
        self.log.info("lock unlocked by operator", lock_id=lock_id, source=table.source,
                      table=f"{table.schema}.{table.table}", action=action, operation_revision=res.revision)
        return (f"{table} of lock {lock_id} unlocked with {action}: its worker "
                + (f"executes {op.ddls}" if op.ddls else "executes nothing") + " and continues")

    def remove_table(self, lock: LockKey, lock_id: str, table: TableRef) -> str:
        try:
            out = self.keeper.remove_table(lock, table)
        except LockError as e:
            raise RequestError(str(e)) from None
        removed = self._persist(out)["removed"]
        msg = f"{table} removed from lock {lock_id}"
        if removed:
            msg += "; the lock is now resolved and removed"
        elif removed is False:
            msg += ("; the lock would be resolved, but its removal was deferred: a newer DDL from one of its "
                    "tables arrived (see `shardctl shard-ddl-lock`)")
        return msg

    def force_remove(self, lock: LockKey, lock_id: str, no_check: bool = False) -> str:
        """Forget a whole lock and delete its records.  Unless ``no_check``, first compare what
        the lock says the downstream table holds (``LockKeeper.expectation``: the schemas whose
        DDLs are done, not pending conflicting DDLs) with the table's ``SHOW CREATE TABLE``, and
        refuse when they differ or the downstream cannot be read: once the lock is gone nothing
        remembers the difference."""
        try:
            exp = self.keeper.expectation(lock)
        except LockError as e:
            raise RequestError(str(e)) from None
        checked = "schema check skipped (--no-check)"
        if not no_check:
            checked = self._check_downstream(lock, lock_id, exp)
        self._write_remnants(lock)
        if not self.store.remove_lock(self.fence, lock, _ALL):
            raise RequestError(f"lock {lock_id} was not removed: etcd refused the delete; retry", lock_id=lock_id)
        view = self.keeper.force_remove(lock)
        msg = f"lock {lock_id} removed (was {view.state}, {len(view.synced) + len(view.unsynced)} tables); {checked}"
        if self.store.get_task(lock.task) is not None and view.waiting:
            msg += ("\ntask is still running: workers of " + ", ".join(t for t, _ in view.waiting[:5])
                    + " may wait for an answer; they send their DDL again within 30 s (at once: "
                    "`shardctl pause-task -s SOURCE TASK` then `resume-task -s SOURCE TASK`)")
        self.log.warning("lock force-removed by operator", lock_id=lock_id, state=view.state, no_check=no_check)
        return msg

    def _check_downstream(self, lock: LockKey, lock_id: str, exp) -> str:
        """The schema check of ``force_remove``: returns the agreement text or raises RequestError."""
        again = "add --no-check to remove the lock anyway"
        try:
            addr, down = self.schema_source.downstream_table(lock)
        except DownstreamUnknown as e:
            raise RequestError(f"force-remove of lock {lock_id} refused: {e.message}, so the lock's schema cannot "
                               f"be compared with it. `shardctl stop-task {lock.task}` removes a stopped task's "
                               f"locks; or {again}", lock_id=lock_id) from None
        except DownstreamUnreachable as e:
            raise RequestError(f"force-remove of lock {lock_id} refused: cannot read the downstream table at "
                               f"{e.address} to compare it with the lock's schema: {e.error}. Fix the downstream "
                               f"connection, or {again}", lock_id=lock_id) from None
        except SchemaError as e:
            raise RequestError(f"force-remove of lock {lock_id} refused: the downstream table's SHOW CREATE TABLE "
                               f"cannot be parsed ({e}); {again}", lock_id=lock_id) from None
        res = check_schema(exp, down, addr)
        if not res.agree:
            self.log.warning("force-remove refused: downstream schema differs", lock_id=lock_id, address=addr)
            raise RequestError(f"force-remove of lock {lock_id} refused: {res.text}\nReconcile the downstream "
                               f"table (or the shards) first, or {again}", lock_id=lock_id)
        return res.text

    def remove_task(self, task: str, sources: list[str] | None) -> int:
        if sources is None:
            keys = self.keeper.remove_task(task)
            self.store.delete_task(self.fence, task)
            self.log.info("task shard DDL metadata removed", task=task, locks=len(keys))
            return len(keys)
        outs = self.keeper.remove_sources(task, sources)
        for out in outs:
            self._persist(out)
        self.store.delete_task(self.fence, task, sources)
        return len({o.lock for o in outs})


@functools.lru_cache(maxsize=None)
def _infos_counter(stage: str):
    """The Infos-handled counter of one stage (looked up once: ``labels`` takes a lock per call)."""
    return metrics.INFOS.labels(stage=stage)


def _to_pb(v: LockView) -> pb.DDLLock:
    return pb.DDLLock(ID=v.ID, task=v.task, mode=v.mode, owner=v.owner, DDLs=v.DDLs, synced=v.synced,
                      unsynced=v.unsynced, state=v.state, error=v.error,
                      waiting=[pb.TableWait(table=t, waiting_for=r) for t, r in v.waiting],
                      owners=[pb.LockOwner(owner=o.table, DDLs=o.DDLs, state=o.state, waiting_for=o.waiting_for)
                              for o in v.owners])
