"""The worker's own tables in the downstream's meta-schema: syncer checkpoints
(``worker.sync.checkpoint``), load checkpoints (``worker.load.store``), online-DDL state
(``worker.sync.online_ddl``).

One place for how a store of one (task, source) reaches its table (a connection of its own per
operation, one transaction on it) and for the statements that create the table, so the stores
cannot drift apart.  Shared by the syncer and the full load, hence here and not under either.
"""
from __future__ import annotations

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

    def _connect(self) -> pymysql.connections.Connection:
        try:
            return pymysql.connect(**self.db_kwargs, autocommit=False, charset="utf8mb4")
        except pymysql.MySQLError as e:
            raise self.error(f"cannot connect to the downstream for {self.what}: {e}",
                             task=self.task, source=self.source_id) from e

    @contextmanager
    def _transaction(self, rollback_on: tuple[type[BaseException], ...] = ()) -> Iterator[Cursor]:
        """A cursor in one transaction: committed when the block ends, the connection closed
        whatever happens.  An error is rolled back explicitly only when it is one of
        ``rollback_on``; any other leaves it to the close (the server discards an uncommitted
        transaction), so that on a lost connection the block's own error is raised, not the
        failed ROLLBACK's.  Errors propagate as they are: a store types them itself."""
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                yield cur
            conn.commit()
        except rollback_on:
            conn.rollback()
            raise
        finally:
            conn.close()

    def ensure_table(self) -> None:
        """Create the meta-schema and the table unless they exist, then :meth:`_upgrade` it."""
        with self._transaction() as cur:
            for sql in create_statements(self.meta_schema, self.fq, self.columns):
                cur.execute(sql)
            self._upgrade(cur)

    def _upgrade(self, cur: Cursor) -> None:
        """Bring a table made by an older version up to date, in ``ensure_table``'s transaction."""
