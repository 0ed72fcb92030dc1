"""``binlog replace`` statements: split, checked and merged one statement per table."""
from __future__ import annotations

import pytest

from coordinator.schema.replacement import ReplacementError, plan_replacement, split_statements


def test_split_keeps_semicolons_inside_quotes():
    assert split_statements("alter table t add c varchar(3) default ';'; alter table `a;b` add d int;") == [
        "alter table t add c varchar(3) default ';'", "alter table `a;b` add d int"]
    assert split_statements(" ; ;") == []


def test_alters_of_one_table_merge_and_other_tables_stay_apart():
    assert plan_replacement(["alter table db.t1 add column c int; alter table db.t1 add unique(c);",
                             "alter table db.t2 add column c int"]) == [
        "alter table db.t1 add column c int, add unique(c)", "alter table db.t2 add column c int"]
    # the session schema decides whether `t1` and `s.t1` are one table
    assert plan_replacement(["alter table t1 add a int; alter table s.t1 add b int"], "s") == [
        "alter table t1 add a int, add b int"]


@pytest.mark.parametrize("stmts, why", [
    ([], "at least one statement"),
    (["insert into t values (1)"], "is not a DDL on a table"),
    (["alter table t add a int; create index i on t (a)"], "one ALTER TABLE"),
    (["alter table t add a int; alter table u add a int; alter table t add b int"], "one ALTER TABLE"),
])
def test_refused_with_the_statement_and_the_fix(stmts, why):
    with pytest.raises(ReplacementError, match=why):
        plan_replacement(stmts)
