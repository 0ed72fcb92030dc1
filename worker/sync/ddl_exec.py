"""The one place DDL statements are executed downstream, and the one list of errors that mean
"this change is already there".

Every DDL the syncer runs (a non-sharded table's statement, a shard DDL the lock returned, an
operator's ``unlock --action exec``) goes through :func:`run_ddls`.  Several shards making the
same change is normal in optimistic mode: the first one changes the merged table and the
repeats fail with one of :data:`IGNORABLE_DDL_ERRORS`, which are logged and passed over.  Any
other error propagates unchanged (the syncer types it: transient -> retried, else the subtask
stops in Error with the server's code and text).
"""
from __future__ import annotations

import pymysql

from coordinator.failpoints import failpoint
from coordinator.obs import logger
from coordinator.schema.dialect import for_server, server_flavor

_log = logger("worker.sync.ddl_exec")

# MariaDB error code -> why a repeat of an applied change fails with it.
IGNORABLE_DDL_ERRORS: dict[int, str] = {
    1007: "database exists",
    1050: "table exists",
    1051: "unknown table (DROP)",
    1060: "duplicate column name",
    1061: "duplicate key name",
    1068: "multiple primary key defined",
    1091: "can't drop field or key; check that it exists",
    1507: "error in list of partitions to DROP (the partition is gone)",
    # a shard's DROP PARTITION repeated after the partition went: MariaDB counts the named partition
    # as all that is left when the table has one (the shard itself cannot drop its last partition)
    1508: "cannot remove all partitions (the partition is gone)",
    1517: "duplicate partition name",
}


# MariaDB's fixed SQLSTATE of the errors replication meets most (pymysql drops the SQLSTATE
# the server sends; ``run_ddls`` asks the server for it, row changes use this table)
SQLSTATE = {1048: "23000", 1050: "42S01", 1051: "42S02", 1054: "42S22", 1060: "42S21", 1061: "42000",
            1062: "23000", 1064: "42000", 1091: "42000", 1136: "21S01", 1146: "42S02", 1216: "23000",
            1217: "23000", 1264: "22003", 1265: "01000", 1292: "22007", 1364: "HY000", 1366: "22007",
            1406: "22001", 1451: "23000", 1452: "23000", 1906: "HY000"}


def server_error(e: Exception) -> str:
    """The server's error as DM users know it: ``Error 1062 (23000): Duplicate entry ...``."""
    code = e.args[0] if e.args else None
    text = e.args[-1] if e.args else str(e)
    state = getattr(e, "sqlstate", None) or (SQLSTATE.get(code) if isinstance(code, int) else None)
    if isinstance(code, int):
        return f"Error {code}" + (f" ({state})" if state else "") + f": {text}"
    return str(text)


def _sqlstate(cur) -> str | None:
    """The SQLSTATE of the statement that just failed (pymysql drops it from the error)."""
    try:
        cur.execute("GET DIAGNOSTICS CONDITION 1 @shardmerge_sqlstate = RETURNED_SQLSTATE")
        cur.execute("SELECT @shardmerge_sqlstate")
        row = cur.fetchone()
        return row[0] if row and row[0] else None
    except pymysql.MySQLError:
        return None


def run_ddls(conn, statements: list[str], *, timestamp: int | None = None, ignorable: bool = True,
             **ctx) -> list[str]:
    """Run ``statements`` in order on ``conn`` (autocommit) with the event's timestamp;
    returns those the downstream applied (ignored repeats left out)."""
    if statements:
        failpoint("ddl-before-execute")     # tests: a worker that dies between an Operation and running it
    applied: list[str] = []
    flavor = server_flavor(conn.get_server_info())     # canonical texts are MariaDB's: MySQL spells some otherwise
    with conn.cursor() as cur:
        if timestamp:
            cur.execute("SET TIMESTAMP = %s", (int(timestamp),))
        try:
            for sql in statements:
                try:
                    cur.execute(for_server(sql, flavor))
                    applied.append(sql)
                except pymysql.MySQLError as e:
                    code = e.args[0] if e.args else 0
                    if ignorable and code in IGNORABLE_DDL_ERRORS:
                        fields = {k: str(v) for k, v in ctx.items() if v not in (None, "")}
                        _log.info("DDL already in effect downstream; ignored", statement=sql, code=code,
                                  reason=IGNORABLE_DDL_ERRORS[code], **fields)
                        continue
                    e.sqlstate, e.statement = _sqlstate(cur), sql
                    raise
        finally:
            if timestamp:
                try:
                    cur.execute("SET TIMESTAMP = DEFAULT")
                except pymysql.MySQLError:
                    pass      # connection gone: the original error matters, not this one
    return applied
