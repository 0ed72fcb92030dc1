"""Wakes an idle syncer when its upstream writes a new transaction, instead of a fixed sleep.

A caught-up syncer used to sleep ``poll_interval`` (0.5 s) before asking the upstream again, so
a DDL arriving then waited up to that long before coordination even began.  ``wait`` opens a
blocking binlog dump from the syncer's GTID state and returns at the first new GTID event (every
transaction of either flavor, DML or DDL, starts with one), or after ``timeout``, or when ``stop`` is set;
the server's heartbeats give control back every ``heartbeat`` seconds to look at ``stop`` and
``wake`` (a held table's redirect asks the syncer to rewind).
Nothing is decoded but event headers; the dump is closed on return (the batch reader reads the
transaction).  Any failure (no GTID state, connection refused) degrades to the plain sleep: the
doorbell only ever makes a wait shorter, never a read different.
"""
from __future__ import annotations

import random
import threading
import time
from typing import Callable

from coordinator.obs import logger
from worker.events import Position

_log = logger("worker.binlog.doorbell")


def wait_for_binlog(db_kwargs: dict, at: Position, timeout: float, stop: threading.Event,
                    wake: Callable[[], bool] = lambda: False, heartbeat: float = 0.1) -> bool:
    """True when a transaction after ``at`` exists, or may (the timeout or ``wake()``, e.g. a
    held table's redirect, ended the wait; or the dump failed and the plain sleep ran out);
    False on ``stop``.  ``stop`` and ``wake`` are looked at every ``heartbeat``."""
    deadline = time.monotonic() + timeout
    if not at.gtid:
        return not stop.wait(timeout)
    # the protocol library is loaded where the binlog is read (as in source.decode_range)
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import GtidEvent, HeartbeatLogEvent, MariadbGtidEvent
    from worker.binlog.source import by_gtid, dump_position
    # by file/pos where it can (no GTID scan of the binlog file); a wrong position only wakes
    # the syncer early, and a failed one is tried again by GTID
    hows = [dump_position(at)]
    if "log_file" in hows[0]:
        hows.append(by_gtid(at))
    for i, how in enumerate(hows):
        stream = None
        try:
            stream = BinLogStreamReader(connection_settings={**db_kwargs, "port": int(db_kwargs["port"])},
                                        server_id=random.randint(1_000_000, 2_000_000_000), blocking=True,
                                        slave_heartbeat=heartbeat, only_events=[MariadbGtidEvent, GtidEvent, HeartbeatLogEvent],
                                        **how)
            while not stop.is_set() and not wake() and time.monotonic() < deadline:
                ev = stream.fetchone()
                if isinstance(ev, (MariadbGtidEvent, GtidEvent)):
                    return True
            return not stop.is_set()
        except Exception as e:  # noqa: BLE001 — any failure falls back to the plain sleep
            if i + 1 < len(hows):
                continue
            _log.debug(f"binlog doorbell unavailable, sleeping instead: {e}")
            return not stop.wait(max(0.0, deadline - time.monotonic()))
        finally:
            if stream is not None:
                try:
                    stream.close()
                except Exception:  # noqa: BLE001 — closing a dead dump connection
                    pass
    return not stop.is_set()
