"""The operator's binlog commands on the master: ``binlog skip|replace|revert|list`` (and DM's
``handle-error TASK skip|replace``).  Each arms (or disarms) a one-time record for the statement
event a subtask is stopped on, in Error or Paused at a shard-DDL lock, and rewrites the task
record so a stopped subtask restarts and meets it; the worker carries it out
(``worker/sync/operator_records.py``).  The sources, tasks and status they read are
``Cluster``'s.
"""
from __future__ import annotations

import pymysql

from coordinator.config import parse_source
from coordinator.etcdproto import BinlogSkip, Fence, SubtaskStatus, binlog_pos_gtid, parse_binlog_pos
from coordinator.etcdproto.binlog_skip import STATEMENT_OPS
from coordinator.schema.replacement import ReplacementError, plan_replacement

from .cluster import Cluster, CommandResult, _now
from .errors import RequestError

HANDLE_ERROR_OPS = ("skip", "replace", "inject", "revert", "list")


def _stopped_statement(st: SubtaskStatus | None) -> dict | None:
    """The error of a subtask stopped *at a statement event*, else None: stopped in Error there
    (the syncer adds ``statement_end`` to such errors; ``position`` is then the statement's
    start), or Paused there by a shard-DDL lock (a held or conflicting DDL: DM's runbooks exit
    that state with ``binlog skip``).  A ``pause-task`` pause is not a statement to skip."""
    if st is None or st.stage not in ("Error", "Paused"):
        return None
    detail = st.detail or {}
    if st.stage == "Paused" and (detail.get("paused_by") == "operator" or not detail.get("lock_id")):
        return None
    err = detail.get("error")
    if isinstance(err, dict) and err.get("statement_end") and err.get("position"):
        return err
    if st.stage == "Error" and _rows_event(err):
        return err
    return None


def _rows_event(err) -> bool:
    """The error is a rows event the decoder cannot read (``RowDecodeError``; ``position`` is
    where the event ends): ``binlog skip`` passes over that one event."""
    return isinstance(err, dict) and err.get("event") == "rows" and bool(err.get("position"))


def handle_error(cluster: Cluster, fence: Fence, task: str, source: str, op: str, binlog_pos: str,
                 statements: list[str] | None = None) -> CommandResult:
    """``binlog skip|replace`` / ``handle-error TASK skip|replace``: arm a one-time skip (or
    replacement by ``statements``) of the statement event of ``source``'s binlog starting at
    ``binlog_pos`` (default: the statement the subtask is stopped on in Error, or paused at on
    a shard-DDL lock), then rewrite the task record so a failed subtask restarts and meets it.
    ``revert`` removes one that is still pending; ``list`` shows them.  Serialized with the
    other task-record writers (``task_lock``) so no concurrent stage change is lost."""
    if op == "list":
        return _list_skips(cluster, task, source)
    with cluster.task_lock:
        if not source and op in ("skip", *STATEMENT_OPS) and not binlog_pos:
            return _skip_on_every_source(cluster, fence, task, op, statements or [])
        return _handle_error(cluster, fence, task, source, op, binlog_pos, statements or [])


def _list_skips(cluster: Cluster, task: str, source: str) -> CommandResult:
    """``binlog list TASK [-s SOURCE]``: the armed skips and replacements and what became of them."""
    cluster._task_for_stage_change(task, [source] if source else [], "binlog list")
    recs = [r for r in cluster.store.list_binlog_skips(task, source or None).items]
    lines = [f"{r.source} {r.position} {r.op}{' rows event' if r.event == 'rows' else ''} {r.state}"
             + (f" with {'; '.join(r.replace_with)}" if r.replace_with else "")
             + (f" (statement: {r.statement})" if r.statement else "") + (f" [{r.note}]" if r.note else "")
             for r in sorted(recs, key=lambda r: (r.source, r.file, r.pos))]
    return CommandResult(True, "\n".join(lines) if lines else f"no binlog skip, replace or inject armed for task {task!r}",
                   [(r.source, True, f"{r.op} {r.state} at {r.position}") for r in recs])


def _skip_on_every_source(cluster: Cluster, fence: Fence, task: str, op: str = "skip",
                          statements: list[str] | None = None) -> CommandResult:
    """``binlog skip TASK`` without ``-s`` (DM's runbook form): skip the statement on every
    source of the task stopped at one; the others answer "source 'S' has no error"."""
    cur = cluster._task_for_stage_change(task, [], "binlog skip")
    statuses = {s.source: s for s in cluster.store.list_status(task).items}
    per, msgs = [], []
    for src in cur.sources:
        if _stopped_statement(statuses.get(src)) is None:
            per.append((src, False, f"source '{src}' has no error"))
            continue
        out = _handle_error(cluster, fence, task, src, op, "", statements or [])
        per.extend(out.per_source)
        msgs.append(f"{src}: {out.msg}")
    if not msgs:
        raise RequestError(f"no source of task {task!r} is stopped at a statement (in Error, or Paused at a "
                           f"shard DDL); nothing to {op}", task=task)
    return CommandResult(True, "; ".join(msgs), per)


def _handle_error(cluster: Cluster, fence: Fence, task: str, source: str, op: str, binlog_pos: str,
                  statements: list[str] | None = None) -> CommandResult:
    cmd = f"binlog {op or '?'}"
    if op not in HANDLE_ERROR_OPS:
        raise RequestError(f"binlog operation {op!r} is not supported; use one of {', '.join(HANDLE_ERROR_OPS)}")
    replace_with: list[str] = []
    if op in STATEMENT_OPS:
        try:
            plan_replacement(list(statements or []), cmd=cmd)     # refused here, not on the worker
        except ReplacementError as e:
            raise RequestError(f"{cmd}: {e}", task=task, source=source) from None
        replace_with = [s for s in statements or [] if s.strip()]
    elif statements:
        raise RequestError(f"{cmd} takes no statements (only binlog replace and inject do)", task=task,
                           source=source)
    if not source:
        raise RequestError(f"{cmd} needs exactly one source: -s SOURCE")
    cur = cluster._task_for_stage_change(task, [source], cmd)
    given: tuple[str, int] | None = None
    if binlog_pos:
        try:
            given = parse_binlog_pos(binlog_pos)
        except ValueError as e:
            raise RequestError(f"{cmd}: -b {e}", task=task, source=source) from None
    st = next((s for s in cluster.store.list_status(task).items if s.source == source), None)
    err = _stopped_statement(st)
    if op == "revert":
        return _revert_skip(cluster, fence, task, source, *(given or (None, None)))
    if given is None:
        if err is None:
            if st is not None and st.stage == "Error":
                last = (st.detail or {}).get("error")
                last = last.get("message", "") if isinstance(last, dict) else str(last or "")
                why = f"stopped in Error, but not at a statement event (error: {last})"
            else:
                why = (f"not stopped in Error at a DDL nor paused at a shard DDL "
                       f"(stage {st.stage if st is not None else 'not reported yet'})")
            raise RequestError(f"subtask of task {task!r} on source {source!r} is {why}; to skip a statement "
                               f"that is not reached yet, give its start position with -b FILE:POS",
                               task=task, source=source)
        at = _pos_or_none(err["position"])
        if at is None:
            raise RequestError(f"the error position {err['position']!r} of task {task!r} on source {source!r} "
                               f"is not FILE:POS; give the statement's start position with -b FILE:POS",
                               task=task, source=source)
    else:
        at = given
        # the end of the statement the subtask is stopped on names that statement too
        if err is not None and _pos_or_none(err.get("statement_end", "")) == at and _pos_or_none(err["position"]):
            at = _pos_or_none(err["position"]) or at
    file, pos = at
    stopped = err if err is not None and _pos_or_none(err["position"]) == at else None
    at_error = stopped is not None
    rows = stopped is not None and _rows_event(stopped)
    if stopped is not None and rows and replace_with:
        raise RequestError(f"{cmd}: the subtask of task {task!r} on source {source!r} is stopped at a rows event "
                           f"that cannot be decoded ({stopped.get('table', '')} at {stopped['position']}), not at a "
                           f"statement: only `binlog skip` applies to it (its rows are not applied)",
                           task=task, source=source)
    if not at_error:
        _require_statement_start(cluster, task, source, file, pos, cmd)
    gtid = binlog_pos_gtid(stopped["position"]) if stopped is not None else binlog_pos_gtid(binlog_pos)
    statement = "" if stopped is None else f"rows of {stopped.get('table', '?')}" if rows else \
        stopped.get("statement", "")
    rec = BinlogSkip(task, source, file, pos, statement=statement, gtid=gtid, requested_at=_now(),
                     op=op if replace_with else "skip", replace_with=replace_with,
                     event="rows" if rows else "statement")
    prev = cluster.store.get_binlog_skip(task, source, file, pos)
    cluster.store.put_binlog_skip(fence, rec)
    # like resume-task: a new revision restarts a subtask stopped in Error (healthy ones go on)
    cluster.store.put_task(fence, cur.with_stages({}))
    what = f"the statement at {rec.position}" + (f" ({rec.statement})" if rec.statement else "")
    cluster.log.warning(f"binlog {rec.op} armed", task=task, source=source, position=rec.position,
                        statement=rec.statement, stopped_there=at_error, replace_with="; ".join(replace_with),
                        event=rec.event)
    if rows:
        msg = (f"the rows event ending at {rec.position} ({rec.statement}) will be skipped: its rows are not applied "
               f"downstream, the rest of its transaction is; the subtask restarts and continues after it")
    elif replace_with and op == "inject":
        msg = (f"{'; '.join(replace_with)} will run just before {what}, then the statement itself: "
               + ("the subtask restarts and runs them" if at_error else f"when source {source} reaches it"))
    elif replace_with:
        instead = f"replaced by {'; '.join(replace_with)}"
        msg = (f"{what} will be {instead}: " + ("the subtask coordinates the replacement on its lock instead"
                                                  if at_error and st is not None and st.stage == "Paused" else
                                                  "the subtask restarts and runs it in its place" if at_error else
                                                  f"when source {source} reaches it"))
    elif at_error and st is not None and st.stage == "Paused":
        msg = (f"{what} will be skipped: the subtask withdraws it from lock {(st.detail or {}).get('lock_id')} "
               f"and continues after it")
    elif at_error:
        msg = f"{what} will be skipped; the subtask restarts and continues after it"
    else:
        msg = (f"{what} will be skipped when source {source} reaches it (the subtask is not stopped there; "
               f"no statement starting exactly at {rec.position} means nothing is skipped)")
    if prev is not None and prev.state == "pending" and (prev.op, prev.replace_with) == (rec.op, rec.replace_with):
        msg += "; it was already armed"
    elif prev is not None and prev.state in ("pending", "held"):
        msg += f"; the {prev.op} armed there before is overwritten"
    elif prev is not None:
        msg += f"; a {prev.state} {prev.op} at that position was overwritten"
    return CommandResult(True, msg, [(source, True, f"{rec.op} armed at {rec.position}")])


def _require_statement_start(cluster: Cluster, task: str, source: str, file: str, pos: int, cmd: str) -> None:
    """``-b FILE:POS`` must be where a DDL statement starts in the source's binlog (its
    transaction's GTID event, then the statement): a skip armed anywhere else would never match
    and silently skip nothing.  The upstream is asked with ``SHOW BINLOG EVENTS``; an unreachable
    upstream is refused too (nothing is armed on a guess)."""
    rec = cluster.store.get_source(source)
    if rec is None:
        raise RequestError(f"{cmd}: source {source!r} is not registered; `shardctl operate-source show` "
                           "lists the sources", task=task, source=source)
    db = parse_source(rec.yaml, f"<source {source} in etcd>").db
    where = f"{file}:{pos}"
    try:
        conn = pymysql.connect(**db.pymysql_kwargs(), connect_timeout=5)
    except pymysql.MySQLError as e:
        raise RequestError(f"{cmd}: cannot read the binlog of source {source!r} at {db.host}:{db.port} to check "
                           f"-b {where} ({e.args[-1] if e.args else e}); nothing armed", task=task,
                           source=source) from None
    try:
        with conn.cursor() as cur:
            try:
                cur.execute("SHOW BINLOG EVENTS IN %s FROM %s LIMIT 2", (file, int(pos)))
                events = cur.fetchall()
            except pymysql.MySQLError as e:
                raise RequestError(f"{cmd}: -b {where} is not an event position in source {source!r}'s binlog "
                                   f"({e.args[-1] if e.args else e}); give the start position of the statement "
                                   "as query-status or `SHOW BINLOG EVENTS` shows it; nothing armed",
                                   task=task, source=source) from None
    finally:
        conn.close()
    kinds = [(str(e[2]), str(e[5] or "")) for e in events]   # Event_type, Info
    query = next((info for kind, info in kinds if kind == "Query"), "").lstrip()
    if query.lower().startswith("use ") and "; " in query:
        query = query.split("; ", 1)[1]       # SHOW BINLOG EVENTS prefixes the session database
    words = query.split(None, 1)
    first = words[0].upper() if words else ""
    if not kinds or kinds[0][0] not in ("Gtid", "Query") or first in ("", "BEGIN", "COMMIT", "XA") \
            or first not in ("ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE"):
        seen = "; ".join(f"{k} {i[:60]}" for k, i in kinds) or "no event"
        raise RequestError(f"{cmd}: -b {where} is not the start of a DDL statement in source {source!r}'s binlog "
                           f"(found: {seen}); give the statement's start position (its GTID event) as "
                           "query-status or `SHOW BINLOG EVENTS` shows it; nothing armed", task=task, source=source)


def _pos_or_none(text) -> tuple[str, int] | None:
    try:
        return parse_binlog_pos(str(text))
    except ValueError:
        return None


def _revert_skip(cluster: Cluster, fence: Fence, task: str, source: str, file, pos) -> CommandResult:
    pending = [r for r in cluster.store.list_binlog_skips(task, source).items
               if r.state == "pending" and (file is None or (r.file, r.pos) == (file, pos))]
    if not pending:
        where = f" at {file}:{pos}" if file else ""
        raise RequestError(f"no pending binlog skip{where} for task {task!r} on source {source!r}; "
                           f"nothing to revert", task=task, source=source)
    done: list[str] = []
    lost: list[str] = []
    for r in pending:
        (done if cluster.store.delete_binlog_skip(fence, r) else lost).append(r.position)
    if lost:
        return CommandResult(False, f"skip(s) at {', '.join(lost)} changed while reverting (the worker may have "
                              f"used them); run `binlog revert` again to see", [(source, False, ", ".join(lost))])
    cluster.log.info("binlog skip reverted", task=task, source=source, positions=",".join(done))
    return CommandResult(True, f"reverted pending skip(s) at {', '.join(done)}", [(source, True, "")])
