"""Reading one upstream's binlog through a Spark source: the ``mysql-binlog`` Python data source.

The default reader (``worker.binlog.source.BinlogPrefetch``) decodes in a child process of the
driver.  This one decodes in a Spark executor instead, for deployments that keep every
data-path step inside Spark (a small driver pod, executors with the CPU):

* :class:`BinlogDataSource` (format ``mysql-binlog``) is a batch read of ``[start, end)``.
  Offsets are binlog positions with their MariaDB GTID set (options ``start``/``end``, JSON of
  :class:`~worker.events.Position`); they come from the syncer's checkpoints in the downstream,
  never from a Spark checkpoint dir.  The executor runs the same decoder as the default path
  (``decode_range`` with the fast row decoder, grouped into pieces of ``piece_rows`` rows) and
  yields each :class:`Chunk` / :class:`Statement` / :class:`End` pickled into a binary column,
  in binlog order.  One partition: a binlog range is one sequential stream.
* :class:`SparkBinlogReader` is what the syncer consumes (``Syncer(..., reader="spark")``): the
  same context manager and ``items()`` as ``BinlogPrefetch``, same items, same order.

Why segments: ``toLocalIterator`` hands a partition to the driver only once the partition is
complete, so one read of a whole batch would hold the batch in the driver and start the apply
only after all of it is decoded.  The reader therefore runs the range as consecutive reads of
about ``segment_rows`` rows (each stops at a transaction boundary; the next starts from the
GTID state where it stopped, as a new batch would) in a background thread, one Spark job each,
while the apply jobs run: at most about one segment (in the driver JVM) plus ``max_rows`` (in
the queue) decoded rows wait in the driver.
"""
from __future__ import annotations

import base64
import json
import pickle
import threading
import uuid
import weakref

from pyspark import InheritableThread
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from worker.binlog.contract import BinlogReadError, Chunk, End, RouteArgs
from worker.binlog.read_ahead import ReadAhead, _Failed
from worker.binlog.source import _pieces
from worker.events import Position

FORMAT = "mysql-binlog"
SCHEMA = "seq long, item binary"
# The option key carrying the connection settings (with the password) matches Spark's
# ``spark.redaction.regex`` ("secret"), so plan strings and the UI show it redacted.
DB_OPTION = "db_secret"


# ------------------------------------------------------------------ options
def _blob(obj) -> str:
    return base64.b64encode(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).decode()


def _unblob(text: str):
    return pickle.loads(base64.b64decode(text))


def read_options(db_kwargs: dict, route: RouteArgs, start: Position, end: Position | None, *,
                 max_events: int = 0, source_id: str = "", piece_rows: int = 2_000) -> dict[str, str]:
    """The data source options of one read (Spark options are strings; the route as the plain
    tuple it always was, so the option text is unchanged)."""
    return {"start": json.dumps(start.to_json()), "end": json.dumps(end.to_json()) if end else "",
            "max_events": str(int(max_events)), "piece_rows": str(int(piece_rows)), "source_id": source_id,
            DB_OPTION: _blob(db_kwargs), "mapper": _blob(route.wire())}


def _request(options) -> dict:
    """Options -> the decode request ``binlog_source._pieces`` takes (runs in the executor)."""
    try:
        start = Position.from_json(json.loads(options["start"]))
        end_text = options.get("end") or ""
        end = Position.from_json(json.loads(end_text)) if end_text else None
        return {"db_kwargs": _unblob(options[DB_OPTION]), "mapper": _unblob(options["mapper"]),
                "start": start, "end": end, "max_events": int(options.get("max_events") or 0),
                "piece_rows": max(1, int(options.get("piece_rows") or 2_000)),
                "source_id": options.get("source_id") or ""}
    except (KeyError, ValueError, TypeError, pickle.UnpicklingError) as e:
        raise BinlogReadError(f"data source {FORMAT!r} needs the options start, {DB_OPTION} and mapper as "
                              f"written by worker.binlog.spark_reader.read_options ({type(e).__name__}: {e})",
                              source=options.get("source_id") or "") from None


# ------------------------------------------------------------------ the data source
class BinlogDataSource(DataSource):
    """``spark.read.format("mysql-binlog").options(**read_options(...)).load()``: one row per
    decoded item (``seq``, pickled ``item``) of ``[start, end)``, in binlog order."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema) -> "BinlogRangeReader":
        return BinlogRangeReader(dict(self.options))


class BinlogRangeReader(DataSourceReader):
    def __init__(self, options: dict):
        self.options = options

    def partitions(self):
        return [InputPartition(0)]

    def read(self, partition):
        """Runs in the executor: decode with the default path's decoder, pieces of whole
        transactions, the End (with the executor's decode time) last."""
        req = _request(self.options)
        for seq, item in enumerate(_pieces(req)):
            yield (seq, pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))


_registered: "weakref.WeakSet" = weakref.WeakSet()
_register_lock = threading.Lock()


def register(spark) -> None:
    """Register ``mysql-binlog`` with this SparkSession (once per session)."""
    with _register_lock:
        if spark not in _registered:
            spark.dataSource.register(BinlogDataSource)
            _registered.add(spark)


def load_range(spark, db_kwargs: dict, route: RouteArgs, start: Position, end: Position | None, *,
               max_events: int = 0, source_id: str = "", piece_rows: int = 2_000):
    """The DataFrame of one read (``seq long, item binary``)."""
    register(spark)
    opts = read_options(db_kwargs, route, start, end, max_events=max_events, source_id=source_id,
                        piece_rows=piece_rows)
    return spark.read.format(FORMAT).schema(SCHEMA).options(**opts).load()


def spark_error_text(e: BaseException) -> str:
    """The executor's error line out of a Spark job failure (the Java stack is noise here)."""
    text = str(e)
    for marker in ("RowDecodeError:", "BinlogReadError:", "PositionError:", "OperationalError:", "pymysql.err.", "Error: "):
        i = text.rfind(marker)
        if i >= 0:
            return text[i:].splitlines()[0][:500]
    return (text.splitlines()[0][:500] if text else type(e).__name__)


# ------------------------------------------------------------------ what the syncer consumes
class SparkBinlogReader(ReadAhead):
    """``[start, end)`` read through the ``mysql-binlog`` source, ahead of the consumer.

    A ``worker.binlog.contract.BinlogRange``, with the same items as the decoder process's
    ``BinlogPrefetch`` (``ReadAhead.items()``, shared with it: chunks of
    whatever whole pieces are ready, at most ``max_rows`` rows, never across a statement
    event, End last).  A background thread runs consecutive reads and queues their pieces:
    the first of a quarter of ``segment_rows`` (the apply starts early), then ``segment_rows``
    each (default ``2 * max_rows``: every read pays a Spark job, the data source's planning
    and a GTID-positioned binlog dump, ~0.5-1 s on a busy 2-core machine with a large binlog
    file, so reads are fewer and larger than the apply's chunks); at most ``max_events`` rows
    in all, cut at a transaction boundary exactly where one read of the whole range would
    stop.  Leaving the context early cancels the running read job."""

    def __init__(self, spark, db_kwargs: dict, route: RouteArgs, start: Position, end: Position | None, *,
                 max_events: int = 0, source_id: str = "", max_rows: int = 20_000, piece_rows: int = 2_000,
                 segment_rows: int | None = None):
        super().__init__(source_id, start, max_rows=max_rows, piece_rows=piece_rows)
        self.spark = spark
        self.db_kwargs, self.route = db_kwargs, route
        self.end = end
        self.max_events = max_events
        self.piece_rows = piece_rows
        self.segment_rows = max(1, segment_rows or 2 * max(max_rows, piece_rows))
        self.segments = 0
        self._group = f"shardmerge-binlog-{source_id}-{uuid.uuid4().hex[:8]}"
        # job group properties are thread-local; InheritableThread clears them when it ends
        self._thread = InheritableThread(self._run, name=f"binlog-spark-read-{source_id}", daemon=True)

    def __enter__(self) -> SparkBinlogReader:
        register(self.spark)
        self._thread.start()
        return self

    def _segment(self, pos: Position, limit: int):
        """One Spark read from ``pos``: yields its Chunk/Statement items, returns its End."""
        df = load_range(self.spark, self.db_kwargs, self.route, pos, self.end,
                        max_events=limit, source_id=self.source_id, piece_rows=self.piece_rows)
        self.segments += 1
        expect = 0
        for row in df.toLocalIterator():
            if row.seq != expect:
                raise BinlogReadError(f"the {FORMAT} read returned item {row.seq} where {expect} was expected",
                                      source=self.source_id, position=str(pos))
            expect += 1
            item = pickle.loads(row.item)
            if isinstance(item, End):
                return item
            yield item
        raise BinlogReadError(f"the {FORMAT} read ended without its end marker", source=self.source_id,
                              position=str(pos))

    def _run(self) -> None:
        sc = self.spark.sparkContext
        sc.setJobGroup(self._group, f"shardmerge binlog read {self.source_id} from {self.start}",
                       interruptOnCancel=True)
        pos, total, decode = self.start, 0, 0.0
        try:
            while not self._stop.is_set():
                # the first read is small so the apply starts early; later ones are full size
                size = self.segment_rows if self.segments else max(self.piece_rows, self.segment_rows // 4)
                limit = size if not self.max_events else min(size, self.max_events - total)
                seg_rows = 0
                seg = self._segment(pos, limit)
                while True:
                    try:
                        item = next(seg)
                    except StopIteration as stop:
                        seg_end: End = stop.value
                        break
                    if isinstance(item, Chunk):
                        seg_rows += item.rows
                    if not self._put(item):
                        return
                total += seg_rows
                decode += seg_end.decode_seconds
                end = self.end
                reached = end is not None and bool(end.file) and seg_end.pos >= end
                # a read stops early only after ``limit`` rows; fewer means the range is done
                if reached or seg_rows < limit or (self.max_events and total >= self.max_events):
                    self.decode_seconds = decode
                    self._finished = True
                    self._put(End(seg_end.pos, decode))
                    return
                if not pos < seg_end.pos:
                    raise BinlogReadError(f"the {FORMAT} read made no progress past {pos}",
                                          source=self.source_id, position=str(pos))
                pos = seg_end.pos
        except Exception as e:   # reported to the consumer, which raises it with its context
            if not self._stop.is_set():
                self._finished = True
                self._put(_Failed(f"{FORMAT} read from {pos}: {spark_error_text(e)}"))

    def close(self) -> None:
        self._stop.set()
        if not self._finished:
            try:
                self.spark.sparkContext.cancelJobGroup(self._group)
            except Exception:    # the session is gone: nothing left to cancel
                pass
        self._drain()
