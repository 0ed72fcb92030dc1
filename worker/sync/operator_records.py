"""The operator's records at one statement event: ``shardctl binlog skip | replace | inject`` and
a binlog event filter that ignores the statement (DM's "skip event").

The syncer owns the normal path of a statement (route, hand over, execute, checkpoint); this
module only decides what an operator record turns the statement into and calls back into that
path.  Its interface is narrow on purpose: :meth:`OperatorRecords.find` and
:meth:`OperatorRecords.use` for an armed record, :meth:`OperatorRecords.ignore` for a filtered
statement.  How a statement expands to tables is ``worker.sync.statement_route``'s, shared with
the syncer's normal path.  The records themselves live in etcd
(``worker.sync.binlog_skip.BinlogSkips``).
"""
from __future__ import annotations

import dataclasses
from typing import Callable


from coordinator.errors import ShardMergeError
from coordinator.etcdproto import BinlogSkip
from coordinator.routing import TableMapper
from coordinator.schema.kinds import StatementKind, parse_ddl
from coordinator.schema.replacement import ReplacementError, plan_replacement
from worker.binlog.contract import Statement
from worker.events import DDLEvent, Position
from worker.sync.binlog_skip import BinlogSkips
from worker.sync.checkpoint import CheckpointStore
from worker.sync.folds import as_combined, skipped_folds
from worker.sync.ddl_handler import DDLContext, DDLHandler
from worker.sync.statement_route import statement_tables


def _short(sql: str) -> str:
    return " ".join(sql.split())[:500]


class OperatorRecords:
    """Skip, replace or inject at one statement of one (task, source) syncer.

    ``handle(m) -> bool`` is the syncer's normal path for one statement (routed, handed to the
    DDL handler, executed; False for a statement that is not a DDL), ``advance(pos)`` moves and
    flushes the global point, ``held(schema, table)`` says whether a table waits on its lock."""

    def __init__(self, skips: BinlogSkips | None, *, task: str, source: str, store: CheckpointStore,
                 mapper: TableMapper, handler: DDLHandler, ctx: DDLContext, log,
                 handle: Callable[[Statement], bool], advance: Callable[[Position], None],
                 held: Callable[[str, str], bool], count: Callable[[str, int], None]):
        self.skips, self.task, self.source = skips, task, source
        self.store, self.mapper, self.handler, self.ctx, self.log = store, mapper, handler, ctx, log
        self._handle, self._advance, self._held, self._count = handle, advance, held, count

    def find(self, start: Position) -> BinlogSkip | None:
        """The record armed at the statement starting at ``start`` (None without etcd)."""
        return self.skips.find(start) if self.skips is not None else None

    def use(self, m: Statement, rec: BinlogSkip) -> bool:
        """``binlog skip``, ``binlog replace`` or ``binlog inject`` armed at ``m``'s start; False
        when the record waits (a table it names is held on an earlier DDL)."""
        if rec.op == "inject":
            return self._inject_before(m, rec)
        if rec.op == "replace":
            return self._replace(m, rec)
        return self._skip(m, rec)

    def ignore(self, m: Statement) -> bool:
        """A binlog event filter ignores ``m``: passed over like an operator's skip, no record."""
        return self._skip(m, None)

    def _records(self) -> BinlogSkips:
        if self.skips is None:      # a record was found, so there are records: cannot happen
            raise ShardMergeError("operator record used without a binlog skip store", task=self.task,
                                  source=self.source)
        return self.skips

    def _plan(self, rec: BinlogSkip, session: str, cmd: str) -> list[str]:
        try:
            return plan_replacement(list(rec.replace_with), session, cmd=cmd)
        except ReplacementError as e:
            raise ShardMergeError(f"{cmd} at {rec.position}: {e}; `shardctl binlog revert "
                                  f"{self.task} -s {self.source} -b {rec.position}` removes it",
                                  task=self.task, source=self.source) from None

    def _tables(self, sql: str, session: str, m: Statement) -> list[tuple[str, str]]:
        parsed = parse_ddl(sql, session)
        return [(schema, table) for schema, table, _ in statement_tables(parsed, m) if table]

    def _inject_before(self, m: Statement, rec: BinlogSkip) -> bool:
        """``shardctl binlog inject``: handle the operator's statements just before ``m`` (each
        through the normal path: routed, coordinated on its shard-DDL lock, executed), then ``m``
        itself as usual.  Injected statement ``i`` is handled as if it ended at ``m.start + 1 + i``:
        a table point there says it ran (rule 6 skips it when a crash replays ``m``, the record
        still pending) while ``m`` (ending at ``m.end``) is still to run; a point at ``m.start``
        only says the rows before ``m`` are applied.  While a table is held on its lock the record
        stays ``held`` (the table replays from ``m`` after its redirect); then it is marked done."""
        session = m.schema or ""
        plan = self._plan(rec, session, "binlog inject")
        if m.start.file != m.end.file or m.start.pos + len(plan) >= m.end.pos:
            raise ShardMergeError(f"binlog inject at {rec.position}: {len(plan)} statements do not fit before the "
                                  f"statement (it ends at {m.end}); inject fewer statements (merge one table's "
                                  "changes into one ALTER TABLE)", task=self.task, source=self.source)
        tables = []
        for i, sql in enumerate(plan):
            tables += self._tables(sql, session, m)
            at = Position(m.start.file, m.start.pos + 1 + i, m.start.gtid)
            self._handle(dataclasses.replace(m, query=sql, end=at))
        self.store.flush()             # the injected statements' points, before the statement runs
        injected = "; ".join(plan)
        still = [f"{s}.{t}" for s, t in tables if self._held(s, t)]
        self.log.warning("statements injected before a binlog statement on the operator's binlog inject",
                         position=str(m.start), statement=_short(m.query), injected=injected, held=",".join(still))
        self._count("operator_inject", len(plan))
        self._handle(m)      # the statement itself (a held table skips it and replays it)
        self._advance(m.end)
        if still:
            self._records().held(rec, m.query, note=f"injected: {injected}; held on its lock: {', '.join(still)}")
        else:
            self._records().used(rec, m.query, note=f"injected before it: {injected}")
        return True

    def _replace(self, m: Statement, rec: BinlogSkip) -> bool:
        """``shardctl binlog replace``: handle the operator's statements in place of ``m``, at
        ``m``'s position, each through the normal path (routed, coordinated on the shard-DDL lock,
        executed, table points moved to ``m.end``).  While a table they change is held on its
        lock the record is kept ``held`` (the table replays ``m`` after its redirect and meets it
        again); once none is, it is marked done.  A failing replacement stops the subtask with
        the record still armed, so fixing the cause and resuming retries it (DM's behaviour)."""
        session = m.schema or ""
        plan = self._plan(rec, session, "binlog replace")
        tables = []
        for sql in plan:
            tables += self._tables(sql, session, m)
            self._handle(dataclasses.replace(m, query=sql))
        instead = "; ".join(plan)
        still = [f"{s}.{t}" for s, t in tables if self._held(s, t)]
        if still:
            self._records().held(rec, m.query, note=f"replaced by: {instead}; held on its lock: {', '.join(still)}")
            self.log.warning("statement replaced on the operator's binlog replace; held on its shard-DDL lock",
                             position=str(m.start), statement=_short(m.query), replaced_by=instead,
                             held=",".join(still))
        else:
            self._count("operator_replace", 1)
            self.log.warning("statement replaced on the operator's binlog replace", position=str(m.start),
                             statement=_short(m.query), replaced_by=instead)
        self._advance(m.end)
        if not still:
            self._records().used(rec, m.query, note=f"replaced by: {instead}")
        return True

    def _skip_change(self, m: Statement, skip: BinlogSkip, ev: DDLEvent, intent: dict) -> bool:
        """The skip covers the change the downstream refused (``DDLHandler.skip_change``): its
        intent record says it is finished, the record is used, and the statement is handed over
        again: the changes before it and it are taken as finished (rule 8b), the later ones are
        coordinated as usual (held, the table replays the statement after its redirect)."""
        assert ev.table is not None
        self.store.write_ddl_intent(ev.schema, ev.table, intent)
        self._count("operator_skip", 1)
        self.log.warning("change skipped on the operator's binlog skip: not executed; the statement's later "
                         "changes are coordinated", position=str(m.start), end=str(m.end), statement=_short(m.query),
                         change=intent.get("change"), still_to_come=len(intent.get("rest") or []))
        self._records().used(skip, m.query, note=f"change {intent.get('change')} of the statement skipped; "
                                                 f"the {len(intent.get('rest') or [])} after it coordinated")
        self._handle(m)
        self._advance(m.end)
        return True

    def _skip(self, m: Statement, skip: BinlogSkip | None) -> bool:
        """``shardctl binlog skip`` (or, with ``skip`` None, a binlog event filter that ignores
        ``m``): do not execute nor coordinate ``m`` (no Info in optimistic
        mode); let the handler's schema state follow the upstream, then advance each routed
        table's point and the global point to ``m.end`` exactly as a handled DDL does and flush
        (rule 2, 3, 6), and only then mark the skip used.  False (skip not consumed) when a
        table it names is held: the held table replays it after its redirect."""
        session = m.schema or ""
        try:
            parsed = parse_ddl(m.query, session)
            events = [] if parsed.kind is StatementKind.NOT_DDL else statement_tables(parsed, m)
        except ShardMergeError:
            events = []     # not even tokenizable: nothing to route, skip it whole
        todo: list[tuple[DDLEvent, str]] = []
        tables: list[str] = []
        for schema, table, query in events:
            if table is None:
                continue
            tgt = self.mapper.target(schema, table)
            if tgt is None:
                continue
            if self._held(schema, table):
                self.log.warning("binlog skip waits: the statement's table is held on an earlier DDL",
                                 table=f"{schema}.{table}", position=str(m.start))
                return False
            tables.append(f"{schema}.{table}")
            tp = self.store.table_point(schema, table)
            if tp is not None and m.end <= tp:
                continue  # rule 6: already behind this table's point
            todo.append((DDLEvent(self.source, schema, table, parsed.kind, query, tgt.schema, tgt.table,
                                  m.start, m.end, int(m.ts or 0), {"session_schema": session}), table))
        if skip is not None and len(todo) == 1 and (part := self.handler.skip_change(todo[0][0], self.ctx)):
            return self._skip_change(m, skip, todo[0][0], part)
        for ev, table in todo:
            ev = as_combined(self.store, ev)       # a held statement the lock had combined: skipped whole
            self.handler.ddl_skipped(ev, self.ctx)
            self.store.save_table(ev.schema, table, ev.end, self.handler.table_info(ev.schema, table),
                                  keep_info=False, folded=skipped_folds(self.store, ev))
        self._count("filter_ignore" if skip is None else "operator_skip", 1)
        self.log.warning("statement ignored by a binlog event filter (filter-rules)" if skip is None else
                         "statement skipped on the operator's binlog skip: not executed, not coordinated",
                         position=str(m.start), end=str(m.end), statement=_short(m.query),
                         tables=",".join(tables))
        self._advance(m.end)
        if skip is not None:
            self._records().used(skip, m.query, note=f"tables: {', '.join(tables)}" if tables else "no routed table")
        return True
