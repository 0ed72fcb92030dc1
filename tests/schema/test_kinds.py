"""One classifier: the worker's routing (``kinds.parse_ddl``) and the schema engine
(``statement.parse_statement``) name every table statement the same kind; every kind has its row
(``KIND_ROWS``) and every ALTER clause kind its parse and schema effect."""
import json

import pytest

from coordinator.schema import apply_ddl, parse_create_table, split_ddl
from coordinator.schema.ddl import _CLAUSES
from coordinator.schema.kinds import KIND_ROWS, ClauseKind, Expand, Route, Track, kinds_routed, parse_ddl
from coordinator.schema.kinds import StatementKind as K
from coordinator.schema.statement import changed_columns, parse_statement

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


# ----------------------------------------------------------------------------- one row per kind

# one statement of every kind: a new kind fails here until it has its row, its parse and a sample
SAMPLES = {
    K.CREATE_TABLE: "CREATE TABLE t (id INT PRIMARY KEY, a INT, KEY ia (a))",
    K.ALTER_TABLE: "ALTER TABLE t ADD COLUMN b INT, DROP COLUMN a",
    K.DROP_TABLE: "DROP TABLE t",
    K.TRUNCATE_TABLE: "TRUNCATE TABLE t",
    K.RENAME_TABLE: "RENAME TABLE t TO u",
    K.CREATE_INDEX: "CREATE INDEX i2 ON t (a)",
    K.DROP_INDEX: "DROP INDEX ia ON t",
    K.CREATE_DATABASE: "CREATE DATABASE d",
    K.ALTER_DATABASE: "ALTER DATABASE d CHARACTER SET utf8mb4",
    K.DROP_DATABASE: "DROP DATABASE d",
    K.OTHER: "CREATE VIEW v AS SELECT 1",
    K.NOT_DDL: "BEGIN",
}
# the kinds' text is persisted (DDLEvent.kind in records and logs): it must never change
VALUES = {K.CREATE_TABLE: "create_table", K.ALTER_TABLE: "alter_table", K.DROP_TABLE: "drop_table",
          K.TRUNCATE_TABLE: "truncate_table", K.RENAME_TABLE: "rename_table", K.CREATE_INDEX: "create_index",
          K.DROP_INDEX: "drop_index", K.CREATE_DATABASE: "create_database", K.ALTER_DATABASE: "alter_database",
          K.DROP_DATABASE: "drop_database", K.OTHER: "other", K.NOT_DDL: "not_ddl"}

# one ALTER TABLE clause of every clause kind (on SAMPLES' CREATE TABLE)
CLAUSES = {
    ClauseKind.ADD_COLUMN: "ADD COLUMN b INT AFTER id",
    ClauseKind.DROP_COLUMN: "DROP COLUMN a",
    ClauseKind.MODIFY_COLUMN: "MODIFY COLUMN a BIGINT",
    ClauseKind.CHANGE_COLUMN: "CHANGE COLUMN a b INT",
    ClauseKind.RENAME_COLUMN: "RENAME COLUMN a TO b",
    ClauseKind.ALTER_DEFAULT: "ALTER COLUMN a SET DEFAULT 3",
    ClauseKind.COLUMN_VISIBILITY: "ALTER COLUMN a SET INVISIBLE",
    ClauseKind.ADD_INDEX: "ADD INDEX i2 (a)",
    ClauseKind.DROP_INDEX: "DROP INDEX ia",
    ClauseKind.RENAME_INDEX: "RENAME INDEX ia TO ib",
    ClauseKind.ALTER_INDEX: "ALTER INDEX ia IGNORED",
    ClauseKind.TABLE_OPTIONS: "COMMENT = 'x'",
    ClauseKind.CONVERT_CHARSET: "CONVERT TO CHARACTER SET utf8mb4",
    ClauseKind.RENAME_TABLE: "RENAME TO u",
    ClauseKind.NOOP: "ALGORITHM = INPLACE",
}


def test_every_kind_has_one_row_and_a_sample():
    assert set(KIND_ROWS) == set(K) == set(SAMPLES) == set(VALUES)
    for k in K:
        assert k.value == VALUES[k] and str(k) == VALUES[k] and f"{k}" == VALUES[k]
        assert json.dumps({"kind": k}) == json.dumps({"kind": VALUES[k]})


@pytest.mark.parametrize("kind", list(K))
def test_a_kinds_row_says_what_its_statement_does(kind):
    row, sql = KIND_ROWS[kind], SAMPLES[kind]
    parsed = parse_ddl(sql, "db")
    assert parsed.kind is kind
    assert kind.on_table == bool(parsed.tables) == (row.expand is not Expand.DATABASE)
    assert (row.route is Route.NONE) == (not kind.on_table) == (row.track is Track.NONE)
    if not kind.on_table:
        return
    assert parse_statement(sql).kind is kind
    base = parse_create_table(SAMPLES[K.CREATE_TABLE])
    if row.track is Track.CREATE:
        assert apply_ddl(None, sql) == base
    elif row.track is Track.FORGET:
        assert apply_ddl(base, sql) is None
    else:
        after = apply_ddl(base, sql)
        assert after is not None
        if row.track is Track.APPLY_SPLIT:
            step = base
            parts = split_ddl(sql)
            assert len(parts) > 1
            for part in parts:
                step = apply_ddl(step, part)
            assert step == after


def test_a_statement_naming_several_tables_expands_only_when_its_row_says_so():
    assert parse_ddl("DROP TABLE a, b", "db").tables and KIND_ROWS[K.DROP_TABLE].expand is Expand.EACH
    assert [k for k, r in KIND_ROWS.items() if r.expand is Expand.EACH] == [K.DROP_TABLE]


def test_the_coordinated_kinds():
    assert kinds_routed(Route.COORDINATE) == {K.ALTER_TABLE, K.CREATE_INDEX, K.DROP_INDEX}


@pytest.mark.parametrize("clause", list(ClauseKind))
def test_every_clause_kind_parses_applies_and_keeps_its_text(clause):
    assert set(CLAUSES) == set(ClauseKind) == set(_CLAUSES)
    st = parse_statement(f"ALTER TABLE t {CLAUSES[clause]}")
    assert [c.kind for c in st.clauses] == [clause]
    assert apply_ddl(parse_create_table(SAMPLES[K.CREATE_TABLE]), st.sql) is not None
    assert clause == clause.value and str(clause) == clause.value and json.dumps(clause) == f'"{clause.value}"'


@pytest.mark.parametrize("sql,added,dropped", [
    ("ALTER TABLE `db`.`t` ADD COLUMN `C` INT AFTER `b`", {"c"}, set()),
    ("ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `c d` INT", {"c d"}, set()),
    ("ALTER TABLE `db`.`t` DROP COLUMN IF EXISTS `Index`", set(), {"index"}),
    ("ALTER TABLE t DROP c, ADD d INT", {"d"}, {"c"}),
    ("ALTER TABLE `db`.`t` DROP INDEX `i`", set(), set()),
    ("ALTER TABLE `db`.`t` DROP PRIMARY KEY", set(), set()),
    ("ALTER TABLE `db`.`t` ADD UNIQUE KEY `u`(`a`)", set(), set()),
    ("ALTER TABLE `db`.`t` ADD COLUMN `e` VARCHAR(9) DEFAULT 'DROP x'", {"e"}, set()),
    ("CREATE TABLE t (a INT)", set(), set()),
    ("ALTER TABLE t ADD PARTITION (PARTITION p1 VALUES LESS THAN (10))", set(), set()),
])
def test_changed_columns_reads_the_clauses(sql, added, dropped):
    """What the lock engine counts as added / dropped columns of an answer's statements."""
    assert changed_columns(sql) == (added, dropped)


def test_tokens_are_shared_for_short_statements_and_not_kept_for_long_ones():
    """``coordinator.schema.lexer``: the readers of one shard DDL share one tokenization; a
    statement longer than ``CACHED_CHARS`` is tokenized afresh each time (its tokens are not
    kept), and both give the same tokens as sqlglot."""
    from sqlglot.dialects.mysql import MySQL

    from coordinator.schema.lexer import CACHED_CHARS, mysql_tokens

    short = "ALTER TABLE `shop_01`.`orders_0001` ADD COLUMN c1 INT"
    assert mysql_tokens(short) is mysql_tokens(short)
    long = "ALTER TABLE t " + ", ".join(f"ADD COLUMN c{i} INT" for i in range(CACHED_CHARS // 16))
    assert len(long) > CACHED_CHARS
    first, again = mysql_tokens(long), mysql_tokens(long)
    assert first is not again
    expect = [(t.token_type, t.text) for t in MySQL().tokenize(long)]
    assert [(t.token_type, t.text) for t in first] == expect == [(t.token_type, t.text) for t in again]
