"""Where a shard table joining a lock starts: the schema its worker checkpointed downstream.

When a table joins a lock, its starting schema is the ``table_info`` of its
row in ``<meta-schema>.<task>_syncer_checkpoint`` (written by ``worker.sync.checkpoint``); if that
cannot be read (no task config, downstream unreachable for ``wait`` seconds, no row, JSON ``null``)
the engine falls back to the lock's init schema.  Connections are cached per task, dropped on
error and re-opened at once (a downstream restart kills the cached one).

``downstream_table`` reads the lock's downstream table itself (``SHOW CREATE TABLE``) for the
schema check of ``shard-ddl-lock unlock --force-remove``: one attempt, no fallback, because an
operator is waiting and a refusal must name the address and the error.
"""
from __future__ import annotations

import json

import pymysql

from coordinator.config import parse_task
from coordinator.errors import ShardMergeError
from coordinator.etcdproto import LockKey, Store, TableRef
from coordinator.obs import logger
from coordinator.retry import retry
from coordinator.schema import TableSchema
from coordinator.schema.parse import parse_create_table
from coordinator.sql import checkpoint_table, quote_table

log = logger("master.checkpoint_schema")


class DownstreamUnknown(ShardMergeError):
    """The lock's task has no config in etcd, so its downstream database is unknown."""


class DownstreamUnreachable(ShardMergeError):
    """The downstream database of a task could not be connected to or queried; ``address``
    is ``host:port`` and ``error`` the driver's message."""

    def __init__(self, message: str, address: str, error: str, **context):
        super().__init__(message, **context)
        self.address, self.error = address, error


def _pos_key(file: str, pos) -> tuple:
    head = file.rstrip("0123456789")
    return (int(file[len(head):] or -1), head, int(pos or 0))


def current_info(table_info, binlog_name, binlog_pos, ddl_intent):
    """The checkpoint row's ``table_info``, or the schema its finished-DDL intent carries when the
    row's position is still before that DDL's end: the worker records the DDL finished (rule 8b)
    before its done mark and moves the checkpoint later, so a lock created in between would
    otherwise start the table from the schema before a DDL it already finished and wait for it
    forever."""
    if not ddl_intent:
        return table_info
    try:
        intent = json.loads(ddl_intent)
        after, pos = intent.get("table_info"), intent.get("pos") or {}
        # finished: the DDL's schema after it; ``done``: a multi-change ALTER coordinated change by
        # change is running a later change, the schema after the ones finished
        if (intent.get("finished") or intent.get("done")) and after and \
                _pos_key(pos.get("file", ""), pos.get("pos", 0)) > _pos_key(binlog_name or "", binlog_pos):
            return after
    except (ValueError, TypeError, AttributeError):
        pass                      # an unreadable intent: the checkpoint's own schema
    return table_info


class CheckpointSchemaSource:
    """Callable ``(lock, table) -> TableSchema | None`` for ``LockKeeper(schema_source=...)``."""

    def __init__(self, store: Store, connect_timeout: float = 5.0, wait: float = 10.0):
        self.store = store
        self.timeout = connect_timeout
        self.wait = wait
        self._conns: dict[str, tuple[pymysql.connections.Connection, str]] = {}
        self._addrs: dict[str, str] = {}

    def _conn(self, task: str):
        cached = self._conns.get(task)
        if cached is not None:
            return cached
        rec = self.store.get_task(task)
        if rec is None:
            return None
        cfg = parse_task(rec.yaml, f"<task {task} in etcd>")
        self._addrs[task] = cfg.target.address()
        conn = pymysql.connect(**cfg.target.pymysql_kwargs(), connect_timeout=self.timeout,
                               read_timeout=self.timeout, autocommit=True, charset="utf8mb4")
        self._conns[task] = (conn, cfg.meta_schema)
        return self._conns[task]

    def _read(self, lock: LockKey, table: TableRef):
        got = self._conn(lock.task)
        if got is None:
            return None
        conn, meta = got
        fq = quote_table(meta, checkpoint_table(lock.task))
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT table_info, binlog_name, binlog_pos, ddl_intent FROM {fq} "
                            f"WHERE id=%s AND cp_schema=%s AND cp_table=%s",
                            (table.source, table.schema, table.table))
                row = cur.fetchone()
                return None if row is None else (current_info(*row),)
        except (pymysql.MySQLError, OSError):
            self.close(lock.task)   # e.g. the cached connection died with a downstream restart
            raise

    def many(self, lock: LockKey, tables: list[TableRef]) -> dict[TableRef, TableSchema | None]:
        """The checkpoint schemas of many joining tables in one query (a big lock's first Info
        adds thousands of members: one SELECT each took seconds).  Unreadable rows and a
        downstream that stays unreachable give the lock's init schema (None), as ``__call__``."""
        want = set(tables)
        if len(want) < 8:
            return {t: self(lock, t) for t in tables}

        def read():
            got = self._conn(lock.task)
            if got is None:
                return []
            conn, meta = got
            fq = quote_table(meta, checkpoint_table(lock.task))
            sources = sorted({t.source for t in want})
            try:
                with conn.cursor() as cur:
                    cur.execute(f"SELECT id, cp_schema, cp_table, table_info, binlog_name, binlog_pos, ddl_intent "
                                f"FROM {fq} WHERE id IN ({', '.join(['%s'] * len(sources))})", sources)
                    return [(s, sc, t, current_info(info, bn, bp, intent)) for s, sc, t, info, bn, bp, intent
                            in cur.fetchall()]
            except (pymysql.MySQLError, OSError):
                self.close(lock.task)
                raise
        out: dict[TableRef, TableSchema | None] = dict.fromkeys(tables)
        try:
            rows = retry(read, what="downstream (checkpoint schemas)", deadline=self.wait, cap=2.0)
        except (pymysql.MySQLError, ShardMergeError, OSError) as e:
            self.close(lock.task)
            log.warning("cannot read the joining tables' checkpoint schemas; using the lock's init schema",
                        lock_id=lock.id, tables=len(want), error=str(e))
            return out
        for src, sch, tbl, info in rows:
            t = TableRef(src, sch, tbl)
            if t not in want or info in (None, "", "null"):
                continue
            try:
                out[t] = TableSchema.from_json(json.loads(info))
            except Exception as e:  # noqa: BLE001 — a bad row must not stop the lock
                log.warning("checkpoint schema unreadable; using the lock's init schema", lock_id=lock.id,
                            source=src, table=f"{sch}.{tbl}", error=str(e))
        return out

    def __call__(self, lock: LockKey, table: TableRef) -> TableSchema | None:
        try:
            # a dead cached connection (downstream restarted) or a downstream that is briefly down
            # must not make a joining table start from the init schema: retry with a fresh
            # connection for up to ``wait`` seconds (the chaos test restarts the downstream)
            row = retry(lambda: self._read(lock, table), what="downstream (checkpoint schema)",
                        deadline=self.wait, cap=2.0)
        except (pymysql.MySQLError, ShardMergeError, OSError) as e:
            self.close(lock.task)
            log.warning("cannot read a joining table's checkpoint schema; using the lock's init schema",
                        lock_id=lock.id, source=table.source, table=f"{table.schema}.{table.table}", error=str(e))
            return None
        if not row or row[0] in (None, "", "null"):
            return None
        try:
            return TableSchema.from_json(json.loads(row[0]))
        except Exception as e:  # noqa: BLE001 — a bad row must not stop the lock
            log.warning("checkpoint schema unreadable; using the lock's init schema", lock_id=lock.id,
                        source=table.source, table=f"{table.schema}.{table.table}", error=str(e))
            return None

    def downstream_table(self, lock: LockKey) -> tuple[str, TableSchema | None]:
        """``(address, schema)`` of the lock's downstream table read with ``SHOW CREATE TABLE``
        now; ``schema`` is None when the table does not exist.  Raises ``DownstreamUnknown`` (no
        task config) or ``DownstreamUnreachable`` (after one retry with a fresh connection: the
        cached one may have died with a downstream restart)."""
        fq = quote_table(lock.down_schema, lock.down_table)
        last: Exception | None = None
        for _ in range(2):
            try:
                got = self._conn(lock.task)
            except ShardMergeError as e:   # the stored task config no longer parses / no password
                raise DownstreamUnreachable(f"cannot connect to the downstream of task {lock.task}: {e}",
                                            self._addrs.get(lock.task, "?"), str(e), task=lock.task,
                                            lock_id=lock.id) from None
            except (pymysql.MySQLError, OSError) as e:
                last = e
                continue
            if got is None:
                raise DownstreamUnknown(f"task {lock.task!r} has no config in etcd (stopped or never started), "
                                        "so its downstream database is unknown", task=lock.task, lock_id=lock.id)
            try:
                with got[0].cursor() as cur:
                    cur.execute(f"SHOW CREATE TABLE {fq}")
                    row = cur.fetchone()
                return self._addrs.get(lock.task, "?"), parse_create_table(row[1])
            except pymysql.MySQLError as e:
                if e.args and e.args[0] == 1146:   # ER_NO_SUCH_TABLE
                    return self._addrs.get(lock.task, "?"), None
                last = e
                self.close(lock.task)
            except OSError as e:
                last = e
                self.close(lock.task)
        addr = self._addrs.get(lock.task, "?")
        raise DownstreamUnreachable(f"cannot read {fq} from the downstream {addr} of task {lock.task}: {last}",
                                    addr, str(last), task=lock.task, lock_id=lock.id)

    def close(self, task: str | None = None) -> None:
        for t in [task] if task else list(self._conns):
            got = self._conns.pop(t, None)
            if got:
                try:
                    got[0].close()
                except Exception:  # noqa: BLE001
                    pass
