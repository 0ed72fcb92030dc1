"""Typed errors of the worker's shard-DDL path; each carries lock ID, source, table, position."""
from __future__ import annotations

from coordinator.errors import ShardMergeError, TransientError


class ShardDDLError(ShardMergeError):
    """A sharded DDL the worker cannot complete."""


class StrictConflict(ShardDDLError):
    """strict-optimistic-shard-mode: a conflicting DDL fails the subtask at once.  ``tables``
    names the shard tables of the lock with pending (unfinished) DDLs."""

    def __init__(self, message: str, *, tables: tuple[str, ...] | list[str] = (), **ctx):
        super().__init__(message, tables=", ".join(tables), **ctx)
        self.tables = list(tables)


class UnsupportedShardDDL(ShardDDLError):
    """A statement optimistic mode cannot coordinate (RENAME TABLE, several tables at once)."""


class CoordinationStopped(ShardDDLError, TransientError):
    """The subtask is stopping while a DDL waited for its Operation; nothing was executed or
    checkpointed, the DDL is re-processed on the next start."""
