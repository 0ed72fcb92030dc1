"""One classifier: the worker's routing (``kinds.parse_ddl``) and the schema engine
(``statement.parse_statement``) name every table statement the same kind."""
import pytest

from coordinator.schema.kinds import StatementKind as K, parse_ddl
from coordinator.schema.statement import parse_statement

CASES = [
    ("ALTER TABLE t ADD COLUMN c INT", K.ALTER_TABLE),
    ("ALTER ONLINE TABLE db.t DROP COLUMN c", K.ALTER_TABLE),
    ("CREATE TABLE t (id INT PRIMARY KEY)", K.CREATE_TABLE),
    ("CREATE TABLE IF NOT EXISTS `d`.`t` (id INT)", K.CREATE_TABLE),
    ("CREATE UNIQUE INDEX u ON t (a)", K.CREATE_INDEX),
    ("CREATE INDEX i ON db.t (a, b)", K.CREATE_INDEX),
    ("DROP INDEX i ON t", K.DROP_INDEX),
    ("DROP TABLE IF EXISTS t", K.DROP_TABLE),
    ("TRUNCATE TABLE t", K.TRUNCATE_TABLE),
    ("RENAME TABLE a TO b", K.RENAME_TABLE),
]


@pytest.mark.parametrize("sql,kind", CASES)
def test_both_parsers_agree_on_the_kind(sql, kind):
    assert parse_ddl(sql, "db").kind is kind
    assert parse_statement(sql).kind is kind
    assert kind.on_table


@pytest.mark.parametrize("sql,kind", [("CREATE DATABASE x", K.CREATE_DATABASE), ("DROP SCHEMA x", K.DROP_DATABASE),
                                      ("BEGIN", K.NOT_DDL), ("CREATE VIEW v AS SELECT 1", K.OTHER),
                                      ("CREATE TEMPORARY TABLE t (a INT)", K.OTHER)])
def test_statements_that_change_no_table(sql, kind):
    assert parse_ddl(sql, "db").kind is kind and not kind.on_table
    assert str(kind) == kind.value      # records and logs keep the plain text
