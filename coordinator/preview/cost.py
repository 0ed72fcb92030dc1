"""The downstream's cost of each previewed statement, read from the server itself.

The server is the only authority on which ALTERs it can do instantly, in place, or only by
copying the table (it depends on version, row format, the column's position, indexes...), so
the statement is tried on an empty copy of the merged table's structure (``CREATE TABLE ... LIKE``
in a scratch schema): ``ALGORITHM=INSTANT``, then ``NOCOPY`` (MariaDB), then ``INPLACE``; a
statement refused all three copies the table.  The copy then takes the statement (plain), so the
next one is judged on the structure it would meet, and is dropped at the end.  Rows touched: the
merged table's row count for in-place and copy (an instant change touches none).
"""
from __future__ import annotations

import uuid

import pymysql

from coordinator.schema.split import rename_ddl_table
from coordinator.sql import quote_table

SCRATCH_SCHEMA = "shardmerge_preview"
EXACT_COUNT_LIMIT = 1_000_000      # above this estimate the row count stays the server's estimate

# algorithm tried -> cost class
# duplicate column / key, can't drop: the worker takes these as "already done" (worker/sync/ddl_exec.py)
_ALREADY = (1060, 1061, 1091)
_TRIALS = (("INSTANT", "instant"), ("NOCOPY", "in-place"), ("INPLACE", "in-place"))


class DownstreamTrial:
    """Callable ``statement -> cost document`` on one connection; ``close()`` drops the copy."""

    def __init__(self, conn, down_schema: str, down_table: str, scratch_schema: str = SCRATCH_SCHEMA):
        self.conn = conn
        self.down = (down_schema, down_table)
        self.scratch = (scratch_schema, f"{down_table[:40]}_{uuid.uuid4().hex[:12]}")
        self.error = ""
        self.rows: int | None = None
        self.rows_exact = False
        self._ready = False
        self._open()

    def _exec(self, sql: str, args=None):
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    def _open(self) -> None:
        src, dst = quote_table(*self.down), quote_table(*self.scratch)
        try:
            est = self._exec("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s "
                             "AND TABLE_NAME=%s", self.down)
            if not est:
                self.error = f"the downstream table {src} does not exist yet; nothing to measure"
                return
            self.rows = int(est[0][0] or 0)
            if self.rows < EXACT_COUNT_LIMIT:
                self.rows, self.rows_exact = int(self._exec(f"SELECT COUNT(*) FROM {src}")[0][0]), True
            self._exec(f"CREATE DATABASE IF NOT EXISTS {quote_table(self.scratch[0])}")
            self._exec(f"CREATE TABLE {dst} LIKE {src}")
            self._ready = True
        except pymysql.MySQLError as e:
            self.error = (f"cannot make an empty copy of {src} in scratch schema `{self.scratch[0]}` "
                          f"to try the statements: {e}")

    def __call__(self, statement: str) -> dict:
        doc: dict = {"class": "unknown", "algorithm": "", "rows": self.rows, "rows_exact": self.rows_exact,
                     "rows_touched": None, "reason": ""}
        if not self._ready:
            doc["reason"] = self.error
            return doc
        try:
            sql = rename_ddl_table(statement, self.scratch)
        except Exception as e:  # noqa: BLE001 — a statement the model cannot retarget
            doc["reason"] = f"cannot retarget the statement to the scratch copy: {e}"
            return doc
        refusals = []
        for algo, cls in _TRIALS:
            try:
                self._exec(f"{sql}, ALGORITHM={algo}" if sql.upper().startswith("ALTER TABLE")
                           else f"{sql} ALGORITHM={algo}")
            except pymysql.MySQLError as e:
                refusals.append(f"{algo}: {e.args[1] if len(e.args) > 1 else e}")
                if e.args and e.args[0] in _ALREADY:
                    doc.update({"class": "no-op", "rows_touched": 0,
                                "reason": f"the downstream already has this change ({refusals[-1]}); the worker "
                                          "ignores this error and runs nothing"})
                    return doc
                if e.args and e.args[0] not in (1845, 1846, 1064):   # not "ALGORITHM=x is not supported"
                    doc["reason"] = f"the downstream refuses the statement itself: {refusals[-1]}"
                    doc["class"] = "error"
                    return doc
                continue
            doc.update({"class": cls, "algorithm": algo,
                        "rows_touched": 0 if cls == "instant" else self.rows,
                        "reason": "; ".join(refusals)})
            return doc
        try:
            self._exec(sql)            # keep the copy in step with the downstream
        except pymysql.MySQLError as e:
            doc.update(**{"class": "error", "reason": f"the downstream refuses the statement: {e}"})
            return doc
        doc.update({"class": "copy", "algorithm": "COPY", "rows_touched": self.rows, "reason": "; ".join(refusals)})
        return doc

    def close(self) -> None:
        if self._ready:
            try:
                self._exec(f"DROP TABLE IF EXISTS {quote_table(*self.scratch)}")
            except pymysql.MySQLError:
                pass
            self._ready = False
