"""Errors the worker's two data paths share: the full load (``worker.load``) and the binlog apply
(``worker.sync``)."""
from __future__ import annotations

from coordinator.errors import ShardMergeError


class KeyCollision(ShardMergeError):
    """A row has the primary/unique key of a row already in the merged target (another shard's, or
    data not written by this task): a retry cannot fix it.  The full load names source, shard
    table, chunk and snapshot position (``worker.load.chunk``); the apply names source, table and
    binlog position (``worker.sync.apply``; the syncer stops on it with
    ``worker.sync.errors.ReplicationKeyCollision``)."""
