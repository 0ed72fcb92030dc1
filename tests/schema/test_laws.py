"""Property tests for the lattice laws, serialisation and diff.

"Equal" in the lattice laws is lattice equality (``same_as``: column and
index order, comments, display widths and non-charset table options are
ignored); join's idempotence, JSON and render round trips and diff are
checked with exact ``==`` equality."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from coordinator.schema import (Incomparable, SchemaConflict, TableSchema, compare, diff_ddls,
                                join)

from .strategies import table
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.diff import settle_mixed
from coordinator.schema.parse import parse_create_table

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def try_join(a, b):
    try:
        return join(a, b)
    except SchemaConflict:
        return None


def try_compare(a, b):
    try:
        return compare(a, b)
    except Incomparable:
        return None


@SETTINGS
@given(table())
def test_join_idempotent(a):
    assert join(a, a) == a
    assert compare(a, a) == 0


@SETTINGS
@given(table(), table())
def test_join_commutative(a, b):
    ab, ba = try_join(a, b), try_join(b, a)
    assert (ab is None) == (ba is None)
    if ab is not None:
        assert ab.same_as(ba)


@SETTINGS
@given(table(), table(), table())
def test_join_associative(a, b, c):
    ab = try_join(a, b)
    bc = try_join(b, c)
    left = try_join(ab, c) if ab is not None else None
    right = try_join(a, bc) if bc is not None else None
    # failures must not depend on the bracketing either
    assert (left is None) == (right is None)
    if left is not None:
        assert left.same_as(right)


@SETTINGS
@given(table(), table())
def test_join_is_upper_bound(a, b):
    j = try_join(a, b)
    if j is not None:
        assert compare(a, j) <= 0
        assert compare(b, j) <= 0
        assert join(j, a).same_as(j)


def check_agreement(a, b):
    order = try_compare(a, b)
    j = try_join(a, b)
    assert (order is not None and order <= 0) == (j is not None and j.same_as(b))
    assert (order is not None and order >= 0) == (j is not None and j.same_as(a))
    back = try_compare(b, a)
    assert back == (None if order is None else -order)


@SETTINGS
@given(table(), table())
def test_compare_agrees_with_join(a, b):
    check_agreement(a, b)
    j = try_join(a, b)
    if j is not None:   # comparable pairs are rare among random tables
        check_agreement(a, j)
        check_agreement(j, b)


@SETTINGS
@given(table(), table())
def test_diff_reaches_target(a, b):
    for old, new in ((a, b), (a, try_join(a, b))):
        if new is None:
            continue
        new = settle_mixed(old, new)     # the merged table keeps its default where tables disagree
        cur = old
        for stmt in diff_ddls(old, new, ("db", "t")):
            cur = apply_ddl(cur, stmt)
        assert cur.columns == new.columns
        assert cur.primary_key == new.primary_key
        assert cur.indexes == new.indexes
        assert (cur.charset, cur.collation) == (new.charset, new.collation)
        assert dict(cur.options) == dict(new.options)


@SETTINGS
@given(table())
def test_json_and_sql_round_trip(a):
    assert TableSchema.from_json(a.to_json()) == a
    assert hash(TableSchema.from_json(a.to_json())) == hash(a)
    assert parse_create_table(a.to_create_sql("t")) == a


def test_diff_of_equal_schemas_is_empty():
    a = parse_create_table("CREATE TABLE t (a int, b varchar(3))")
    assert diff_ddls(a, a, "t") == []


@pytest.mark.parametrize("order", [["c", "a", "b"], ["b", "c", "a"], ["a", "c", "b"]])
def test_diff_reorders_columns(order):
    old = parse_create_table("CREATE TABLE t (a int, b int, c int)")
    new = parse_create_table("CREATE TABLE t (" + ", ".join(f"{n} int" for n in order) + ")")
    cur = old
    stmts = diff_ddls(old, new, "t")
    assert len(stmts) == 1
    for s in stmts:
        cur = apply_ddl(cur, s)
    assert cur == new
