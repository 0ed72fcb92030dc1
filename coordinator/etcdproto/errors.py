"""Typed errors of the etcd protocol.

A record that cannot be read names its key (and what the key decodes to), so rebuild can mark
the one lock it belongs to as ``error`` instead of failing the whole master.
A master write refused because this master is no longer the leader raises ``Fenced``.
"""
from __future__ import annotations

from coordinator.errors import ShardMergeError, TransientError


class EtcdProtoError(ShardMergeError):
    """Base of every etcd-protocol error; ``etcd_key`` names the key concerned (or "")."""

    @property
    def etcd_key(self) -> str:
        return self.context.get("etcd_key", "")


class BadKey(EtcdProtoError):
    """A key or key component that does not fit the layout (empty name, wrong arity)."""


class RecordError(EtcdProtoError):
    """A stored value that cannot be decoded.  ``etcd_key`` is the full key; ``parts`` are the
    decoded key components (``{}`` when the key itself is foreign) so callers can attribute the
    record to a task / lock / table without the value."""

    def __init__(self, message: str, *, etcd_key: str, kind: str = "", parts: dict | None = None,
                 **ctx: object):
        super().__init__(message, etcd_key=etcd_key, **ctx)
        self.kind = kind
        self.parts = dict(parts or {})


class GarbageRecord(RecordError):
    """Value is not JSON, not an object, lacks the ``v`` field, or has wrong/missing fields."""


class UnknownVersion(RecordError):
    """Value carries a format version this release cannot read (written by a newer release)."""


class NotLeader(EtcdProtoError):
    """A fenced master write was attempted by a process that is not (or no longer) the leader."""


class Fenced(NotLeader):
    """The leader key's create-revision no longer matches the one this master was elected with:
    another master took over (or the lease expired).  Nothing was written."""


class StaleOperation(EtcdProtoError):
    """The Operation a worker wants to mark done was replaced by a different one meanwhile
    (new info revision, new stage or DDLs); the worker must handle the current one instead."""


class OperationWaitTimeout(EtcdProtoError, TransientError):
    """No matching Operation arrived in time; the worker may keep waiting (its Info stays)."""


class EtcdUnavailable(TransientError, EtcdProtoError):
    """etcd did not answer (connection refused / timeout); retry later."""
