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
from coordinator.schema import kinds as K
from coordinator.schema.statement import parse_statement


class FilterSplitError(ShardMergeError):
    """A binlog event filter ignores some changes of one ALTER TABLE and keeps others."""


_KIND_EVENT = {K.CREATE_TABLE: "create table", K.DROP_TABLE: "drop table", K.TRUNCATE_TABLE: "truncate table",
               K.RENAME_TABLE: "rename table", K.CREATE_INDEX: "create index", K.DROP_INDEX: "drop index",
               K.CREATE_DATABASE: "create database", K.ALTER_DATABASE: "alter database",
               K.DROP_DATABASE: "drop database", K.ALTER_TABLE: "alter table"}
_CLAUSE_EVENT = {"drop_column": "drop column", "modify_column": "modify column", "change_column": "modify column",
                 "rename_column": "rename column", "rename_index": "rename index", "rename_table": "rename table",
                 "alter_default": "modify default value", "convert_charset": "modify charset"}


def _clause_event(c) -> str:
    if c.kind == "drop_index":
        return "drop primary key" if str(c.data.get("name", "")).upper() == "PRIMARY" else "drop index"
    if c.kind == "table_options":
        if c.data.get("charset"):
            return "modify charset"
        if c.data.get("collation"):
            return "modify collation"
        if any("ENGINE" in str(o).upper() for o in (c.data.get("options") or ())):
            return "modify storage engine"
    return _CLAUSE_EVENT.get(c.kind, "alter table")


def statement_events(parsed: K.ParsedDDL) -> list[str]:
    """DM's event name of each change the statement makes ("" for a statement DM has no name for:
    only ``sql-pattern`` applies to it)."""
    if parsed.kind == K.ALTER_TABLE:
        try:
            clauses = [c for c in parse_statement(parsed.query).clauses if c.kind != "noop"]
        except ShardMergeError:
            clauses = []
        return [_clause_event(c) for c in clauses] or ["alter table"]
    return [_KIND_EVENT.get(parsed.kind, "")]


def statement_ignored(flt: EventFilter, parsed: K.ParsedDDL, session_schema: str, real_name=None) -> bool:
    """True when the filter ignores the statement: as in DM, one of its tables suffices.
    ``real_name(table)``: the real table of an online schema change tool's shadow table (else
    None), so a rule on ``t`` also covers ``_t_gho``'s ALTER, as DM's ``RealName`` does."""
    if parsed.kind == K.NOT_DDL:
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
