"""Why a syncer stops: each error names the task, source and binlog position (see
``worker.process`` for which are retried and which stop the subtask in Error)."""
from __future__ import annotations

from coordinator.errors import ShardMergeError


class SyncError(ShardMergeError):
    """The syncer cannot continue; names task, source and binlog position."""


class ReplicationKeyCollision(SyncError):
    """A replicated row collided with another shard's row on the target's key
    (:class:`worker.errors.KeyCollision`): a retry cannot fix it, the subtask stops in Error."""


class DownstreamDDLRejected(SyncError):
    """The downstream refused a DDL of a non-sharded table with a non-transient error (syntax,
    data that does not fit, an unsupported ALTER): retrying cannot fix it; the subtask stops in
    Error until the target is fixed (``resume-task``) or the statement skipped (``binlog skip``)."""


class UpstreamChanged(SyncError):
    """The upstream's binlog at the checkpoint is not the one the checkpoint was taken on (a
    failover to another server, RESET MASTER, purged files): file positions no longer mean the
    same changes, so the subtask stops instead of skipping or repeating them."""


class StartUnavailable(SyncError):
    """The position a subtask must read from is not in the upstream's binlog any more (purged
    transactions, a purged file) or is not a position of this server's flavor: a retry cannot
    bring it back, so the subtask stops with what to do instead of retrying forever."""


class UnreplicableDDL(ShardMergeError):
    """A DDL the direct path cannot replicate downstream (RENAME TABLE of a merged table, a
    statement naming a filtered table); retried until the operator routes, allows or skips it.
    Not the schema library's ``coordinator.schema.UnsupportedDDL`` (a statement it does not
    model), which is a ``SchemaError`` without the source / table / position context."""


class SyncPaused(ShardMergeError):
    """The DDL handler asked to stop before a DDL; a restart handles the same DDL again."""
