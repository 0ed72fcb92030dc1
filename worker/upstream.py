"""Questions the worker asks an upstream server: its flavor (MySQL or MariaDB), its binlog end
and GTID state, whether its row binlogs carry what replication needs, whether a checkpoint still
names a point of its binlog, a table's ``SHOW CREATE TABLE``.  Shared by the syncer, the full
load and the process.  The two flavors differ here and in :mod:`worker.gtid` only."""
from __future__ import annotations

import pymysql

from coordinator.errors import ConfigError
from coordinator.sql import show_create_table
from worker import gtid
from worker.events import Position
from worker.sync.errors import StartUnavailable, SyncError, UpstreamChanged


def server_flavor(cur) -> str:
    """``mysql`` or ``mariadb``, from ``VERSION()`` (MariaDB always names itself there)."""
    cur.execute("SELECT VERSION()")
    return gtid.MARIADB if "mariadb" in str(cur.fetchone()[0]).lower() else gtid.MYSQL


def master_status(db_kwargs: dict) -> Position:
    """The upstream's current binlog end with the exact GTID state there (a new connection; a
    loop asking often keeps an :class:`UpstreamEnd` instead)."""
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        return _master_status(cur, server_flavor(cur))


_OLD_STATUS_NAME: set[str] = set()      # "host:port" of MySQL servers older than 8.2 (asked once)


def _binlog_status_row(cur, flavor: str = gtid.MARIADB) -> tuple:
    """MySQL 8.2+ renamed ``SHOW MASTER STATUS`` to ``SHOW BINARY LOG STATUS`` (8.4 and 9.x
    have only the new name, MySQL before 8.2 only the old one; MariaDB keeps the old one)."""
    server = f"{getattr(cur.connection, 'host', '')}:{getattr(cur.connection, 'port', '')}"
    if flavor == gtid.MARIADB or server in _OLD_STATUS_NAME:
        cur.execute("SHOW MASTER STATUS")
    else:
        try:
            cur.execute("SHOW BINARY LOG STATUS")
        except pymysql.err.ProgrammingError:
            _OLD_STATUS_NAME.add(server)
            cur.execute("SHOW MASTER STATUS")
    row = cur.fetchone()
    if not row:
        raise SyncError("upstream has no binary log (SHOW BINARY LOG STATUS is empty); enable log_bin")
    return row


def _master_status(cur, flavor: str = gtid.MARIADB) -> Position:
    if flavor == gtid.MYSQL:
        # one statement gives file, position and the executed set at that point together
        row = _binlog_status_row(cur, flavor)
        return Position(row[0], int(row[1]), gtid.canonical((row[4] or "") if len(row) > 4 else ""))
    return _mariadb_status(cur)


STATUS_TRIES = 8        # before/after reads of one MariaDB status before the binlog scan


def _mariadb_status(cur, tries: int = STATUS_TRIES) -> Position:
    """``@@gtid_binlog_pos`` read before and after ``SHOW MASTER STATUS``: when both agree no
    transaction got a GTID in between, so it is the state at that position.  They disagree when a
    commit falls between the reads: asked again (three round trips, well under a millisecond),
    up to ``tries`` times.  Only then ``BINLOG_GTID_POS``, which scans the binlog file (~0.1 s per
    300 MB): with one try, an upstream committing 1,000 transactions/s made a third of the
    syncer's batches wait for that scan (tens to hundreds of ms each: most of the steady lag,
    bench/steady_lag.py)."""
    for _ in range(tries):
        cur.execute("SELECT @@gtid_binlog_pos")
        (before,) = cur.fetchone()
        row = _binlog_status_row(cur)
        cur.execute("SELECT @@gtid_binlog_pos")
        (after,) = cur.fetchone()
        file, pos = row[0], int(row[1])
        if before == after:
            return Position(file, pos, before)
    return Position(file, pos, gtid_at(cur, file, pos))


class UpstreamEnd:
    """:func:`master_status` on one kept connection: the syncer asks before every batch, and a
    new connection each time cost more than the question (tens of ms on a busy machine).  A
    broken connection is replaced once per call; a second failure propagates."""

    def __init__(self, db_kwargs: dict):
        self.db_kwargs = db_kwargs
        self._conn: pymysql.connections.Connection | None = None
        self._flavor: str | None = None

    def position(self) -> Position:
        for attempt in (0, 1):
            try:
                if self._conn is None:
                    self._conn = pymysql.connect(**self.db_kwargs, autocommit=True)
                with self._conn.cursor() as cur:
                    if self._flavor is None:
                        self._flavor = server_flavor(cur)
                    return _master_status(cur, self._flavor)
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        conn, self._conn, self._flavor = self._conn, None, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 — closing a broken connection
                pass


def gtid_at(cur, file: str, pos: int) -> str:
    """The GTID state exactly at file:pos ("" if unknown)."""
    return _gtid_at(cur, server_flavor(cur), file, pos) or ""


def _gtid_at(cur, flavor: str, file: str, pos: int) -> str | None:
    """The GTID state at file:pos; None when that is not an event boundary of an existing file.
    MariaDB has ``BINLOG_GTID_POS``.  MySQL has no such function: the file's Previous_gtids
    event plus the GTIDs of the transactions before ``pos`` (``SHOW BINLOG EVENTS``, a scan of
    one file; asked at start and when a position has no GTID, never per batch)."""
    if flavor == gtid.MARIADB:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
        (at,) = cur.fetchone()
        return at
    state, pending, boundary = "", "", pos == 4
    # unbuffered: a 1 GB binlog file is millions of rows, read once and dropped as they come
    with cur.connection.cursor(pymysql.cursors.SSCursor) as sc:
        try:
            sc.execute("SHOW BINLOG EVENTS IN %s", (file,))
        except pymysql.MySQLError:
            return None
        for row in sc:
            start, kind, end, info = int(row[1]), row[2], int(row[4]), row[5] or ""
            if start >= pos:
                continue           # drained, not broken off: the connection must stay usable
            if kind == "Previous_gtids":
                state = gtid.canonical(info)
            elif kind == "Gtid":
                pending = info.split("'")[1] if "'" in info else ""
            elif pending and (kind == "Xid" or (kind == "Query" and info.strip().upper() != "BEGIN")):
                state, pending = gtid.advance(state, pending), ""   # a commit, or a DDL (its own transaction)
            boundary = boundary or end == pos
    return state if boundary else None


def _mysql_checkpoint_matches(cur, pos: Position) -> tuple[bool, str]:
    """On MySQL, without scanning the file: ``pos`` is an event boundary of an existing file
    (``SHOW BINLOG EVENTS ... FROM pos`` refuses anything else), the first transaction after it
    is the next one of its stream after the checkpoint's set (or there is none and the server's
    executed set is the checkpoint's), and the checkpoint's set is one the server executed.
    (matches, what was found instead)."""
    try:
        cur.execute("SHOW BINLOG EVENTS IN %s FROM %s LIMIT 4", (pos.file, int(pos.pos)))
        rows = cur.fetchall()
    except pymysql.MySQLError as e:
        return False, f"{pos.file}:{pos.pos} is not a position in its binlog ({e.args[-1] if e.args else e})"
    cur.execute("SELECT @@GLOBAL.gtid_executed")
    executed = gtid.canonical(str(cur.fetchone()[0] or ""))
    if not gtid.contains(executed, pos.gtid):
        return False, f"the server's executed GTID set {executed!r} does not contain it"
    nxt = next((r[5].split("'")[1] for r in rows if r[2] == "Gtid" and "'" in (r[5] or "")), None)
    if nxt is None:
        if rows and any(r[2] not in ("Rotate", "Stop") for r in rows):
            return True, ""        # no transaction starts here within reach (e.g. anonymous GTIDs)
        ok = gtid.contains(pos.gtid, executed)
        return ok, "" if ok else f"nothing follows {pos.file}:{pos.pos}, but the server executed {executed!r}"
    if gtid.follows(pos.gtid, nxt):
        return True, ""
    return False, f"the transaction after {pos.file}:{pos.pos} is {nxt!r}, which does not follow it"


def require_flavor(actual: str, configured: str, source_id: str, where: str = "") -> None:
    """A source config that names a flavor must name the server's (DM's empty flavor is
    detected): positions of one flavor mean nothing on the other."""
    if configured and configured != actual:     # a ConfigError: not retried, the source config must change
        raise ConfigError(f"upstream {where or source_id} is {actual}, but the source config says flavor: "
                          f"{configured}; set `flavor: {actual}` (or leave it empty to detect it) in the source "
                          "config (operate-source stop, then create)", source=source_id, key="flavor")


def check_checkpoint_on_upstream(db_kwargs: dict, pos: Position, source_id: str) -> None:
    """The GTID state at the checkpoint's file:pos on the upstream must be the one recorded
    with it (every stream recorded): otherwise the server behind the source is not the one the
    checkpoint came from, and reading on from file:pos would skip or repeat changes (DM pain
    #26: a failover).  Checkpoints without a GTID are not checked."""
    if not pos.gtid or not pos.file:
        return
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        flavor = server_flavor(cur)
        if flavor == gtid.MYSQL and gtid.flavor_of(pos.gtid) == gtid.MYSQL:
            ok, found = _mysql_checkpoint_matches(cur, pos)
        else:
            ok, found = _state_matches(cur, flavor, pos)
    if ok:
        return
    raise UpstreamChanged(
        f"upstream {db_kwargs.get('host')}:{db_kwargs.get('port')} does not match the checkpoint: it was taken at "
        f"GTID {pos.gtid!r}, but {found}. The source now points at another server (failover?), or its binlog "
        "was reset or purged; replicating from file positions would skip or repeat changes. See "
        "docs/reliability.md, 'The upstream changed', for how to continue from the GTID",
        source=source_id, position=str(pos))


def _state_matches(cur, flavor: str, pos: Position) -> tuple[bool, str]:
    """The GTID state the server gives at ``pos`` names every stream of the checkpoint's as
    recorded.  (matches, what was found instead)."""
    at = _gtid_at(cur, flavor, pos.file, pos.pos)
    want = gtid.entries(pos.gtid)
    try:
        have = gtid.entries(at or "")
    except gtid.GtidError:
        have = {}
    if at is not None and all(have.get(d) == g for d, g in want.items()):
        return True, ""
    return False, (f"{pos.file}:{pos.pos} is not a position in its binlog (file missing or purged, or not an "
                   "event boundary)" if at is None else f"the GTID state at {pos.file}:{pos.pos} is {at or 'empty'!r}")


def check_not_past_end(db_kwargs: dict, pos: Position, source_id: str, what: str = "the start position") -> None:
    """A file:pos start beyond what the server has written: its binlog dump is refused (error
    1236, "impossible position") or, at the live end, waits for bytes that are never events of
    this position, so the subtask would show Running with nothing arriving.  Refused here with
    the server's own end.  A file the server does not list is left to :func:`check_start_available`."""
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        sizes = {r[0]: int(r[1]) for r in cur.fetchall()}
        if pos.file not in sizes or pos.pos <= sizes[pos.file]:
            return
        end = _master_status(cur, server_flavor(cur))
    where = f"upstream {db_kwargs.get('host')}:{db_kwargs.get('port')}"
    raise StartUnavailable(
        f"{what} {pos.file}:{pos.pos} is past the end of {where}'s binlog: {pos.file} has {sizes[pos.file]} bytes "
        f"and the server's binlog ends at {end.file}:{end.pos}. Give a position the server has written (task meta "
        f"`binlog-name`/`binlog-pos` from SHOW BINARY LOGS / SHOW MASTER STATUS, or `binlog-gtid`); a position "
        f"from another server means the source points at the wrong one", source=source_id, position=str(pos))


def check_start_available(db_kwargs: dict, pos: Position, source_id: str, what: str = "the start position") -> None:
    """The upstream must still hold every transaction after ``pos``, and ``pos`` must be of the
    server's flavor.  Otherwise its binlog dump fails (error 1236) on every retry, for ever:
    stop once with what to do.  MySQL: ``@@gtid_purged`` within the start GTID set; a start
    by file only (no GTID): the file is still listed.  (MariaDB by GTID: not checked here.)"""
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        flavor = server_flavor(cur)
        where = f"upstream {db_kwargs.get('host')}:{db_kwargs.get('port')}"
        have = gtid.flavor_of(pos.gtid)
        if have is not None and have != flavor:
            raise StartUnavailable(
                f"{what} is the {have} GTID set {pos.gtid!r}, but {where} is {flavor}: positions of one flavor "
                f"mean nothing on the other. Give a start position of this server (task meta `binlog-gtid`, "
                f"e.g. its @@{'gtid_executed' if flavor == gtid.MYSQL else 'gtid_binlog_pos'}, or "
                f"`binlog-name`/`binlog-pos`), or point the source at the server the position came from",
                source=source_id, position=str(pos))
        if have == gtid.MYSQL:
            cur.execute("SELECT @@GLOBAL.gtid_purged")
            purged = gtid.canonical(str(cur.fetchone()[0] or ""))
            if not gtid.contains(pos.gtid, purged):
                raise StartUnavailable(
                    f"{where} purged binlogs the task still needs: {what} is GTID set {pos.gtid!r}, but the "
                    f"server's @@gtid_purged is {purged!r}, so the transactions {gtid.subtract_mysql(purged, pos.gtid)!r} "
                    "are gone from its binlog and replicating would lose them. Either run the task with "
                    "`task-mode: all` (the full load takes a new snapshot; drop this source's checkpoint rows "
                    "first), or, when the downstream already has those changes, start from a GTID set that "
                    "contains @@gtid_purged (task meta `binlog-gtid`); keep binlogs longer with "
                    "binlog_expire_logs_seconds", source=source_id, position=str(pos))
        elif not have and pos.file:
            cur.execute("SHOW BINARY LOGS")
            files = [r[0] for r in cur.fetchall()]
            if pos.file not in files:
                raise StartUnavailable(
                    f"{what} is {pos.file}:{pos.pos}, but {where} has no binlog file {pos.file} "
                    f"(it has {files[0] + ' to ' + files[-1] if files else 'none'}): purged, or another server. "
                    "Start from a file it has (task meta `binlog-name`/`binlog-pos`, or `binlog-gtid`), or run the "
                    "task with `task-mode: all`", source=source_id, position=str(pos))


# MySQL settings whose events this worker cannot read (worker.binlog.source._UNREADABLE)
_MYSQL_UNREADABLE = (("binlog_transaction_compression", ("OFF", "0"), "OFF"),
                     ("binlog_row_value_options", ("",), "''"))


def start_position(db_kwargs: dict, checkpoint: Position | None, meta, source_id: str) -> tuple[Position, str]:
    """Where a syncer starts reading and where that came from: the checkpoint (checked to name a
    point of this server's binlog), else the task's ``meta`` start (its GTID state read here),
    else the upstream's current position (``""``: nothing to check).  A checkpoint or meta start
    that is no longer in the binlog stops the start here (a purged start fails every dump)."""
    came_from = ""
    if checkpoint is not None:
        check_checkpoint_on_upstream(db_kwargs, checkpoint, source_id)
        if checkpoint.file:
            check_not_past_end(db_kwargs, checkpoint, source_id, "the checkpoint")
        pos, came_from = checkpoint, "the checkpoint"
    elif meta and (meta.binlog_name or meta.binlog_gtid):
        pos, came_from = Position(meta.binlog_name, meta.binlog_pos or 4, meta.binlog_gtid), "the task's meta start"
        if pos.file:
            check_not_past_end(db_kwargs, pos, source_id, came_from)
        if not pos.gtid and pos.file:
            with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
                pos = Position(pos.file, pos.pos, gtid_at(cur, pos.file, pos.pos))
    else:
        pos = master_status(db_kwargs)
    if came_from:
        check_start_available(db_kwargs, pos, source_id, came_from)
    return pos, came_from


def check_upstream(db_kwargs: dict, source_id: str, flavor: str = "") -> str:
    """The row images must carry column names and full rows (DML is named from the image), and
    on MySQL nothing may be written in a form the reader cannot decode.  Returns the flavor."""
    with pymysql.connect(**db_kwargs) as c, c.cursor() as cur:
        actual = server_flavor(cur)
        require_flavor(actual, flavor, source_id, f"{db_kwargs.get('host')}:{db_kwargs.get('port')}")
        try:
            cur.execute("SELECT @@binlog_format, @@binlog_row_image, @@binlog_row_metadata")
            fmt, image, meta = cur.fetchone()
        except pymysql.err.OperationalError:   # MySQL 5.7 has no binlog_row_metadata
            raise SyncError("upstream has no binlog_row_metadata (MySQL 5.7 or older): the binlog does not name "
                            "columns; use MySQL 8.0+ or MariaDB 10.5+", source=source_id) from None
        bad = []
        if actual == gtid.MYSQL:
            for var, ok, fix in _MYSQL_UNREADABLE:
                # the global value: every new session (the application's writers) starts from it
                cur.execute(f"SELECT @@GLOBAL.{var}")
                raw = str(cur.fetchone()[0])
                v = {"1": "ON", "0": "OFF"}.get(raw, raw)
                if v.upper() not in ok:
                    bad.append(f"{var}={v} (set it to {fix}: SET PERSIST {var} = {fix}; sessions keep their old "
                               "value until they reconnect)")
    if (fmt, image, meta) != ("ROW", "FULL", "FULL"):
        raise SyncError(f"upstream binlog settings are binlog_format={fmt}, binlog_row_image={image}, "
                        f"binlog_row_metadata={meta}; set them to ROW, FULL, FULL", source=source_id)
    if bad:
        raise SyncError("upstream writes binlog events the reader cannot decode: " + "; ".join(bad), source=source_id)
    return actual


def show_create(conn, schema: str, table: str) -> str | None:
    """The target's definition for rule 8's intent; None when it cannot be read (the DDL then
    counts as not yet run, and "already applied" errors are ignored on the rerun)."""
    try:
        return show_create_table(conn, schema, table)
    except pymysql.MySQLError:
        return None
