"""DM's binlog event filters (task ``filters`` + instance ``filter-rules``), with DM's semantics.

A rule names tables by ``schema-pattern`` / ``table-pattern`` (the routing wildcards; an empty
``table-pattern`` makes it a schema rule, which also covers every table of the schema), a list of
``events`` in DM's names (``insert``, ``delete``, ``truncate table``, groups ``all``, ``all dml``,
``all ddl``, ``incompatible ddl changes``, ``none``...), optional ``sql-pattern`` regular
expressions (matched case-insensitively against the upstream statement) and ``action``:

* ``Ignore``: a matching event (or statement matching a ``sql-pattern``) is dropped;
* ``Do``: only matching events are kept: an event of a matched table that the rule's ``events``
  (or, for a statement, its ``sql-pattern``) do not name is dropped.

The rules of a table are taken table rules first, then schema rules, each in file order; the
first one that decides wins (DM's ``BinlogEvent.Filter``).  Pure logic: the worker asks
:meth:`EventFilter.ignores` per rows event in the binlog decoder and per statement in the
syncer (``worker/filters.py``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from coordinator.errors import ConfigError
from coordinator.patterns import match

IGNORE, DO = "Ignore", "Do"
DML, DDL, INCOMPATIBLE = "dml", "ddl", "incompatible ddl"

# DM's event names (pkg/binlog-filter) and their class; the three aliases map onto database events
_DML_EVENTS = ("insert", "update", "delete")
_DDL_EVENTS = ("create database", "alter database", "create table", "create index", "create view", "drop view",
               "alter table", "add table partition")
_INCOMPATIBLE_EVENTS = (
    "drop database", "drop table", "drop index", "rename table", "truncate table", "drop table partition",
    "truncate table partition", "value range decrease", "precision decrease", "modify column", "rename column",
    "rename index", "drop column", "drop primary key", "drop unique key", "modify default value",
    "modify constraint", "modify columns order", "modify charset", "modify collation", "remove auto increment",
    "modify storage engine", "reorganize table partition", "rebuild table partition", "coalesce table partition",
    "split table partition", "exchange table partition", "add foreign key", "drop foreign key",
    "modify schema charset and collate", "modify table charset and collate", "modify table comment",
    "recover table", "alter table partitioning", "remove table partitioning", "add column", "set default value",
    "rebase auto id", "add primary key", "alter index visibility", "alter ttl info", "alter ttl remove",
    "multi schema change")
GROUPS = ("all", "all dml", "all ddl", "none", "none dml", "none ddl", "incompatible ddl changes")
ALIASES = {"create schema": "create database", "drop schema": "drop database", "alter schema": "alter database"}
EVENT_CLASS = {**{e: DML for e in _DML_EVENTS}, **{e: DDL for e in _DDL_EVENTS},
               **{e: INCOMPATIBLE for e in _INCOMPATIBLE_EVENTS}}
EVENT_NAMES = frozenset(EVENT_CLASS) | frozenset(GROUPS) | frozenset(ALIASES)


@dataclass(frozen=True)
class EventRule:
    name: str
    schema_pattern: str
    table_pattern: str
    events: tuple[str, ...]
    sql_pattern: tuple[str, ...]
    action: str

    @property
    def sql_regex(self) -> re.Pattern | None:
        return _sql_regex(self.sql_pattern)


@lru_cache(maxsize=256)
def _sql_regex(patterns: tuple[str, ...]) -> re.Pattern | None:
    return re.compile("|".join(patterns), re.IGNORECASE) if patterns else None


def parse_rule(name: str, node) -> EventRule:
    """One entry of the task's ``filters`` (``node`` is ``coordinator.config._Node``)."""
    schema = node.get("schema-pattern", str, required=True)
    if not schema:
        raise ConfigError(f"`{node.key('schema-pattern')}` must not be empty (DM's table selector needs it)",
                          file=node.file, key=node.key("schema-pattern"))
    events = []
    for i, ev in enumerate(node.str_list("events")):
        e = ev.strip().lower()
        if e not in EVENT_NAMES:
            raise ConfigError(f"`{node.key('events')}[{i}]` {ev!r} is not one of DM's binlog event types "
                              f"(e.g. insert, update, delete, all dml, all ddl, truncate table, drop table, "
                              f"alter table, create table)", file=node.file, key=f"{node.key('events')}[{i}]")
        events.append(ALIASES.get(e, e))
    sqls = node.str_list("sql-pattern")
    for i, p in enumerate(sqls):
        try:
            re.compile(p)
        except re.error as err:
            raise ConfigError(f"`{node.key('sql-pattern')}[{i}]` {p!r} is not a regular expression: {err}",
                              file=node.file, key=f"{node.key('sql-pattern')}[{i}]") from None
    action = node.get("action", str, required=True)
    if action == "Error":
        raise ConfigError(f"`{node.key('action')}: Error` is not supported: shardmerge filters with Ignore or Do; "
                          f"to stop at such a statement leave it unfiltered (an unsupported DDL stops the subtask)",
                          file=node.file, key=node.key("action"))
    if action not in (IGNORE, DO):
        raise ConfigError(f"`{node.key('action')}` must be Ignore or Do, got {action!r}", file=node.file,
                          key=node.key("action"))
    table = node.get("table-pattern", str, default="")
    node.finish()
    return EventRule(name, schema, table, tuple(events), tuple(sqls), action)


def _match_event(cls: str, event: str, rule_events: tuple[str, ...]) -> bool:
    """DM's ``matchEvent``: the first group word that applies decides."""
    for r in rule_events:
        if r == "all":
            return True
        if r == "none":
            return False
        if cls in (DDL, INCOMPATIBLE):
            if r == "all ddl":
                return True
            if r == "none ddl":
                return False
        if cls == DML:
            if r == "all dml":
                return True
            if r == "none dml":
                return False
        if cls == INCOMPATIBLE and r == "incompatible ddl changes":
            return True
        if r == event:
            return True
    return False


class EventFilter:
    """The binlog event filter of one task instance."""

    def __init__(self, rules: tuple[EventRule, ...] | list[EventRule]):
        self.rules = tuple(rules)
        self._cache: dict[tuple[str, str, str], bool] = {}

    def _rules_of(self, schema: str, table: str) -> list[EventRule]:
        table_rules = [r for r in self.rules if r.table_pattern and table
                       and match(r.schema_pattern, schema) and match(r.table_pattern, table)]
        schema_rules = [r for r in self.rules if not r.table_pattern and match(r.schema_pattern, schema)]
        return table_rules + schema_rules

    def ignores(self, schema: str, table: str, event: str, query: str = "") -> bool:
        """True when DM's filter would drop ``event`` (a DM event name, or "" for a statement it
        has no name for) on ``schema``.``table`` (table "" for database-level statements)."""
        cls = EVENT_CLASS.get(event, "")
        for rule in self._rules_of(schema, table):
            if cls:
                hit = _match_event(cls, event, rule.events)
                if hit and rule.action == IGNORE:
                    return True
                if not hit and rule.action == DO:
                    return True
            if query:
                rx = rule.sql_regex
                if rx is None:
                    continue
                hit = rx.search(query) is not None
                if hit and rule.action == IGNORE:
                    return True
                if not hit and rule.action == DO:
                    return True
        return False

    def ignores_rows(self, schema: str, table: str, event: str) -> bool:
        """:meth:`ignores` for a rows event (``insert`` / ``update`` / ``delete``), cached per table."""
        k = (schema, table, event)
        hit = self._cache.get(k)
        if hit is None:
            hit = self._cache[k] = self.ignores(schema, table, event)
        return hit
