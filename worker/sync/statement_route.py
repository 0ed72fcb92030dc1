"""How one statement event of the binlog becomes the ``DDLEvent`` of each table it changes: the
tables it names (:func:`statement_tables`), each routed to its target and left out when filtered,
already applied (checkpoint rule 6) or held on an earlier DDL (it replays this one later).  The
syncer hands each event to its DDL handler; the operator's records (``operator_records``) expand
their statements the same way."""
from __future__ import annotations

from typing import Callable, Iterator

from coordinator.routing import TableMapper
from coordinator.schema.kinds import Expand, ParsedDDL, parse_ddl
from coordinator.sql import quote_table
from worker.binlog.contract import Statement
from worker.events import DDLEvent
from worker.sync.checkpoint import CheckpointStore
from worker.sync.online_ddl import CutOver


def statement_tables(parsed: ParsedDDL, m: Statement) -> list[tuple[str, str | None, str]]:
    """(upstream schema, table or None for database-level, statement) of one statement, as its
    kind's row expands it (``KIND_ROWS``, ``expand``): a multi-table DROP TABLE is one DROP per
    table, any other statement belongs to its first table."""
    if parsed.kind.row.expand is Expand.EACH and len(parsed.tables) > 1:
        return [(t.schema, t.table, f"DROP TABLE {quote_table(t.schema, t.table)}") for t in parsed.tables]
    if parsed.tables:
        t0 = parsed.tables[0]
        return [(t0.schema, t0.table, m.query)]
    return [(parsed.database or m.schema or "", None, m.query)]


class StatementRouter:
    """``held(schema, table)``: the table waits on its lock; ``count(action)``: the DDL metric;
    ``ahead(event)``: a held table's statement, read past (``DDLHandler.read_ahead``)."""

    def __init__(self, source: str, mapper: TableMapper, store: CheckpointStore,
                 held: Callable[[str, str], bool], count: Callable[[str], None],
                 ahead: Callable[[DDLEvent], None] = lambda ev: None):
        self.source, self.mapper, self.store, self._held, self._count = source, mapper, store, held, count
        self._ahead = ahead

    def events(self, parsed: ParsedDDL, m: Statement) -> Iterator[DDLEvent]:
        """The statement's events, one per routed table still to handle.  Lazy: each table is
        checked just before its event is handled (the one before may have moved points)."""
        session = m.schema or ""
        for schema, table, query in statement_tables(parsed, m):
            if table is None:
                if not self.mapper.filter.schema_allowed(schema):
                    continue
                tgt_s, tgt_t = self.mapper.router.route_schema(schema), None
            else:
                tgt = self.mapper.target(schema, table)
                if tgt is None:
                    continue
                tgt_s, tgt_t = tgt.schema, tgt.table
                tp = self.store.table_point(schema, table)
                if tp is not None and m.end <= tp:
                    self._count("already_applied")
                    continue  # rule 6
                if self._held(schema, table):
                    self._ahead(DDLEvent(self.source, schema, table, parsed.kind, query, tgt_s, tgt_t,
                                         m.start, m.end, int(m.ts or 0), {"session_schema": session}))
                    continue
            yield DDLEvent(self.source, schema, table, parsed.kind, query, tgt_s, tgt_t,
                           m.start, m.end, int(m.ts or 0), {"session_schema": session})

    def cut_over(self, c: CutOver, m: Statement) -> DDLEvent | None:
        """An online schema change tool swapped its shadow table in: its DDLs are this table's
        DDL at the RENAME's position (the RENAME itself runs nowhere)."""
        tgt = self.mapper.target(c.schema, c.table)
        tp = self.store.table_point(c.schema, c.table)
        if not c.sql or tgt is None or (tp is not None and m.end <= tp) or self._held(c.schema, c.table):
            return None   # nothing remembered, a filtered table, already applied (rule 6) or held (replays it)
        kind = parse_ddl(c.sql, c.schema).kind
        return DDLEvent(self.source, c.schema, c.table, kind, c.sql, tgt.schema, tgt.table, m.start, m.end,
                        int(m.ts or 0), {"session_schema": m.schema or "", "online_ddl_shadow": c.shadow})
