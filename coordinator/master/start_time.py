"""``start-task --start-time`` (dmctl's flag): an incremental task starts each source at the first
transaction written at or after a point in time instead of a binlog position.

The time is resolved on each source's binlog here, at start-task (``worker.binlog.at_time``), and
written into the task's ``meta`` for that source, so the stored task says exactly where each
source started and a worker restart is no different from any start.  As in DM it wins over the
``meta`` in the task file.  It is refused for a source that already has a checkpoint from an
earlier run of the task: DM moves such a source back or forward (in safe mode), which can apply
rows twice into tables whose schema has moved on, or skip rows; here the operator drops the
checkpoint rows first, knowingly (the refusal gives the statement).
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pymysql
import yaml

from coordinator.config import TaskConfig, parse_source
from coordinator.etcdproto import Store
from coordinator.precheck.connect import connect
from coordinator.sql import checkpoint_table, quote_table

from .errors import RequestError

_FORMAT = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(Z|[+-]\d{2}:\d{2})?$")


def parse_start_time(text: str) -> int:
    """UNIX seconds of ``2021-10-21 00:01:00`` / ``2021-10-21T00:01:00`` (DM's forms), with an
    optional ``Z`` or ``+08:00``; without one, the master's local time zone (as dm-master)."""
    m = _FORMAT.match(text.strip())
    if m is None:
        raise RequestError(f"--start-time {text!r} is not a time: give '2021-10-21 00:01:00' or 2021-10-21T00:01:00 "
                           "(optionally ending in Z or +08:00; without it, the master's local time zone)")
    try:
        naive = datetime.strptime(f"{m[1]} {m[2]}", "%Y-%m-%d %H:%M:%S")
    except ValueError as e:
        raise RequestError(f"--start-time {text!r} is not a valid date and time ({e})") from None
    zone = m[3]
    if zone is None:
        return int(naive.astimezone().timestamp())
    if zone == "Z":
        return int(naive.replace(tzinfo=timezone.utc).timestamp())
    sign = 1 if zone[0] == "+" else -1
    offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])) * sign
    return int(naive.replace(tzinfo=timezone(offset)).timestamp())


def resolve(store: Store, cfg: TaskConfig, text: str, sources: list[str], start_time: str) -> tuple[str, list[str]]:
    """``text`` with each of ``sources``' ``meta`` set to the binlog position of ``start_time``,
    and one line per source saying where it starts."""
    from worker.binlog.at_time import StartTimeError, position_at_time   # reads the binlog: only when asked
    when = parse_start_time(start_time)
    if cfg.task_mode != "incremental":
        raise RequestError(f"--start-time applies to task-mode: incremental (as in DM); task {cfg.name!r} is "
                           f"{cfg.task_mode!r}, whose full load decides where replication starts", task=cfg.name)
    utc = datetime.fromtimestamp(when, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    _refuse_checkpoints(cfg, sources)
    doc = yaml.safe_load(text)
    lines = []
    for inst in doc["mysql-instances"]:
        sid = inst.get("source-id")
        if sid not in sources:
            continue
        rec = store.get_source(sid)
        if rec is None:
            raise RequestError(f"source {sid!r} is not registered", task=cfg.name, source=sid)
        db = parse_source(rec.yaml, f"<source {sid} in etcd>").db
        try:
            pos = position_at_time(db.pymysql_kwargs(), when, sid)
        except StartTimeError as e:
            raise RequestError(str(e), task=cfg.name, source=sid) from None
        except pymysql.MySQLError as e:
            raise RequestError(f"cannot read the binlog of source {sid} at {db.address()} to find --start-time "
                               f"{start_time!r}: {e}", task=cfg.name, source=sid) from None
        inst["meta"] = {"binlog-name": pos.file, "binlog-pos": pos.pos, "binlog-gtid": pos.gtid}
        lines.append(f"source {sid}: --start-time {start_time} ({utc}) starts at {pos.file}:{pos.pos}"
                     + (f" (GTID state {pos.gtid})" if pos.gtid else ""))
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), lines


def _refuse_checkpoints(cfg: TaskConfig, sources: list[str]) -> None:
    table = quote_table(cfg.meta_schema, checkpoint_table(cfg.name))
    try:
        conn = connect(cfg.target)
    except pymysql.MySQLError as e:
        raise RequestError(f"cannot connect to the downstream {cfg.target.address()} to look for checkpoints of "
                           f"task {cfg.name!r}: {e}", task=cfg.name) from None
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(f"SELECT id, binlog_name, binlog_pos FROM {table} WHERE is_global = 1")
            except pymysql.MySQLError as e:
                if e.args and e.args[0] in (1049, 1146):       # no meta schema / no checkpoint table yet
                    return
                raise RequestError(f"cannot read {table} on {cfg.target.address()}: {e}", task=cfg.name) from None
            found = {sid: f"{name}:{pos}" for sid, name, pos in cur.fetchall() if sid in sources and name}
    finally:
        conn.close()
    if found:
        sid, at = sorted(found.items())[0]
        ids = ", ".join(repr(s) for s in sorted(found))
        raise RequestError(
            f"source {sid} of task {cfg.name!r} has a checkpoint at {at} from an earlier run; --start-time only "
            "chooses where a source without one starts (moving a checkpoint can apply rows twice or skip them). "
            f"To start over from the time, delete its checkpoints first: DELETE FROM {table} WHERE id IN ({ids})",
            task=cfg.name, source=sid)
