"""Binlog event filters on statement events: does DM's filter ignore this DDL?

Rows events are filtered in the binlog decoder (``worker/binlog/source.py``, per table and
``insert`` / ``update`` / ``delete``); this module answers for statements, which the syncer
then passes over the way DM does with a filtered DDL (``OperatorRecords.ignore`` in
``worker/sync/operator_records.py``): nothing runs downstream, no shard-DDL Info is sent, the
table's tracked schema follows the upstream and its checkpoint moves past the statement.

The DM event of a statement follows DM's syncer (``DDLWorker.AstToDDLEvent``): the statement
kind (``create table``, ``truncate table``, ``drop table``, ...), and for an ALTER TABLE the
change it makes (``drop column``, ``rename column``, ``modify column``, ``drop index``,
``modify charset``, ...; ``alter table`` for ADD COLUMN / ADD INDEX and the rest).  DM filters
each change of a multi-change ALTER TABLE on its own; when the filter keeps some changes of
one statement and ignores others, this refuses the statement (:class:`FilterSplitError`)
instead of running part of it.
"""
from __future__ import annotations

from coordinator.binlog_filter import EventFilter
from coordinator.errors import ShardMergeError
from coordinator.schema.kinds import ClauseKind, ParsedDDL, StatementKind
from coordinator.schema.statement import parse_statement


class FilterSplitError(ShardMergeError):
    """A binlog event filter ignores some changes of one ALTER TABLE and keeps others."""


_CLAUSE_EVENT = {ClauseKind.DROP_COLUMN: "drop column", ClauseKind.MODIFY_COLUMN: "modify column",
                 ClauseKind.CHANGE_COLUMN: "modify column", ClauseKind.RENAME_COLUMN: "rename column",
                 ClauseKind.RENAME_INDEX: "rename index", ClauseKind.RENAME_TABLE: "rename table",
                 ClauseKind.ALTER_DEFAULT: "modify default value", ClauseKind.CONVERT_CHARSET: "modify charset"}


def _clause_event(c) -> str:
    if c.kind is ClauseKind.DROP_INDEX:
        return "drop primary key" if str(c.data.get("name", "")).upper() == "PRIMARY" else "drop index"
    if c.kind is ClauseKind.TABLE_OPTIONS:
        if c.data.get("charset"):
            return "modify charset"
        if c.data.get("collation"):
            return "modify collation"
        if any("ENGINE" in str(o).upper() for o in (c.data.get("options") or ())):
            return "modify storage engine"
    return _CLAUSE_EVENT.get(c.kind, "alter table")


def statement_events(parsed: ParsedDDL) -> list[str]:
    """DM's event name of each change the statement makes ("" for a statement DM has no name for:
    only ``sql-pattern`` applies to it)."""
    if parsed.kind is StatementKind.ALTER_TABLE:
        try:
            clauses = [c for c in parse_statement(parsed.query).clauses if c.kind is not ClauseKind.NOOP]
        except ShardMergeError:
            clauses = []
        return [_clause_event(c) for c in clauses] or ["alter table"]
    return [parsed.kind.row.event]


def statement_ignored(flt: EventFilter, parsed: ParsedDDL, session_schema: str, real_name=None) -> bool:
    """True when the filter ignores the statement: as in DM, one of its tables suffices.
    ``real_name(table)``: the real table of an online schema change tool's shadow table (else
    None), so a rule on ``t`` also covers ``_t_gho``'s ALTER, as DM's ``RealName`` does."""
    if parsed.kind is StatementKind.NOT_DDL:
        return False
    names = [(t.schema, (real_name(t.table) if real_name else None) or t.table) for t in parsed.tables] \
        or [(parsed.database or session_schema, "")]
    events = statement_events(parsed)
    for schema, table in names:
        verdicts = [flt.ignores(schema, table, ev, parsed.query) for ev in events]
        if all(verdicts):
            return True
        if any(verdicts):
            kept = sorted({ev for ev, v in zip(events, verdicts) if not v})
            dropped = sorted({ev for ev, v in zip(events, verdicts) if v})
            raise FilterSplitError(
                f"the binlog event filter ignores the {', '.join(dropped)} change(s) of this ALTER TABLE on "
                f"`{schema}`.`{table}` but keeps its {', '.join(kept)} change(s); shardmerge does not run part of a "
                f"statement: `shardctl binlog replace` it with the changes to keep, or change the filter",
                table=f"{schema}.{table}")
    return False
