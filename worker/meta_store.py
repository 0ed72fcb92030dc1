"""The worker's own tables in the downstream's meta-schema: syncer checkpoints
(``worker.sync.checkpoint``), load checkpoints (``worker.load.store``), online-DDL state
(``worker.sync.online_ddl``).

One place for how a store of one (task, source) reaches its table (one transaction per
operation; a long-lived store keeps its connection between them) and for the statements that create the table, so the stores
cannot drift apart.  Shared by the syncer and the full load, hence here and not under either.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pymysql
from pymysql.cursors import Cursor

from coordinator.errors import ShardMergeError
from coordinator.sql import quote_ident


def create_statements(meta_schema: str, fq: str, columns: str) -> list[str]:
    """The meta-schema and the table ``fq`` (``columns``: its definitions), each created unless
    it exists: every start runs them."""
    return [f"CREATE DATABASE IF NOT EXISTS {quote_ident(meta_schema)}",
            f"CREATE TABLE IF NOT EXISTS {fq} ({columns}) DEFAULT CHARSET = utf8mb4"]


class MetaStore:
    """Base of the rows of one (task, source) in one meta table ``fq``.  A subclass names its
    ``columns``, the ``error`` it raises (naming task and source) and ``what`` it stores."""

    columns = ""
    error: type[ShardMergeError] = ShardMergeError
    what = "meta tables"

    def __init__(self, db_kwargs: dict, meta_schema: str, task: str, source_id: str, fq: str):
        self.db_kwargs = dict(db_kwargs)
        self.meta_schema, self.task, self.source_id = meta_schema, task, source_id
        self.fq = fq
        self._kept: pymysql.connections.Connection | None = None   # between operations (keep_connection)
        self._kept_lock: threading.Lock | None = None               # set by keep_connection

    def _connect(self) -> pymysql.connections.Connection:
        try:
            return pymysql.connect(**self.db_kwargs, autocommit=False, charset="utf8mb4")
        except pymysql.MySQLError as e:
            raise self.error(f"cannot connect to the downstream for {self.what}: {e}",
                             task=self.task, source=self.source_id) from e

    @contextmanager
    def _transaction(self, rollback_on: tuple[type[BaseException], ...] = ()) -> Iterator[Cursor]:
        """A cursor in one transaction, committed when the block ends.  An error is rolled back
        explicitly only when it is one of ``rollback_on``; any other leaves it to closing the
        connection (the server discards an uncommitted transaction), so that on a lost
        connection the block's own error is raised, not the failed ROLLBACK's.  Errors
        propagate as they are: a store types them itself.

        After :meth:`keep_connection` the connection is kept for the next transaction when this
        one committed (a new connection per operation was ~1.5 ms of a shard DDL's ~30 ms,
        three times); a failed one is closed.  One thread at a time uses the kept
        connection; a concurrent caller gets a connection of its own.  Otherwise (short-lived
        stores) every operation has a connection of its own."""
        conn, kept = self._take()
        ok = False
        try:
            with conn.cursor() as cur:
                yield cur
            conn.commit()
            ok = True
        except rollback_on:
            conn.rollback()
            raise
        finally:
            self._give(conn, kept, ok)

    def _take(self) -> tuple[pymysql.connections.Connection, bool]:
        """The kept connection (checked with a ping; a new one if it is gone) when no other
        thread holds it, else a connection of the caller's own."""
        lock = self._kept_lock
        if lock is None or not lock.acquire(blocking=False):
            return self._connect(), False
        try:
            conn, self._kept = self._kept, None
            if conn is not None:
                try:
                    conn.ping(reconnect=False)
                except (pymysql.MySQLError, OSError):
                    _close(conn)
                    conn = None
            return (conn if conn is not None else self._connect()), True
        except BaseException:
            lock.release()
            raise

    def _give(self, conn: pymysql.connections.Connection, kept: bool, ok: bool) -> None:
        if kept and ok:
            self._kept = conn
        else:
            _close(conn)
        if kept and self._kept_lock is not None:
            self._kept_lock.release()

    def keep_connection(self) -> None:
        """Keep one connection between operations (a long-lived store; :meth:`close` ends it)."""
        if self._kept_lock is None:
            self._kept_lock = threading.Lock()

    def close(self) -> None:
        """Close the kept connection (the store stays usable: the next operation opens one)."""
        lock = self._kept_lock
        got = lock is not None and lock.acquire(timeout=10)     # not while a transaction uses it
        try:
            conn, self._kept = self._kept, None
            if conn is not None:
                _close(conn)
        finally:
            if got and lock is not None:
                lock.release()

    def __getstate__(self) -> dict:
        """A copy (e.g. pickled to a Spark task) opens its own connections."""
        return {**self.__dict__, "_kept": None, "_kept_lock": None}

    def ensure_table(self) -> None:
        """Create the meta-schema and the table unless they exist, then :meth:`_upgrade` it."""
        with self._transaction() as cur:
            for sql in create_statements(self.meta_schema, self.fq, self.columns):
                cur.execute(sql)
            self._upgrade(cur)

    def _upgrade(self, cur: Cursor) -> None:
        """Bring a table made by an older version up to date, in ``ensure_table``'s transaction."""


def _close(conn: pymysql.connections.Connection) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 -- already broken: nothing to release
        pass
