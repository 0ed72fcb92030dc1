"""Typed errors of the lock engine (operator requests that cannot be honoured)."""
from __future__ import annotations

from coordinator.errors import ShardMergeError


class LockError(ShardMergeError):
    """Base of lock-engine errors; context carries lock_id / table."""


class LockNotFound(LockError):
    """No lock with that ID (it may have resolved meanwhile)."""


class TableNotInLock(LockError):
    """The named shard table is not a member of the lock."""


class UnlockRefused(LockError):
    """The table is not in a stage that unlock applies to (it is not blocked)."""


class BadAction(LockError):
    """An unlock action other than exec/skip."""
