"""Per-chunk progress of the full load, stored downstream in ``<meta>.<task>_load_checkpoint``.

Rows are keyed by **source** (not worker), so whichever worker the source is bound to resumes
the load.  Three kinds of rows per source:

* the plan row (``up_schema = up_table = ''``, ``chunk = -1``): ``status`` ``planned`` or
  ``finished``; ``info`` = {plan position, result once finished};
* one table row per shard table (``chunk = -1``): ``info`` = the table's planned shape
  (create SQL, schema fingerprint, target, chunk key, columns, row estimate);
* one row per chunk (``chunk >= 0``): bounds ``lo``/``hi``, ``status`` ``pending`` or ``done``,
  and once done the rows loaded, the binlog position of the chunk's snapshot and the schema
  seen in it (``info``).

A chunk is marked done by its loader in the same downstream transaction as its rows
(``worker.load.chunk``), so a chunk is either fully loaded and marked, or neither.  The plan
is written once and reused on resume: chunk bounds never change under finished chunks.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass

import pymysql

from coordinator.errors import ShardMergeError
from coordinator.sql import quote_ident
from worker.events import Position
from worker.meta_store import MetaStore


class LoadCheckpointError(ShardMergeError):
    """The load checkpoint table could not be read or written; names task and source."""


def table_name(task: str) -> str:
    return f"{task}_load_checkpoint"


_q = quote_ident


def fq_name(meta_schema: str, task: str) -> str:
    return f"{_q(meta_schema)}.{_q(table_name(task))}"


@dataclass
class ChunkRow:
    up_schema: str
    up_table: str
    chunk: int
    lo: list | None           # encoded key values (worker.load.values.enc), None = open
    hi: list | None
    status: str = "pending"
    rows: int = 0
    pos: Position | None = None
    info: str | None = None   # table_info JSON of the shard at the chunk's snapshot


@dataclass
class Stored:
    plan: dict | None                     # None: never planned
    status: str                           # '', planned, finished
    tables: dict[tuple[str, str], dict]   # table rows' info
    chunks: list[ChunkRow]


class _LockConflict(Exception):
    """A deadlock or lock-wait timeout while writing the plan: the transaction is rerun."""


class LoadStore(MetaStore):
    columns = """
        source VARCHAR(64) NOT NULL,
        up_schema VARCHAR(128) NOT NULL,
        up_table VARCHAR(128) NOT NULL,
        chunk INT NOT NULL,
        status VARCHAR(16) NOT NULL,
        lo LONGTEXT, hi LONGTEXT, info LONGTEXT,
        rows_loaded BIGINT NOT NULL DEFAULT 0,
        binlog_name VARCHAR(128) NOT NULL DEFAULT '',
        binlog_pos BIGINT UNSIGNED NOT NULL DEFAULT 0,
        binlog_gtid TEXT,
        update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
        PRIMARY KEY (source, up_schema, up_table, chunk)
    """
    error = LoadCheckpointError
    what = "load checkpoints"

    def __init__(self, db_kwargs: dict, meta_schema: str, task: str, source_id: str):
        super().__init__(db_kwargs, meta_schema, task, source_id, fq_name(meta_schema, task))

    def load(self) -> Stored:
        try:
            with self._transaction() as cur:
                cur.execute(f"SELECT up_schema, up_table, chunk, status, lo, hi, info, rows_loaded, binlog_name, "
                            f"binlog_pos, binlog_gtid FROM {self.fq} WHERE source = %s "
                            f"ORDER BY up_schema, up_table, chunk", (self.source_id,))
                rows = cur.fetchall()
        except pymysql.MySQLError as e:
            raise LoadCheckpointError(f"cannot read load checkpoints from {self.fq}: {e}", task=self.task,
                                      source=self.source_id) from e
        plan, status, tables, chunks = None, "", {}, []
        for s, t, c, st, lo, hi, info, n, bn, bp, bg in rows:
            if s == "" and t == "":
                plan, status = json.loads(info or "{}"), st
            elif c < 0:
                tables[(s, t)] = json.loads(info or "{}")
            else:
                chunks.append(ChunkRow(s, t, c, json.loads(lo) if lo else None, json.loads(hi) if hi else None,
                                       st, int(n), Position(bn, int(bp), bg or "") if bn else None, info))
        return Stored(plan, status, tables, chunks)

    def save_plan(self, plan: dict, tables: dict[tuple[str, str], dict], chunks: list[ChunkRow]) -> None:
        """Write the whole plan in one transaction (a crash leaves none of it).  Two sources
        replacing their plans at once can deadlock on the key's gap locks (1213) or time out on
        a lock wait (1205): the transaction is then rerun, a few times, after a short random pause."""
        for attempt in range(6):
            try:
                return self._save_plan_once(plan, tables, chunks)
            except _LockConflict:
                time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
        return self._save_plan_once(plan, tables, chunks, last=True)

    def _save_plan_once(self, plan: dict, tables: dict[tuple[str, str], dict], chunks: list[ChunkRow],
                        last: bool = False) -> None:
        # not ``_transaction``: only the statements' errors become typed here; a ROLLBACK that
        # fails on a lost connection raises its own pymysql error
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"DELETE FROM {self.fq} WHERE source = %s", (self.source_id,))
                rows = [(self.source_id, "", "", -1, "planned", None, None, json.dumps(plan))]
                rows += [(self.source_id, s, t, -1, "planned", None, None, json.dumps(info))
                         for (s, t), info in tables.items()]
                rows += [(self.source_id, c.up_schema, c.up_table, c.chunk, "pending",
                          None if c.lo is None else json.dumps(c.lo), None if c.hi is None else json.dumps(c.hi),
                          None) for c in chunks]
                cur.executemany(f"INSERT INTO {self.fq} (source, up_schema, up_table, chunk, status, lo, hi, info) "
                                f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", rows)
            conn.commit()
        except pymysql.MySQLError as e:
            conn.rollback()
            if not last and e.args and e.args[0] in (1205, 1213):
                raise _LockConflict() from e
            raise LoadCheckpointError(f"cannot store the load plan in {self.fq}: {e}", task=self.task,
                                      source=self.source_id) from e
        finally:
            conn.close()

    def finish(self, result: dict) -> None:
        with self._transaction() as cur:
            cur.execute(f"SELECT info FROM {self.fq} WHERE source = %s AND up_schema = '' AND up_table = '' "
                        f"AND chunk = -1 FOR UPDATE", (self.source_id,))
            row = cur.fetchone()
            plan = json.loads(row[0]) if row and row[0] else {}
            plan["result"] = result
            cur.execute(f"UPDATE {self.fq} SET status = 'finished', info = %s WHERE source = %s AND "
                        f"up_schema = '' AND up_table = '' AND chunk = -1", (json.dumps(plan), self.source_id))

    def progress_rows(self) -> dict[tuple[str, str], tuple[int, int]]:
        """{(schema, table): (rows loaded, chunks done)} from the done chunks (cheap poll)."""
        with self._transaction() as cur:
            cur.execute(f"SELECT up_schema, up_table, SUM(rows_loaded), COUNT(*) FROM {self.fq} "
                        f"WHERE source = %s AND chunk >= 0 AND status = 'done' GROUP BY up_schema, up_table",
                        (self.source_id,))
            out = {(s, t): (int(n or 0), int(c)) for s, t, n, c in cur.fetchall()}
        return out

    def delete_all(self) -> None:
        """Forget this source's load (``stop-task --remove-meta``)."""
        with self._transaction() as cur:
            cur.execute(f"DELETE FROM {self.fq} WHERE source = %s", (self.source_id,))
