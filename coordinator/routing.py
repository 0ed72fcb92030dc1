"""Routing and filtering of upstream tables, with DM's semantics.

* Route rules: a rule with a ``table-pattern`` is a *table rule*, one without is a *schema
  rule*.  A table rule wins over a schema rule; two matching rules of the same kind are an
  error (the target would be ambiguous).  A schema rule keeps the table name; an empty
  ``target-table`` keeps it too.  Unrouted tables map one to one.
* Block-allow list: ``do-dbs`` (if any) must match, then ``ignore-dbs`` must not; then, if
  ``do-tables`` is given the table must match one, and it must match no ``ignore-tables``.
  System schemas are always filtered.
Patterns are DM's (``coordinator.patterns``): wildcards, or a regular expression after ``~``;
names compare case-insensitively, like DM's default.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from coordinator.binlog_filter import EventFilter
from coordinator.expr_filter import ExpressionFilter
from coordinator.config import BlockAllowList, Instance, OnlineDDLRules, RouteRule, TablePattern
from coordinator.errors import ShardMergeError
from coordinator.patterns import match
from coordinator.sql import quote_table

SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


class RouteConflict(ShardMergeError):
    """A table matches several route rules of the same kind."""


@dataclass(frozen=True)
class Target:
    schema: str
    table: str

    def quoted(self) -> str:
        return quote_table(self.schema, self.table)


class Router:
    """Maps upstream (schema, table) to the downstream target of one task instance."""

    def __init__(self, rules: tuple[RouteRule, ...] | list[RouteRule]):
        self.table_rules = [r for r in rules if r.table_pattern]
        self.schema_rules = [r for r in rules if not r.table_pattern]

    def route(self, schema: str, table: str) -> Target:
        hits = [r for r in self.table_rules if match(r.schema_pattern, schema) and match(r.table_pattern, table)]
        if not hits:
            hits = [r for r in self.schema_rules if match(r.schema_pattern, schema)]
        if not hits:
            return Target(schema, table)
        if len(hits) > 1:
            raise RouteConflict(f"`{schema}`.`{table}` matches several route rules: "
                                + ", ".join(r.name for r in hits) + "; make the patterns disjoint",
                                table=f"{schema}.{table}")
        r = hits[0]
        return Target(r.target_schema, (r.target_table or table) if r.table_pattern else table)

    def extract(self, schema: str, table: str, source: str) -> tuple[tuple[str, str], ...]:
        """(column, value) of the shard origin columns of ``schema``.``table`` (DM's
        ``FetchExtendColumn``: the table rule, else the schema rule, decides; a value is the
        concatenation of the regexp's groups, "" when it does not match); () without extracts."""
        hits = [r for r in self.table_rules if match(r.schema_pattern, schema) and match(r.table_pattern, table)]
        hits = hits or [r for r in self.schema_rules if match(r.schema_pattern, schema)]
        if not hits or not hits[0].extract:
            return ()
        names = {"table": table, "schema": schema, "source": source}
        out = []
        for e in hits[0].extract:
            m = re.search(e.regexp, names[e.kind])
            out.append((e.column, "".join(g or "" for g in m.groups()) if m else ""))
        return tuple(out)

    def route_schema(self, schema: str) -> str:
        """Target of a schema-level statement (CREATE/DROP DATABASE)."""
        hits = [r for r in self.schema_rules if match(r.schema_pattern, schema)]
        hits = hits or [r for r in self.table_rules if match(r.schema_pattern, schema)]
        return hits[0].target_schema if hits else schema

    def is_sharded(self, schema: str, table: str) -> bool:
        """True when the target is (potentially) shared: a wildcard rule merged it."""
        t = self.route(schema, table)
        return (t.schema, t.table) != (schema, table) or any(
            match(r.schema_pattern, schema) for r in self.table_rules + self.schema_rules)


class Filter:
    """DM block-allow list; ``None`` list allows everything but system schemas."""

    def __init__(self, bal: BlockAllowList | None, extra_ignored_schemas: tuple[str, ...] = ()):
        self.bal = bal
        self.extra = {s.lower() for s in extra_ignored_schemas}

    def schema_allowed(self, schema: str) -> bool:
        s = schema.lower()
        if s in SYSTEM_SCHEMAS or s in self.extra:
            return False
        if self.bal is None:
            return True
        if self.bal.do_dbs:
            return any(match(p, schema) for p in self.bal.do_dbs)
        return not any(match(p, schema) for p in self.bal.ignore_dbs)

    def table_allowed(self, schema: str, table: str) -> bool:
        if not self.schema_allowed(schema):
            return False
        if self.bal is None:
            return True

        def hit(refs: tuple[TablePattern, ...]) -> bool:
            return any(match(r.db_name, schema) and match(r.tbl_name, table) for r in refs)

        if self.bal.do_tables and hit(self.bal.do_tables):
            return True
        if self.bal.ignore_tables and hit(self.bal.ignore_tables):
            return False
        return not self.bal.do_tables


class OnlineTables:
    """Names of an online schema change tool's tables (task option ``online-ddl``)."""

    def __init__(self, rules: OnlineDDLRules):
        self.rules = rules
        self.shadow = [re.compile(p, re.IGNORECASE) for p in rules.shadow]
        self.trash = [re.compile(p, re.IGNORECASE) for p in rules.trash]

    def real_of_shadow(self, table: str) -> str | None:
        """The real table a shadow table (``_t_new``, ``_t_gho``) stands for, else None."""
        for r in self.shadow:
            m = r.search(table)
            if m:
                return m.group(1)
        return None

    def is_trash(self, table: str) -> bool:
        return any(r.search(table) for r in self.trash)

    def is_tool_table(self, table: str) -> bool:
        return self.real_of_shadow(table) is not None or self.is_trash(table)


class TableMapper:
    """Filter + router for one task instance: the one question the worker asks per event."""

    def __init__(self, inst: Instance, meta_schema: str = ""):
        self.router = Router(inst.routes)
        self.filter = Filter(inst.block_allow_list, (meta_schema,) if meta_schema else ())
        self.online = OnlineTables(inst.online_ddl) if inst.online_ddl is not None else None
        # binlog event filters (``filter-rules``); None when the instance names none
        self.events = EventFilter(inst.filters) if inst.filters else None
        self.source_id = inst.source_id
        # expression filters (``expression-filters``); None when the instance names none
        self.exprs = ExpressionFilter(inst.expr_filters) if inst.expr_filters else None
        self.has_extract = any(r.extract for r in inst.routes)
        # end positions (file, pos) of rows events the operator's `binlog skip` passes over unread
        # (their values cannot be decoded); set by the syncer for its decoder (RouteArgs)
        self.skip_rows: frozenset = frozenset()

    def extract(self, schema: str, table: str) -> tuple[tuple[str, str], ...]:
        """The shard origin columns (``extract-*`` of its route) and their values for this table."""
        return self.router.extract(schema, table, self.source_id) if self.has_extract else ()

    def target(self, schema: str, table: str) -> Target | None:
        """The downstream table for an upstream table, or None if it is filtered out (an online
        schema change tool's shadow and trash tables are: their rows are the tool's copy)."""
        if not self.filter.table_allowed(schema, table):
            return None
        if self.online is not None and self.online.is_tool_table(table):
            return None
        return self.router.route(schema, table)
