"""Run every precheck of a task: per source (server settings, privileges), per merged target
(key presence, schema join, AUTO_INCREMENT collisions), and the downstream."""
from __future__ import annotations

import pymysql

from coordinator.config import SourceConfig, TaskConfig
from coordinator.errors import ConfigError
from coordinator.obs import logger
from coordinator.routing import TableMapper

from . import downstream, shards, upstream
from .connect import SECRET_HINT, connect
from .grants import current_grants
from coordinator.checking_items import ignored_names, is_ignored
from .result import FAIL, WARN, CheckItem, CheckReport

log = logger("precheck")


def _source_conn(src: SourceConfig):
    """(connection or None, failing item or None)."""
    db = src.db
    it = CheckItem("source_connection", "check whether the upstream is reachable with the source config",
                   extra=f"source {src.source_id} ({db.address()})")
    try:
        return connect(db), None
    except ConfigError as e:
        # password-env / password-file are read where the connection is made: a worker may hold a
        # secret the master does not, which is a valid deployment, so the checks are skipped, loudly
        it.problem(WARN, f"the master cannot read the password of source {src.source_id} ({e}); the checks of "
                         f"this source were not run", SECRET_HINT)
        return None, it
    except (pymysql.MySQLError, OSError) as e:
        it.problem(FAIL, f"cannot connect to source {src.source_id} at {db.address()} as {db.user!r}: "
                         f"{e}{db.tls_hint(e)}",
                   "check `from` in the source config (operate-source show / get-config source) and that the "
                   "server is running")
        return None, it


def _sequence(conn) -> tuple[int, int]:
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.auto_increment_increment, @@GLOBAL.auto_increment_offset")
        inc, off = cur.fetchone()
    return int(inc), int(off)


def _source_items(conn, src: SourceConfig, inst, task: TaskConfig, where: str,
                  targets: dict[tuple[str, str], shards.Target]) -> list[CheckItem]:
    """The server and privilege items of one source; its routed tables are added to ``targets``."""
    items = upstream.server_checks(conn, src, task.task_mode, where)
    grants = current_grants(conn)
    found = shards.discover(conn, src.source_id, TableMapper(inst, task.meta_schema))
    mysql = upstream.is_mysql(conn)
    if task.task_mode != "incremental":
        items.append(upstream.dump_privilege(grants, [(s.schema, s.table) for s, _ in found], where, mysql=mysql))
    if task.task_mode != "full":
        items.append(upstream.replication_privilege(grants, where, mysql=mysql))
    if task.task_mode == "incremental" and inst.meta is not None and inst.meta.binlog_name:
        items.append(upstream.start_position_check(conn, inst.meta, where))
    for st, (ts, tt) in found:
        targets.setdefault((ts, tt), shards.Target(ts, tt)).shards.append(st)
    return items


def run_prechecks(task: TaskConfig, sources: dict[str, SourceConfig], only: list[str] | None = None) -> CheckReport:
    """All checks of ``task`` on the sources ``only`` (default: all of the task's).  ``sources``
    holds the registered config of each; connection failures become failed items, never
    exceptions."""
    report = CheckReport()
    ignored = ignored_names(task.ignore_checking_items)
    if "*" in ignored:            # DM's `all`: nothing is checked, as --skip-precheck
        log.info("precheck skipped: ignore-checking-items has all", task=task.name)
        return report
    conns: dict[str, pymysql.connections.Connection] = {}
    unchecked: list[str] = []        # sources whose tables the shard checks could not see
    seq: dict[str, tuple[int, int]] = {}
    targets: dict[tuple[str, str], shards.Target] = {}
    try:
        for inst in task.instances:
            if only and inst.source_id not in only:
                continue
            src = sources[inst.source_id]
            where = f"source {src.source_id} ({src.db.address()})"
            conn, failed = _source_conn(src)
            if conn is None:
                report.items.append(failed)
                unchecked.append(src.source_id)
                continue
            conns[src.source_id] = conn
            try:
                report.items += _source_items(conn, src, inst, task, where, targets)
                seq[src.source_id] = _sequence(conn)
            except pymysql.MySQLError as e:       # e.g. a table the user may not SHOW CREATE
                it = CheckItem("source_connection", "check whether the upstream answers the checks' queries",
                               extra=where)
                report.items.append(it.problem(FAIL, f"source {src.source_id} refused a check's query: {e}",
                                               "grant the source's user the privileges of the failed checks "
                                               "(see docs/precheck.md)"))
                conns.pop(src.source_id).close()
                unchecked.append(src.source_id)
        ordered = [targets[k] for k in sorted(targets)]
        origin_targets = {(r.target_schema, r.target_table) for i in task.instances for r in i.routes
                          if r.extract and r.target_table}
        keys = shards.key_check(ordered)
        if unchecked:
            # a check that could not look at a source's tables did not pass for them
            keys.problem(WARN, f"not checked: the tables of source(s) {', '.join(unchecked)} (the source could "
                               f"not be reached or refused the queries; see its source_connection item)",
                         "fix the source's connection, then check-task again")
        report.items.append(keys)
        for t in ordered:
            # as DM: the shards' consistency matters for what the load copies; an incremental task
            # starts from binlog positions whose schemas the worker tracks from its checkpoints
            if len(t.shards) < 2 or task.task_mode == "incremental":
                continue
            report.items.append(shards.join_check(t))
            if (t.schema, t.table) in origin_targets:
                # keys of the merged table include the origin columns: equal keys of two shards are two rows
                report.items.append(CheckItem("auto-increment key checking", f"AUTO_INCREMENT keys of the shards of "
                                              f"{t.name} may be equal: the merged keys include the route's origin "
                                              f"columns (extract-*)", extra=f"sharding {t.name}"))
                continue
            try:
                report.items.append(shards.auto_increment_check(t, conns, seq))
            except pymysql.MySQLError as e:       # no SELECT on a shard: the dump privilege item fails too
                it = CheckItem("auto-increment key checking", f"check whether AUTO_INCREMENT keys of the shards "
                               f"of {t.name} collide when merged", extra=f"sharding {t.name}")
                report.items.append(it.problem(WARN, f"the key values could not be read: {e}; not checked",
                                               "grant SELECT on the shard tables to the source's user"))
        down, item = downstream.connection_check(task)
        report.items.append(item)
        if down is not None:
            try:
                report.items.append(downstream.meta_schema_check(down, task))
                if any(r.extract for i in task.instances for r in i.routes):
                    report.items.append(downstream.origin_columns_check(down, task))
            finally:
                down.close()
    finally:
        for c in conns.values():
            c.close()
    if ignored:
        left = [i.name for i in report.items if is_ignored(i.name, ignored)]
        report.items = [i for i in report.items if not is_ignored(i.name, ignored)]
        log.info("precheck items left out by ignore-checking-items", task=task.name, items=sorted(set(left)))
    log.info("precheck done", task=task.name, total=len(report.items), failed=report.count("fail"),
             warning=report.count("warn"))
    return report


def check_source(src: SourceConfig) -> list[CheckItem]:
    """What ``operate-source create`` checks before registering ``src`` (as DM does): the
    connection with the config's own address, user and password, the server settings the
    binlog reader needs (binlog on, ROW format, FULL row image and metadata, GTIDs) and the
    replication privileges.  A password this process cannot read is a warning (the workers may
    hold a secret the master does not), never a pass."""
    conn, failed = _source_conn(src)
    if conn is None:
        return [failed]
    where = f"source {src.source_id} ({src.db.address()})"
    try:
        items = upstream.server_checks(conn, src, "incremental", where)
        items.append(upstream.replication_privilege(current_grants(conn), where, mysql=upstream.is_mysql(conn)))
        return items
    except pymysql.MySQLError as e:
        it = CheckItem("source_connection", "check whether the upstream answers the checks' queries", extra=where)
        return [it.problem(FAIL, f"source {src.source_id} refused a check's query: {e}",
                           "grant the source's user REPLICATION SLAVE and BINLOG MONITOR (MariaDB) or "
                           "REPLICATION CLIENT (MySQL)")]
    finally:
        conn.close()
