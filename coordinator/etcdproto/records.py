"""The JSON records stored in etcd, as dataclasses.

Every value is a JSON object with a format version ``"v"``.  A reader accepts every version up
to ``VERSION`` of its record type (a later release adds a branch in ``_upgrade`` to read older
records) and raises ``UnknownVersion`` for a newer one; anything else unreadable raises
``GarbageRecord``.  Both name the key.

Schemas inside Infos (``before``/``afters``) are the ``TableSchema.to_json()`` dicts of
``coordinator.schema`` — our own format, not wire-compatible with DM's TiDB table-info JSON.

Fields marked ``meta`` are not stored: they are filled from etcd's key metadata on read
(``revision`` = the key's mod revision, ``version`` = its per-key version).
"""
import dataclasses
import enum
import json
import re
import types
import typing
from dataclasses import dataclass, field

from .errors import GarbageRecord, UnknownVersion
from .keys import LockKey, TableRef


def _meta(default=0):
    return field(default=default, compare=False, metadata={"meta": True})


class Stage(str, enum.Enum):
    """What an Operation tells the worker (see docs/etcd-layout.md for the worker's reaction)."""
    NONE = "none"                    # execute ``ddls`` (maybe empty), then mark done
    DETECTED = "detected"            # conflict: execute nothing, keep waiting for a newer Operation
    SKIP_AND_WAIT = "skip-and-wait"  # skip this DDL and the table's later events until a redirect
    RESOLVED = "resolved"            # redirect: the conflict is gone, replay the skipped binlog
    UNLOCKED = "unlocked"            # operator decision: execute ``ddls`` (exec) or nothing (skip)
    ERROR = "error"                  # the Info cannot be handled; pause the task with ``message``


class DroppedStage(enum.IntEnum):
    """Per table and column: how far a DROP COLUMN has progressed (drives re-add refusal)."""
    NOT_DONE = 0   # the table dropped the column upstream; its worker has not confirmed yet
    PARTIAL = 1    # confirmed, but this table's Operation did not execute the DROP downstream
    DONE = 2       # this table's Operation executed the DROP downstream


class Record:
    KIND: typing.ClassVar[str] = ""
    VERSION: typing.ClassVar[int] = 1

    def to_dict(self) -> dict:
        out = {"v": self.VERSION}
        for f in dataclasses.fields(self):
            if f.metadata.get("meta"):
                continue
            val = getattr(self, f.name)
            out[f.name] = val.value if isinstance(val, enum.Enum) else val
        return out

    def encode(self) -> bytes:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def _upgrade(cls, d: dict, version: int) -> dict:
        """Turn an older-version dict into the current shape (no older versions exist yet)."""
        return d

    @classmethod
    def decode(cls, key: str, raw: bytes | str, parts: dict | None = None, **meta):
        """Parse ``raw`` read at ``key``; ``meta`` sets the not-stored fields (revision, version)."""
        where = dict(etcd_key=key, kind=cls.KIND, parts=parts)
        try:
            d = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise GarbageRecord(f"{cls.KIND} record is not JSON ({e}); delete or rewrite the key", **where) from e
        if not isinstance(d, dict):
            raise GarbageRecord(f"{cls.KIND} record is a JSON {type(d).__name__}, expected an object", **where)
        v = d.get("v")
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise GarbageRecord(f"{cls.KIND} record has no valid format version field 'v' (got {v!r})", **where)
        if v > cls.VERSION:
            raise UnknownVersion(f"{cls.KIND} record has format version {v}; this release reads up to "
                                 f"{cls.VERSION} (written by a newer shardmerge?)", **where)
        d = cls._upgrade(d, v)
        kw = {}
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.metadata.get("meta"):
                if f.name in meta:
                    kw[f.name] = meta[f.name]
                continue
            if f.name not in d:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise GarbageRecord(f"{cls.KIND} record lacks field {f.name!r}", **where)
                continue
            val = d[f.name]
            tp = hints[f.name]
            try:
                kw[f.name] = _coerce(val, tp)
            except (TypeError, ValueError) as e:
                raise GarbageRecord(f"{cls.KIND} record field {f.name!r}: {e}", **where) from e
        try:
            rec = cls(**kw)
            rec.validate()
        except (TypeError, ValueError) as e:
            raise GarbageRecord(f"{cls.KIND} record is inconsistent: {e}", **where) from e
        return rec

    def validate(self) -> None:
        """Cross-field checks; raise ValueError."""


def _coerce(val, tp):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if val is None and type(None) in args:
            return None
        errs = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(val, a)
            except (TypeError, ValueError) as e:
                errs.append(str(e))
        raise TypeError("; ".join(errs))
    if origin is list:
        if not isinstance(val, list):
            raise TypeError(f"expected a list, got {type(val).__name__}")
        (inner,) = typing.get_args(tp) or (typing.Any,)
        return [_coerce(x, inner) for x in val]
    if origin is dict or tp is dict:
        if not isinstance(val, dict):
            raise TypeError(f"expected an object, got {type(val).__name__}")
        return val
    if tp is typing.Any:
        return val
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(val)  # ValueError names the bad value
    if tp is bool:
        if not isinstance(val, bool):
            raise TypeError(f"expected true/false, got {val!r}")
        return val
    if tp is int:
        if not isinstance(val, int) or isinstance(val, bool):
            raise TypeError(f"expected an integer, got {val!r}")
        return val
    if tp is str:
        if not isinstance(val, str):
            raise TypeError(f"expected a string, got {val!r}")
        return val
    raise TypeError(f"unsupported field type {tp}")


# ----------------------------------------------------------------------------- shard DDL records

@dataclass
class Info(Record):
    """A worker's sharded DDL (one upstream table, one or more single-change statements).

    ``before`` is the tracked upstream schema before the first statement, ``afters[i]`` the schema
    after statement ``i`` (both ``TableSchema.to_json()`` dicts).  ``ddls`` are routed to the
    downstream names.  ``ignore_conflict`` marks a "force this schema" Info (no Operation is
    written for it).  ``revision`` (not stored) is the Info key's mod revision: the master puts it
    into the Operation's ``info_revision`` so the worker can ignore answers to older Infos."""
    KIND: typing.ClassVar[str] = "info"
    task: str
    source: str
    up_schema: str
    up_table: str
    down_schema: str
    down_table: str
    ddls: list[str]
    before: dict | None
    afters: list[dict]
    ignore_conflict: bool = False
    revision: int = _meta()
    version: int = _meta()

    def validate(self) -> None:
        for n in ("task", "source", "up_schema", "up_table", "down_schema", "down_table"):
            if not getattr(self, n):
                raise ValueError(f"{n} is empty")

    @property
    def lock(self) -> LockKey:
        return LockKey(self.task, self.down_schema, self.down_table)

    @property
    def table(self) -> TableRef:
        return TableRef(self.source, self.up_schema, self.up_table)


@dataclass
class Operation(Record):
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
    revision: int = _meta()

    @property
    def lock(self) -> LockKey:
        return LockKey(self.task, self.down_schema, self.down_table)

    @property
    def table(self) -> TableRef:
        return TableRef(self.source, self.up_schema, self.up_table)

    def same_answer(self, other: "Operation") -> bool:
        """Equal apart from ``done`` and the revision (done marks keep the answer)."""
        a, b = self.to_dict(), other.to_dict()
        a.pop("done"), b.pop("done")
        return a == b


@dataclass
class SourceTables(Record):
    """All upstream tables of one task+source and their targets, written by the worker at subtask
    start and on CREATE/DROP TABLE.  ``tables``: down_schema -> down_table -> up_schema -> sorted
    list of up_table."""
    KIND: typing.ClassVar[str] = "source-tables"
    task: str
    source: str
    tables: dict = field(default_factory=dict)
    revision: int = _meta()

    def validate(self) -> None:
        for ds, tbls in self.tables.items():
            if not isinstance(tbls, dict):
                raise ValueError(f"tables[{ds!r}] is not an object")
            for dt, ups in tbls.items():
                if not isinstance(ups, dict):
                    raise ValueError(f"tables[{ds!r}][{dt!r}] is not an object")
                for us, uts in ups.items():
                    if not isinstance(uts, list) or not all(isinstance(t, str) for t in uts):
                        raise ValueError(f"tables[{ds!r}][{dt!r}][{us!r}] is not a list of names")

    def add(self, up_schema: str, up_table: str, down_schema: str, down_table: str) -> bool:
        lst = self.tables.setdefault(down_schema, {}).setdefault(down_table, {}).setdefault(up_schema, [])
        if up_table in lst:
            return False
        lst.append(up_table)
        lst.sort()
        return True

    def remove(self, up_schema: str, up_table: str, down_schema: str, down_table: str) -> bool:
        lst = self.tables.get(down_schema, {}).get(down_table, {}).get(up_schema)
        if not lst or up_table not in lst:
            return False
        lst.remove(up_table)
        if not lst:  # prune empty parents
            del self.tables[down_schema][down_table][up_schema]
            if not self.tables[down_schema][down_table]:
                del self.tables[down_schema][down_table]
                if not self.tables[down_schema]:
                    del self.tables[down_schema]
        return True

    def targets(self) -> dict[tuple[str, str], set[tuple[str, str]]]:
        """(down_schema, down_table) -> {(up_schema, up_table)}."""
        out = {}
        for ds, tbls in self.tables.items():
            for dt, ups in tbls.items():
                out[(ds, dt)] = {(us, ut) for us, uts in ups.items() for ut in uts}
        return out

    def members(self, down_schema: str, down_table: str) -> set[tuple[str, str]]:
        return self.targets().get((down_schema, down_table), set())


@dataclass
class DroppedColumn(Record):
    """One (lock, column, table) dropped-column record; the key holds the identity, the value
    only the stage.  Identity fields are filled from the key on read."""
    KIND: typing.ClassVar[str] = "dropped-column"
    stage: DroppedStage
    task: str = _meta("")
    down_schema: str = _meta("")
    down_table: str = _meta("")
    column: str = _meta("")
    source: str = _meta("")
    up_schema: str = _meta("")
    up_table: str = _meta("")
    revision: int = _meta()


# ----------------------------------------------------------------------------- cluster records

@dataclass
class LeaderRecord(Record):
    """Value of the leader key (attached to the leader's lease)."""
    KIND: typing.ClassVar[str] = "leader"
    member: str
    addr: str = ""
    create_revision: int = _meta()


@dataclass
class SourceRecord(Record):
    """A registered upstream source: its YAML config text (parsed by coordinator.config)."""
    KIND: typing.ClassVar[str] = "source"
    source: str
    yaml: str
    revision: int = _meta()


TASK_STAGES = ("running", "paused", "stopped")


@dataclass
class TaskRecord(Record):
    """A started task: its YAML config text, the sources it runs on and its desired stage.

    ``stage`` (running / paused / stopped) is the desired stage of every source, except those
    listed in ``source_stages`` (format v2: ``pause-task -s``), which override it per source.
    A record without overrides is still written as v1, so older workers keep reading whole-task
    pauses; a per-source override is v2, which an older reader cannot decode (``UnknownVersion``):
    it then runs none of the task's subtasks rather than a source that was paused.  Every write gets a new etcd
    revision: a worker restarts a subtask that stopped on an error when the revision changes
    (that is how ``resume-task`` restarts it)."""
    KIND: typing.ClassVar[str] = "task"
    VERSION: typing.ClassVar[int] = 2
    task: str
    yaml: str
    sources: list[str] = field(default_factory=list)
    stage: str = "running"
    source_stages: dict = field(default_factory=dict)   # v2: source -> stage, only where != stage
    revision: int = _meta()

    def validate(self) -> None:
        for where, st in [("stage", self.stage)] + [(f"source_stages[{s!r}]", v)
                                                     for s, v in self.source_stages.items()]:
            if st not in TASK_STAGES:
                raise ValueError(f"{where} is {st!r}, expected one of {', '.join(TASK_STAGES)}")

    def to_dict(self) -> dict:
        d = super().to_dict()
        if not self.source_stages:           # nothing v2-only: stay readable by v1 readers
            d["v"] = 1
            del d["source_stages"]
        return d

    def stage_of(self, source: str) -> str:
        """Desired stage of ``source``'s subtask."""
        return self.source_stages.get(source, self.stage)

    def with_stages(self, stages: dict[str, str], sources: list[str] | None = None) -> "TaskRecord":
        """A copy whose sources are ``sources`` (default: the same) with the desired stages of
        ``stages`` applied (sources not named keep theirs; new sources default to running);
        stored compactly: one ``stage`` when all agree, overrides only for the exceptions."""
        srcs = list(self.sources if sources is None else sources)
        eff = {s: stages.get(s, self.stage_of(s) if s in self.sources else "running") for s in srcs}
        values = set(eff.values())
        base = values.pop() if len(values) == 1 else ("running" if "running" in values else self.stage)
        if not eff:
            base = self.stage
        return TaskRecord(self.task, self.yaml, srcs, base, {s: v for s, v in sorted(eff.items()) if v != base})


@dataclass
class WorkerRegistration(Record):
    """A live worker process; the key is attached to the worker's lease and vanishes with it."""
    KIND: typing.ClassVar[str] = "worker"
    worker: str
    addr: str = ""
    started_at: str = ""
    # The source this worker was started with (``shardctl worker --source FILE``) and that
    # file's text: the master registers the source if it is unknown and prefers this worker
    # when the source needs a (new) binding.  Empty for a pool worker.
    source: str = ""
    source_yaml: str = ""
    revision: int = _meta()


@dataclass
class SourceBinding(Record):
    """Which worker runs a source (written by the master)."""
    KIND: typing.ClassVar[str] = "binding"
    source: str
    worker: str
    revision: int = _meta()


@dataclass
class SubtaskStatus(Record):
    """What a worker reports for query-status: stage, positions, blocking DDL info.  ``detail`` is
    free-form JSON (binlog positions, lag, last error) owned by the worker."""
    KIND: typing.ClassVar[str] = "status"
    task: str
    source: str
    stage: str
    worker: str = ""
    block_ddl_owner: str = ""
    conflict_msg: str = ""
    detail: dict = field(default_factory=dict)
    updated_at: str = ""
    revision: int = _meta()


RECORD_TYPES: dict[str, type[Record]] = {c.KIND: c for c in (
    Info, Operation, SourceTables, DroppedColumn, LeaderRecord, SourceRecord, TaskRecord,
    WorkerRegistration, SourceBinding, SubtaskStatus)}


# ----------------------------------------------------------------------------- operator skips

SKIP_STATES = ("pending", "held", "done", "passed")
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
    ``file:pos`` without meeting a statement starting there."""
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
        if self.state not in SKIP_STATES:
            raise ValueError(f"state is {self.state!r}, expected one of {', '.join(SKIP_STATES)}")


RECORD_TYPES[BinlogSkip.KIND] = BinlogSkip


# ----------------------------------------------------------------------------- binlog-schema
SCHEMA_OPS = ("list", "update", "delete")
SCHEMA_OP_STATES = ("pending", "done", "failed")


@dataclass
class SchemaOp(Record):
    """An operator's ``shardctl binlog-schema list|update|delete``: a request to the worker bound
    to ``source`` about the tracked schema of upstream table ``up_schema.up_table`` of ``task``.
    Written ``pending`` by the master (``request_id`` tells one request from the next); the
    worker rewrites it ``done`` with ``result`` (list: the tracked ``CREATE TABLE``) or
    ``failed`` with ``result`` = the error.  ``create_sql`` is the new structure (update), or
    ``from_source`` / ``from_target``: the worker reads it from the upstream table / the
    downstream target; ``flush`` writes it to the checkpoint too, ``sync`` sends it to the
    shard-DDL lock."""
    KIND: typing.ClassVar[str] = "schema-op"
    task: str
    source: str
    up_schema: str
    up_table: str
    op: str
    request_id: str
    create_sql: str = ""
    flush: bool = False
    sync: bool = False
    from_source: bool = False
    from_target: bool = False
    state: str = "pending"
    result: str = ""
    worker: str = ""
    requested_at: str = ""
    done_at: str = ""
    revision: int = _meta()

    def validate(self) -> None:
        for n in ("task", "source", "up_schema", "up_table", "request_id"):
            if not getattr(self, n):
                raise ValueError(f"{n} is empty")
        if self.op not in SCHEMA_OPS:
            raise ValueError(f"op is {self.op!r}, expected one of {', '.join(SCHEMA_OPS)}")
        given = [bool(self.create_sql), self.from_source, self.from_target].count(True)
        if given != (1 if self.op == "update" else 0):
            raise ValueError("an update takes exactly one of create_sql, from_source, from_target; "
                             "other ops none")
        if self.state not in SCHEMA_OP_STATES:
            raise ValueError(f"state is {self.state!r}, expected one of {', '.join(SCHEMA_OP_STATES)}")


RECORD_TYPES[SchemaOp.KIND] = SchemaOp
