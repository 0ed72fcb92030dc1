"""Checks of the downstream: reachable with the task's credentials, and its meta schema (where
the checkpoints live) writable.  The write test leaves nothing behind: a probe table is created
and dropped, and a meta schema the probe had to create is dropped again."""
from __future__ import annotations

import uuid

import pymysql

from coordinator.config import TaskConfig
from coordinator.errors import ConfigError
from coordinator.sql import quote_ident, quote_table

from .connect import SECRET_HINT, connect
from .result import FAIL, WARN, CheckItem



def connection_check(task: TaskConfig):
    """(connection or None, item)."""
    db = task.target
    it = CheckItem("downstream_connection", "check whether the downstream is reachable with the task's "
                   "target-database", extra=db.address())
    try:
        return connect(db), it
    except ConfigError as e:      # a password-env / password-file only the workers have (see runner)
        it.problem(WARN, f"the master cannot read the downstream password ({e}); the downstream checks were "
                         f"not run", SECRET_HINT)
        return None, it
    except (pymysql.MySQLError, OSError) as e:
        it.problem(FAIL, f"cannot connect to the downstream at {db.address()} as {db.user!r}: {e}{db.tls_hint(e)}",
                   "check `target-database` (host, port, user, password, security) in the task file and "
                   "that the downstream is running")
        return None, it


def meta_schema_check(conn, task: TaskConfig) -> CheckItem:
    schema = task.meta_schema
    it = CheckItem("meta_schema_writable", f"check whether the meta schema `{schema}` (checkpoints) is writable",
                   extra=task.target.address())
    probe = f"_shardmerge_precheck_{uuid.uuid4().hex[:12]}"
    created = False
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(f"CREATE DATABASE {quote_ident(schema)}")
                created = True
            except pymysql.err.ProgrammingError as e:
                if not (e.args and e.args[0] == 1007):      # 1007: exists
                    raise
            try:
                cur.execute(f"CREATE TABLE {quote_table(schema, probe)} (id INT PRIMARY KEY)")
                cur.execute(f"INSERT INTO {quote_table(schema, probe)} VALUES (1)")
            finally:
                cur.execute(f"DROP TABLE IF EXISTS {quote_table(schema, probe)}")
                if created:
                    cur.execute(f"DROP DATABASE IF EXISTS {quote_ident(schema)}")
    except pymysql.MySQLError as e:
        it.problem(FAIL, f"cannot write to meta schema `{schema}` on the downstream: {e}",
                   f"GRANT CREATE, DROP, SELECT, INSERT, UPDATE, DELETE ON {quote_ident(schema)}.* TO the task's "
                   f"downstream user (and CREATE if the schema does not exist), and make sure the downstream "
                   f"is not read_only")
    return it


def origin_columns_check(conn, task: TaskConfig) -> CheckItem:
    """Routes with ``extract-*`` (``coordinator/origin.py``): a merged table that exists must have
    the origin columns; one that does not exist is created with them by the full load, so an
    ``incremental`` task needs it created first (DM asks for the table in every mode)."""
    it = CheckItem("origin_columns", "check whether the merged tables have the routes' shard origin columns "
                   "(extract-table / extract-schema / extract-source)", extra=task.target.address())
    wanted: dict[tuple[str, str], list[str]] = {}
    for inst in task.instances:
        for r in inst.routes:
            if r.extract and r.target_table:
                cols = wanted.setdefault((r.target_schema, r.target_table), [])
                cols += [e.column for e in r.extract if e.column not in cols]
    with conn.cursor() as cur:
        for (schema, table), cols in sorted(wanted.items()):
            cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
                        "TABLE_NAME = %s", (schema, table))
            have = {r[0].lower() for r in cur.fetchall()}
            name = quote_table(schema, table)
            if not have:
                if task.task_mode == "incremental":
                    it.problem(FAIL, f"merged table {name} does not exist and an incremental task does not create it "
                                     f"with the origin columns {', '.join(cols)}",
                               f"create {name} downstream with the shards' columns, then {', '.join(cols)} "
                               f"VARCHAR(128) NOT NULL DEFAULT '' last, in its primary key (DM asks the same), or "
                               f"use task-mode all")
                continue
            missing = [c for c in cols if c.lower() not in have]
            if missing:
                it.problem(FAIL, f"merged table {name} lacks the origin columns {', '.join(missing)}",
                           f"ALTER TABLE {name} " + ", ".join(f"ADD COLUMN {quote_ident(c)} VARCHAR(128) NOT NULL "
                                                             f"DEFAULT ''" for c in missing)
                           + ", and add them to its primary key so rows of different shards do not collide")
    return it
