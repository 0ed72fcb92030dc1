"""BinlogSkip: an operator's ``binlog skip|replace|inject`` of one statement, and its etcd
operations (DM's ``ha/ops.go`` error-operation records)."""
import dataclasses
import re
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from etcd3 import transactions as T
from etcd3 import utils as eu

from .errors import GarbageRecord, RecordError
from .leader import Fence
from .record import Listing, Record, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


SKIP_STATES = ("pending", "held", "done", "passed")
SKIP_EVENTS = ("statement", "rows")
SKIP_OPS = ("skip", "replace", "inject")
STATEMENT_OPS = ("replace", "inject")   # ops that carry statements (``replace_with``)
_BINLOG_POS = re.compile(r"^\s*([^\s:]+):(\d+)(?:\s+gtid=(\S*))?\s*$")


def parse_binlog_pos(text: str) -> tuple[str, int]:
    """``"FILE:POS"`` -> (file, pos).  A trailing ``gtid=...`` (the form query-status prints) is
    accepted (:func:`binlog_pos_gtid` returns it).  ``ValueError`` names the input and the
    expected form."""
    m = _BINLOG_POS.match(text or "")
    if not m or int(m.group(2)) < 4:
        raise ValueError(f"binlog position {text!r} is not FILE:POS with POS >= 4 "
                         f"(e.g. mysql-bin.000003:1234, as query-status shows in errorBinlog)")
    return m.group(1), int(m.group(2))


def binlog_pos_gtid(text: str) -> str:
    """The ``gtid=...`` part of a position text, "" if none (after :func:`parse_binlog_pos`)."""
    m = _BINLOG_POS.match(text or "")
    return (m.group(3) or "") if m else ""


@dataclass
class BinlogSkip(Record):
    """An operator's ``shardctl binlog skip|replace|inject``: the statement event of ``source``'s
    binlog that *starts* at ``file:pos`` is not executed nor coordinated; with op ``replace`` the
    worker handles ``replace_with`` in its place (coordinated like an upstream DDL), with
    ``skip`` it only advances its checkpoints past it; with ``inject`` it handles ``replace_with``
    just before it, then the statement itself as usual.  Written ``pending`` by the master; the
    worker rewrites it ``done`` (with the skipped ``statement``) after the checkpoint moved past
    it, ``held`` while a replacement waits on its shard-DDL lock (the table replays the statement
    after its redirect and meets the record again), or ``passed`` when its stream went past
    ``file:pos`` without meeting a statement starting there.

    ``event`` "rows": the rows event that *ends* at ``file:pos`` (one the decoder cannot read, as the
    subtask's RowDecodeError names it) is passed over unread; the rest of its transaction is
    applied.  Only ``skip`` applies to it; ``done`` once the checkpoint is past it."""
    KIND: typing.ClassVar[str] = "binlog-skip"
    task: str
    source: str
    file: str
    pos: int
    op: str = "skip"
    state: str = "pending"
    statement: str = ""          # pending: the statement the subtask stopped on (if known); done: the one skipped
    gtid: str = ""               # GTID state at file:pos when known: guards against another server's binlog
    requested_at: str = ""
    done_at: str = ""
    worker: str = ""
    note: str = ""
    replace_with: list[str] = field(default_factory=list)   # replace: run instead; inject: run before
    event: str = "statement"     # what file:pos names: a statement's start, or a rows event's end ("rows")
    revision: int = _meta()

    @property
    def position(self) -> str:
        return f"{self.file}:{self.pos}"

    def validate(self) -> None:
        for n in ("task", "source", "file"):
            if not getattr(self, n):
                raise ValueError(f"{n} is empty")
        if self.pos < 4:
            raise ValueError(f"pos is {self.pos}, a binlog event never starts before offset 4")
        if self.op not in SKIP_OPS:
            raise ValueError(f"op is {self.op!r}, expected one of {', '.join(SKIP_OPS)}")
        if (self.op in STATEMENT_OPS) != bool(self.replace_with):
            raise ValueError("replace_with must list the statements of a replace or inject, and only of those")
        if self.event not in SKIP_EVENTS:
            raise ValueError(f"event is {self.event!r}, expected one of {', '.join(SKIP_EVENTS)}")
        if self.event == "rows" and self.op != "skip":
            raise ValueError(f"a rows event can only be skipped, not {self.op}")
        if self.state not in SKIP_STATES:
            raise ValueError(f"state is {self.state!r}, expected one of {', '.join(SKIP_STATES)}")



class BinlogSkipOps(_Base):
    """Armed and reverted by the master leader; met and finished by the worker."""

    # caller: the reads below
    def _skip_record(self, kv: typing.Any) -> BinlogSkip:
        """Decode one binlog-skip key; its task, source and FILE:POS must match the key's."""
        rec = self._decode(BinlogSkip, kv.key, kv.value, kv)
        key = kv.key.decode() if isinstance(kv.key, bytes) else kv.key
        _, parts = self.keys.parse(key)
        if (rec.task, rec.source, rec.position) != (parts["task"], parts["source"], parts["position"]):
            raise GarbageRecord(f"binlog-skip record is for {rec.task}/{rec.source}/{rec.position} but its "
                                f"key says {parts['task']}/{parts['source']}/{parts['position']}",
                                etcd_key=key, kind="binlog-skip", parts=parts)
        return rec

    # caller: master leader (binlog skip|replace|inject, fenced)
    def put_binlog_skip(self, fence: Fence, rec: BinlogSkip) -> int:
        """Master: arm (or re-arm) a skip; overwrites a record at the same position."""
        key = self.keys.binlog_skip(rec.task, rec.source, rec.file, rec.pos)
        _, rev, _ = self._fenced(fence, f"writing {key}", [], [T.Put(key, rec.encode())])
        rec.revision = rev
        return rev

    # caller: any master (binlog list), worker (worker/sync/binlog_skip.py)
    def list_binlog_skips(self, task: str | None = None, source: str | None = None) -> Listing[BinlogSkip]:
        """Skip records (all states) of every task, one task, or one task+source."""
        parts = [p for p in (task, source) if p]
        prefix = self.keys.key("binlog-skip", *parts)
        resp = self._call(f"listing {prefix}", self.client.get_prefix_response, prefix)
        items: list[BinlogSkip] = []
        bad: list[RecordError] = []
        for kv in resp.kvs:
            try:
                items.append(self._skip_record(kv))
            except RecordError as e:
                bad.append(e)
        return Listing(items, resp.header.revision, bad)

    # caller: any master (binlog revert / list)
    def get_binlog_skip(self, task: str, source: str, file: str, pos: int) -> BinlogSkip | None:
        resp = self._call("reading binlog skip", self.client.get_response,
                          self.keys.binlog_skip(task, source, file, pos))
        return self._skip_record(resp.kvs[0]) if resp.kvs else None

    # caller: worker (worker/sync/binlog_skip.py)
    def finish_binlog_skip(self, rec: BinlogSkip, state: str, **fields: typing.Any) -> BinlogSkip | None:
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

    # caller: master leader (binlog revert, fenced)
    def delete_binlog_skip(self, fence: Fence, rec: BinlogSkip) -> bool:
        """Master (revert): delete one record if it is unchanged since read (still pending)."""
        key = self.keys.binlog_skip(rec.task, rec.source, rec.file, rec.pos)
        ok, _, _ = self._fenced(fence, f"deleting {key}", [T.Mod(key) == rec.revision], [T.Delete(key)])
        return ok

    # caller: master leader (stop-task, fenced)
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
