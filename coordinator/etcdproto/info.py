"""Info: a worker's sharded DDL for one upstream table, and its etcd operations (DM's
``optimism/info.go``)."""
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from etcd3 import transactions as T

from .keys import LockKey, TableRef
from .record import MAX_TXN_OPS, Listing, TableRecord, _meta, dumps

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


@dataclass
class Info(TableRecord):
    """A worker's sharded DDL (one upstream table, one or more single-change statements).

    ``before`` is the tracked upstream schema before the first statement, ``afters[i]`` the schema
    after statement ``i`` (both ``TableSchema.to_json()`` dicts).  ``ddls`` are routed to the
    downstream names.  ``ignore_conflict`` marks a "force this schema" Info (no Operation is
    written for it).  ``revision`` (not stored) is the Info key's mod revision: the master puts it
    into the Operation's ``info_revision`` so the worker can ignore answers to older Infos.

    Stored form, version 2: each schema is embedded as JSON *text*, not as a nested object.  The
    Infos of one DDL carry the same schemas thousands of times (one per shard table); as text a
    reader parses each distinct schema once (``_schema``) and the leader's decode of an Info
    allocates a few strings instead of a hundred dicts and lists: on a 4,096-table lock that was
    most of its watch thread.  Version 1 (nested objects) is still read."""
    KIND: typing.ClassVar[str] = "info"
    VERSION: typing.ClassVar[int] = 2
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
    # the DDL's upstream commit time (binlog event header, whole seconds; 0: unknown): the lock
    # places a column it adds before columns other shards added later upstream but sent first
    timestamp: int = 0
    # written by the master when the table left the lock (dropped upstream, removed by the
    # operator): ``before`` is the schema it left with, no DDL.  The lock keeps it as a departed
    # table's remnant (what it made downstream), never as a member; a new Info of the table
    # (re-created, or still replicating) overwrites it and the table is a member again
    departed: bool = False
    # the later changes of the same ALTER, not yet coordinated (routed like ``ddls``): no upstream
    # row sits between them and this one, so the lock may ask for one of them first
    # (``Operation.first``) when other tables are held on it
    rest: list[str] = field(default_factory=list)
    # a held table's later changes its worker has read past (the changes of the statements after
    # this one, routed like ``ddls``; rows sit between statements): the worker re-puts its Info
    # as it reads them, and the lock may ask the table to coordinate some of them together with
    # this one (``Operation.combine``) when other tables make the same changes in another order
    ahead: list[str] = field(default_factory=list)
    # the worker reads past this table while it is held and sends ``ahead``, and follows
    # ``Operation.combine``; the lock asks only such tables to combine changes
    reads_ahead: bool = False
    # this Info repeats the table's Info of that revision with more ``ahead`` (the worker read
    # further while held): the same DDL, so its answer stands, live and at a rebuild
    extends: int = 0
    # where each ``ahead`` statement ends in the table's binlog (``Position.to_json``): the worker's
    # own bookkeeping, so a restart can tell which statements a ``combine`` answer folds in
    ahead_at: list[dict] = field(default_factory=list)
    revision: int = _meta()
    version: int = _meta()

    @classmethod
    def of_departed(cls, lock: LockKey, table: TableRef, schema: dict, revision: int = 0) -> "Info":
        """The Info the master writes for ``table`` leaving ``lock`` with ``schema``."""
        return cls(lock.task, table.source, table.schema, table.table, lock.down_schema, lock.down_table, [],
                   schema, [schema], departed=True, revision=revision)

    def validate(self) -> None:
        for n in ("task", "source", "up_schema", "up_table", "down_schema", "down_table"):
            if not getattr(self, n):
                raise ValueError(f"{n} is empty")
        if self.departed and (self.ddls or self.before is None):
            raise ValueError("a departed table's Info carries its schema (before) and no DDL")

    def encode(self, **changed: Any) -> bytes:
        before, afters = changed.get("before", self.before), changed.get("afters", self.afters)
        return super().encode(**{**changed, "before": None if before is None else _text(before),
                                 "afters": [_text(a) for a in afters]})

    @classmethod
    def _upgrade(cls, d: dict, version: int) -> dict:
        if version >= 2:
            b, a = d.get("before"), d.get("afters")
            if isinstance(b, str):
                d["before"] = _schema(b)
            if isinstance(a, list):
                d["afters"] = [_schema(x) if isinstance(x, str) else x for x in a]
        return d


def _text(schema: Any) -> Any:
    """A schema dict as its stored JSON text (anything else is left for the decoder to refuse)."""
    return dumps(schema).decode() if isinstance(schema, dict) else schema


_SCHEMAS: dict[str, Any] = {}   # schema JSON text -> its parsed dict (shared: readers never mutate it)


def _schema(text: str) -> Any:
    """Parse a stored schema text, once per distinct text; not JSON is left as the text (the
    field check then names it)."""
    d = _SCHEMAS.get(text)
    if d is None:
        try:
            d = orjson.loads(text)
        except ValueError:
            return text
        if len(_SCHEMAS) >= 1024:
            _SCHEMAS.clear()
        _SCHEMAS[text] = d
    return d


class InfoOps(_Base):
    """Info reads and writes; a worker overwrites its table's Info, the master only reads them."""

    # caller: worker (shardddl lock client / handler, binlog-schema --sync)
    def put_info(self, info: Info) -> int:
        """PUT the Info (overwrites the table's previous one); returns its revision, which the
        answering Operation carries as ``info_revision``."""
        key = self.keys.info(info.task, info.down_schema, info.down_table, info.source,
                             info.up_schema, info.up_table)
        rev = self._put(key, info)
        info.revision = rev
        return rev

    # caller: a worker with several tables' DDLs at hand (bench/lock_bench.py's workers)
    def put_infos(self, infos: list[Info]) -> int:
        """PUT many Infos (of distinct tables) in transactions of at most MAX_TXN_OPS: one etcd
        round trip per chunk instead of one per table.  Infos of one chunk share its revision,
        which is fine: every guard compares one Info key's own mod revision."""
        rev = 0
        for i in range(0, len(infos), MAX_TXN_OPS):
            chunk = infos[i:i + MAX_TXN_OPS]
            puts = [T.Put(self.keys.info(f.task, f.down_schema, f.down_table, f.source, f.up_schema, f.up_table),
                          f.encode()) for f in chunk]
            _, rev, _ = self._txn(f"writing {len(chunk)} Infos", [], puts)
            for f in chunk:
                f.revision = rev
        return rev

    # caller: worker (shardddl lock client / handler)
    def get_info(self, lock: LockKey, table: TableRef) -> Info | None:
        return self._get(Info, self.keys.info(lock.task, lock.down_schema, lock.down_table,
                                                table.source, table.schema, table.table))[0]

    # caller: master leader (optimist rebuild), worker (lock client resync)
    def list_infos(self, task: str | None = None) -> Listing[Info]:
        return self._list(Info, self.keys.key("info", *([task] if task else [])))
