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
import re
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


# Server errors that mean "the downstream refuses writes for now": read_only (1290), a read-only
# table (1036), a full table (1114), a full disk (1021).  Nothing is wrong with the data: the
# subtask keeps its checkpoints, waits and retries until the server accepts writes again.
DOWNSTREAM_REFUSING = {1290: "read-only", 1036: "table is read-only", 1114: "table is full", 1021: "disk full"}
_REFUSAL_TEXT = re.compile(r"\((" + "|".join(str(c) for c in DOWNSTREAM_REFUSING) + r"),")


def refusal_code(exc: BaseException) -> int | None:
    """The :data:`DOWNSTREAM_REFUSING` code behind ``exc`` (its cause chain, or the text of an
    error that crossed a process boundary, e.g. from a Spark task), else None."""
    e: BaseException | None = exc
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, pymysql.MySQLError) and e.args and e.args[0] in DOWNSTREAM_REFUSING:
            return int(e.args[0])
        m = _REFUSAL_TEXT.search(str(e))
        if m:
            return int(m.group(1))
        e = e.__cause__ or e.__context__
    return None


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
