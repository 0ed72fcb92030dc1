"""The read-ahead both readers share: a background thread queues a range's items (bounded), and the
consumer's ``items()`` merges whatever whole pieces are ready into one chunk.  A reader subclasses
:class:`ReadAhead`, starts ``self._thread`` (which feeds ``_put``) on ``__enter__`` and stops it in
``close()``."""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Iterator

from worker.binlog.contract import BinlogReadError, Chunk, End, Item, RowDecodeError
from worker.events import Position


@dataclass
class _Failed:
    """A reader thread's error, queued (and sent over the decoder pipe) in place of the next item."""
    error: str


_Failed.__module__ = "worker.binlog.source"     # its pickled name on the decoder pipe and in Spark rows


class ReadAhead:
    """Items of ``[start, ...)`` queued ahead of the consumer: at most about ``max_rows`` rows wait.

    :meth:`items` hands out as a chunk whatever whole pieces are ready when the consumer asks (at
    least one, at most ``max_rows`` rows, never across a statement event): while the apply keeps up,
    chunks stay small and the apply starts early; when it falls behind, pieces pile up and the next
    chunk is bigger, so fewer Spark jobs (~0.1-0.3 s each on a small machine) are paid per row."""

    _thread: threading.Thread

    def __init__(self, source_id: str, start: Position, *, max_rows: int, piece_rows: int):
        self.source_id, self.start = source_id, start
        self.max_rows = max_rows
        self.min_rows = min(piece_rows, max_rows)
        self._q: queue.Queue = queue.Queue(maxsize=max(2, max_rows // max(1, piece_rows)))
        self._stop = threading.Event()
        self._finished = False
        self.decode_seconds = 0.0

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _drain(self) -> None:
        """Empty the queue (unblocks a thread waiting to put) and wait for the thread to end."""
        while True:
            try:
                self._q.get_nowait()
            except queue.Empty:
                break
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _get(self, block: bool = True):
        while True:
            try:
                item = self._q.get(timeout=0.5) if block else self._q.get_nowait()
            except queue.Empty:
                if not block:
                    raise
                if not self._thread.is_alive() and self._q.empty():
                    raise BinlogReadError("binlog receiving thread ended without a result",
                                          source=self.source_id, position=str(self.start)) from None
                continue
            if isinstance(item, _Failed):
                # a decoder's error crosses a pipe (or a Spark job) as text: its type by name
                if "RowDecodeError: " in item.error:
                    raise RowDecodeError.from_text(item.error, self.source_id, str(self.start))
                raise BinlogReadError(f"decoding the binlog failed: {item.error}", source=self.source_id,
                                      position=str(self.start))
            return item

    def items(self) -> Iterator[Item]:
        while True:
            item = self._get()
            if not isinstance(item, Chunk):
                yield item
                if isinstance(item, End):
                    return
                continue
            txns, rows, last, nxt = list(item.txns), item.rows, item.end, None
            while rows < self.max_rows:
                if rows >= self.min_rows:
                    try:
                        more = self._get(block=False)
                    except queue.Empty:
                        break
                else:
                    more = self._get()
                if isinstance(more, Chunk):
                    txns += more.txns
                    rows += more.rows
                    last = more.end
                else:
                    nxt = more
                    break
            yield Chunk(txns, rows, last)
            if nxt is not None:
                yield nxt
                if isinstance(nxt, End):
                    return
