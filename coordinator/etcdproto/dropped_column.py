"""DroppedColumn: per lock, column and table, how far a DROP COLUMN has gone, and its etcd
operations (DM's ``optimism/column.go``)."""
import functools
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from etcd3 import transactions as T
from etcd3 import utils as eu

from .keys import LockKey, TableRef
from .leader import Fence
from .record import DroppedStage, Listing, Record, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


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


class DroppedColumnOps(_Base):
    """Written and read by the master leader only (re-add refusal survives a master restart)."""

    # caller: master leader (optimist rebuild); delete_table
    def list_dropped_columns(self, lock: LockKey | None = None) -> Listing[DroppedColumn]:
        pre = self.keys.lock_prefix("dropped-column", lock) if lock else self.keys.key("dropped-column")
        return self._list(DroppedColumn, pre)

    # caller: master leader (master/write_batch.py: the raw writes, to batch with others)
    def dropped_column_puts(self, lock: LockKey, table: TableRef, columns: Iterable[str],
                            stage: DroppedStage = DroppedStage.NOT_DONE) -> list[tuple[str, typing.Any]]:
        """(key, etcd put) of each column's record: what ``put_dropped_columns`` writes."""
        value = _encoded(DroppedStage(stage))
        out = []
        for c in columns:
            k = self.keys.dropped_column(lock, c, *self._t(table))
            out.append((k, T.Put(k, value)))
        return out

    # caller: master leader (master/write_batch.py)
    def dropped_column_prefix(self, lock: LockKey, column: str) -> str:
        """The prefix ``delete_dropped_column`` clears (every table's record of the column)."""
        return self.keys.key("dropped-column", lock.task, lock.down_schema, lock.down_table, column)

    # caller: master leader (master/locks.py, fenced)
    def put_dropped_columns(self, fence: Fence, lock: LockKey, table: TableRef, columns: Iterable[str],
                            stage: DroppedStage = DroppedStage.NOT_DONE) -> int:
        ops = [put for _, put in self.dropped_column_puts(lock, table, columns, stage)]
        return self._fenced_chunks(fence, f"recording dropped columns of {table} in {lock.id}", ops)

    # caller: master leader (master/locks.py, fenced)
    def delete_dropped_column(self, fence: Fence, lock: LockKey, column: str) -> int:
        """The column is fully dropped downstream: forget all its per-table records."""
        p = self.dropped_column_prefix(lock, column)
        _, rev, _ = self._fenced(fence, f"clearing dropped column {column} of {lock.id}", [],
                                 [T.Delete(p, eu.prefix_range_end(eu.to_bytes(p)))])
        return rev


@functools.lru_cache(maxsize=None)
def _encoded(stage: DroppedStage) -> bytes:
    """A record's value is its stage alone: one encoding per stage (a big lock's DROP writes one
    record per table, twice)."""
    return DroppedColumn(stage).encode()
