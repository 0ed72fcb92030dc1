"""What a binlog reader hands the syncer, and what it is given: the contract every reader of
``worker.binlog.READERS`` keeps (the decoder process of ``source.py``, the Spark data source of
``spark_reader.py``).  The syncer and the apply import these names from here, never a reader's module.

A reader's ``open(...)`` is a :class:`BinlogRange`: a context manager whose ``items()`` yields, in
binlog order,

* :class:`Chunk` - whole transactions (``txns`` = ``[(end position, [(kind, RowsTable, rows)])]``,
  a DML transaction's changes all carry the position at its END); a transaction of keyed tables
  too large for one chunk comes in pieces (:class:`Unfinished`, with the position before it)
  then its last piece;
* :class:`Statement` - any statement event other than BEGIN/COMMIT, with the positions before and
  after it;
* :class:`End` - always last: the position the read stopped at (a transaction boundary).

Rows are tuples of values pymysql binds directly; ``rows`` of an update is a list of
``(before, after)`` pairs.  Every reader yields the same items for the same range
(``tests/worker/test_binlog_readers.py``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Iterator, NamedTuple, Protocol, Union

from coordinator.errors import ShardMergeError
from coordinator.routing import TableMapper
from worker.events import Position

if TYPE_CHECKING:
    from coordinator.config import Instance

# The items travel pickled (decoder pipe, Spark rows) under the module name they always had:
# a driver and an executor of different versions still read each other's items.
_WIRE_MODULE = "worker.binlog.source"


class BinlogReadError(ShardMergeError):
    """The binlog could not be read up to the requested end; names source and position."""


class RowDecodeError(BinlogReadError):
    """The values of a rows event could not be decoded (a byte sequence the column's character
    set leaves undefined that the server stored anyway, a type the decoder does not know): the
    same bytes fail on every retry, so the subtask stops, naming the table, the event and its
    position, instead of retrying for ever.  ``position`` is where the event *ends* (``event``
    is "rows"): the operator's ``binlog skip`` takes it from the status and the decoder then
    passes over that one event (the rest of its transaction is applied)."""

    @classmethod
    def from_text(cls, text: str, source: str, fallback: str) -> "RowDecodeError":
        """The error again from its text, which is all that crosses the decoder's pipe or a
        Spark job: the event's end position and the table are read back from the message."""
        m = _ROWS_EVENT_AT.search(text)
        t = _ROWS_TABLE.search(text)
        return cls(f"decoding the binlog failed: {text}", source=source,
                   position=m.group(1) if m else fallback, event="rows" if m else None,
                   table=f"{t.group(1)}.{t.group(2)}" if t else None)


# the words of the decoder's RowDecodeError message that ``RowDecodeError.from_text`` reads back
ROWS_EVENT_AT = "in the rows event ending at"
_ROWS_EVENT_AT = re.compile(re.escape(ROWS_EVENT_AT) + r" ([^\s:]+:\d+)")
_ROWS_TABLE = re.compile(r"rows of `((?:[^`]|``)+)`\.`((?:[^`]|``)+)`")


class RowsTable(NamedTuple):
    """One upstream table as seen by a rows event (interned: shared by all its rows)."""
    up_schema: str
    up_table: str
    tgt_schema: str
    tgt_table: str
    cols: tuple          # column names of the row image (binlog_row_metadata=FULL), then ``origin``'s
    pk: tuple            # the upstream primary key from the binlog metadata ((), if none), then ``origin``'s
    origin: tuple = ()   # values of the shard origin columns (route ``extract-*``), last in every row


@dataclass
class Chunk:
    txns: list           # [(Position, [(kind, RowsTable, rows)])], whole transactions in order
    rows: int
    end: Position        # end of the last transaction


class Unfinished(list):
    """The changes of a transaction whose commit comes later: a piece of a transaction larger
    than the decoder's ``split_rows``, handed out before the rest is decoded.  In a chunk's
    ``txns`` it stands with the position BEFORE its transaction (its commit position is not
    known yet), so a table acknowledged with it is never marked past the transaction; a table
    point equal to that position does not skip it (``Partitioner.split``).  Only transactions
    whose every table has a primary key in the binlog are split: a keyless table's replay is
    exact only for whole transactions (checkpoint rule 10)."""


@dataclass
class Statement:
    query: str
    schema: str          # the session's default database
    ts: int
    start: Position      # before the statement
    end: Position        # after it


@dataclass
class End:
    pos: Position
    decode_seconds: float = 0.0


for _cls in (RowsTable, Chunk, Unfinished, Statement, End):
    _cls.__module__ = _WIRE_MODULE

Item = Union[Chunk, Statement, End]


class RouteArgs(NamedTuple):
    """What a decoder needs to filter and route rows: the task instance and the task's meta schema
    (its tables are never replicated).  Picklable: it travels to the decoder process and into Spark
    options, as the plain tuple ``(instance, meta_schema)`` it always was, now and then with
    ``skip_rows``: the end positions ``(file, pos)`` of rows events an operator's ``binlog skip``
    names (events whose values cannot be decoded: the decoder passes over them unread)."""
    instance: Instance
    meta_schema: str
    skip_rows: frozenset = frozenset()

    def mapper(self) -> TableMapper:
        m = TableMapper(self.instance, self.meta_schema)
        m.skip_rows = self.skip_rows
        return m

    def wire(self) -> tuple:
        """The plain tuple that travels: ``(instance, meta_schema)`` unless skips are armed, so a
        decoder of the release before ``skip_rows`` still reads every ordinary request."""
        return tuple(self) if self.skip_rows else (self.instance, self.meta_schema)


class BinlogRange(Protocol):
    """One read of ``[start, end)``: enter it, consume ``items()``, leave it (leaving early stops the read)."""
    decode_seconds: float    # time spent decoding, known once End was handed out

    def __enter__(self) -> BinlogRange: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...

    def items(self) -> Iterator[Item]: ...

    def close(self) -> None: ...


class BinlogReader(Protocol):
    """A reader, made once per syncer (``worker.binlog.make_reader``): ``prepare()`` at syncer start,
    ``open(...)`` per batch, ``close()`` when the syncer goes.  ``max_events`` caps the rows of one read
    (cut at a transaction boundary), ``max_rows`` the rows of one chunk."""

    def prepare(self) -> None: ...

    def open(self, db_kwargs: dict, route: RouteArgs, start: Position, end: Position | None, *,
             max_events: int = 0, source_id: str = "", max_rows: int = 20_000) -> BinlogRange: ...

    def close(self) -> None: ...
