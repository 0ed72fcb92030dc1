"""Bounded retries with exponential backoff for every connection (etcd, upstream, downstream).

A transient failure (connection refused or reset, timeout, leader change, MySQL "gone away")
is retried with jittered exponential backoff until ``deadline`` seconds have passed; what the
caller is waiting for is published on a ``WaitBoard`` so ``query-status`` can say it
("waiting for downstream 127.0.0.1:3306: Connection refused, attempt 4").  A non-transient
error is raised at once.  Processes never exit on a transient error: their loops catch
``RetryExhausted`` and report it as the subtask's error, then try again later.
"""
from __future__ import annotations

import errno
import random
import threading
import time
from typing import Callable, TypeVar

import etcd3.exceptions as ee
import grpc
import pymysql

from coordinator.errors import ShardMergeError, TransientError

T = TypeVar("T")

# MySQL client/server error codes that mean "try again": can't connect, gone away, lost
# connection, lock wait timeout, deadlock, too many connections, server shutting down.
MYSQL_TRANSIENT = {1040, 1053, 1205, 1213, 2002, 2003, 2006, 2013, 2055}
_OS_TRANSIENT = {errno.ECONNREFUSED, errno.ECONNRESET, errno.ETIMEDOUT, errno.EPIPE, errno.EHOSTUNREACH}


class RetryExhausted(TransientError):
    """The operation still failed transiently when the retry deadline passed."""


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, TransientError):
        return True
    if isinstance(exc, ShardMergeError):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, OSError) and exc.errno in _OS_TRANSIENT:
        return True
    if isinstance(exc, pymysql.err.OperationalError) and exc.args and exc.args[0] in MYSQL_TRANSIENT:
        return True
    if isinstance(exc, pymysql.err.InterfaceError):
        return True
    if isinstance(exc, (ee.ConnectionFailedError, ee.ConnectionTimeoutError)):
        return True
    if isinstance(exc, grpc.RpcError) and exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return True
    return False


class WaitBoard:
    """What each part of a process is currently waiting for (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._waits: dict[str, str] = {}

    def set(self, what: str, reason: str) -> None:
        with self._lock:
            self._waits[what] = reason

    def clear(self, what: str) -> None:
        with self._lock:
            self._waits.pop(what, None)

    def summary(self) -> str:
        with self._lock:
            return "; ".join(f"{k}: {v}" for k, v in sorted(self._waits.items()))


def retry(fn: Callable[[], T], *, what: str, deadline: float = 60.0, base: float = 0.1,
          cap: float = 5.0, board: WaitBoard | None = None,
          transient: Callable[[BaseException], bool] = is_transient,
          sleep: Callable[[float], None] = time.sleep, **context) -> T:
    """Call ``fn`` until it succeeds, a non-transient error occurs, or ``deadline`` passes."""
    start = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            result = fn()
        except BaseException as e:  # noqa: BLE001 - classified below
            if not transient(e):
                raise
            waited = time.monotonic() - start
            if waited >= deadline:
                if board:
                    board.clear(what)
                raise RetryExhausted(f"{what} still failing after {attempt} attempts in {waited:.1f}s: {e}",
                                     **context) from e
            delay = min(cap, base * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            if board:
                board.set(what, f"{type(e).__name__}: {e} (attempt {attempt}, next in {delay:.1f}s)")
            sleep(min(delay, max(0.0, deadline - waited)))
            continue
        if board:
            board.clear(what)
        return result
