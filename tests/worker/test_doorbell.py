"""The binlog doorbell on a real MariaDB: an idle syncer is woken by the upstream's next
transaction, by stop, or by a wake condition, not by its (long) timeout.  The bounds are only
there to tell "woken" from "timed out" (the timeout is 120 s)."""
from __future__ import annotations

import threading
import time

from worker.binlog.doorbell import wait_for_binlog
from worker.events import Position
from worker.upstream import master_status

LONG = 120.0


def _later(fn, delay=0.3):
    t = threading.Timer(delay, fn)
    t.start()
    return t


def test_a_new_transaction_wakes_the_wait(source1_db):
    at = master_status(source1_db.params)
    _later(lambda: source1_db.execute("CREATE TABLE doorbell_t (id INT PRIMARY KEY)"))
    t0 = time.monotonic()
    assert wait_for_binlog(source1_db.params, at, LONG, threading.Event()) is True
    assert time.monotonic() - t0 < LONG / 2
    assert master_status(source1_db.params) > at


def test_stop_and_wake_end_the_wait(source1_db):
    at = master_status(source1_db.params)
    stop = threading.Event()
    _later(stop.set)
    t0 = time.monotonic()
    assert wait_for_binlog(source1_db.params, at, LONG, stop) is False
    assert time.monotonic() - t0 < LONG / 2
    flag = threading.Event()
    _later(flag.set)
    assert wait_for_binlog(source1_db.params, at, LONG, threading.Event(), wake=flag.is_set) is True


def test_without_a_gtid_state_or_a_server_it_is_the_plain_sleep(source1_db):
    at = master_status(source1_db.params)
    no_gtid = Position(at.file, at.pos, "")
    t0 = time.monotonic()
    assert wait_for_binlog(source1_db.params, no_gtid, 0.3, threading.Event()) is True
    assert time.monotonic() - t0 >= 0.3
    dead = dict(source1_db.params, port=1)           # nothing listens there: falls back, no error
    assert wait_for_binlog(dead, at, 0.3, threading.Event()) is True
