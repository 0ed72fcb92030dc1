"""Checks of one upstream server (MySQL 8.0+ or MariaDB 10.5+): version, server_id, the binlog
settings the worker decodes (log_bin, ROW, FULL row image, FULL row metadata; on MySQL no
compressed transactions and no partial JSON updates), GTID, and the privileges of the source's user.

Binlog, GTID and replication-privilege checks run only when the task replicates the binlog
(``task-mode`` all / incremental); the dump privilege only when it loads (all / full), as DM.
"""
from __future__ import annotations

from coordinator.config import SourceConfig

from .grants import Grants
from .result import FAIL, WARN, CheckItem


def _vars(conn, names: tuple[str, ...], mysql: bool = False) -> dict[str, str | None]:
    """Global server variables (None for a variable this server does not have).  MySQL serves
    them from performance_schema (information_schema.GLOBAL_VARIABLES is gone since 5.7)."""
    table = "performance_schema.global_variables" if mysql else "information_schema.GLOBAL_VARIABLES"
    with conn.cursor() as cur:
        cur.execute(f"SELECT VARIABLE_NAME, VARIABLE_VALUE FROM {table} "
                    "WHERE VARIABLE_NAME IN (" + ", ".join(["%s"] * len(names)) + ")",
                    [n.upper() for n in names])
        got = {k.lower(): v for k, v in cur.fetchall()}
    return {n: got.get(n) for n in names}


_SET = "SET GLOBAL {var} = {value}; and in the server's config file ({var} = {value}) so a restart keeps it"
_PERSIST = "SET PERSIST {var} = {value} (kept across restarts), or {var} = {value} in the server's config file"


def is_mysql(conn) -> bool:
    """A MySQL server, not a MariaDB (MariaDB always names itself in VERSION())."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return "mariadb" not in str(cur.fetchone()[0]).lower()


def _version_tuple(version: str) -> tuple[int, ...]:
    """``8.0.36-log`` -> (8, 0, 36): the leading numbers of ``VERSION()`` (suffixes such as
    ``-log``, ``-commercial``, a distribution's ``-2`` or MariaDB's ``-MariaDB-...`` dropped)."""
    nums = []
    for part in version.strip().split("-")[0].split(".")[:3]:
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        nums.append(int(digits or 0))
    return tuple(nums)


def version_problem(version: str) -> tuple[str, str] | None:
    """(problem, fix) when ``VERSION()`` names a server shardmerge cannot replicate from: MySQL
    before 8.0.1 and MariaDB before 10.5 write no ``binlog_row_metadata`` (row events without
    column names).  None when it can (tested: MySQL 9.7, MariaDB 10.11)."""
    if "mariadb" in version.lower():
        # the handshake (and some proxies) show MariaDB as "5.5.5-10.11.6-MariaDB": skip that prefix
        if _version_tuple(version.removeprefix("5.5.5-")) < (10, 5):
            return (f"MariaDB {version} has no binlog_row_metadata: its row events do not name their columns, "
                    "which the worker needs", "upgrade the upstream to MariaDB 10.5 or later (tested: 10.11)")
        return None
    if _version_tuple(version) < (8, 0, 1):
        return (f"MySQL {version} has no binlog_row_metadata: its row events do not name their columns, "
                "which the worker needs", "upgrade the upstream to MySQL 8.0 or later (tested: 9.7)")
    return None


def server_checks(conn, src: SourceConfig, mode: str, where: str) -> list[CheckItem]:
    """The server-level items for one source (``where`` names it in ``extra``)."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0])
    mysql = "mariadb" not in version.lower()
    v = _vars(conn, ("server_id", "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata",
                     "gtid_strict_mode", "gtid_mode", "enforce_gtid_consistency", "binlog_transaction_compression",
                     "binlog_row_value_options"), mysql)
    items = []
    flavor = "mysql" if mysql else "mariadb"
    it = CheckItem("mysql_version", "check whether the upstream is a MySQL or MariaDB shardmerge can replicate",
                   extra=f"{where}, version {version}")
    if src.flavor and src.flavor != flavor:
        it.problem(FAIL, f"the server is {flavor} {version}, but the source config says `flavor: {src.flavor}`",
                   f"set `flavor: {flavor}` in the source config, or leave it empty to detect it")
    if (bad := version_problem(version)) is not None:
        it.problem(FAIL, *bad)
    items.append(it)

    it = CheckItem("mysql_server_id", "check whether the upstream has a server_id", extra=where)
    sid = int(v["server_id"] or 0)
    if sid == 0:
        it.problem(FAIL, "server_id is 0: the server does not take part in replication",
                   (_PERSIST if mysql else _SET).format(var="server_id", value="<a unique number>"))
    elif src.server_id and src.server_id == sid:
        it.problem(FAIL, f"the source config's `server-id` {src.server_id} equals the upstream's server_id: the "
                         f"server refuses a binlog reader with its own id",
                   "set another `server-id` in the source config (operate-source stop, then create)")
    items.append(it)
    if mode == "full":
        return items

    it = CheckItem("mysql_binlog_enable", "check whether the upstream's binlog is enabled", extra=where)
    if (v["log_bin"] or "").upper() != "ON":
        it.problem(FAIL, f"log_bin is {v['log_bin'] or 'OFF'}: there is no binlog to replicate",
                   "remove skip-log-bin / disable-log-bin from the server's options (MySQL 8.0+ writes a binlog "
                   "by default; log-bin=mysql-bin names it) and restart it" if mysql else
                   "start the server with log-bin (e.g. log-bin=mysql-bin in its config file) and restart it")
    items.append(it)
    for var, want, why in (("binlog_format", "ROW", "only row events carry the changed rows"),
                           ("binlog_row_image", "FULL", "rows are applied and keyed from the full before/after "
                                                        "image"),
                           ("binlog_row_metadata", "FULL", "the worker names the columns of a row event from "
                                                           "its metadata")):
        it = CheckItem(f"mysql_{var}", f"check whether the upstream's {var} is {want}", extra=where)
        got = v[var]
        if got is None:
            it.problem(FAIL, f"the server has no {var} variable (MySQL before 8.0 or MariaDB before 10.5?); {why}",
                       "upgrade the upstream to MySQL 8.0+ or MariaDB 10.5+")
        elif got.upper() != want:
            it.problem(FAIL, f"{var} is {got}, and should be {want}: {why}",
                       (_PERSIST if mysql else _SET).format(var=var, value=want)
                       + "; sessions keep their old value until they reconnect")
        items.append(it)
    if mysql:
        items += _mysql_unreadable(v, where)
        items.append(_mysql_gtid(v, src, where))
        return items

    it = CheckItem("mysql_gtid", "check whether the upstream's GTIDs identify binlog positions unambiguously",
                   extra=where)
    if (v["gtid_strict_mode"] or "").upper() != "ON":
        it.problem(WARN, f"gtid_strict_mode is {v['gtid_strict_mode'] or 'OFF'}: out-of-order GTIDs are "
                         f"possible, and a checkpoint's GTID may not identify its position after a failover",
                   _SET.format(var="gtid_strict_mode", value="ON"))
    if not src.enable_gtid:
        it.problem(WARN, "the source config has `enable-gtid: false`; shardmerge records GTIDs with every "
                         "checkpoint anyway", "set `enable-gtid: true` in the source config")
    items.append(it)
    return items


def _mysql_unreadable(v: dict, where: str) -> list[CheckItem]:
    """MySQL binlog forms the reader cannot decode: a compressed transaction hides its rows in
    one payload event, a partial JSON update carries a diff instead of the after image."""
    items = []
    for var, ok, value, why in (
            ("binlog_transaction_compression", ("OFF", "0"), "OFF",
             "compressed transactions (TRANSACTION_PAYLOAD events) cannot be decoded by the binlog reader"),
            ("binlog_row_value_options", ("",), "''",
             "partial JSON updates carry a diff, not the row's after image the worker applies")):
        it = CheckItem(f"mysql_{var}", f"check whether the upstream's {var} is {value}", extra=where)
        got = v[var]
        if got is not None and got.upper() not in ok:
            it.problem(FAIL, f"{var} is {got!r}: {why}", _PERSIST.format(var=var, value=value))
        items.append(it)
    return items


_GTID_MODES = ["OFF", "OFF_PERMISSIVE", "ON_PERMISSIVE", "ON"]


def _mysql_gtid(v: dict, src: SourceConfig, where: str) -> CheckItem:
    it = CheckItem("mysql_gtid", "check whether the upstream's GTIDs identify binlog positions", extra=where)
    mode, enforce = (v["gtid_mode"] or "OFF").upper(), (v["enforce_gtid_consistency"] or "OFF").upper()
    if mode != "ON":
        steps = _GTID_MODES[_GTID_MODES.index(mode) + 1:] if mode in _GTID_MODES else _GTID_MODES[1:]
        first = [] if enforce == "ON" else ["SET PERSIST enforce_gtid_consistency = ON"]
        it.problem(FAIL, f"gtid_mode is {mode}{'' if enforce == 'ON' else f' (enforce_gtid_consistency {enforce})'}: "
                         "checkpoints, restarts and failovers locate positions by GTID",
                   "; then ".join(first + [f"SET PERSIST gtid_mode = {m}" for m in steps])
                   + " (gtid_mode moves one step at a time; before ON, wait until no anonymous transaction is "
                     "left: SHOW STATUS LIKE 'Ongoing_anonymous_transaction_count' is 0)")
    elif enforce != "ON":
        it.problem(FAIL, f"enforce_gtid_consistency is {enforce} with gtid_mode ON",
                   _PERSIST.format(var="enforce_gtid_consistency", value="ON"))
    if not src.enable_gtid:
        it.problem(WARN, "the source config has `enable-gtid: false`; shardmerge records GTIDs with every "
                         "checkpoint anyway", "set `enable-gtid: true` in the source config")
    return it


def replication_privilege(grants: Grants, where: str, mysql: bool = False) -> CheckItem:
    it = CheckItem("source db replication privilege checker",
                   "check replication privileges of the source DB", extra=where)
    if not grants.has_global("REPLICATION SLAVE"):
        it.problem(FAIL, "lack of REPLICATION SLAVE privilege (needed to read the binlog)",
                   "GRANT REPLICATION SLAVE ON *.* TO the source's user")
    if mysql and not any(grants.has_global(p) for p in ("REPLICATION CLIENT", "SUPER")):
        it.problem(FAIL, "lack of REPLICATION CLIENT privilege (needed for SHOW BINARY LOG STATUS and SHOW "
                         "BINARY LOGS)", "GRANT REPLICATION CLIENT ON *.* TO the source's user")
    elif not mysql and not any(grants.has_global(p) for p in ("BINLOG MONITOR", "REPLICATION CLIENT", "SUPER")):
        it.problem(FAIL, "lack of BINLOG MONITOR privilege (needed for SHOW MASTER STATUS)",
                   "GRANT BINLOG MONITOR ON *.* TO the source's user")
    return it


def dump_privilege(grants: Grants, tables: list[tuple[str, str]], where: str, mysql: bool = False) -> CheckItem:
    """SELECT on every table the full load reads.  On MariaDB a consistent snapshot needs no
    lock; on MySQL it is opened under FLUSH TABLES WITH READ LOCK (worker.load.snapshot): RELOAD.
    BACKUP_ADMIN alone is not enough: LOCK INSTANCE FOR BACKUP blocks DDL but not commits, so
    the snapshot's read view and its binlog position would not correspond."""
    it = CheckItem("source db dump privilege checker", "check dump privileges of the source DB", extra=where)
    if mysql and not grants.has_global("RELOAD"):
        also = (" BACKUP_ADMIN is not enough: LOCK INSTANCE FOR BACKUP does not stop commits, so the "
                "snapshot and its binlog position would not correspond." if grants.has_global("BACKUP_ADMIN") else "")
        it.problem(FAIL, "lack of RELOAD privilege (a MySQL snapshot's binlog position is read under "
                         f"FLUSH TABLES WITH READ LOCK, held for milliseconds).{also}",
                   "GRANT RELOAD ON *.* TO the source's user")
    missing = [f"`{s}`.`{t}`" for s, t in tables if not grants.on_table("SELECT", s, t)]
    if missing:
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        it.problem(FAIL, f"lack of SELECT privilege on {', '.join(missing[:10])}{more}",
                   "GRANT SELECT ON each shard schema (`db`.*) TO the source's user")
    return it


def start_position_check(conn, meta, where: str) -> CheckItem:
    """The task's meta start (``binlog-name``/``binlog-pos``) must be a position the server has
    written: a file it lists, and not past that file's end (the worker would refuse to start
    with the same reason; better to hear it from check-task)."""
    it = CheckItem("binlog_start_position", "check whether the task's meta start is in the upstream's binlog",
                   extra=f"{where}, meta {meta.binlog_name}:{meta.binlog_pos or 4}")
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        sizes = {r[0]: int(r[1]) for r in cur.fetchall()}
    pos = meta.binlog_pos or 4
    fix = ("set the task's `meta` to a position from SHOW BINARY LOGS / SHOW MASTER STATUS on this server (or "
           "`binlog-gtid`), or run the task with `task-mode: all`")
    if meta.binlog_name not in sizes:
        names = sorted(sizes)
        it.problem(FAIL, f"the server has no binlog file {meta.binlog_name} (it has "
                         f"{names[0] + ' to ' + names[-1] if names else 'none'}): purged, or another server", fix)
    elif pos > sizes[meta.binlog_name]:
        it.problem(FAIL, f"{meta.binlog_name}:{pos} is past the end of that file ({sizes[meta.binlog_name]} bytes): "
                         f"the server has not written that position", fix)
    return it
