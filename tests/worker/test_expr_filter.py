"""Expression filter evaluation (pure logic): SQL's three-valued logic and the comparison rules
the module docstring promises, checked against what MariaDB answers for the same expressions."""
from __future__ import annotations

import datetime as dt
import decimal

import pytest

from coordinator.expr_filter import ExprError, ExpressionFilter, ExprRule, compile_expr, parse

COLS = ("id", "name", "price", "ts", "note")
ROW = (7, "Apple ", decimal.Decimal("2.50"), dt.datetime(2024, 5, 1, 12, 0), None)


def ev(text: str, row=ROW) -> bool:
    return compile_expr(parse(text), COLS, "test")(row)


@pytest.mark.parametrize("text,want", [
    ("id = 7", True), ("id <> 7", False), ("id != 8", True), ("id > 6 AND id < 8", True), ("id >= 8 OR id <= 6", False),
    ("name = 'apple'", True),            # _ci collation: case and trailing spaces ignored
    ("name = 'pear'", False), ("name LIKE 'ap%'", True), ("name LIKE 'a_ple%'", True), ("name NOT LIKE 'ap%'", False),
    ("price > 2.4", True), ("price = 2.5", True), ("price * 2 = 5", True), ("id % 4 = 3", True), ("id DIV 2 = 3", True),
    ("-id < 0", True), ("id IN (1, 7)", True), ("id NOT IN (1, 2)", True), ("id BETWEEN 7 AND 9", True),
    ("id NOT BETWEEN 1 AND 6", True), ("ts > '2024-04-30'", True), ("ts < '2024-05-01 11:00:00'", False),
    ("note IS NULL", True), ("note IS NOT NULL", False), ("note = 1", False),        # NULL: not TRUE
    ("NOT (note = 1)", False), ("note = 1 OR id = 7", True), ("note = 1 AND id = 7", False),
    ("note <=> NULL", True), ("id IN (1, NULL)", False), ("id XOR 0", True), ("id IS TRUE", True),
    ("'10' > 9", True), ("TRUE", True), ("FALSE", False), ("(id = 7)", True), ("id / 0 = 1", False),
])
def test_expressions(text, want):
    assert ev(text) is want


def test_unknown_column_names_the_rule():
    with pytest.raises(ExprError, match="column `nope`"):
        compile_expr(parse("nope = 1"), COLS, "`r`.insert-value-expr on `s`.`t`")


def test_update_needs_old_and_new_as_dm_does():
    f = ExpressionFilter([ExprRule("r", "S", "T", update_old="id = 1", update_new="id = 2"),
                          ExprRule("only-new", "s", "t", update_new="name = 'x'")])
    tx = f.for_table("s", "t", ("id", "name"))
    assert tx.skip_update((1, "a"), (2, "a"))           # old AND new
    assert not tx.skip_update((1, "a"), (3, "a"))
    assert tx.skip_update((9, "a"), (9, "X"))           # a missing old expression counts as TRUE
    assert not tx.skip_insert((1, "x")) and not tx.skip_delete((1, "x"))
    assert f.for_table("s", "other", ("id",)) is None
    assert f.insert_sql("s", "t") == []


def test_full_load_sql_agrees_with_the_evaluator(services):
    """The full load filters in MariaDB's SQL, replication here: both must agree on the same rows."""
    import pymysql
    exprs = ["id % 2 = 0", "name = 'apple'", "name LIKE 'b%'", "price BETWEEN 1 AND 3", "note IS NULL OR id > 5",
             "ts >= '2024-05-01'", "id IN (1, 3, NULL)", "NOT (price > 2)", "'10' > id"]
    rows = [(1, "Apple ", decimal.Decimal("2.50"), dt.datetime(2024, 5, 1), None),
            (2, "banana", decimal.Decimal("0.99"), dt.datetime(2024, 4, 1), "n"),
            (3, "APPLE", None, None, "x"), (6, "cherry", decimal.Decimal("3.00"), dt.datetime(2024, 6, 1), None),
            (12, "b", decimal.Decimal("1"), dt.datetime(2023, 1, 1), None)]
    with pymysql.connect(**services.mysql["source1"], autocommit=True) as c, c.cursor() as cur:
        for e in exprs:
            for r in rows:
                cur.execute(f"SELECT ({e.replace('%', '%%')}) IS TRUE FROM (SELECT %s AS id, CAST(%s AS CHAR) COLLATE utf8mb4_general_ci "
                            f"AS name, %s AS price, %s AS ts, %s AS note) AS t", r)
                assert bool(cur.fetchone()[0]) is ev(e, r), (e, r)
