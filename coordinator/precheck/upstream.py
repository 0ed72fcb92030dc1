"""Checks of one upstream server: version, server_id, the binlog settings the worker decodes
(log_bin, ROW, FULL row image, FULL row metadata), GTID, and the privileges of the source's user.

Binlog, GTID and replication-privilege checks run only when the task replicates the binlog
(``task-mode`` all / incremental); the dump privilege only when it loads (all / full), as DM.
"""
from __future__ import annotations

from coordinator.config import SourceConfig

from .grants import Grants
from .result import FAIL, WARN, CheckItem


def _vars(conn, names: tuple[str, ...]) -> dict[str, str | None]:
    """Global server variables (None for a variable this server does not have)."""
    with conn.cursor() as cur:
        cur.execute("SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
                    "WHERE VARIABLE_NAME IN (" + ", ".join(["%s"] * len(names)) + ")",
                    [n.upper() for n in names])
        got = {k.lower(): v for k, v in cur.fetchall()}
    return {n: got.get(n) for n in names}


_SET = "SET GLOBAL {var} = {value}; and in the server's config file ({var} = {value}) so a restart keeps it"


def server_checks(conn, src: SourceConfig, mode: str, where: str) -> list[CheckItem]:
    """The server-level items for one source (``where`` names it in ``extra``)."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = cur.fetchone()[0]
    v = _vars(conn, ("server_id", "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata",
                     "gtid_strict_mode"))
    items = []
    it = CheckItem("mysql_version", "check whether the upstream is a MariaDB shardmerge can replicate",
                   extra=f"{where}, version {version}")
    if "mariadb" not in version.lower():
        it.problem(FAIL, f"version {version!r} is not MariaDB; shardmerge reads MariaDB GTIDs and binlog "
                         f"metadata and supports MariaDB 10.5 or later upstreams",
                   "point the source at a MariaDB server (10.5 or later)")
    items.append(it)

    it = CheckItem("mysql_server_id", "check whether the upstream has a server_id", extra=where)
    sid = int(v["server_id"] or 0)
    if sid == 0:
        it.problem(FAIL, "server_id is 0: the server does not take part in replication",
                   _SET.format(var="server_id", value="<a unique number>"))
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
            it.problem(FAIL, f"the server has no {var} variable (MariaDB older than 10.5?); {why}",
                       "upgrade the upstream to MariaDB 10.5 or later")
        elif got.upper() != want:
            it.problem(FAIL, f"{var} is {got}, and should be {want}: {why}",
                       _SET.format(var=var, value=want) + "; sessions keep their old value until they reconnect")
        items.append(it)

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


def replication_privilege(grants: Grants, where: str) -> CheckItem:
    it = CheckItem("source db replication privilege checker",
                   "check replication privileges of the source DB", extra=where)
    if not grants.has_global("REPLICATION SLAVE"):
        it.problem(FAIL, "lack of REPLICATION SLAVE privilege (needed to read the binlog)",
                   "GRANT REPLICATION SLAVE ON *.* TO the source's user")
    if not any(grants.has_global(p) for p in ("BINLOG MONITOR", "REPLICATION CLIENT", "SUPER")):
        it.problem(FAIL, "lack of BINLOG MONITOR (REPLICATION CLIENT) privilege (needed for SHOW MASTER STATUS)",
                   "GRANT BINLOG MONITOR ON *.* TO the source's user")
    return it


def dump_privilege(grants: Grants, tables: list[tuple[str, str]], where: str) -> CheckItem:
    """SELECT on every table the full load reads (a consistent snapshot needs no RELOAD or LOCK)."""
    it = CheckItem("source db dump privilege checker", "check dump privileges of the source DB", extra=where)
    missing = [f"`{s}`.`{t}`" for s, t in tables if not grants.on_table("SELECT", s, t)]
    if missing:
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        it.problem(FAIL, f"lack of SELECT privilege on {', '.join(missing[:10])}{more}",
                   "GRANT SELECT ON each shard schema (`db`.*) TO the source's user")
    return it
