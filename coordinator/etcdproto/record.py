"""The base of the JSON records stored in etcd (one module per record kind holds the record and
its etcd operations: info.py, operation.py, ... — see docs/etcd-layout.md).

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
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypedDict, TypeVar

import orjson

from .errors import GarbageRecord, RecordError, UnknownVersion
from .keys import LockKey, TableRef

R = TypeVar("R", bound="Record")

MAX_TXN_OPS = 120  # etcd's default --max-txn-ops is 128 (compares count apart); leave room


def _meta(default: Any = 0) -> Any:
    # ``Any`` like ``dataclasses.field`` itself: the result is the field's default to the checker
    return field(default=default, compare=False, metadata={"meta": True})


class _Where(TypedDict):
    """What every decode error names: the key, the record kind and the key's components."""
    etcd_key: str
    kind: str
    parts: dict | None


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
    """Base of the record dataclasses (every concrete kind is a ``@dataclass`` subclass)."""
    KIND: typing.ClassVar[str] = ""
    VERSION: typing.ClassVar[int] = 1
    # per class, computed on first use (``_stored_fields``, ``_decode_plan``); declared, not set
    _stored_names: typing.ClassVar[tuple[str, ...]]
    _plan: typing.ClassVar[tuple]
    if typing.TYPE_CHECKING:
        # Declared, not set: makes ``Record`` a ``DataclassInstance`` to the checker so
        # ``dataclasses.fields``/``replace`` accept it; each subclass's @dataclass sets it.
        __dataclass_fields__: typing.ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"v": self.VERSION}
        for name in self._stored_fields():
            val = getattr(self, name)
            out[name] = val.value if isinstance(val, enum.Enum) else val
        return out

    @classmethod
    def _stored_fields(cls) -> tuple[str, ...]:
        """The names of the stored (not ``meta``) fields, computed once per class."""
        names = cls.__dict__.get("_stored_names")
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(cls) if not f.metadata.get("meta"))
            cls._stored_names = names
        return names

    def encode(self, **changed: Any) -> bytes:
        """Compact JSON, keys sorted; ``changed`` overrides stored fields (a done mark is the
        Operation with ``done=True``, without building a second record).  orjson is five times
        faster than ``json`` (a big lock encodes one Operation per Info); the stdlib writes what
        orjson refuses (integers beyond 64 bits, non-string keys in a free-form dict)."""
        d = self.to_dict()
        for name, val in changed.items():
            if name not in d:
                raise TypeError(f"{type(self).__name__} has no stored field {name!r}")
            d[name] = val.value if isinstance(val, enum.Enum) else val
        return dumps(d)

    @classmethod
    def _upgrade(cls, d: dict, version: int) -> dict:
        """Turn an older-version dict into the current shape (no older versions exist yet)."""
        return d

    @classmethod
    def decode(cls: type[R], key: str, raw: bytes | str, parts: dict | None = None, **meta: Any) -> R:
        """Parse ``raw`` read at ``key``; ``meta`` sets the not-stored fields (revision, version)."""
        try:
            d = orjson.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:   # orjson.JSONDecodeError is a ValueError
            raise GarbageRecord(f"{cls.KIND} record is not JSON ({e}); delete or rewrite the key",
                                **_where(cls, key, parts)) from e
        if not isinstance(d, dict):
            raise GarbageRecord(f"{cls.KIND} record is a JSON {type(d).__name__}, expected an object",
                                **_where(cls, key, parts))
        v = d.get("v")
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise GarbageRecord(f"{cls.KIND} record has no valid format version field 'v' (got {v!r})",
                                **_where(cls, key, parts))
        if v > cls.VERSION:
            raise UnknownVersion(f"{cls.KIND} record has format version {v}; this release reads up to "
                                 f"{cls.VERSION} (written by a newer shardmerge?)", **_where(cls, key, parts))
        d = cls._upgrade(d, v)
        kw: dict[str, Any] = {}
        fields, meta_names = cls._decode_plan()
        for name, required, is_str, coerce in fields:
            val = d.get(name, _ABSENT)
            if val is _ABSENT:
                if required:
                    raise GarbageRecord(f"{cls.KIND} record lacks field {name!r}", **_where(cls, key, parts))
                continue
            if is_str and type(val) is str:
                kw[name] = val          # most fields: no call
                continue
            try:
                kw[name] = coerce(val)
            except (TypeError, ValueError) as e:
                raise GarbageRecord(f"{cls.KIND} record field {name!r}: {e}", **_where(cls, key, parts)) from e
        if meta:
            for name in meta_names:
                if name in meta:
                    kw[name] = meta[name]
        try:
            rec = cls(**kw)
            rec.validate()
        except (TypeError, ValueError) as e:
            raise GarbageRecord(f"{cls.KIND} record is inconsistent: {e}", **_where(cls, key, parts)) from e
        return rec

    @classmethod
    def _decode_plan(cls) -> tuple:
        """((name, required, is a plain string, coercer) per stored field, the meta field names),
        computed once per class: resolving the type hints, then walking them, on every decode was
        most of a big lock's watch thread."""
        plan = cls.__dict__.get("_plan")
        if plan is None:
            hints = typing.get_type_hints(cls)
            fields = tuple((f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                            hints[f.name] is str, _coercer(hints[f.name]))
                           for f in dataclasses.fields(cls) if not f.metadata.get("meta"))
            metas = tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("meta"))
            plan = cls._plan = (fields, metas)
        return plan

    def validate(self) -> None:
        """Cross-field checks; raise ValueError."""


class TableRecord(Record):
    """A record about one shard table of one lock (Info, Operation, done mark).  Its lock and
    table names are built once, at first use, and kept: a big lock's master asks for them several
    times per record."""
    if typing.TYPE_CHECKING:
        task: str
        source: str
        up_schema: str
        up_table: str
        down_schema: str
        down_table: str

    @property
    def lock(self) -> LockKey:
        k = self.__dict__.get("_lock")
        if k is None:
            k = self.__dict__["_lock"] = LockKey(self.task, self.down_schema, self.down_table)
        return k

    @property
    def table(self) -> TableRef:
        t = self.__dict__.get("_table")
        if t is None:
            t = self.__dict__["_table"] = TableRef(self.source, self.up_schema, self.up_table)
        return t



def dumps(d: dict) -> bytes:
    """A record's stored form: compact JSON, keys sorted."""
    try:
        return orjson.dumps(d, option=orjson.OPT_SORT_KEYS)
    except TypeError:    # orjson.JSONEncodeError is a TypeError
        return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _coercer(tp: Any) -> Callable[[Any], Any]:
    """A function that checks (and for enums converts) one JSON value of type ``tp``, raising
    TypeError/ValueError that name the bad value; built once per field by ``_decode_plan``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [_coercer(a) for a in typing.get_args(tp) if a is not type(None)]
        nullable = type(None) in typing.get_args(tp)

        def union(val: Any) -> Any:
            if val is None and nullable:
                return None
            errs = []
            for c in options:
                try:
                    return c(val)
                except (TypeError, ValueError) as e:
                    errs.append(str(e))
            raise TypeError("; ".join(errs))
        return union
    if origin is list:
        (inner,) = typing.get_args(tp) or (typing.Any,)
        item = _coercer(inner)

        def list_of(val: Any) -> list:
            if not isinstance(val, list):
                raise TypeError(f"expected a list, got {type(val).__name__}")
            return [item(x) for x in val]
        return list_of
    if origin is dict or tp is dict:
        def mapping(val: Any) -> dict:
            if not isinstance(val, dict):
                raise TypeError(f"expected an object, got {type(val).__name__}")
            return val
        return mapping
    if tp is typing.Any:
        return _as_is
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp   # ValueError names the bad value
    if tp is bool:
        def boolean(val: Any) -> bool:
            if val is not True and val is not False:
                raise TypeError(f"expected true/false, got {val!r}")
            return val
        return boolean
    if tp is int:
        def integer(val: Any) -> int:
            if type(val) is not int and (not isinstance(val, int) or isinstance(val, bool)):
                raise TypeError(f"expected an integer, got {val!r}")
            return val
        return integer
    if tp is str:
        def string(val: Any) -> str:
            if type(val) is not str and not isinstance(val, str):
                raise TypeError(f"expected a string, got {val!r}")
            return val
        return string
    raise TypeError(f"unsupported field type {tp}")


def _as_is(val: Any) -> Any:
    return val


_ABSENT = object()


def _where(cls: "type[Record]", key: str, parts: dict | None) -> _Where:
    """What a decode error names (built only when there is an error)."""
    return _Where(etcd_key=key, kind=cls.KIND, parts=parts)


@dataclass
class Listing(Generic[R]):
    """Records of one kind read in one request: ``revision`` is the etcd revision of the read;
    ``bad`` holds the undecodable ones (``RecordError`` naming the key and its components)."""
    items: list[R]
    revision: int
    bad: list[RecordError] = field(default_factory=list)
