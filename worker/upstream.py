"""Questions the worker asks an upstream server: its binlog end and GTID state, whether it is a
MariaDB with row binlogs, whether a checkpoint still names a point of its binlog, a table's
``SHOW CREATE TABLE``.  Shared by the syncer, the full load and the process."""
from __future__ import annotations

import pymysql

from coordinator.sql import show_create_table
from worker.events import Position
from worker.sync.errors import SyncError, UpstreamChanged


def master_status(db_kwargs: dict) -> Position:
    """The upstream's current binlog end with the exact GTID state there (a new connection; a
    loop asking often keeps an :class:`UpstreamEnd` instead)."""
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        return _master_status(cur)


def _master_status(cur) -> Position:
    """``@@gtid_binlog_pos`` read before and after ``SHOW MASTER STATUS``: when both agree no
    transaction got a GTID in between, so it is the state at that position.  Otherwise ask
    ``BINLOG_GTID_POS``, which scans the binlog file (~0.1 s per 300 MB; too slow for every
    batch and idle poll)."""
    cur.execute("SELECT @@gtid_binlog_pos")
    (before,) = cur.fetchone()
    cur.execute("SHOW MASTER STATUS")
    row = cur.fetchone()
    if not row:
        raise SyncError("upstream has no binary log (SHOW MASTER STATUS is empty); enable log_bin")
    cur.execute("SELECT @@gtid_binlog_pos")
    (after,) = cur.fetchone()
    file, pos = row[0], int(row[1])
    return Position(file, pos, before if before == after else gtid_at(cur, file, pos))


class UpstreamEnd:
    """:func:`master_status` on one kept connection: the syncer asks before every batch, and a
    new connection each time cost more than the question (tens of ms on a busy machine).  A
    broken connection is replaced once per call; a second failure propagates."""

    def __init__(self, db_kwargs: dict):
        self.db_kwargs = db_kwargs
        self._conn: pymysql.connections.Connection | None = None

    def position(self) -> Position:
        for attempt in (0, 1):
            try:
                if self._conn is None:
                    self._conn = pymysql.connect(**self.db_kwargs, autocommit=True)
                with self._conn.cursor() as cur:
                    return _master_status(cur)
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 — closing a broken connection
                pass


def gtid_at(cur, file: str, pos: int) -> str:
    """The GTID state exactly at file:pos (MariaDB ``BINLOG_GTID_POS``; "" if unknown)."""
    cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
    (gtid,) = cur.fetchone()
    return gtid or ""


def require_mariadb(version: str, source_id: str, where: str = "") -> None:
    """Positions are MariaDB GTIDs (``@@gtid_binlog_pos``, ``BINLOG_GTID_POS``): a MySQL server
    would fail later with an unknown-variable error, so say it up front."""
    if "mariadb" not in version.lower():
        raise SyncError(f"upstream {where or source_id} runs {version!r}, which is not MariaDB; replication "
                        "reads MariaDB GTIDs and supports MariaDB upstreams only (10.5 or later)", source=source_id)


def _gtid_domains(state: str) -> dict[str, str]:
    return {g.split("-", 1)[0]: g for g in (x.strip() for x in state.split(",")) if g.count("-") == 2}


def check_checkpoint_on_upstream(db_kwargs: dict, pos: Position, source_id: str) -> None:
    """The GTID state at the checkpoint's file:pos on the upstream must be the one recorded
    with it (every domain recorded): otherwise the server behind the source is not the one the
    checkpoint came from, and reading on from file:pos would skip or repeat changes (DM pain
    #26: a MariaDB failover).  Checkpoints without a GTID are not checked."""
    if not pos.gtid or not pos.file:
        return
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (pos.file, pos.pos))
        (at,) = cur.fetchone()
    want = _gtid_domains(pos.gtid)
    have = _gtid_domains(at or "")
    if at is not None and all(have.get(d) == g for d, g in want.items()):
        return
    found = (f"{pos.file}:{pos.pos} is not a position in its binlog (file missing or purged, or not an "
             "event boundary)" if at is None else f"the GTID state at {pos.file}:{pos.pos} is {at or 'empty'!r}")
    raise UpstreamChanged(
        f"upstream {db_kwargs.get('host')}:{db_kwargs.get('port')} does not match the checkpoint: it was taken at "
        f"GTID {pos.gtid!r}, but {found}. The source now points at another server (failover?), or its binlog "
        "was reset or purged; replicating from file positions would skip or repeat changes. See "
        "docs/reliability.md, 'The upstream changed', for how to continue from the GTID",
        source=source_id, position=str(pos))


def check_upstream(db_kwargs: dict, source_id: str) -> None:
    """The row images must carry column names and full rows (DML is named from the image)."""
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        cur.execute("SELECT VERSION()")
        require_mariadb(cur.fetchone()[0], source_id, f"{db_kwargs.get('host')}:{db_kwargs.get('port')}")
        cur.execute("SELECT @@binlog_format, @@binlog_row_image, @@binlog_row_metadata")
        fmt, image, meta = cur.fetchone()
    if (fmt, image, meta) != ("ROW", "FULL", "FULL"):
        raise SyncError(f"upstream binlog settings are binlog_format={fmt}, binlog_row_image={image}, "
                        f"binlog_row_metadata={meta}; set them to ROW, FULL, FULL", source=source_id)


def show_create(conn, schema: str, table: str) -> str | None:
    """The target's definition for rule 8's intent; None when it cannot be read (the DDL then
    counts as not yet run, and "already applied" errors are ignored on the rerun)."""
    try:
        return show_create_table(conn, schema, table)
    except pymysql.MySQLError:
        return None
