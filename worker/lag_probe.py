"""A subtask's lag while its stream does not come back: a batch blocked on a shard-DDL lock
(waiting, or paused for the operator) reports nothing itself, so without this the status kept the
last batch's "synced, lag 0" and the lag gauge stayed 0 while rows waited upstream.

The probe wakes every ``interval``; when no batch has ended since its last look it asks the
upstream for its binlog end (one kept connection) and, if that is past what the stream has read,
reports the lag as the time since the subtask was last caught up.  The stream's own report takes
over again at its next batch.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from worker.events import Position
from worker.upstream import UpstreamEnd


class LagProbe:
    """``read_pos()``: what the stream has read; ``report(lag_seconds, upstream_end)``: called
    from the probe's thread when the stream is behind and has not reported for a while."""

    def __init__(self, up_kwargs: dict, read_pos: Callable[[], Position | None],
                 report: Callable[[float, Position], None], interval: float = 2.0,
                 caught_up_at: float | None = None):
        """``caught_up_at``: when the subtask was last caught up, if known (a probe that takes
        over from another, e.g. for a subtask stopped in Error, goes on from its time)."""
        self.read_pos, self.report, self.interval = read_pos, report, interval
        self._end = UpstreamEnd(up_kwargs)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.caught_up_at = time.monotonic() if caught_up_at is None else caught_up_at
        self._batches = 0
        self._thread = threading.Thread(target=self._run, name="lag-probe", daemon=True)

    def start(self) -> LagProbe:
        self._thread.start()
        return self

    def batch_done(self, caught_up: bool) -> None:
        """The stream ended a batch (and reported itself); ``caught_up``: nothing left to read."""
        with self._lock:
            self._batches += 1
            if caught_up:
                self.caught_up_at = time.monotonic()

    def lag(self) -> float:
        return round(time.monotonic() - self.caught_up_at, 1)

    def close(self) -> None:
        self._stop.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        self._end.close()

    def _run(self) -> None:
        seen = -1
        while not self._stop.wait(self.interval):
            with self._lock:
                batches = self._batches
            if batches != seen:           # the stream reported since the last look
                seen = batches
                continue
            self.probe()

    def probe(self) -> bool:
        """One look (the thread's step; callable directly): True when it reported a lag."""
        try:
            end = self._end.position()
        except Exception:  # noqa: BLE001 -- an unreachable upstream is the stream's error to report
            return False
        pos = self.read_pos()
        if pos is None or not end.file:
            return False
        if (end.file, end.pos) == (pos.file, pos.pos):
            # caught up as of now: a write after a long idle wait is not reported as that long a lag
            with self._lock:
                self.caught_up_at = time.monotonic()
            return False
        self.report(self.lag(), end)
        return True
