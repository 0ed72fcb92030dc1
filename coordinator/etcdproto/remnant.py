"""Remnant: the schema a table had when it left a lock (dropped upstream, `remove-table`), kept
after the lock is removed.  What the table made downstream stays there (a column it added by
ordinary statements), so the target's next lock must still know it: a rename the remaining
tables agree later would otherwise run onto that column (docs/lock-algorithm.md, "Departures").
While its lock lives the same schema is the table's departed Info; the master writes the
remnants of a lock just before it removes the lock's records."""
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from etcd3 import transactions as T

from .keys import LockKey, TableRef
from .leader import Fence
from .record import Listing, Record, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


@dataclass
class Remnant(Record):
    """One (target, table) remnant; the key holds the identity, the value the schema
    (``TableSchema.to_json()``) and the columns the table dropped whose DROP never ran
    downstream (the others still had them): the next lock completes those drops once no member
    has the column, as the lock the table left would have."""
    KIND: typing.ClassVar[str] = "remnant"
    schema: dict
    dropped: list[str] = field(default_factory=list)
    task: str = _meta("")
    down_schema: str = _meta("")
    down_table: str = _meta("")
    source: str = _meta("")
    up_schema: str = _meta("")
    up_table: str = _meta("")
    revision: int = _meta()

    @classmethod
    def of(cls, lock: LockKey, table: TableRef, schema: dict, dropped: Iterable[str] = ()) -> "Remnant":
        return cls(schema, sorted(dropped), task=lock.task, down_schema=lock.down_schema, down_table=lock.down_table,
                   source=table.source, up_schema=table.schema, up_table=table.table)

    @property
    def lock(self) -> LockKey:
        return LockKey(self.task, self.down_schema, self.down_table)

    @property
    def table(self) -> TableRef:
        return TableRef(self.source, self.up_schema, self.up_table)


class RemnantOps(_Base):
    """Written and read by the master leader only."""

    # caller: master leader (optimist rebuild)
    def list_remnants(self) -> Listing[Remnant]:
        return self._list(Remnant, self.keys.key("remnant"))

    # caller: master leader (master/locks.py, before removing a lock)
    def put_remnants(self, fence: Fence, lock: LockKey, puts: Iterable[Remnant],
                     deletes: Iterable[TableRef] = ()) -> int:
        """Record the tables that left ``lock`` (``puts``, identified by their ``table``) and forget
        those that came back as members (``deletes``).  Idempotent: written before the lock's
        removal, which may still be deferred by a newer Info."""
        def key(t: TableRef) -> str:
            return self.keys.key("remnant", lock.task, lock.down_schema, lock.down_table, *self._t(t))
        ops = [T.Put(key(r.table), r.encode()) for r in sorted(puts, key=lambda r: str(r.table))]
        ops += [T.Delete(key(t)) for t in sorted(deletes, key=str)]
        if not ops:
            return 0
        return self._fenced_chunks(fence, f"recording the tables that left lock {lock.id}", ops)
