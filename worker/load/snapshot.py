"""Consistent snapshots of an upstream, each with the binlog position it corresponds to.

``START TRANSACTION WITH CONSISTENT SNAPSHOT`` on MariaDB (>= 5.3, checked on 10.11) fixes the
InnoDB read view *and* the binlog position together: the status variables
``Binlog_snapshot_file`` / ``Binlog_snapshot_position`` then name the end of the last
transaction the snapshot contains, whatever commits later.  No ``FLUSH TABLES WITH READ
LOCK`` and no other global lock is taken; each snapshot only holds an InnoDB read view (undo
is kept while it is open) and metadata locks on the tables it reads.

MySQL has no such status variables (its binlog end moves before a commit becomes visible, so
reading the position around the snapshot is not exact either): there the snapshot is opened
under ``FLUSH TABLES WITH READ LOCK``, held only while the snapshot starts and the position is
read (milliseconds; needs RELOAD), as DM's dump does.

Spark tasks cannot share one connection's snapshot, so every chunk reader opens its own: each
chunk is consistent at its own position.  ``worker.load`` turns those positions into checkpoints
(see docs/full-load.md for why the result is exact).
"""
from __future__ import annotations

import re

import pymysql
from pymysql.constants import FIELD_TYPE

from coordinator.errors import ShardMergeError
from coordinator.sql import quote_table
from worker import gtid
from worker.events import Position
from worker.upstream import _master_status, server_flavor


class SnapshotError(ShardMergeError):
    """The upstream cannot give a consistent snapshot with a binlog position."""


# Values that must round-trip exactly are read as the server's text and written back as text:
# no float/Decimal/datetime conversion cost, and zero dates, negative TIMEs and big DECIMALs
# survive unchanged.
_TEXT_TYPES = (FIELD_TYPE.DECIMAL, FIELD_TYPE.NEWDECIMAL, FIELD_TYPE.DATE, FIELD_TYPE.DATETIME,
               FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIME, FIELD_TYPE.NEWDATE, FIELD_TYPE.FLOAT,
               FIELD_TYPE.DOUBLE)


def read_conversions() -> dict:
    conv = dict(pymysql.converters.conversions)
    for t in _TEXT_TYPES:
        conv.pop(t, None)
    return conv


def connect_reader(db_kwargs: dict, *, streaming: bool = True):
    """An upstream connection for dumping: UTC session, text values, unbuffered cursor."""
    kw = dict(db_kwargs, charset="utf8mb4", autocommit=True, conv=read_conversions())
    if streaming:
        kw["cursorclass"] = pymysql.cursors.SSCursor
    conn = pymysql.connect(**kw)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    return conn


def open_snapshot(conn, source_id: str = "") -> Position:
    """Start a consistent-snapshot transaction on ``conn``; the binlog position (and GTID set)
    the snapshot corresponds to."""
    with conn.cursor() as cur:
        if server_flavor(cur) == gtid.MYSQL:
            return _mysql_snapshot(cur, source_id, _master_status)
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
        vals = {k.lower(): v for k, v in cur.fetchall()}
        f, p = vals.get("binlog_snapshot_file", ""), vals.get("binlog_snapshot_position")
        if not f or p is None:
            raise SnapshotError("upstream reports no Binlog_snapshot_file/position: enable log_bin "
                                "(a full load needs the snapshot's binlog position)", source=source_id)
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (f, int(p)))
        gtid_ = cur.fetchone()[0] or ""
    return Position(f, int(p), gtid_)


def _mysql_snapshot(cur, source_id: str, status) -> Position:
    try:
        cur.execute("FLUSH TABLES WITH READ LOCK")
    except pymysql.err.OperationalError as e:
        if e.args and e.args[0] in (1227, 1045):     # access denied: no RELOAD
            raise SnapshotError(f"a consistent snapshot of a MySQL upstream needs FLUSH TABLES WITH READ LOCK, "
                                f"which the user may not run ({e.args[1]}); GRANT RELOAD ON *.* to it",
                                source=source_id) from None
        raise
    try:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        pos = status(cur, gtid.MYSQL)
    finally:
        cur.execute("UNLOCK TABLES")      # the snapshot's read view stays; only the global lock goes
    return pos


_AUTO_INC = re.compile(r"\s+AUTO_INCREMENT=\d+")


def show_create(conn, schema: str, table: str) -> str:
    with conn.cursor() as cur:
        cur.execute(f"SHOW CREATE TABLE {quote_table(schema, table)}")
        row = cur.fetchone()
        while cur.fetchone() is not None:  # drain (unbuffered cursors)
            pass
    return row[1]


def fingerprint(create_sql: str) -> str:
    """The table definition without the moving AUTO_INCREMENT counter: equal iff no DDL."""
    return _AUTO_INC.sub("", create_sql)
