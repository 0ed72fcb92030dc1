"""Binlog readers: how a syncer gets ``[start, end)`` of its source's binlog as whole-transaction
``Chunk``s, ``Statement``s and a final ``End``, all readers alike (the contract: ``contract.py``).

``READERS`` maps the task key ``syncer.binlog-reader`` to a reader; adding one is adding an entry
(``coordinator.config.BINLOG_READERS`` lists the names the config accepts; a test keeps the two
equal, another runs every reader over one range and compares the items).  A reader is made once per
syncer: ``prepare()`` at syncer start, ``open(...)`` per batch (a ``contract.BinlogRange``),
``close()`` when the syncer goes.
"""
from __future__ import annotations

from typing import Callable

from worker.events import Position

from .contract import (BinlogRange, BinlogReadError, BinlogReader, Chunk, End, Item, RouteArgs, RowsTable,
                       Statement, Unfinished)
from .source import BinlogPrefetch, DecoderProcess, decode_range, dump_position, gtid_follows

__all__ = ["READERS", "BinlogPrefetch", "BinlogRange", "BinlogReadError", "BinlogReader", "Chunk", "DecoderProcess",
           "End", "Item", "ProcessReader", "RouteArgs", "RowsTable", "SparkReader", "Statement", "Unfinished",
           "decode_range", "dump_position", "gtid_follows", "make_reader"]


class ProcessReader:
    """Decoding in a child process of the driver (the default): one process, started ahead of
    the first batch and reused by all of them."""

    def __init__(self, spark, source_id: str):
        self.decoder = DecoderProcess(source_id)

    def prepare(self) -> None:
        self.decoder.ensure()

    def open(self, db_kwargs: dict, route: RouteArgs, start: Position, end: Position | None, *,
             max_events: int = 0, source_id: str = "", max_rows: int = 20_000) -> BinlogRange:
        return BinlogPrefetch(self.decoder, db_kwargs, route, start, end, max_events=max_events,
                              source_id=source_id, max_rows=max_rows)

    def close(self) -> None:
        self.decoder.kill()


class SparkReader:
    """Decoding in a Spark executor through the ``mysql-binlog`` Python data source."""

    def __init__(self, spark, source_id: str):
        self.spark = spark

    def prepare(self) -> None:
        from .spark_reader import register   # pyspark's data source API: only when this reader is used
        register(self.spark)

    def open(self, db_kwargs: dict, route: RouteArgs, start: Position, end: Position | None, *,
             max_events: int = 0, source_id: str = "", max_rows: int = 20_000) -> BinlogRange:
        from .spark_reader import SparkBinlogReader   # as in prepare()
        return SparkBinlogReader(self.spark, db_kwargs, route, start, end, max_events=max_events,
                                 source_id=source_id, max_rows=max_rows)

    def close(self) -> None:
        pass


READERS: dict[str, Callable[..., BinlogReader]] = {"process": ProcessReader, "spark": SparkReader}


def make_reader(name: str, spark, source_id: str) -> BinlogReader:
    """The reader called ``name``; KeyError names the known ones."""
    try:
        return READERS[name](spark, source_id)
    except KeyError:
        raise KeyError(f"binlog reader {name!r} is unknown; use one of {', '.join(sorted(READERS))}") from None
