"""Running one DDL's statements downstream at most once (checkpoint rules 8 and 8b).

``worker.sync.ddl_exec`` runs statements on a connection; this module decides whether they run
at all.  Before running, the target's ``SHOW CREATE TABLE`` and the statements are recorded as
the table's ``ddl_intent`` in its checkpoint row; a restart that meets the same DDL compares the
target with that record (:func:`ddl_in_effect`) and does not run it a second time.  A DDL a
shard-DDL lock answered is recorded ``finished`` once run, so a restart before its checkpoint
does not coordinate it again (rule 8b).
"""
from __future__ import annotations

from typing import Any, Callable

import pymysql

from coordinator.retry import is_transient, refusal_code
from coordinator.schema.kinds import StatementKind, Track
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.parse import parse_create_table
from coordinator.schema.model import TableSchema
from worker.events import DDLEvent, Position
from worker.schema_tracker import schema_from_json
from worker.sync.checkpoint import CheckpointStore
from worker.sync.ddl_exec import run_ddls, server_error
from worker.sync.ddl_handler import DDLContext, DDLDecision, DDLHandler, has_if_not_exists
from worker.sync.folds import combined_event, folded_after
from worker.sync.errors import DownstreamDDLRejected, SyncError
from worker.upstream import show_create


class DDLIntent:
    """Executes the statements of one (task, source)'s DDL decisions under the rule-8 intent.

    ``connect()`` opens an autocommit downstream connection; ``refresh_target(conn, target)``
    re-reads a target's key and generated columns on it (a shard's CREATE of a target another
    source made)."""

    def __init__(self, *, task: str, source: str, store: CheckpointStore, handler: DDLHandler, log,
                 connect: Callable[[], Any], refresh_target: Callable[[Any, tuple[str, str]], None]):
        self.task, self.source, self.store, self.handler, self.log = task, source, store, handler, log
        self._connect, self._refresh_target = connect, refresh_target

    def resume_finished(self, ev: DDLEvent, ctx: DDLContext) -> bool:
        """Rule 8b: the DDL was executed and answered before a restart (checkpoint not yet past
        it): the handler takes up its answer, the table's point moves past it; True when so."""
        table = ev.table
        tp = self.store.tables.get((ev.schema, table)) if table is not None else None
        intent = tp.ddl_intent if tp is not None else None
        if table is None or not (intent and Position.from_json(intent["pos"]).same_point(ev.end)
                                 and change_finished(intent, ev.change)):
            return False
        self.handler.resume_finished(ev, ctx)
        if ev.last_change:
            self.store.save_table(ev.schema, table, ev.end, self.handler.table_info(ev.schema, table),
                                  keep_info=False, folded=folded_after(self.store, ev))
        self.log.info("DDL finished before a restart; not coordinated again", table=ev.upstream,
                      position=str(ev.end), change=ev.change)
        return True

    def record_combine(self, ev: DDLEvent, folds: list[dict]) -> DDLEvent:
        """The lock asks for ``ev`` to run with later statements folded in: recorded in the
        table's intent row before anything else happens (a restart meets ``ev`` again and hands
        it over combined), and the combined event returned (checkpoint rule 11)."""
        assert ev.table is not None
        self.store.write_ddl_intent(ev.schema, ev.table, {"pos": ev.end.to_json(), "combine": folds})
        return combined_event(ev, folds)

    def replay_order(self, changes: list[DDLEvent]) -> list[DDLEvent]:
        """The order to hand a statement's changes over in: as the handler split them, unless
        the table's intent row for this statement records another (the lock asked for a later
        change first): the changes it has finished, then the unfinished ones in its order."""
        if len(changes) < 2 or changes[0].change is None or changes[0].table is None:
            return changes
        ev = changes[0]
        tp = self.store.tables.get((ev.schema, ev.table or ""))
        intent = tp.ddl_intent if tp is not None else None
        if not intent or "rest" not in intent or not Position.from_json(intent["pos"]).same_point(ev.end):
            return changes
        at = intent.get("change")
        unfinished = ([] if intent.get("finished") or at is None else [at]) + [int(k) for k in intent["rest"]]
        by = {c.change: c for c in changes}
        return [c for c in changes if c.change not in unfinished] + [by[k] for k in unfinished if k in by]

    def record_finished(self, ev: DDLEvent, decision: DDLDecision) -> None:
        """Rule 8b: a lock-answered DDL is finished, recorded before the done mark, so a restart
        between the mark and the checkpoint does not coordinate it again.  A shard table's CREATE
        too: the record carries its schema before SourceTables names it (the master reads it for
        a lock the table joins while its checkpoint row has no schema yet)."""
        if (decision.coordinated or decision.joins) and ev.table is not None:
            self.store.write_ddl_intent(ev.schema, ev.table, {"pos": ev.end.to_json(), "finished": True,
                                                              "statements": decision.execute, "change": ev.change,
                                                              **_order(ev), **_combine(ev),
                                                              "table_info": self.handler.after_info(ev)})

    def execute(self, ev: DDLEvent, decision: DDLDecision) -> bool:
        """Execute with the at-most-once intent of rule 8; False when it had already run."""
        key_s, key_t = ev.schema, ev.table or ""
        with self._connect() as conn:
            target = (ev.target_schema or "", ev.target_table) if ev.target_table else None
            before = show_create(conn, *target) if target else None
            if target and before is not None and StatementKind(ev.kind).row.track is Track.CREATE \
                    and decision.execute \
                    and all(has_if_not_exists(s) for s in decision.execute):
                # a new shard of a target that exists: the routed CREATE ... IF NOT EXISTS would
                # change nothing downstream (no intent record, no statement).  The target may be
                # new to this syncer (another source created it): its keys are read on this
                # connection
                self.log.debug("target exists; shard CREATE TABLE changes nothing downstream",
                               table=ev.upstream, target=f"{ev.target_schema}.{ev.target_table}")
                self._refresh_target(conn, target)
                return False
            tp = self.store.tables.get((key_s, key_t))
            intent = tp.ddl_intent if tp else None
            if intent and Position.from_json(intent["pos"]).same_point(ev.end) and target \
                    and intent.get("change") == ev.change \
                    and intent.get("before") != before \
                    and ddl_in_effect(intent.get("before"), before, intent.get("statements") or decision.execute):
                self.log.info("DDL already executed before a restart; not running it again",
                              table=ev.upstream, position=str(ev.end))
                return False
            if ev.table is not None:
                # ``change``/``rest``: which change of the statement runs and which are still to
                # come; the others are finished (their own finished record is overwritten by this one)
                finished = _finished(ev)
                self.store.write_ddl_intent(key_s, key_t, {"pos": ev.end.to_json(), "before": before,
                                                           "statements": decision.execute, "change": ev.change,
                                                           "done": finished, **_order(ev), **_combine(ev),
                                                           "table_info": (self.handler.table_info(key_s, key_t)
                                                                          if finished else None)})
            else:
                self.store.check_fence()     # (the intent write checks it for a table's DDL)
            try:
                run_ddls(conn, decision.execute, timestamp=ev.timestamp, ignorable=decision.ignorable,
                         task=self.task, source=self.source, table=ev.upstream)
            except pymysql.MySQLError as e:
                if self._rename_in_effect(e, ev, decision, conn):
                    return False
                failed = getattr(e, "statement", "; ".join(decision.execute))
                if is_transient(e) or refusal_code(e):     # a hiccup, or read_only / full: retried
                    raise SyncError(f"downstream DDL failed: {server_error(e)}; statement: {failed}; retried "
                                    f"until the downstream accepts it", task=self.task,
                                    source=self.source, table=ev.upstream, position=str(ev.end)) from e
                raise DownstreamDDLRejected(f"downstream DDL failed: {server_error(e)}; statement: {failed}; "
                                            f"fix the target and `shardctl resume-task`, or `shardctl binlog skip "
                                            f"{self.task} -s {self.source}` to skip it",
                                            task=self.task, source=self.source, table=ev.upstream,
                                            position=str(ev.end)) from e
        return True

    def _rename_in_effect(self, e: pymysql.MySQLError, ev: DDLEvent, decision: DDLDecision, conn) -> bool:
        """A rename the downstream refuses with "Unknown column 'old'" (1054) may already have run:
        another shard's table ran the agreed change and this one, told to run it too (e.g. after
        a master restart re-decided the lock), meets it done.  In effect when every column the
        statements touch, going from this shard's schema before the DDL, already looks as they
        would make it downstream (:func:`ddl_in_effect`); then nothing is run and it is logged."""
        if not (e.args and e.args[0] == 1054) or ev.table is None or ev.target_table is None:
            return False
        shard_before = schema_from_json(self.handler.table_info(ev.schema, ev.table))
        now = show_create(conn, ev.target_schema or "", ev.target_table)
        if shard_before is None or now is None:
            return False
        if not ddl_in_effect(shard_before.to_create_sql(ev.target_table), now, decision.execute):
            return False
        self.log.warning("DDL already in effect downstream (another shard's table ran it); not run again",
                         table=ev.upstream, position=str(ev.start), statements="; ".join(decision.execute),
                         error=server_error(e))
        return True


def _finished(ev: DDLEvent) -> int:
    """How many changes of ``ev``'s statement are finished before it."""
    return 0 if ev.change is None else ev.changes - 1 - len(ev.later)


def _combine(ev: DDLEvent) -> dict:
    """The intent record's ``combine``: the later statements a combined DDL folds in (rule 11)."""
    return {"combine": list(ev.folds)} if ev.folds else {}


def _order(ev: DDLEvent) -> dict:
    """The intent record's ``rest``: the changes of the statement still to come after ``ev``."""
    return {} if ev.change is None else {"rest": list(ev.later)}


def change_finished(intent: dict, change: int | None) -> bool:
    """Does the table's intent record (for the statement it names) say ``change`` is finished?
    A statement handled whole (``change`` None) is finished when its record is.  A change of one
    coordinated change by change: every change but the record's unfinished one and those it
    names still to come (``rest``).  A record without ``rest`` (an earlier release: changes in
    the statement's order) when it is for this change or a later one and finished, or for a
    later change at all (``done`` counts those before it)."""
    if change is None:
        return bool(intent.get("finished")) and intent.get("change") is None
    at = intent.get("change")
    if at is None:
        return False
    if "rest" in intent:
        return change not in intent["rest"] and (change != at or bool(intent.get("finished")))
    return (bool(intent.get("finished")) and at >= change) or int(intent.get("done") or 0) > change


def ddl_in_effect(before_sql: str | None, now_sql: str | None, statements: list[str]) -> bool:
    """Rule 8's test after a restart: did ``statements`` already run on the target?  Only what
    the statements change counts (another source's DDL may have changed the merged target
    meanwhile): every column and index they touch must look as they would make it.  Unknown
    (unparsable, or a statement that touches nothing) means "not in effect": the statements run
    again, with the "already applied" errors ignored."""
    if not before_sql or not now_sql:
        return False
    try:
        before = parse_create_table(before_sql)
        now = parse_create_table(now_sql)
        expected: TableSchema | None = before
        for sql in statements:
            expected = apply_ddl(expected, sql)
    except Exception:  # noqa: BLE001 — cannot tell: run again (errors meaning "done" are ignored)
        return False
    if expected is None:
        return False

    def col(ts: TableSchema, name: str):
        c = ts.column(name)
        return None if c is None else (c.type, c.nullable)

    def idx(ts: TableSchema, name: str):
        i = ts.index(name)
        return None if i is None else (i.kind, tuple(i.columns))

    cols = {c.name.lower() for c in (*before.columns, *expected.columns)}
    idxs = {i.name.lower() for i in (*before.indexes, *expected.indexes)}
    touched_c = [n for n in cols if col(before, n) != col(expected, n)]
    touched_i = [n for n in idxs if idx(before, n) != idx(expected, n)]
    if not touched_c and not touched_i:
        return False
    return all(col(now, n) == col(expected, n) for n in touched_c) and \
        all(idx(now, n) == idx(expected, n) for n in touched_i)
