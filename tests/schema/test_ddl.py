"""Table-driven tests of DDL application, splitting and the typed errors."""
from __future__ import annotations

import pytest

from coordinator.schema import (InvalidDDL, SchemaError, TableSchema, UnsupportedDDL, apply_ddl,
                                rename_ddl_table, split_ddl)

from .ddl_cases import BASE, DDL_CASES
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.parse import parse_create_table


@pytest.mark.parametrize("name,start,ddl,expected", DDL_CASES, ids=[c[0] for c in DDL_CASES])
def test_apply(name, start, ddl, expected):
    got = apply_ddl(parse_create_table(start), ddl)
    want = parse_create_table(expected)
    assert got == want, f"\n{got.to_create_sql('t')}\n!=\n{want.to_create_sql('t')}"


@pytest.mark.parametrize("name,start,ddl,expected", DDL_CASES, ids=[c[0] for c in DDL_CASES])
def test_split_pieces_apply_to_the_same_result(name, start, ddl, expected):
    s = parse_create_table(start)
    pieces = split_ddl(ddl)
    multi = {"add several columns", "add generated columns after", "add column list", "drop two columns", "multi clause",
             "drop and add primary key"}
    assert (len(pieces) > 1) == (name in multi)
    for p in pieces:
        s = apply_ddl(s, p)
    assert s == parse_create_table(expected)


def test_create_drop_rename_table():
    s = apply_ddl(None, "CREATE TABLE db.t1 (a INT)")
    assert s.name == "t1" and [c.name for c in s.columns] == ["a"]
    assert apply_ddl(s, "CREATE TABLE IF NOT EXISTS t1 (b INT)") is s
    assert apply_ddl(s, "RENAME TABLE db.t1 TO db.t2").name == "t2"
    assert apply_ddl(s, "ALTER TABLE t1 RENAME TO t3").name == "t3"
    assert apply_ddl(s, "DROP TABLE t1") is None
    assert apply_ddl(None, "DROP TABLE IF EXISTS t1") is None
    with pytest.raises(InvalidDDL):
        apply_ddl(s, "CREATE TABLE t1 (b INT)")
    with pytest.raises(InvalidDDL):
        apply_ddl(None, "ALTER TABLE t1 ADD b INT")


def test_truncate_resets_auto_increment_option():
    s = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT) AUTO_INCREMENT=9")
    assert s.option("AUTO_INCREMENT") == "9"
    assert apply_ddl(s, "TRUNCATE t").option("AUTO_INCREMENT") is None


@pytest.mark.parametrize("ddl,clause", [
    ("ALTER TABLE t ADD COLUMN d INT, PARTITION BY HASH(id) PARTITIONS 4", "PARTITION BY HASH(id) PARTITIONS 4"),
    ("ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u (id)",
     "ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u (id)"),
    ("ALTER TABLE t DROP FOREIGN KEY fk", "DROP FOREIGN KEY fk"),
    ("ALTER TABLE t ORDER BY a", "ORDER BY a"),
    ("ALTER TABLE t ADD d INT, DISABLE KEYS", "DISABLE KEYS"),
    ("ALTER TABLE t ALTER INDEX ka SET INVISIBLE", "ALTER INDEX ka SET INVISIBLE"),
])
def test_unsupported_clause_is_named(ddl, clause):
    s = parse_create_table(BASE)
    with pytest.raises(UnsupportedDDL) as ei:
        apply_ddl(s, ddl)
    assert ei.value.statement == ddl
    assert ei.value.clause == clause
    assert clause in str(ei.value)


@pytest.mark.parametrize("ddl", ["CREATE VIEW v AS SELECT 1", "DROP DATABASE d", "GRANT ALL ON *.* TO x",
                                 "CREATE TABLE t2 LIKE t", "CREATE TEMPORARY TABLE x (a INT)"])
def test_unsupported_statement(ddl):
    with pytest.raises(UnsupportedDDL) as ei:
        apply_ddl(parse_create_table(BASE), ddl)
    assert ei.value.statement


@pytest.mark.parametrize("ddl,field,value", [
    ("ALTER TABLE t ADD COLUMN a INT", "column", "a"),
    ("ALTER TABLE t DROP COLUMN nope", "column", "nope"),
    ("ALTER TABLE t MODIFY nope INT", "column", "nope"),
    ("ALTER TABLE t CHANGE a b INT", "column", "b"),
    ("ALTER TABLE t ADD d INT AFTER nope", "column", "nope"),
    ("ALTER TABLE t ADD INDEX ka (b)", "index", "ka"),
    ("ALTER TABLE t ADD PRIMARY KEY (a)", "index", "PRIMARY"),
    ("ALTER TABLE t DROP INDEX nope", "index", "nope"),
    ("ALTER TABLE t ADD INDEX kx (nope)", "column", "nope"),
    ("ALTER TABLE t ALTER b SET DEFAULT NULL", "column", "b"),
    ("ALTER TABLE t DROP PRIMARY KEY", "column", "id"),   # AUTO_INCREMENT must stay a key
])
def test_invalid_ddl_has_context(ddl, field, value):
    with pytest.raises(InvalidDDL) as ei:
        apply_ddl(parse_create_table(BASE), ddl)
    assert getattr(ei.value, field) == value
    assert ei.value.statement == ddl
    assert isinstance(ei.value, SchemaError)


def test_if_exists_forms_are_no_ops():
    s = parse_create_table(BASE)
    assert apply_ddl(s, "ALTER TABLE t DROP COLUMN IF EXISTS nope") == s
    assert apply_ddl(s, "ALTER TABLE t ADD COLUMN IF NOT EXISTS a BIGINT") == s
    assert apply_ddl(s, "ALTER TABLE t DROP INDEX IF EXISTS nope") == s


def test_split_examples():
    assert split_ddl("ALTER TABLE t ADD COLUMN a INT, DROP COLUMN b") == [
        "ALTER TABLE t ADD COLUMN a INT", "ALTER TABLE t DROP COLUMN b"]
    assert split_ddl("alter table `s`.`t` add a int first, add index i (a)", target=("d", "x")) == [
        "alter table `d`.`x` add a int first", "alter table `d`.`x` add index i (a)"]
    assert split_ddl("ALTER TABLE t ADD (a INT, b VARCHAR(3) DEFAULT 'x,y')", target="u") == [
        "ALTER TABLE `u` ADD COLUMN a INT", "ALTER TABLE `u` ADD COLUMN b VARCHAR(3) DEFAULT 'x,y'"]
    assert split_ddl("ALTER TABLE t MODIFY e ENUM('a','b'), ALGORITHM=INPLACE") == [
        "ALTER TABLE t MODIFY e ENUM('a','b')"]
    assert split_ddl("DROP TABLE IF EXISTS a.b", target=("c", "d")) == ["DROP TABLE IF EXISTS `c`.`d`"]
    assert split_ddl("TRUNCATE TABLE a.b;") == ["TRUNCATE TABLE a.b"]


def test_rename_ddl_table():
    assert rename_ddl_table("ALTER TABLE `shard_01`.`t1` ADD x INT, DROP y", ("db", "t")) == \
        "ALTER TABLE `db`.`t` ADD x INT, DROP y"
    assert rename_ddl_table("CREATE TABLE IF NOT EXISTS t1 (a INT)", "t") == \
        "CREATE TABLE IF NOT EXISTS `t` (a INT)"


def test_json_format():
    s = parse_create_table(BASE)
    d = s.to_json()
    assert d["version"] == 1 and d["charset"] == "utf8mb4"
    assert d["columns"][0] == {"name": "id", "type": {"base": "int", "length": 11}, "nullable": False,
                               "auto_increment": True}
    assert d["indexes"][1] == {"name": "ka", "kind": "key", "columns": [["a", None]]}
    assert TableSchema.from_json(d) == s
    assert len({s, TableSchema.from_json(d)}) == 1


def test_mysql_forms_in_the_model():
    """MySQL 8's DDL forms (issue 29): ALTER INDEX ... VISIBLE/INVISIBLE is MariaDB's [NOT] IGNORED,
    ALTER COLUMN ... SET [IN]VISIBLE flips the column, CHECK constraints are not merged (a
    no-op that splits to nothing), and SHOW CREATE TABLE's versioned comments are read."""
    from coordinator.schema.canonical import canonical_ddl
    from coordinator.schema.dialect import for_server
    from coordinator.schema.split import split_ddl
    s = parse_create_table(BASE)
    name = s.indexes[-1].name
    hidden = apply_ddl(s, f"ALTER TABLE t ALTER INDEX {name} INVISIBLE")
    assert hidden.index(name).ignored and not apply_ddl(hidden, f"ALTER TABLE t ALTER INDEX {name} VISIBLE") \
        .index(name).ignored
    assert canonical_ddl(f"ALTER TABLE t ALTER INDEX {name} INVISIBLE") == f"ALTER TABLE `t` ALTER INDEX `{name}` IGNORED"
    assert for_server(f"ALTER TABLE `t` ALTER INDEX `{name}` IGNORED", "mysql") == \
        f"ALTER TABLE `t` ALTER INDEX `{name}` INVISIBLE"
    assert for_server("ALTER TABLE `t` ALTER INDEX `ignored` NOT IGNORED", "mysql") == \
        "ALTER TABLE `t` ALTER INDEX `ignored` VISIBLE"              # a quoted name is never rewritten
    assert for_server("ALTER TABLE `t` ALTER INDEX `k` IGNORED", "mariadb") == "ALTER TABLE `t` ALTER INDEX `k` IGNORED"
    col = s.columns[-1].name
    inv = apply_ddl(s, f"ALTER TABLE t ALTER COLUMN {col} SET INVISIBLE")
    assert inv.column(col).invisible and not apply_ddl(inv, f"ALTER TABLE t ALTER COLUMN {col} SET VISIBLE") \
        .column(col).invisible
    assert canonical_ddl(f"ALTER TABLE t ALTER COLUMN {col} SET INVISIBLE") == \
        f"ALTER TABLE `t` ALTER COLUMN `{col}` SET INVISIBLE"
    for ddl in ("ALTER TABLE t ADD CONSTRAINT ck CHECK (id > 0)", "ALTER TABLE t ADD CHECK (id > 0) NOT ENFORCED",
                "ALTER TABLE t DROP CHECK ck", "ALTER TABLE t ALTER CHECK ck NOT ENFORCED"):
        assert apply_ddl(s, ddl) == s, ddl
        assert split_ddl(ddl) == [], ddl
    t = parse_create_table("CREATE TABLE t2 (id int NOT NULL, c int DEFAULT NULL /*!80023 INVISIBLE */, "
                           "PRIMARY KEY (id), KEY k (c) /*!80000 INVISIBLE */, "
                           "CONSTRAINT ck CHECK ((`id` > 0)) /*!80016 NOT ENFORCED */) ENGINE=InnoDB")
    assert t.column("c").invisible and t.index("k").ignored and [c.name for c in t.columns] == ["id", "c"]


def test_collations_are_named_as_the_downstream_knows_them():
    """MySQL 8's utf8mb4_0900_* do not exist on MariaDB (its UCA 14.0 names are the nearest) and
    the reverse; a quoted identifier that happens to look like one is a name, but collation
    names are never quoted in the texts the model renders."""
    from coordinator.schema.dialect import for_server
    sql = "CREATE TABLE t (a VARCHAR(3) COLLATE utf8mb4_0900_ai_ci) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_bin"
    assert for_server(sql, "mariadb") == ("CREATE TABLE t (a VARCHAR(3) COLLATE utf8mb4_uca1400_ai_ci) "
                                          "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
    assert for_server(sql, "mysql") == sql
    assert for_server("ALTER TABLE t MODIFY a TEXT COLLATE utf8mb4_uca1400_as_cs", "mysql") == \
        "ALTER TABLE t MODIFY a TEXT COLLATE utf8mb4_0900_as_cs"
    assert for_server("ALTER TABLE t MODIFY a TEXT COLLATE utf8mb4_general_ci", "mysql") == \
        "ALTER TABLE t MODIFY a TEXT COLLATE utf8mb4_general_ci"       # both servers have it
