"""Reading and writing the layout on a real etcd: the helpers workers and the master call.

Two kinds of writers:
* workers write their own records unconditionally (Info, SourceTables, status, registration)
  and mark Operations done (guarded on the Operation's mod revision);
* the master writes everything else through **fenced** transactions: each carries the compare
  ``create_revision(leader key) == fence.revision``.  A deposed master (its lease expired, another
  one was elected) fails that compare and gets ``Fenced``; nothing it sends is applied.

Writes that depend on earlier state compare mod revisions (``put_operation``, ``mark_done``,
``remove_lock``).  Listings return the etcd revision they were read at, so a watch can continue
from ``revision + 1`` without a gap, plus the records that could not be decoded (``bad``) instead
of raising, so one garbage value never stops a rebuild.

The operations live with their record, one module per kind (``info.py``, ``operation.py``, ...,
each a mixin of ``Store``); this module keeps the plumbing they share: calls, fenced
transactions, decoding, listing, watches.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Protocol, TypeVar, overload

import etcd3
import grpc
from etcd3 import etcdrpc
from etcd3 import transactions as T
from etcd3 import utils as eu

from .binding import BindingOps, SourceBinding
from .binlog_skip import BinlogSkip, BinlogSkipOps
from .dropped_column import DroppedColumn, DroppedColumnOps
from .errors import BadKey, EtcdUnavailable, Fenced, GarbageRecord, RecordError
from .info import Info, InfoOps
from .keys import DEFAULT_PREFIX, Keys, LockKey, TableRef
from .leader import Fence, LeaderOps, LeaderRecord
from .lock_cleanup import LockCleanupOps
from .operation import DoneMark, Operation, OperationOps
from .record import MAX_TXN_OPS, R, Listing, Record
from .remnant import Remnant, RemnantOps
from .schema_op import SchemaOp, SchemaOpOps
from .source import SourceOps, SourceRecord
from .source_tables import SourceTables, SourceTablesOps
from .status import StatusOps, SubtaskStatus
from .task import TaskOps, TaskRecord
from .master_member import MasterOps, MasterRegistration
from .worker import WorkerOps, WorkerRegistration

_T = TypeVar("_T")


RECORD_TYPES: dict[str, type[Record]] = {c.KIND: c for c in (
    Info, Operation, DoneMark, SourceTables, DroppedColumn, LeaderRecord, SourceRecord, TaskRecord,
    WorkerRegistration, MasterRegistration, SourceBinding, SubtaskStatus, BinlogSkip, SchemaOp, Remnant)}


@dataclass
class RecordEvent:
    """One watch event, decoded.  ``record`` is None for deletes (``prev`` then holds the last
    value when available) and when decoding failed (``error`` set)."""
    kind: str
    key: str
    parts: dict
    deleted: bool
    revision: int
    record: Record | None = None
    prev: Record | None = None
    error: RecordError | None = None


# kinds whose records repeat their key's components (a mismatch is a garbage record)
_KEYED_KINDS = frozenset(("info", "operation", "source-tables", "status", "source", "task", "binding", "worker"))


# kinds whose records store no identity: it is filled from the key's components
_IDENTITY_FROM_KEY = frozenset(("dropped-column", "done", "remnant"))

_META_NAMES: dict[type, frozenset[str]] = {}


def _meta_names(cls: type[Record]) -> frozenset[str]:
    """The not-stored fields of ``cls`` (filled from the key's metadata), once per class."""
    names = _META_NAMES.get(cls)
    if names is None:
        names = _META_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get("meta"))
    return names


def _unavailable(e: Exception, what: str) -> EtcdUnavailable:
    return EtcdUnavailable(f"etcd did not answer while {what}: {type(e).__name__}: {e}")


# A transaction's outcome: (succeeded, header revision, raw responses).  etcd3 has no type
# information, so its compares, operations, leases, key-values and responses are ``Any`` here.
TxnResult = tuple[bool, int, Any]


class StoreCore(Protocol):
    """The plumbing the per-record operation mixins use (implemented by ``Store``).  The mixins
    subclass it only under TYPE_CHECKING (at run time their base is ``object``), so the record
    modules never import this one and there is no cycle.

    ``_decode``, ``_get`` and ``_list`` take the record class (``Info``, ``Operation``, ...) and
    return that type; ``Store`` also accepts a kind name (``"info"``), typed as plain ``Record``."""
    client: etcd3.Etcd3Client
    keys: Keys

    def _call(self, what: str, fn: Callable[..., _T], *a: Any, **kw: Any) -> _T: ...
    def _txn(self, what: str, compare: list, success: list, failure: list | None = None) -> TxnResult: ...
    def _fence_cmp(self, fence: Fence) -> Any: ...
    def _fenced(self, fence: Fence, what: str, compare: list, success: list,
                failure: list | None = None) -> TxnResult: ...
    def _fenced_chunks(self, fence: Fence, what: str, ops: list) -> int: ...
    def _decode(self, kind: type[R], key: bytes | str, raw: bytes, kv: Any = None,
                parts: dict | None = None) -> R: ...
    def _get(self, kind: type[R], key: str) -> tuple[R | None, int]: ...
    def _get_raw(self, key: str) -> tuple[Any, int]: ...
    def _list(self, kind: type[R], prefix: str) -> Listing[R]: ...
    def _list_many(self, reads: list[tuple[type[Record], str]]) -> list[Listing[Any]]: ...
    def _put(self, key: str, rec: Record, lease: Any = None) -> int: ...
    @staticmethod
    def _t(table: TableRef) -> tuple[str, str, str]: ...
    def list_dropped_columns(self, lock: LockKey | None = None) -> Listing[DroppedColumn]: ...


class Store(LeaderOps, InfoOps, OperationOps, SourceTablesOps, DroppedColumnOps, RemnantOps, LockCleanupOps,
            SourceOps, TaskOps, WorkerOps, MasterOps, BindingOps, StatusOps, BinlogSkipOps, SchemaOpOps):
    """All shardmerge records under ``prefix`` in one etcd (see docs/etcd-layout.md)."""

    def __init__(self, client: etcd3.Etcd3Client, prefix: str = DEFAULT_PREFIX) -> None:
        self.client = client
        self.keys = Keys(prefix)

    # ------------------------------------------------------------------ low level
    def _call(self, what: str, fn: Callable[..., _T], *a: Any, **kw: Any) -> _T:
        try:
            return fn(*a, **kw)
        except (etcd3.exceptions.ConnectionFailedError, etcd3.exceptions.ConnectionTimeoutError,
                etcd3.exceptions.NoServerAvailableError, grpc.RpcError) as e:
            raise _unavailable(e, what) from e
        except ValueError as e:   # etcd3's "Trying to use a failed node": the endpoint is quarantined
            if "failed node" not in str(e):
                raise
            raise _unavailable(e, what) from e

    def _txn(self, what: str, compare: list, success: list, failure: list | None = None) -> TxnResult:
        """Run one transaction; returns (succeeded, header revision, raw responses)."""
        req = etcdrpc.TxnRequest(compare=[c.build_message() for c in compare])
        self._add_requests(req.success, success)
        self._add_requests(req.failure, failure or [])
        resp = self._call(what, self.client.kvstub.Txn, req, self.client.timeout,
                          credentials=self.client.call_credentials, metadata=self.client.metadata)
        return resp.succeeded, resp.header.revision, resp.responses

    def _add_requests(self, into: Any, ops: list) -> None:
        """Append ``ops`` (etcd3 transaction ops) to a TxnRequest's ``success``/``failure``.
        Plain puts are filled in place: etcd3 builds each through a copied sub-message and an
        exception in its lease check, 8x the cost (a big lock's flush writes thousands)."""
        for op in ops:
            if type(op) is T.Put and op.lease is None and not op.prev_kv:
                put = into.add().request_put
                put.key = op.key.encode() if isinstance(op.key, str) else op.key
                put.value = op.value.encode() if isinstance(op.value, str) else op.value
            else:
                into.append(self.client._ops_to_requests([op])[0])

    def _fence_cmp(self, fence: Fence) -> Any:
        return T.Create(self.keys.leader()) == fence.revision

    def _fenced(self, fence: Fence, what: str, compare: list, success: list,
                failure: list | None = None) -> TxnResult:
        """Fenced txn.  On failure the leader key is read in the same txn: if the fence is what
        failed, raise ``Fenced``; else return (False, rev, responses[1:]) for the caller."""
        ok, rev, resps = self._txn(what, [self._fence_cmp(fence), *compare], success,
                                   [T.Get(self.keys.leader()), *(failure or [])])
        if ok:
            return True, rev, resps
        kvs = resps[0].response_range.kvs
        current = kvs[0].create_revision if kvs else 0
        if current != fence.revision:
            raise Fenced(f"master {fence.member!r} is no longer the leader (elected at revision "
                         f"{fence.revision}, leader key now created at {current or 'none'}); "
                         f"refused: {what}", etcd_key=self.keys.leader())
        return False, rev, resps[1:]

    def _fenced_chunks(self, fence: Fence, what: str, ops: list) -> int:
        """Apply ``ops`` in fenced transactions of at most MAX_TXN_OPS each (idempotent ops only:
        a failure midway leaves a prefix applied; re-running completes it)."""
        rev = 0
        for i in range(0, len(ops), MAX_TXN_OPS) or [0]:
            _, rev, _ = self._fenced(fence, what, [], ops[i:i + MAX_TXN_OPS])
        return rev

    @overload
    def _decode(self, kind: type[R], key: bytes | str, raw: bytes, kv: Any = None,
                parts: dict | None = None) -> R: ...
    @overload
    def _decode(self, kind: str, key: bytes | str, raw: bytes, kv: Any = None,
                parts: dict | None = None) -> Record: ...

    def _decode(self, kind: type[Record] | str, key: bytes | str, raw: bytes, kv: Any = None,
                parts: dict | None = None) -> Record:
        """Decode the value ``raw`` of ``key`` as a record of ``kind`` (its class or its name);
        ``kv`` (the etcd key-value) fills the not-stored fields (revision, ...); ``parts``: the
        key's components when the caller parsed it already (a watch event)."""
        name = kind if isinstance(kind, str) else kind.KIND
        key = key.decode() if isinstance(key, bytes) else key
        if parts is None:
            try:
                _, parts = self.keys.parse(key)
            except BadKey as e:
                raise GarbageRecord(f"foreign key under the {name} prefix: {e.message}", etcd_key=key,
                                    kind=name) from e
        cls = RECORD_TYPES[kind] if isinstance(kind, str) else kind
        meta: dict[str, Any] = {}
        if kv is not None:
            names = _meta_names(cls)
            if names:
                meta = {k: v for k, v in (("revision", kv.mod_revision), ("version", kv.version),
                                          ("create_revision", kv.create_revision)) if k in names}
        if name in _IDENTITY_FROM_KEY:
            meta.update(parts)
        rec = cls.decode(key, raw, parts=parts, **meta)
        if name in _KEYED_KINDS:
            for n, v in parts.items():
                if getattr(rec, n, v) != v:
                    raise GarbageRecord(f"{name} record says {n}={getattr(rec, n)!r} but its key says "
                                        f"{v!r}", etcd_key=key, kind=name, parts=parts)
        return rec

    @overload
    def _get(self, kind: type[R], key: str) -> tuple[R | None, int]: ...
    @overload
    def _get(self, kind: str, key: str) -> tuple[Record | None, int]: ...

    def _get(self, kind: type[Record] | str, key: str) -> tuple[Record | None, int]:
        resp = self._call(f"reading {key}", self.client.get_response, key)
        if not resp.kvs:
            return None, resp.header.revision
        kv = resp.kvs[0]
        return self._decode(kind, kv.key, kv.value, kv), resp.header.revision

    @overload
    def _list(self, kind: type[R], prefix: str) -> Listing[R]: ...
    @overload
    def _list(self, kind: str, prefix: str) -> Listing[Record]: ...

    def _list(self, kind: type[Record] | str, prefix: str) -> Listing[Any]:
        resp = self._call(f"listing {prefix}", self.client.get_prefix_response, prefix)
        return self._listing(kind, resp.kvs, resp.header.revision)

    def _listing(self, kind: type[Record] | str, kvs: Any, revision: int) -> Listing[Any]:
        """Decode listed key-values; the undecodable ones go to ``bad`` (never raised)."""
        items: list[Record] = []
        bad: list[RecordError] = []
        for kv in kvs:
            try:
                items.append(self._decode(kind, kv.key, kv.value, kv))
            except RecordError as e:
                bad.append(e)
        return Listing(items, revision, bad)

    def _list_many(self, reads: list[tuple[type[Record], str]]) -> list[Listing[Any]]:
        """``_list`` of several (record class, prefix) pairs in ONE transaction: one snapshot,
        so records that refer to each other (an Operation and its done mark) agree."""
        _, rev, resps = self._txn(f"listing {', '.join(p for _, p in reads)}", [],
                                  [T.Get(p, eu.prefix_range_end(eu.to_bytes(p))) for _, p in reads])
        return [self._listing(kind, resp.response_range.kvs, rev) for (kind, _), resp in zip(reads, resps)]

    def _put(self, key: str, rec: Record, lease: Any = None) -> int:
        resp = self._call(f"writing {key}", self.client.put, key, rec.encode(), lease=lease)
        return resp.header.revision

    def revision(self) -> int:
        """Current etcd revision (a read of the leader key, which always exists or not cheaply)."""
        return self._call("reading revision", self.client.get_response, self.keys.leader()).header.revision

    # ------------------------------------------------------------------ watches
    def watch(self, kind: str, start_revision: int, callback: Callable[[RecordEvent | Exception], None],
              sub: Iterable[str] = (), deletes: bool = True, prev: bool = True, many: bool = False) -> int:
        """Watch all ``kind`` records (optionally under components ``sub``) from
        ``start_revision``; ``callback`` gets one decoded ``RecordEvent`` per event (with
        ``many``: a list of them per etcd watch response, one hand-over for hundreds of events),
        or an exception when the watch breaks (then re-list and watch again).  ``deletes=False``
        has etcd leave out delete events and ``prev=False`` the previous values
        (``RecordEvent.prev``): a big lock's removal deletes thousands of keys, and a watch stream
        that falls behind is served by etcd in 100 ms rounds.  Returns the watch id (for
        ``client.cancel_watch``)."""
        prefix = self.keys.key(kind, *sub)

        def on_response(resp: Any) -> None:
            if isinstance(resp, Exception):
                callback(resp)
                return
            out = [self._event(kind, ev) for ev in resp.events]
            if many:
                if out:
                    callback(out)   # type: ignore[arg-type]
                return
            for rev in out:
                callback(rev)

        return self._call(f"watching {prefix}", self.client.add_watch_prefix_callback, prefix,
                          on_response, start_revision=start_revision, prev_kv=prev,
                          filters=None if deletes else [etcdrpc.WatchCreateRequest.NODELETE])

    def _event(self, kind: str, ev: Any) -> RecordEvent:
        raw = ev._event.kv
        key = raw.key.decode("utf-8", "replace")
        try:
            _, parts = self.keys.parse(key)
            known: dict | None = parts
        except BadKey:
            parts, known = {}, None   # _decode names the foreign key in its error
        deleted = isinstance(ev, etcd3.events.DeleteEvent)
        out = RecordEvent(kind, key, parts, deleted, raw.mod_revision)
        try:
            if deleted:
                if ev._event.HasField("prev_kv") and ev._event.prev_kv.value:
                    out.prev = self._decode(kind, key, ev._event.prev_kv.value, ev._event.prev_kv, known)
            else:
                out.record = self._decode(kind, key, raw.value, raw, known)
        except RecordError as e:
            out.error = e
        return out

    def _get_raw(self, key: str) -> tuple[Any, int]:
        resp = self._call(f"reading {key}", self.client.get_response, key)
        return (resp.kvs[0] if resp.kvs else None), resp.header.revision

    @staticmethod
    def _t(table: TableRef) -> tuple[str, str, str]:
        return table.source, table.schema, table.table

    def iter_kinds(self) -> Iterator[str]:
        return iter(RECORD_TYPES)
