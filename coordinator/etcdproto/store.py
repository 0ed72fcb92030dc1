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
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import etcd3
import grpc
from etcd3 import etcdrpc
from etcd3 import transactions as T
from etcd3 import utils as eu

from .errors import (BadKey, EtcdUnavailable, Fenced, GarbageRecord, OperationWaitTimeout,
                     RecordError, StaleOperation)
from .keys import DEFAULT_PREFIX, Keys, LockKey, TableRef
from .records import BinlogSkip, SchemaOp
from .records import (RECORD_TYPES, DroppedColumn, DroppedStage, Info, LeaderRecord, Operation,
                      Record, SourceBinding, SourceRecord, SourceTables, SubtaskStatus,
                      TaskRecord, WorkerRegistration)

MAX_TXN_OPS = 120  # etcd's default --max-txn-ops is 128; leave room for compares


@dataclass(frozen=True)
class Fence:
    """Proof of leadership: the leader key's create revision at election.  Pass it to every
    master write.  ``lease`` is the etcd lease keeping the leader key alive (refresh it)."""
    revision: int
    member: str
    lease: object = None


@dataclass
class Listing:
    """Records of one kind read in one request: ``revision`` is the etcd revision of the read;
    ``bad`` holds the undecodable ones (``RecordError`` naming the key and its components)."""
    items: list
    revision: int
    bad: list[RecordError] = field(default_factory=list)


@dataclass
class PutResult:
    put: bool
    revision: int
    reason: str = ""   # why not put: "done" (already done for this Info), "newer-info", "info-gone"


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


def _unavailable(e: Exception, what: str) -> EtcdUnavailable:
    return EtcdUnavailable(f"etcd did not answer while {what}: {type(e).__name__}: {e}")


class Store:
    """All shardmerge records under ``prefix`` in one etcd (see docs/etcd-layout.md)."""

    def __init__(self, client: etcd3.Etcd3Client, prefix: str = DEFAULT_PREFIX):
        self.client = client
        self.keys = Keys(prefix)

    # ------------------------------------------------------------------ low level
    def _call(self, what: str, fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except (etcd3.exceptions.ConnectionFailedError, etcd3.exceptions.ConnectionTimeoutError,
                etcd3.exceptions.NoServerAvailableError, grpc.RpcError) as e:
            raise _unavailable(e, what) from e
        except ValueError as e:   # etcd3's "Trying to use a failed node": the endpoint is quarantined
            if "failed node" not in str(e):
                raise
            raise _unavailable(e, what) from e

    def _txn(self, what: str, compare: list, success: list, failure: list | None = None):
        """Run one transaction; returns (succeeded, header revision, raw responses)."""
        req = etcdrpc.TxnRequest(compare=[c.build_message() for c in compare],
                                 success=self.client._ops_to_requests(success),
                                 failure=self.client._ops_to_requests(failure or []))
        resp = self._call(what, self.client.kvstub.Txn, req, self.client.timeout,
                          credentials=self.client.call_credentials, metadata=self.client.metadata)
        return resp.succeeded, resp.header.revision, resp.responses

    def _fence_cmp(self, fence: Fence):
        return T.Create(self.keys.leader()) == fence.revision

    def _fenced(self, fence: Fence, what: str, compare: list, success: list, failure: list | None = None):
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

    def _decode(self, kind: str, key: bytes | str, raw: bytes, kv=None) -> Record:
        key = key.decode() if isinstance(key, bytes) else key
        try:
            _, parts = self.keys.parse(key)
        except BadKey as e:
            raise GarbageRecord(f"foreign key under the {kind} prefix: {e.message}", etcd_key=key, kind=kind) from e
        cls = RECORD_TYPES[kind]
        meta = {}
        if kv is not None:
            meta = {"revision": kv.mod_revision, "version": kv.version, "create_revision": kv.create_revision}
        names = {f.name for f in dataclasses.fields(cls) if f.metadata.get("meta")}
        meta = {k: v for k, v in meta.items() if k in names}
        if kind == "dropped-column":
            meta.update(parts)
        rec = cls.decode(key, raw, parts=parts, **meta)
        if kind in ("info", "operation", "source-tables", "status", "source", "task", "binding", "worker"):
            for n, v in parts.items():
                if getattr(rec, n, v) != v:
                    raise GarbageRecord(f"{kind} record says {n}={getattr(rec, n)!r} but its key says "
                                        f"{v!r}", etcd_key=key, kind=kind, parts=parts)
        return rec

    def _get(self, kind: str, key: str):
        resp = self._call(f"reading {key}", self.client.get_response, key)
        if not resp.kvs:
            return None, resp.header.revision
        kv = resp.kvs[0]
        return self._decode(kind, kv.key, kv.value, kv), resp.header.revision

    def _list(self, kind: str, prefix: str) -> Listing:
        resp = self._call(f"listing {prefix}", self.client.get_prefix_response, prefix)
        items, bad = [], []
        for kv in resp.kvs:
            try:
                items.append(self._decode(kind, kv.key, kv.value, kv))
            except RecordError as e:
                bad.append(e)
        return Listing(items, resp.header.revision, bad)

    def _put(self, key: str, rec: Record, lease=None) -> int:
        resp = self._call(f"writing {key}", self.client.put, key, rec.encode(), lease=lease)
        return resp.header.revision

    def revision(self) -> int:
        """Current etcd revision (a read of the leader key, which always exists or not cheaply)."""
        return self._call("reading revision", self.client.get_response, self.keys.leader()).header.revision

    # ------------------------------------------------------------------ leader election
    def campaign(self, member: str, addr: str = "", ttl: int = 10) -> Fence | None:
        """Try once to become leader: create the leader key on a new lease if it is absent.
        Returns the ``Fence`` (leader key's create revision) or None if someone else leads.
        The caller refreshes ``fence.lease`` more often than ``ttl`` seconds."""
        lease = self._call("granting leader lease", self.client.lease, ttl)
        key = self.keys.leader()
        ok, rev, _ = self._txn("campaigning", [T.Create(key) == 0],
                               [T.Put(key, LeaderRecord(member, addr).encode(), lease=lease.id)])
        if not ok:
            self._call("revoking unused lease", lease.revoke)
            return None
        return Fence(rev, member, lease)

    def leader(self) -> LeaderRecord | None:
        resp = self._call("reading leader", self.client.get_response, self.keys.leader())
        if not resp.kvs:
            return None
        kv = resp.kvs[0]
        rec = LeaderRecord.decode(self.keys.leader(), kv.value, create_revision=kv.create_revision)
        return rec

    def check_fence(self, fence: Fence) -> None:
        """Raise ``Fenced`` unless ``fence`` is still the current leadership."""
        self._fenced(fence, "checking leadership", [], [])

    def resign(self, fence: Fence) -> bool:
        """Delete the leader key if it is still ours; revoke the lease."""
        ok, _, _ = self._txn("resigning", [self._fence_cmp(fence)], [T.Delete(self.keys.leader())])
        if fence.lease is not None:
            try:
                self._call("revoking leader lease", fence.lease.revoke)
            except EtcdUnavailable:
                pass
        return ok

    # ------------------------------------------------------------------ worker side
    def put_source_tables(self, st: SourceTables) -> int:
        return self._put(self.keys.key("source-tables", st.task, st.source), st)

    def get_source_tables(self, task: str, source: str) -> SourceTables | None:
        return self._get("source-tables", self.keys.key("source-tables", task, source))[0]

    def put_info(self, info: Info) -> int:
        """PUT the Info (overwrites the table's previous one); returns its revision, which the
        answering Operation carries as ``info_revision``."""
        key = self.keys.info(info.task, info.down_schema, info.down_table, info.source,
                             info.up_schema, info.up_table)
        rev = self._put(key, info)
        info.revision = rev
        return rev

    def get_info(self, lock: LockKey, table: TableRef) -> Info | None:
        return self._get("info", self.keys.info(lock.task, lock.down_schema, lock.down_table,
                                                table.source, table.schema, table.table))[0]

    def operation_key(self, lock: LockKey, table: TableRef) -> str:
        return self.keys.operation(lock.task, lock.down_schema, lock.down_table,
                                   table.source, table.schema, table.table)

    def get_operation(self, lock: LockKey, table: TableRef) -> Operation | None:
        return self._get("operation", self.operation_key(lock, table))[0]

    def wait_operation(self, lock: LockKey, table: TableRef, info_revision: int, *,
                       after_revision: int = 0, timeout: float | None = None,
                       stop: threading.Event | None = None) -> Operation:
        """Block until the table's Operation answers ``info_revision`` with a mod revision above
        ``after_revision`` and is not done; return it.  Operations for other (older) Infos are
        ignored (DM pain #7).  After a ``detected`` answer call again with
        ``after_revision=op.revision`` to wait for the next decision; in skip-and-wait, wait for
        a ``resolved`` Operation the same way.  Raises ``OperationWaitTimeout``."""
        key = self.operation_key(lock, table)
        deadline = None if timeout is None else time.monotonic() + timeout

        def matches(op: Operation | None) -> bool:
            return (op is not None and op.info_revision == info_revision
                    and op.revision > after_revision and not op.done)

        while True:
            op, rev = self._get("operation", key)
            if matches(op):
                return op
            q: queue.Queue = queue.Queue()
            watch_id = self._call(f"watching {key}", self.client.add_watch_callback, key, q.put,
                                  start_revision=rev + 1)
            try:
                while True:
                    if stop is not None and stop.is_set():
                        raise OperationWaitTimeout("stopped while waiting for an Operation",
                                                   etcd_key=key, info_revision=info_revision)
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise OperationWaitTimeout(
                            f"no Operation for info revision {info_revision} within {timeout}s",
                            etcd_key=key, info_revision=info_revision)
                    try:
                        resp = q.get(timeout=min(left if left is not None else 1.0, 1.0))
                    except queue.Empty:
                        continue
                    if isinstance(resp, Exception):
                        break   # watch broke (etcd restart, compaction): re-read and re-watch
                    for ev in resp.events:
                        if isinstance(ev, etcd3.events.PutEvent):
                            cand = self._decode("operation", ev.key, ev.value, ev._event.kv)
                            if matches(cand):
                                return cand
            finally:
                try:
                    self.client.cancel_watch(watch_id)
                except Exception:  # noqa: BLE001 — cancelling a broken watch must not mask the result
                    pass

    def mark_done(self, op: Operation) -> int:
        """Store ``op`` with ``done=true``.  Guarded: applies only if the stored Operation is
        still the same answer (same info revision, stage, DDLs); a rewrite with identical
        content (master rebuild) is followed.  Raises ``StaleOperation`` otherwise."""
        key = self.operation_key(op.lock, op.table)
        expect_rev = op.revision
        for _ in range(5):
            done = dataclasses.replace(op, done=True)
            ok, rev, resps = self._txn(f"marking {key} done", [T.Mod(key) == expect_rev],
                                       [T.Put(key, done.encode())], [T.Get(key)])
            if ok:
                return rev
            kvs = resps[0].response_range.kvs
            if not kvs:
                raise StaleOperation("the Operation was deleted before it was marked done "
                                     "(lock removed or table left it)", etcd_key=key, lock_id=op.lock_id)
            cur = self._decode("operation", kvs[0].key, kvs[0].value, kvs[0])
            if not cur.same_answer(op):
                raise StaleOperation(f"the Operation was replaced (now stage {cur.stage.value}, info "
                                     f"revision {cur.info_revision}); handle the current one",
                                     etcd_key=key, lock_id=op.lock_id)
            if cur.done:
                return cur.revision
            expect_rev = cur.revision
        raise StaleOperation("the Operation keeps changing; retry", etcd_key=key, lock_id=op.lock_id)

    def put_status(self, st: SubtaskStatus, lease=None) -> int:
        return self._put(self.keys.key("status", st.task, st.source), st, lease=lease)

    def register_worker(self, reg: WorkerRegistration, ttl: int = 10):
        """PUT the registration on a new lease; returns the lease (refresh it to stay alive)."""
        lease = self._call("granting worker lease", self.client.lease, ttl)
        self._put(self.keys.key("worker", reg.worker), reg, lease=lease.id)
        return lease

    # ------------------------------------------------------------------ reads (master, CLI)
    def list_infos(self, task: str | None = None) -> Listing:
        return self._list("info", self.keys.key("info", *([task] if task else [])))

    def list_operations(self, task: str | None = None) -> Listing:
        return self._list("operation", self.keys.key("operation", *([task] if task else [])))

    def list_source_tables(self, task: str | None = None) -> Listing:
        return self._list("source-tables", self.keys.key("source-tables", *([task] if task else [])))

    def list_dropped_columns(self, lock: LockKey | None = None) -> Listing:
        pre = self.keys.lock_prefix("dropped-column", lock) if lock else self.keys.key("dropped-column")
        return self._list("dropped-column", pre)

    def list_sources(self) -> Listing:
        return self._list("source", self.keys.key("source"))

    def list_tasks(self) -> Listing:
        return self._list("task", self.keys.key("task"))

    def list_workers(self) -> Listing:
        return self._list("worker", self.keys.key("worker"))

    def list_bindings(self) -> Listing:
        return self._list("binding", self.keys.key("binding"))

    def list_status(self, task: str | None = None) -> Listing:
        return self._list("status", self.keys.key("status", *([task] if task else [])))

    def get_source(self, source: str) -> SourceRecord | None:
        return self._get("source", self.keys.key("source", source))[0]

    def get_task(self, task: str) -> TaskRecord | None:
        return self._get("task", self.keys.key("task", task))[0]

    def get_binding(self, source: str) -> SourceBinding | None:
        return self._get("binding", self.keys.key("binding", source))[0]

    # ------------------------------------------------------------------ watches
    def watch(self, kind: str, start_revision: int, callback: Callable[[RecordEvent | Exception], None],
              sub: Iterable[str] = ()) -> int:
        """Watch all ``kind`` records (optionally under components ``sub``) from
        ``start_revision``; ``callback`` gets one decoded ``RecordEvent`` per event, or an
        exception when the watch breaks (then re-list and watch again).  Returns the watch id
        for ``client.cancel_watch``."""
        prefix = self.keys.key(kind, *sub)

        def on_response(resp):
            if isinstance(resp, Exception):
                callback(resp)
                return
            for ev in resp.events:
                callback(self._event(kind, ev))

        return self._call(f"watching {prefix}", self.client.add_watch_prefix_callback, prefix,
                          on_response, start_revision=start_revision, prev_kv=True)

    def _event(self, kind: str, ev) -> RecordEvent:
        raw = ev._event.kv
        key = raw.key.decode("utf-8", "replace")
        try:
            _, parts = self.keys.parse(key)
        except BadKey:
            parts = {}
        deleted = isinstance(ev, etcd3.events.DeleteEvent)
        out = RecordEvent(kind, key, parts, deleted, raw.mod_revision)
        try:
            if deleted:
                if ev._event.HasField("prev_kv") and ev._event.prev_kv.value:
                    out.prev = self._decode(kind, key, ev._event.prev_kv.value, ev._event.prev_kv)
            else:
                out.record = self._decode(kind, key, raw.value, raw)
        except RecordError as e:
            out.error = e
        return out

    # ------------------------------------------------------------------ master writes (fenced)
    def put_operation(self, fence: Fence, op: Operation, *, skip_done: bool = False) -> PutResult:
        """Write the answer ``op`` (``op.info_revision`` = revision of the Info it answers).

        Refused (``put=False``) when the table's Info key no longer has that revision: the worker
        wrote a newer Info (reason ``newer-info``) or the Info is gone (``info-gone``), so the
        answer is obsolete.  ``info_revision=0`` skips that guard (operator-made operations).
        With ``skip_done`` (rebuild), an Operation already done for the same Info is kept
        (reason ``done``): replaying history must not make a worker execute twice."""
        info_key = self.keys.info(op.task, op.down_schema, op.down_table, op.source, op.up_schema, op.up_table)
        key = self.keys.operation(op.task, op.down_schema, op.down_table, op.source, op.up_schema, op.up_table)
        for _ in range(10):
            cur, _rev = self._get_raw(key)
            cmp = [T.Mod(key) == (cur.mod_revision if cur else 0)]
            if skip_done and cur is not None:
                try:
                    stored = self._decode("operation", cur.key, cur.value, cur)
                    if stored.done and stored.info_revision == op.info_revision:
                        return PutResult(False, stored.revision, "done")
                except RecordError:
                    pass  # garbage is overwritten by the answer
            if op.info_revision:
                cmp.append(T.Mod(info_key) == op.info_revision)
            ok, rev, resps = self._fenced(fence, f"writing {key}", cmp, [T.Put(key, op.encode())],
                                          [T.Get(info_key)])
            if ok:
                op.revision = rev
                return PutResult(True, rev)
            kvs = resps[0].response_range.kvs
            if op.info_revision and not kvs:
                return PutResult(False, rev, "info-gone")
            if op.info_revision and kvs[0].mod_revision != op.info_revision:
                return PutResult(False, rev, "newer-info")
            # the Operation changed between read and write (a worker's done mark): re-decide
        raise EtcdUnavailable(f"Operation {key} kept changing while writing; retry", etcd_key=key)

    def _get_raw(self, key: str):
        resp = self._call(f"reading {key}", self.client.get_response, key)
        return (resp.kvs[0] if resp.kvs else None), resp.header.revision

    def remove_lock(self, fence: Fence, lock: LockKey, handled_revision: int) -> bool:
        """Delete all Infos, Operations and dropped-column records of a resolved lock in ONE
        transaction, guarded so that no Info of the lock has a mod revision above
        ``handled_revision`` (the highest Info revision the engine has processed for the lock).
        Returns False (nothing deleted) when a newer Info exists — it will be handled next."""
        ip = self.keys.lock_prefix("info", lock)
        op = self.keys.lock_prefix("operation", lock)
        dp = self.keys.lock_prefix("dropped-column", lock)

        def rng(p):
            return eu.prefix_range_end(eu.to_bytes(p))
        ok, _, _ = self._fenced(fence, f"removing lock {lock.id}",
                                [T.Mod(ip, rng(ip)) < handled_revision + 1],
                                [T.Delete(ip, rng(ip)), T.Delete(op, rng(op)), T.Delete(dp, rng(dp))])
        return ok

    def delete_table(self, fence: Fence, lock: LockKey, table: TableRef) -> int:
        """A table left its lock (dropped upstream, or removed by the operator): delete its Info,
        Operation and dropped-column records."""
        ops = [T.Delete(self.keys.info(lock.task, lock.down_schema, lock.down_table, *self._t(table))),
               T.Delete(self.keys.operation(lock.task, lock.down_schema, lock.down_table, *self._t(table)))]
        for dc in self.list_dropped_columns(lock).items:
            if (dc.source, dc.up_schema, dc.up_table) == self._t(table):
                ops.append(T.Delete(self.keys.dropped_column(lock, dc.column, *self._t(table))))
        return self._fenced_chunks(fence, f"removing {table} from lock {lock.id}", ops)

    @staticmethod
    def _t(table: TableRef) -> tuple[str, str, str]:
        return table.source, table.schema, table.table

    def delete_task(self, fence: Fence, task: str, sources: Iterable[str] | None = None) -> int:
        """stop-task: delete the shard-DDL metadata (Infos, Operations, SourceTables, dropped
        columns) of the task, or only of ``sources``.  Whole task: one transaction of range
        deletes.  Some sources: per-key deletes in chunks (idempotent; re-run on failure).
        Task config, status and bindings are separate records (``delete_task_config``)."""
        if sources is None:
            ops = []
            for kind in ("info", "operation", "source-tables", "dropped-column"):
                p = self.keys.key(kind, task)
                ops.append(T.Delete(p, eu.prefix_range_end(eu.to_bytes(p))))
            _, rev, _ = self._fenced(fence, f"deleting metadata of task {task}", [], ops)
            return rev
        srcs = set(sources)
        ops = [T.Delete(self.keys.key("source-tables", task, s)) for s in srcs]
        for kind in ("info", "operation", "dropped-column"):
            resp = self._call("listing", self.client.get_prefix_response, self.keys.key(kind, task), keys_only=True)
            for kv in resp.kvs:
                try:
                    _, parts = self.keys.parse(kv.key)
                except BadKey:
                    continue
                if parts.get("source") in srcs:
                    ops.append(T.Delete(kv.key))
        return self._fenced_chunks(fence, f"deleting metadata of task {task} sources {sorted(srcs)}", ops)

    def put_dropped_columns(self, fence: Fence, lock: LockKey, table: TableRef, columns: Iterable[str],
                            stage: DroppedStage = DroppedStage.NOT_DONE) -> int:
        ops = [T.Put(self.keys.dropped_column(lock, c, *self._t(table)), DroppedColumn(DroppedStage(stage)).encode())
               for c in columns]
        return self._fenced_chunks(fence, f"recording dropped columns of {table} in {lock.id}", ops)

    def delete_dropped_column(self, fence: Fence, lock: LockKey, column: str) -> int:
        """The column is fully dropped downstream: forget all its per-table records."""
        p = self.keys.key("dropped-column", lock.task, lock.down_schema, lock.down_table, column)
        _, rev, _ = self._fenced(fence, f"clearing dropped column {column} of {lock.id}", [],
                                 [T.Delete(p, eu.prefix_range_end(eu.to_bytes(p)))])
        return rev

    def put_source(self, fence: Fence, cfg: SourceRecord) -> int:
        _, rev, _ = self._fenced(fence, f"registering source {cfg.source}", [],
                                 [T.Put(self.keys.key("source", cfg.source), cfg.encode())])
        return rev

    def delete_source(self, fence: Fence, source: str) -> int:
        _, rev, _ = self._fenced(fence, f"removing source {source}", [],
                                 [T.Delete(self.keys.key("source", source)),
                                  T.Delete(self.keys.key("binding", source))])
        return rev

    def put_task(self, fence: Fence, cfg: TaskRecord) -> int:
        _, rev, _ = self._fenced(fence, f"writing task {cfg.task}", [],
                                 [T.Put(self.keys.key("task", cfg.task), cfg.encode())])
        return rev

    def delete_task_config(self, fence: Fence, task: str) -> int:
        p = self.keys.key("status", task)
        _, rev, _ = self._fenced(fence, f"removing task {task}", [],
                                 [T.Delete(self.keys.key("task", task)),
                                  T.Delete(p, eu.prefix_range_end(eu.to_bytes(p)))])
        return rev

    def put_binding(self, fence: Fence, b: SourceBinding, expect_revision: int | None = None) -> bool:
        """Bind a source to a worker; with ``expect_revision`` only if the binding key still has
        that mod revision (0 = absent).  Returns False when that compare failed."""
        key = self.keys.key("binding", b.source)
        cmp = [] if expect_revision is None else [T.Mod(key) == expect_revision]
        ok, _, _ = self._fenced(fence, f"binding {b.source} to {b.worker}", cmp, [T.Put(key, b.encode())])
        return ok

    def delete_binding(self, fence: Fence, source: str) -> int:
        _, rev, _ = self._fenced(fence, f"unbinding {source}", [], [T.Delete(self.keys.key("binding", source))])
        return rev

    def iter_kinds(self) -> Iterator[str]:
        return iter(RECORD_TYPES)

    # ------------------------------------------------------------------ operator skips (binlog skip)
    def _skip_record(self, kv) -> BinlogSkip:
        """Decode one binlog-skip key; its task, source and FILE:POS must match the key's."""
        rec = self._decode("binlog-skip", kv.key, kv.value, kv)
        key = kv.key.decode() if isinstance(kv.key, bytes) else kv.key
        _, parts = self.keys.parse(key)
        if (rec.task, rec.source, rec.position) != (parts["task"], parts["source"], parts["position"]):
            raise GarbageRecord(f"binlog-skip record is for {rec.task}/{rec.source}/{rec.position} but its "
                                f"key says {parts['task']}/{parts['source']}/{parts['position']}",
                                etcd_key=key, kind="binlog-skip", parts=parts)
        return rec

    def put_binlog_skip(self, fence: Fence, rec: BinlogSkip) -> int:
        """Master: arm (or re-arm) a skip; overwrites a record at the same position."""
        key = self.keys.binlog_skip(rec.task, rec.source, rec.file, rec.pos)
        _, rev, _ = self._fenced(fence, f"writing {key}", [], [T.Put(key, rec.encode())])
        rec.revision = rev
        return rev

    def list_binlog_skips(self, task: str | None = None, source: str | None = None) -> Listing:
        """Skip records (all states) of every task, one task, or one task+source."""
        parts = [p for p in (task, source) if p]
        prefix = self.keys.key("binlog-skip", *parts)
        resp = self._call(f"listing {prefix}", self.client.get_prefix_response, prefix)
        items, bad = [], []
        for kv in resp.kvs:
            try:
                items.append(self._skip_record(kv))
            except RecordError as e:
                bad.append(e)
        return Listing(items, resp.header.revision, bad)

    def get_binlog_skip(self, task: str, source: str, file: str, pos: int) -> BinlogSkip | None:
        resp = self._call("reading binlog skip", self.client.get_response,
                          self.keys.binlog_skip(task, source, file, pos))
        return self._skip_record(resp.kvs[0]) if resp.kvs else None

    def finish_binlog_skip(self, rec: BinlogSkip, state: str, **fields) -> BinlogSkip | None:
        """Worker: store ``rec`` with ``state`` (done / passed) and ``fields`` (statement, worker,
        done_at, note), only if the key still holds the revision ``rec`` was read at.  Returns the
        stored record, or None when it was deleted or rewritten meanwhile (revert, re-arm)."""
        key = self.keys.binlog_skip(rec.task, rec.source, rec.file, rec.pos)
        new = dataclasses.replace(rec, state=state, **fields)
        new.validate()
        ok, rev, _ = self._txn(f"marking {key} {state}", [T.Mod(key) == rec.revision], [T.Put(key, new.encode())])
        if not ok:
            return None
        new.revision = rev
        return new

    def delete_binlog_skip(self, fence: Fence, rec: BinlogSkip) -> bool:
        """Master (revert): delete one record if it is unchanged since read (still pending)."""
        key = self.keys.binlog_skip(rec.task, rec.source, rec.file, rec.pos)
        ok, _, _ = self._fenced(fence, f"deleting {key}", [T.Mod(key) == rec.revision], [T.Delete(key)])
        return ok

    def delete_binlog_skips(self, fence: Fence, task: str, sources: Iterable[str] | None = None) -> int:
        """stop-task: delete the task's skip records (all, or those of ``sources``)."""
        if sources is None:
            p = self.keys.key("binlog-skip", task)
            _, rev, _ = self._fenced(fence, f"deleting binlog skips of task {task}", [],
                                     [T.Delete(p, eu.prefix_range_end(eu.to_bytes(p)))])
            return rev
        ops = []
        for s in set(sources):
            p = self.keys.key("binlog-skip", task, s)
            ops.append(T.Delete(p, eu.prefix_range_end(eu.to_bytes(p))))
        return self._fenced_chunks(fence, f"deleting binlog skips of task {task} sources {sorted(set(sources))}", ops)

    # ------------------------------------------------------------------ binlog-schema requests
    def _schema_op_key(self, rec: SchemaOp) -> str:
        return self.keys.key("schema-op", rec.task, rec.source, rec.up_schema, rec.up_table)

    def put_schema_op(self, fence: Fence, rec: SchemaOp) -> int:
        """Master: write a pending request (replaces an earlier one for the same table)."""
        rec.validate()
        key = self._schema_op_key(rec)
        _, rev, _ = self._fenced(fence, f"writing {key}", [], [T.Put(key, rec.encode())])
        rec.revision = rev
        return rev

    def list_schema_ops(self, task: str | None = None, source: str | None = None) -> Listing:
        """Requests (all states) of every task, one task, or one task+source."""
        parts = [p for p in (task, source) if p]
        prefix = self.keys.key("schema-op", *parts)
        resp = self._call(f"listing {prefix}", self.client.get_prefix_response, prefix)
        items, bad = [], []
        for kv in resp.kvs:
            try:
                items.append(self._decode("schema-op", kv.key, kv.value, kv))
            except RecordError as e:
                bad.append(e)
        return Listing(items, resp.header.revision, bad)

    def get_schema_op(self, task: str, source: str, up_schema: str, up_table: str) -> SchemaOp | None:
        key = self.keys.key("schema-op", task, source, up_schema, up_table)
        resp = self._call("reading binlog-schema request", self.client.get_response, key)
        return self._decode("schema-op", resp.kvs[0].key, resp.kvs[0].value, resp.kvs[0]) if resp.kvs else None

    def finish_schema_op(self, rec: SchemaOp, state: str, **fields) -> SchemaOp | None:
        """Worker: store ``rec`` answered (``state`` done/failed, ``result``...), only if the key
        still holds the revision it was read at; None when it changed meanwhile."""
        key = self._schema_op_key(rec)
        new = dataclasses.replace(rec, state=state, **fields)
        new.validate()
        ok, rev, _ = self._txn(f"answering {key}", [T.Mod(key) == rec.revision], [T.Put(key, new.encode())])
        if not ok:
            return None
        new.revision = rev
        return new

    def delete_schema_op(self, fence: Fence, rec: SchemaOp) -> bool:
        """Master: withdraw a request nobody answered (only if unchanged since written)."""
        key = self._schema_op_key(rec)
        ok, _, _ = self._fenced(fence, f"deleting {key}", [T.Mod(key) == rec.revision], [T.Delete(key)])
        return ok

    def delete_schema_ops(self, fence: Fence, task: str) -> int:
        """stop-task: delete the task's binlog-schema requests."""
        p = self.keys.key("schema-op", task)
        _, rev, _ = self._fenced(fence, f"deleting binlog-schema requests of task {task}", [],
                                 [T.Delete(p, eu.prefix_range_end(eu.to_bytes(p)))])
        return rev
