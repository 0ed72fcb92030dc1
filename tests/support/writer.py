"""One background writer for every suite: a thread that runs ``step(conn)`` until stopped.

The e2e, full-load, chaos and soak workloads differ only in what one step writes, so the thread,
the pause, the stop and the connection handling live here once.  A refused statement (a lock
wait during an ALTER, a shard being dropped) is counted and the step tried again; a broken
connection is replaced.  With ``fail_fast`` the first error ends the thread and is raised by
``stop()`` (the full-load test, where no statement may fail).
"""
from __future__ import annotations

import random
import threading

import pymysql

_BROKEN = (pymysql.err.OperationalError, pymysql.err.InterfaceError)


class BackgroundWriter(threading.Thread):
    """Subclasses implement ``step(conn)``; ``pause()`` is the wait before each step."""

    def __init__(self, name: str, connect, seed: int, *, pause: tuple[float, float] = (0.02, 0.02),
                 fail_fast: bool = False):
        super().__init__(name=name, daemon=True)
        self.connect = connect                 # () -> a new pymysql connection
        self.rng = random.Random(seed)
        self.pause_range = pause
        self.fail_fast = fail_fast
        self.stop_event = threading.Event()
        self.writes = 0                        # steps that committed
        self.failed = 0                        # steps the server refused
        self.last_error = ""
        self.error: BaseException | None = None

    def step(self, conn) -> None:
        raise NotImplementedError

    def pause(self) -> float:
        return self.rng.uniform(*self.pause_range)

    def run(self) -> None:
        conn = None
        try:
            while not self.stop_event.wait(self.pause()):
                try:
                    if conn is None:
                        conn = self.connect()
                    self.step(conn)
                    self.writes += 1
                except pymysql.MySQLError as e:
                    if self.fail_fast:
                        raise
                    self.failed += 1
                    self.last_error = str(e)
                    conn = self._recover(conn, e)
        except BaseException as e:  # noqa: BLE001 — raised by stop() in the test's thread
            self.error = e
        finally:
            if conn is not None:
                conn.close()

    @staticmethod
    def _recover(conn, e):
        """Nothing of a refused step is committed: roll back; a broken connection is replaced."""
        if conn is None:
            return None
        try:
            conn.rollback()
        except Exception:  # noqa: BLE001 — the connection is replaced below
            pass
        if isinstance(e, _BROKEN):
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass
            return None
        return conn

    def stop(self, timeout: float = 30) -> int:
        """Stop, join, raise what ended the thread (``fail_fast``); returns the committed steps."""
        self.stop_event.set()
        self.join(timeout)
        if self.error is not None:
            raise self.error
        return self.writes

    def __enter__(self) -> "BackgroundWriter":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
