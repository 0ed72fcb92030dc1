"""SourceTables: the upstream tables of one task+source and their targets, and its etcd operations
(DM's ``optimism/table.go``)."""
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .record import Listing, Record, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


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


class SourceTablesOps(_Base):
    """Written by the worker, read by the master to know a lock's members."""

    # caller: worker (shardddl/source_tables.py at subtask start, CREATE/DROP TABLE)
    def put_source_tables(self, st: SourceTables) -> int:
        return self._put(self.keys.key("source-tables", st.task, st.source), st)

    # caller: master leader (binlog-schema requests)
    def get_source_tables(self, task: str, source: str) -> SourceTables | None:
        return self._get(SourceTables, self.keys.key("source-tables", task, source))[0]

    # caller: master leader (optimist rebuild, master/locks.py)
    def list_source_tables(self, task: str | None = None) -> Listing[SourceTables]:
        return self._list(SourceTables, self.keys.key("source-tables", *([task] if task else [])))
