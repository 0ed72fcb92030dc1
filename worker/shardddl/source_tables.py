"""This source's SourceTables record: every upstream table of the subtask and its target, so the
master knows a lock's full membership before any shard meets a DDL (written in full at subtask
start, kept up to date on CREATE/DROP TABLE of a routed table)."""
from __future__ import annotations

import threading

from coordinator.etcdproto import SourceTables, Store
from coordinator.routing import TableMapper


class SourceTablesWriter:
    """Keeps this source's SourceTables record (all upstream tables of the subtask and their
    targets) in etcd: written in full at subtask start, updated on CREATE/DROP TABLE."""

    def __init__(self, store: Store, task: str, source: str, mapper: TableMapper):
        self.store, self.mapper = store, mapper
        self.record = SourceTables(task=task, source=source)
        self._lock = threading.Lock()

    def write_all(self, tables) -> SourceTables:
        st = SourceTables(task=self.record.task, source=self.record.source)
        for schema, table in tables:
            t = self.mapper.target(schema, table)
            if t is not None:
                st.add(schema, table, t.schema, t.table)
        with self._lock:
            self.record = st
            self.store.put_source_tables(st)
        return st

    def add(self, schema: str, table: str) -> bool:
        t = self.mapper.target(schema, table)
        with self._lock:
            if t is None or not self.record.add(schema, table, t.schema, t.table):
                return False
            self.store.put_source_tables(self.record)
        return True

    def remove(self, schema: str, table: str) -> bool:
        t = self.mapper.target(schema, table)
        with self._lock:
            if t is None or not self.record.remove(schema, table, t.schema, t.table):
                return False
            self.store.put_source_tables(self.record)
        return True


def list_upstream_tables(conn, mapper: TableMapper) -> list[tuple[str, str]]:
    """All base tables of the upstream that pass the task's block-allow list."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                    "WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY 1, 2")
        rows = cur.fetchall()
    return [(s, t) for s, t in rows if mapper.target(s, t) is not None]
