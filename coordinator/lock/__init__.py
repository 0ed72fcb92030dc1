"""Optimistic shard-DDL lock engine (pure logic; docs/lock-algorithm.md).

    keeper = LockKeeper(schema_source=None)
    out = keeper.handle_info(info)            # LockChange: operation (+ others) to write, dropped
                                              # columns to record, resolved?
    out = keeper.mark_done(op)                # a worker's done mark
    out = keeper.unlock(lock_id, source, schema, table, "skip" | "exec")
    out = keeper.remove_table(lock_id, TableRef(...))
    view = keeper.force_remove(lock_id); keeper.remove_task(task); keeper.remove_sources(task, srcs)
    keeper.locks(task=None, sources=None) -> list[LockView]   # show-ddl-locks, with per-table reasons
    rebuilt = LockKeeper.rebuild(infos, operations, source_tables, dropped_columns, bad)

The master persists every LockChange with ``coordinator.etcdproto.Store`` (fenced) and calls
``keeper.drop_lock(key)`` after ``Store.remove_lock`` succeeded for a resolved/empty lock.
"""
from .errors import BadAction, LockError, LockNotFound, TableNotInLock, UnlockRefused
from .keeper import LockKeeper, LockOwner, LockView, LockChange, Rebuilt
from .lock import Answer, Lock, Member

__all__ = ["BadAction", "LockError", "LockNotFound", "TableNotInLock", "UnlockRefused",
           "LockKeeper", "LockOwner", "LockView", "LockChange", "Rebuilt", "Answer", "Lock", "Member"]
