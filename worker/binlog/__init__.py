"""Binlog readers: how a syncer gets ``[start, end)`` of its source's binlog as whole-transaction
``Chunk``s, ``Statement``s and a final ``End`` (``source.py``), all readers alike.

``READERS`` maps the task key ``syncer.binlog-reader`` to a reader; adding one is adding an entry
(``coordinator.config.BINLOG_READERS`` lists the names the config accepts; a test keeps the two
equal).  A reader is made once per syncer: ``prepare()`` at syncer start, ``open(...)`` per batch
(an iterator and context manager, see ``source.BinlogPrefetch``), ``close()`` when the syncer goes.
"""
from __future__ import annotations

from typing import Callable, Protocol

from worker.events import Position

from .source import BinlogPrefetch, DecoderProcess


class BinlogReader(Protocol):
    def prepare(self) -> None: ...

    def open(self, db_kwargs: dict, mapper_args: tuple, start: Position, end: Position | None,
             **kw) -> BinlogPrefetch: ...

    def close(self) -> None: ...


class ProcessReader:
    """Decoding in a child process of the driver (the default): one process, started ahead of
    the first batch and reused by all of them."""

    def __init__(self, spark, source_id: str):
        self.decoder = DecoderProcess(source_id)

    def prepare(self) -> None:
        self.decoder.ensure()

    def open(self, db_kwargs, mapper_args, start, end, **kw) -> BinlogPrefetch:
        return BinlogPrefetch(self.decoder, db_kwargs, mapper_args, start, end, **kw)

    def close(self) -> None:
        self.decoder.kill()


class SparkReader:
    """Decoding in a Spark executor through the ``mysql-binlog`` Python data source."""

    def __init__(self, spark, source_id: str):
        self.spark = spark

    def prepare(self) -> None:
        from .spark_reader import register   # pyspark's data source API: only when this reader is used
        register(self.spark)

    def open(self, db_kwargs, mapper_args, start, end, **kw) -> BinlogPrefetch:
        from .spark_reader import SparkBinlogReader   # as in prepare()
        return SparkBinlogReader(self.spark, db_kwargs, mapper_args, start, end, **kw)

    def close(self) -> None:
        pass


READERS: dict[str, Callable[..., BinlogReader]] = {"process": ProcessReader, "spark": SparkReader}


def make_reader(name: str, spark, source_id: str) -> BinlogReader:
    """The reader called ``name``; KeyError names the known ones."""
    try:
        return READERS[name](spark, source_id)
    except KeyError:
        raise KeyError(f"binlog reader {name!r} is unknown; use one of {', '.join(sorted(READERS))}") from None
