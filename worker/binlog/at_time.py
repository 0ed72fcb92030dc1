"""The binlog position of a point in time, for ``start-task --start-time`` (dmctl's flag).

A binlog event carries the second it was written.  The files are ordered, so the file holding
the time is the last one whose first event is not after it (one short dump per file, read up to
its first timed event); that file is then read to the first transaction that starts at or after
the time.  The start is that transaction's first event, with the GTID state there, so the
syncer begins on a transaction boundary.  A time after the last transaction is the binlog's
end; a time before the oldest file still on the server is an error (those events were purged).
"""
from __future__ import annotations

import datetime
import random

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import FormatDescriptionEvent, GtidEvent, MariadbGtidEvent, RotateEvent

from coordinator.errors import ShardMergeError
from worker.events import Position
from worker.upstream import gtid_at, master_status


class StartTimeError(ShardMergeError):
    """No binlog position answers a start time (purged, or the server cannot be read)."""


def position_at_time(db_kwargs: dict, when: int, source_id: str) -> Position:
    """The first transaction of the upstream written at or after ``when`` (UNIX seconds)."""
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        files = [r[0] for r in cur.fetchall()]
    if not files:
        raise StartTimeError("the upstream has no binary logs (is log_bin on?)", source=source_id)
    starts = [_first_time(db_kwargs, f) for f in files]
    if when < starts[0]:
        raise StartTimeError(f"the oldest binlog event still on the server ({files[0]}) was written at "
                             f"{_utc(starts[0])}, after the start time {_utc(when)}: the events before it were "
                             "purged; choose a later --start-time, or a full load (task-mode: all)", source=source_id)
    i = max(k for k, t in enumerate(starts) if t <= when)
    for f in files[i:]:
        pos = _first_transaction_at(db_kwargs, f, when)
        if pos is not None:
            with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
                return Position(f, pos, gtid_at(cur, f, pos))
    return master_status(db_kwargs)


def _utc(t: int) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _stream(db_kwargs: dict, file: str, only):
    return BinLogStreamReader(connection_settings={**db_kwargs, "port": int(db_kwargs["port"])},
                              server_id=random.randint(1_000_000, 2_000_000_000), blocking=False,
                              log_file=file, log_pos=4, resume_stream=True, only_events=only)


def _first_time(db_kwargs: dict, file: str) -> int:
    """When ``file`` was started: the timestamp of its first event (the format description)."""
    stream = _stream(db_kwargs, file, [FormatDescriptionEvent])
    try:
        for ev in stream:
            if ev.timestamp:
                return int(ev.timestamp)
    finally:
        stream.close()
    return 0


def _first_transaction_at(db_kwargs: dict, file: str, when: int) -> int | None:
    """The start offset in ``file`` of the first transaction written at or after ``when``; None
    when the file has none.  Every transaction of either flavor starts with a GTID event."""
    stream = _stream(db_kwargs, file, [MariadbGtidEvent, GtidEvent, RotateEvent])
    try:
        for ev in stream:
            if isinstance(ev, RotateEvent):
                if ev.next_binlog != file:
                    return None        # the end of this file: the next one is read by the caller
                continue
            if ev.timestamp >= when:
                return int(ev.packet.log_pos) - int(ev.packet.event_size)   # the header's size: the whole event
    finally:
        stream.close()
    return None
