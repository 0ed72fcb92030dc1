"""DM's binlog event filter semantics (pure logic): event names and groups, Ignore / Do, schema
vs table rules, sql-pattern, and the DM event of each statement the syncer meets."""
from __future__ import annotations

import pytest

from coordinator.binlog_filter import DO, IGNORE, EventFilter, EventRule
from coordinator.schema.kinds import parse_ddl
from worker.filters import FilterSplitError, statement_events, statement_ignored


def rule(events=(), action=IGNORE, schema="shop_*", table="", sql=(), name="r") -> EventRule:
    return EventRule(name, schema, table, tuple(events), tuple(sql), action)


def test_ignore_names_events_and_groups():
    f = EventFilter([rule(["delete"], table="orders_*")])
    assert f.ignores("shop_01", "orders_1", "delete")
    assert not f.ignores("shop_01", "orders_1", "insert")
    assert not f.ignores("shop_01", "users", "delete")          # table rule: other tables untouched
    assert not f.ignores("other", "orders_1", "delete")
    assert f.ignores("SHOP_01", "Orders_1", "delete")            # case-insensitive, DM's default
    g = EventFilter([rule(["all dml"])])
    assert all(g.ignores("shop_1", "t", e) for e in ("insert", "update", "delete"))
    assert not g.ignores("shop_1", "t", "truncate table")
    d = EventFilter([rule(["all ddl"])])
    assert d.ignores("shop_1", "t", "truncate table") and d.ignores("shop_1", "t", "create table")
    assert not d.ignores("shop_1", "t", "insert")
    inc = EventFilter([rule(["incompatible ddl changes"])])
    assert inc.ignores("shop_1", "t", "drop column") and not inc.ignores("shop_1", "t", "create table")


def test_do_keeps_only_what_it_names():
    f = EventFilter([rule(["all dml"], action=DO)])
    assert not f.ignores("shop_1", "t", "insert")
    assert f.ignores("shop_1", "t", "alter table")
    assert not f.ignores("elsewhere", "t", "alter table")       # rules only apply to their tables


def test_table_rules_before_schema_rules_and_ignore_wins():
    f = EventFilter([rule(["all dml"], action=DO, name="s"), rule(["delete"], table="t", name="t")])
    assert f.ignores("shop_1", "t", "delete")                    # the table rule decides first
    assert not f.ignores("shop_1", "t", "insert")


def test_sql_pattern_on_statements():
    f = EventFilter([rule(sql=[r"^DROP\s+PROCEDURE"])])
    assert f.ignores("shop_1", "", "", "drop procedure p1")
    assert not f.ignores("shop_1", "", "", "CREATE PROCEDURE p1() BEGIN END")
    assert not f.ignores("shop_1", "t", "delete")               # rows have no statement text


@pytest.mark.parametrize("sql,events", [
    ("TRUNCATE TABLE t", ["truncate table"]), ("DROP TABLE t", ["drop table"]),
    ("CREATE TABLE t (id INT)", ["create table"]), ("ALTER TABLE t ADD COLUMN c INT", ["alter table"]),
    ("ALTER TABLE t DROP COLUMN c", ["drop column"]), ("ALTER TABLE t DROP PRIMARY KEY", ["drop primary key"]),
    ("ALTER TABLE t DROP INDEX i", ["drop index"]), ("ALTER TABLE t RENAME COLUMN a TO b", ["rename column"]),
    ("ALTER TABLE t MODIFY c BIGINT", ["modify column"]), ("CREATE DATABASE d", ["create database"]),
    ("ALTER TABLE t ADD COLUMN c INT, DROP COLUMN d", ["alter table", "drop column"]),
])
def test_statement_events_follow_dm(sql, events):
    assert statement_events(parse_ddl(sql, "shop_1")) == events


def test_statement_ignored_and_partial_alter_refused():
    f = EventFilter([rule(["truncate table", "drop column"])])
    assert statement_ignored(f, parse_ddl("TRUNCATE TABLE t", "shop_1"), "shop_1")
    assert not statement_ignored(f, parse_ddl("TRUNCATE TABLE t", "other"), "other")
    assert statement_ignored(f, parse_ddl("ALTER TABLE t DROP COLUMN c", "shop_1"), "shop_1")
    assert not statement_ignored(f, parse_ddl("INSERT INTO t VALUES (1)", "shop_1"), "shop_1")
    with pytest.raises(FilterSplitError, match="binlog replace"):
        statement_ignored(f, parse_ddl("ALTER TABLE t ADD COLUMN x INT, DROP COLUMN c", "shop_1"), "shop_1")


def test_shadow_table_alter_is_filtered_by_its_real_table():
    from coordinator.config import OnlineDDLRules
    from coordinator.routing import OnlineTables
    f = EventFilter([rule(["drop column"], table="orders")])
    parsed = parse_ddl("ALTER TABLE _orders_gho DROP COLUMN c", "shop_1")
    assert not statement_ignored(f, parsed, "shop_1")
    assert statement_ignored(f, parsed, "shop_1", OnlineTables(OnlineDDLRules()).real_of_shadow)
