import pytest

from coordinator.config import BlockAllowList, Instance, RouteRule, SyncerConfig, TablePattern
from coordinator.routing import Filter, RouteConflict, Router, TableMapper, Target

RULES = (
    RouteRule("tbl", "shop_*", "orders_*", "shop", "orders"),
    RouteRule("sch", "shop_*", "", "shop", ""),
    RouteRule("rx", "~^log_[0-9]+$", "", "logs", ""),
)


@pytest.mark.parametrize("schema,table,want", [
    ("shop_01", "orders_0007", ("shop", "orders")),
    ("SHOP_02", "Orders_1", ("shop", "orders")),        # case-insensitive like DM
    ("shop_01", "customers", ("shop", "customers")),    # schema rule keeps the table name
    ("log_12", "events", ("logs", "events")),           # ~regex pattern
    ("log_x", "events", ("log_x", "events")),           # regex does not match: 1:1
    ("other", "t", ("other", "t")),                     # unrouted: 1:1
])
def test_route(schema, table, want):
    assert Router(RULES).route(schema, table) == Target(*want)


def test_ambiguous_table_rules_are_an_error():
    r = Router(RULES + (RouteRule("dup", "shop_0?", "orders_*", "x", "y"),))
    with pytest.raises(RouteConflict, match="tbl, dup"):
        r.route("shop_01", "orders_1")


def test_question_mark_matches_one_char():
    r = Router((RouteRule("q", "db?", "t?", "m", "t"),))
    assert r.route("db1", "t2") == Target("m", "t")
    assert r.route("db12", "t2") == Target("db12", "t2")


BAL = BlockAllowList(do_dbs=("shop_*", "crm"), do_tables=(TablePattern("shop_*", "orders_*"), TablePattern("crm", "*")),
                     ignore_tables=(TablePattern("crm", "tmp_*"),))


@pytest.mark.parametrize("schema,table,allowed", [
    ("shop_01", "orders_1", True),
    ("shop_01", "audit", False),        # do-tables given and none matches
    ("crm", "users", True),
    ("crm", "tmp_x", True),             # do-tables match wins before ignore-tables (DM order)
    ("other", "orders_1", False),       # do-dbs given and schema not in it
    ("mysql", "user", False),           # system schemas always filtered
])
def test_block_allow_list(schema, table, allowed):
    assert Filter(BAL).table_allowed(schema, table) is allowed


def test_ignore_lists_without_do_lists():
    f = Filter(BlockAllowList(ignore_dbs=("tmp*",), ignore_tables=(TablePattern("app", "~^_.*_gho$"),)))
    assert f.table_allowed("app", "users")
    assert not f.table_allowed("tmp1", "users")
    assert not f.table_allowed("app", "_users_gho")
    assert Filter(None).table_allowed("anything", "t") and not Filter(None).table_allowed("sys", "t")


def test_mapper_filters_meta_schema():
    m = TableMapper(Instance("s1", RULES, None, None, SyncerConfig()), meta_schema="dm_meta")
    assert m.target("dm_meta", "x_syncer_checkpoint") is None
    assert m.target("shop_01", "orders_9") == Target("shop", "orders")
