"""Binlog positions and the events the syncer hands around (one source, one task).

A :class:`Position` is a point *between* events of one upstream server: binlog file + offset
(the total order the syncer compares with) plus the GTID set reached there (MariaDB or MySQL form) (what an
operator or a failover uses).  Every change carries the position at the END of its
transaction, so "position <= table checkpoint" means "this transaction is already applied".
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from coordinator.errors import ShardMergeError
from worker import gtid


class PositionError(ShardMergeError):
    """A binlog position or GTID set is malformed; names the text and where it came from."""


_FILE_RE = re.compile(r"^(.*?)(\d+)$")


def _file_key(name: str) -> tuple[str, int]:
    m = _FILE_RE.match(name or "")
    return (m.group(1), int(m.group(2))) if m else (name or "", -1)


@dataclass(frozen=True)
class Position:
    file: str = ""
    pos: int = 0
    gtid: str = ""   # GTID set as the server prints it (worker.gtid: MariaDB or MySQL); "" when unknown

    @cached_property
    def key(self) -> tuple:
        # cached: the syncer compares one transaction's position with many others
        base, num = _file_key(self.file)
        return (num, base, self.pos)

    def is_zero(self) -> bool:
        return not self.file

    @property
    def file_number(self) -> int:
        """The binlog file's sequence number (``mysql-bin.000042`` -> 42; -1 if none)."""
        return _file_key(self.file)[1]

    def __lt__(self, other: "Position") -> bool:
        return self.key < other.key

    def __le__(self, other: "Position") -> bool:
        return self.key <= other.key

    def __gt__(self, other: "Position") -> bool:
        return self.key > other.key

    def __ge__(self, other: "Position") -> bool:
        return self.key >= other.key

    def same_point(self, other: "Position") -> bool:
        return self.key == other.key

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" gtid={self.gtid}" if self.gtid else "")

    def to_json(self) -> dict:
        return {"file": self.file, "pos": self.pos, "gtid": self.gtid}

    @classmethod
    def from_json(cls, d: dict) -> "Position":
        return cls(d.get("file", ""), int(d.get("pos", 0)), d.get("gtid", ""))


def parse_gtid_set(text: str, what: str = "GTID set") -> dict[str, str]:
    """GTID set text of either flavor -> {stream key: its part} (MariaDB domain, MySQL UUID);
    see :mod:`worker.gtid`."""
    try:
        return gtid.entries(text, what)
    except gtid.GtidError as e:
        raise PositionError(str(e)) from None


def advance_gtid_set(text: str, gtid_: str) -> str:
    """The set after the transaction with ``gtid_`` (see :func:`worker.gtid.advance`)."""
    return gtid.advance(text, gtid_)


# Kinds of row changes and statement events (see worker.binlog.contract).
INSERT, UPDATE, DELETE, DDL, END = "insert", "update", "delete", "ddl", "end"
DML_KINDS = (INSERT, UPDATE, DELETE)


@dataclass(frozen=True)
class DDLEvent:
    """One DDL statement of the binlog, as the syncer hands it to the DDL handler.

    ``table`` is the upstream table the statement changes (``None`` for database-level
    statements); ``target`` its routed downstream table (``None`` when filtered).  ``start``
    is the position before the statement (the global checkpoint while it is pending),
    ``end`` the position after it (the table checkpoint once it is done)."""
    source: str
    schema: str                       # the upstream schema the statement names (or the session's db)
    table: str | None
    kind: str                         # a coordinator.schema.kinds.StatementKind value
    query: str                        # verbatim upstream statement
    target_schema: str | None
    target_table: str | None
    start: Position
    end: Position
    timestamp: int = 0
    extra: dict = field(default_factory=dict, compare=False)
    # one change of a multi-change shard ALTER, coordinated on its own (``DDLHandler.changes``):
    # its index among the statement's ``changes``; None for a statement handled whole
    change: int | None = None
    changes: int = 1
    # the statement's changes still to come after this one, in the order they will be sent (None:
    # those after ``change``, in the statement's order).  The lock may ask for a later change
    # first (``Operation.first``): the changes of one statement have no upstream row between them
    rest: tuple[int, ...] | None = None
    # a held statement run together with later statements of its table (``Operation.combine``):
    # ``query`` is the combined ALTER and these are the statements it folded in, each
    # ``{"at": end position, "statement": upstream text, "renames": [[old, new], ...]}``
    # (checkpoint rule 11)
    folds: tuple = ()

    @property
    def later(self) -> tuple[int, ...]:
        """The changes of the statement still to come after this one."""
        if self.change is None:
            return ()
        return self.rest if self.rest is not None else tuple(range(self.change + 1, self.changes))

    @property
    def last_change(self) -> bool:
        """The statement is complete once this is done: the table's checkpoint may pass it."""
        return self.change is None or not self.later

    @property
    def upstream(self) -> str:
        return f"`{self.schema}`.`{self.table}`" if self.table else f"`{self.schema}`"
