"""Operation: the master's answer to one table's Info; DoneMark: the worker's "executed" for
it; and their etcd operations (DM's ``optimism/operation.go``).

DM stores "done" inside the Operation.  Here the worker writes it to a key of its own
(``done/<lock>/<table>``), guarded on the Operation's mod revision exactly as DM's rewrite is:
the leader then watches Infos and done marks only, never its own answers coming back, and a
worker watching its Operations never receives its own done marks (a 4,096-table lock sent 16k
such echoes before).  Readers see the same thing as before: ``Operation.done`` is true when
the table's done mark names the Operation's current mod revision, so any rewrite of the
Operation (a new answer) is not done, as with DM's in-place flag."""
import dataclasses
import queue
import threading
import time
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

import etcd3
from etcd3 import transactions as T

from .errors import EtcdUnavailable, OperationWaitTimeout, RecordError, StaleOperation
from .info import Info
from .keys import LockKey, TableRef
from .leader import Fence
from .record import MAX_TXN_OPS, Listing, Stage, TableRecord, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


@dataclass
class Operation(TableRecord):
    """The master's answer for one table.  ``info_revision`` is the revision of the Info it
    answers (for a redirect: of the Info that was skipped); ``cols`` are the columns that Info
    dropped, echoed back on done for dropped-column bookkeeping.  ``revision`` (not stored) is
    the Operation key's mod revision."""
    KIND: typing.ClassVar[str] = "operation"
    lock_id: str
    task: str
    source: str
    up_schema: str
    up_table: str
    down_schema: str
    down_table: str
    info_revision: int
    ddls: list[str]
    stage: Stage
    message: str = ""
    done: bool = False
    cols: list[str] = field(default_factory=list)
    # the table that runs the agreed change of a resolved conflict (on the held tables' answers
    # and their redirects): the resolution is persisted with the answers, so a rebuild restores
    # its runner instead of re-deciding it (docs/lock-algorithm.md, invariant 2)
    runner: str = ""
    # on a ``skip-and-wait`` that holds a table only until another table's running answer is done
    # (that answer drops a column this table's DDL adds: run in the other order, the DROP would
    # remove it): that table.  Not a resolution: the replay is decided afresh
    runs_after: str = ""
    # on a ``skip-and-wait`` answering a change whose Info has ``rest``: coordinate this later
    # change of the same ALTER first (other tables are held on it), then this one again
    first: str = ""
    # on a ``skip-and-wait``: coordinate this change together with these later changes (indexes
    # into the Info's ``rest`` then ``ahead``) as one ALTER; the changes between them touch none
    # of their columns and stay where they are.  The table's rows between are written through the
    # combined renames, and the changes it folded in are skipped when the stream reaches them
    # (docs/lock-algorithm.md, "Opposite orders across statements")
    combine: list[int] = field(default_factory=list)
    # on a ``skip-and-wait``: held because the tables in the way make this rename later in their
    # stream (another order of the same renames); the lock turns it ``detected`` once one will not
    hopeful: bool = False
    # on any answer: renames ([old, new]) of an agreement this table took no side in because it adds
    # the old column later and then renames it; that ADD is coordinated with the rename (the
    # look-ahead that showed it is gone once the table replays, so a rebuild learns it here)
    catch_up: list[list[str]] = field(default_factory=list)
    revision: int = _meta()
    # not stored: read from the done mark with ``done`` (False: the worker marked it done without
    # running its statements, ``binlog skip``), so a rebuild hands a runner's change over as the
    # leader that read the mark did
    ran: bool = _meta(True)

    def same_answer(self, other: "Operation") -> bool:
        """Equal apart from ``done`` and the revision (done marks keep the answer)."""
        a, b = self.to_dict(), other.to_dict()
        a.pop("done"), b.pop("done")
        return a == b


@dataclass
class DoneMark(TableRecord):
    """A worker's done mark of its table's Operation: which Operation (``op_revision``, its mod
    revision, and the ``info_revision`` it answers), its ``stage`` and the ``cols`` it dropped.
    It applies while the Operation key still has ``op_revision``.  The table is the key's (filled
    on read); the rest of the answer is the Operation's, which the leader holds in memory: a mark
    is a fifth the size of the Operation, and the leader decodes one per Info."""
    KIND: typing.ClassVar[str] = "done"
    info_revision: int
    op_revision: int
    stage: Stage
    cols: list[str] = field(default_factory=list)
    # False: the worker gives the mark without having run the statements (``binlog skip`` of the
    # DDL after its execution failed): a runner's change did not happen, another table must run it
    ran: bool = True
    task: str = _meta("")
    down_schema: str = _meta("")
    down_table: str = _meta("")
    source: str = _meta("")
    up_schema: str = _meta("")
    up_table: str = _meta("")
    revision: int = _meta()

    done: typing.ClassVar[bool] = True

    @property
    def lock_id(self) -> str:
        return self.lock.id

    def marks(self, op: Operation | None) -> bool:
        return op is not None and op.revision == self.op_revision and op.info_revision == self.info_revision


def _with_done(op: Operation | None, mark: "DoneMark | None") -> Operation | None:
    """``op`` with ``done`` set from the table's done mark (read in the same transaction).  An
    Operation stored with ``done`` true was marked in place by an older release: still done."""
    if op is not None and not op.done:
        op.done = mark is not None and mark.marks(op)
        op.ran = not op.done or mark is None or mark.ran
    return op


@dataclass
class PutResult:
    put: bool
    revision: int
    reason: str = ""   # why not put: "done" (already done for this Info), "newer-info", "info-gone"


def _mark(op: Operation, op_revision: int, ran: bool = True) -> bytes:
    """The done mark's value for ``op`` at mod revision ``op_revision``."""
    return DoneMark(info_revision=op.info_revision, op_revision=op_revision, stage=op.stage,
                    cols=list(op.cols), ran=ran).encode()


def _unmarked(key: str, done_key: str, op_revision: int) -> list:
    """The Operation at ``key`` still has ``op_revision``, and no done mark was written since."""
    return [T.Mod(key) == op_revision, T.Mod(done_key) < op_revision]


class OperationOps(_Base):
    """Operation reads, the worker's wait and done mark, and the master's guarded answer write."""

    # caller: any (key of a table's Operation)
    def operation_key(self, lock: LockKey, table: TableRef) -> str:
        return self.keys.operation(lock.task, lock.down_schema, lock.down_table,
                                   table.source, table.schema, table.table)

    # caller: any (key of a table's done mark)
    def done_key(self, lock: LockKey, table: TableRef) -> str:
        return self.keys.key("done", lock.task, lock.down_schema, lock.down_table,
                             table.source, table.schema, table.table)

    def _get_with_done(self, key: str, done_key: str) -> tuple[typing.Any, Operation | None, int]:
        """(raw Operation kv or None, the Operation with ``done`` set or None, read revision):
        both keys read in one transaction, so the done flag belongs to the Operation read."""
        _, rev, resps = self._txn(f"reading {key}", [], [T.Get(key), T.Get(done_key)])
        okv, dkv = resps[0].response_range.kvs, resps[1].response_range.kvs
        return (okv[0] if okv else None), self._op_with_mark(okv, dkv), rev

    def _op_with_mark(self, okv: typing.Any, dkv: typing.Any) -> Operation | None:
        """The Operation of a read's kvs with ``done`` from the done mark's kvs."""
        if not okv:
            return None
        op = self._decode(Operation, okv[0].key, okv[0].value, okv[0])
        mark = None
        if dkv:
            try:
                mark = self._decode(DoneMark, dkv[0].key, dkv[0].value, dkv[0])
            except RecordError:
                mark = None   # unreadable mark: not done (the worker re-marks it)
        return _with_done(op, mark)

    # caller: worker (shardddl lock client / handler)
    def get_operation(self, lock: LockKey, table: TableRef) -> Operation | None:
        return self._get_with_done(self.operation_key(lock, table), self.done_key(lock, table))[1]

    # caller: worker (shardddl lock client: what is stored for a DDL before it is sent)
    def get_info_and_operation(self, lock: LockKey, table: TableRef) -> tuple[Info | None, Operation | None]:
        """The table's Info and its Operation (``done`` set from the mark) in one read: the
        worker asks both before every shard DDL (an unlock or an answer already given)."""
        ikey = self.keys.info(lock.task, lock.down_schema, lock.down_table, table.source, table.schema, table.table)
        okey, dkey = self.operation_key(lock, table), self.done_key(lock, table)
        _, _, resps = self._txn(f"reading {ikey}", [], [T.Get(ikey), T.Get(okey), T.Get(dkey)])
        ikv, okv, dkv = (r.response_range.kvs for r in resps)
        info = self._decode(Info, ikv[0].key, ikv[0].value, ikv[0]) if ikv else None
        return info, self._op_with_mark(okv, dkv)

    # caller: worker (shardddl lock client, blocked on its DDL)
    def wait_operation(self, lock: LockKey, table: TableRef, info_revision: int, *,
                       after_revision: int = 0, timeout: float | None = None,
                       stop: threading.Event | None = None, just_put: bool = False) -> Operation:
        """Block until the table's Operation answers ``info_revision`` with a mod revision above
        ``after_revision`` and is not done; return it.  Operations for other (older) Infos are
        ignored.  After a ``detected`` answer call again with
        ``after_revision=op.revision`` to wait for the next decision; in skip-and-wait, wait for
        a ``resolved`` Operation the same way.  Raises ``OperationWaitTimeout``.
        ``just_put``: the caller wrote the Info at ``info_revision`` itself, so every answer to
        it comes later: the first wait watches from there without reading first (one etcd
        round trip less per shard DDL; a broken watch falls back to the read)."""
        key = self.operation_key(lock, table)
        dkey = self.done_key(lock, table)
        deadline = None if timeout is None else time.monotonic() + timeout

        def matches(op: Operation | None) -> TypeGuard[Operation]:
            return (op is not None and op.info_revision == info_revision
                    and op.revision > after_revision and not op.done)

        first = just_put
        while True:
            if first:
                rev, first = info_revision, False
            else:
                _, op, rev = self._get_with_done(key, dkey)
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
                            # a new write of the Operation: not done yet (only this table's
                            # worker marks it, and it is the one waiting)
                            cand = self._decode(Operation, ev.key, ev.value, ev._event.kv)
                            if matches(cand):
                                return cand
            finally:
                try:
                    self.client.cancel_watch(watch_id)
                except Exception:  # noqa: BLE001 — cancelling a broken watch must not mask the result
                    pass

    # caller: worker (shardddl lock client, after executing the answer)
    def mark_done(self, op: Operation, ran: bool = True) -> int:
        """Write ``op``'s done mark; returns the mark's revision.  Guarded: applies only if the
        stored Operation is still the one read (its mod revision) and not marked since it was
        written (a second call writes nothing); after a rewrite with identical content (master
        rebuild) the mark follows it.  Raises ``StaleOperation`` when the Operation was deleted
        or replaced."""
        key, dkey = self.operation_key(op.lock, op.table), self.done_key(op.lock, op.table)
        expect_rev = op.revision
        overwrite = False   # the done key holds garbage: replace it (guard on the Operation only)
        for _ in range(5):
            guard = [T.Mod(key) == expect_rev] if overwrite else _unmarked(key, dkey, expect_rev)
            ok, rev, resps = self._txn(f"marking {key} done", guard,
                                       [T.Put(dkey, _mark(op, expect_rev, ran))], [T.Get(key), T.Get(dkey)])
            if ok:
                return rev
            kvs = resps[0].response_range.kvs
            if not kvs:
                raise StaleOperation("the Operation was deleted before it was marked done "
                                     "(lock removed or table left it)", etcd_key=key, lock_id=op.lock_id)
            cur = self._decode(Operation, kvs[0].key, kvs[0].value, kvs[0])
            if not cur.same_answer(op):
                raise StaleOperation(f"the Operation was replaced (now stage {cur.stage.value}, info "
                                     f"revision {cur.info_revision}); handle the current one",
                                     etcd_key=key, lock_id=op.lock_id)
            dkv = resps[1].response_range.kvs
            if dkv:
                try:
                    if self._decode(DoneMark, dkv[0].key, dkv[0].value, dkv[0]).marks(cur):
                        return dkv[0].mod_revision
                except RecordError:
                    overwrite = True
            expect_rev = cur.revision
        raise StaleOperation("the Operation keeps changing; retry", etcd_key=key, lock_id=op.lock_id)

    # caller: a worker with several answers at hand (bench/lock_bench.py's workers)
    def mark_done_many(self, ops: list[Operation]) -> list[StaleOperation]:
        """``mark_done`` for many Operations (distinct tables) in transactions, each guarded as
        ``mark_done`` guards every one of them (two compares per mark: at most MAX_TXN_OPS / 2
        marks per transaction).  A chunk whose guard fails is marked one by one, so each
        Operation gets ``mark_done``'s exact rules; returns the ``StaleOperation`` of those that
        could not be marked."""
        stale: list[StaleOperation] = []
        per = MAX_TXN_OPS // 2
        for i in range(0, len(ops), per):
            chunk = ops[i:i + per]
            keys = [(self.operation_key(op.lock, op.table), self.done_key(op.lock, op.table)) for op in chunk]
            ok, rev, _ = self._txn(f"marking {len(chunk)} Operations done",
                                   [c for (k, d), op in zip(keys, chunk) for c in _unmarked(k, d, op.revision)],
                                   [T.Put(d, _mark(op, op.revision)) for (_, d), op in zip(keys, chunk)])
            if ok:
                continue
            for op in chunk:
                try:
                    self.mark_done(op)
                except StaleOperation as e:
                    stale.append(e)
        return stale

    # caller: master leader (optimist rebuild), worker (lock client resync)
    def list_operations(self, task: str | None = None) -> Listing[Operation]:
        """Operations (``done`` from their done marks, read in the same transaction)."""
        sub = [task] if task else []
        ops, marks = self._list_many([(Operation, self.keys.key("operation", *sub)),
                                      (DoneMark, self.keys.key("done", *sub))])
        by_table = {(m.lock, m.table): m for m in marks.items}
        for op in ops.items:
            _with_done(op, by_table.get((op.lock, op.table)))
        return Listing(ops.items, ops.revision, ops.bad + marks.bad)

    # caller: master leader (master/locks.py, fenced)
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
            if skip_done:
                try:
                    cur, stored, _rev = self._get_with_done(key, self.done_key(op.lock, op.table))
                    if stored is not None and stored.done and stored.info_revision == op.info_revision:
                        return PutResult(False, stored.revision, "done")
                except RecordError:
                    cur, _rev = self._get_raw(key)   # garbage is overwritten by the answer
            else:
                cur, _rev = self._get_raw(key)
            dkey = self.done_key(op.lock, op.table)
            cmp = [T.Mod(key) == (cur.mod_revision if cur else 0)]
            if op.info_revision:
                # a done mark written after the Info: an answer to it is done, and history (invariant 3)
                cmp += [T.Mod(info_key) == op.info_revision, T.Mod(dkey) < op.info_revision]
            ok, rev, resps = self._fenced(fence, f"writing {key}", cmp, [T.Put(key, op.encode())],
                                          [T.Get(info_key), T.Get(dkey)])
            if ok:
                op.revision = rev
                return PutResult(True, rev)
            kvs = resps[0].response_range.kvs
            if op.info_revision and not kvs:
                return PutResult(False, rev, "info-gone")
            if op.info_revision and kvs[0].mod_revision != op.info_revision:
                newer = self._extending(info_key, kvs[0], op.info_revision)
                if newer is None:
                    return PutResult(False, rev, "newer-info")
                # the same DDL put again with more look-ahead (``Info.extends``): the answer
                # stands for it (the lock re-states it when it reads that Info)
                op = dataclasses.replace(op, info_revision=newer)
                continue
            dkv = resps[1].response_range.kvs
            if op.info_revision and dkv and dkv[0].mod_revision >= op.info_revision:
                return PutResult(False, rev, "done")
            # the Operation changed between read and write (a worker's done mark): re-decide
        raise EtcdUnavailable(f"Operation {key} kept changing while writing; retry", etcd_key=key)

    def _extending(self, info_key: str, kv: Any, answered: int) -> int | None:
        """The revision of the stored Info ``kv`` when it repeats the Info of revision
        ``answered`` (or an earlier one of the same DDL) with more look-ahead; else None."""
        try:
            info = self._decode(Info, info_key, kv.value, kv)
        except RecordError:
            return None
        if 0 < info.extends <= answered < kv.mod_revision:
            return int(kv.mod_revision)
        return None

    # caller: master leader (master/write_batch.py, fenced)
    def put_operations(self, fence: Fence, ops: list[Operation]) -> list[PutResult]:
        """``put_operation`` for many answers (distinct tables) in fenced transactions of at most
        MAX_TXN_OPS, each guarded on the revision of every Info they answer.  A chunk whose guard
        fails (a worker wrote a newer Info, or one is gone) is written one by one, so each answer
        gets ``put_operation``'s exact rules and reason.  Results are in the order of ``ops``.

        Not for rebuild (``skip_done``): that must read what is stored first."""
        out: list[PutResult] = []
        per = MAX_TXN_OPS // 2       # two compares per answer count against etcd's operation limit
        for i in range(0, len(ops), per):
            chunk = ops[i:i + per]
            cmp = [c for op in chunk if op.info_revision
                   for c in (T.Mod(self.keys.info(op.task, op.down_schema, op.down_table, op.source, op.up_schema,
                                                  op.up_table)) == op.info_revision,
                             T.Mod(self.done_key(op.lock, op.table)) < op.info_revision)]
            puts = [T.Put(self.operation_key(op.lock, op.table), op.encode()) for op in chunk]
            ok, rev, _ = self._fenced(fence, f"writing {len(chunk)} Operations", cmp, puts)
            if ok:
                for op in chunk:
                    op.revision = rev
                out.extend(PutResult(True, rev) for _ in chunk)
            else:
                out.extend(self.put_operation(fence, op) for op in chunk)
        return out
