"""Join/compare cases from MySQL type rules: each row is two column
definitions of the same column `c` (plus a shared `id`), the expected
compare result and the expected joined definition (or a conflict)."""
from __future__ import annotations

import pytest

from coordinator.schema import Incomparable, SchemaConflict, TableSchema, compare, join
from coordinator.schema.parse import parse_create_table
from coordinator.schema.typesys import MIXED_DEFAULT

X = "conflict"
INC = "incomparable"
MIXED = "the defaults' top"     # two explicit defaults: joined, the default MIXED_DEFAULT

CASES = [
    # (a, b, compare(a,b), join definition or X)
    ("INT", "INT", 0, "INT"),
    ("TINYINT", "SMALLINT", -1, "SMALLINT"),
    ("BIGINT", "MEDIUMINT", 1, "BIGINT"),
    ("INT(5)", "INT(11)", 0, "INT(5)"),
    ("INT UNSIGNED", "BIGINT UNSIGNED", -1, "BIGINT UNSIGNED"),
    ("INT UNSIGNED", "INT", INC, "BIGINT"),
    ("TINYINT UNSIGNED", "SMALLINT", -1, "SMALLINT"),
    ("SMALLINT UNSIGNED", "SMALLINT", INC, "MEDIUMINT"),
    ("BIGINT UNSIGNED", "TINYINT", INC, X),
    ("INT UNSIGNED ZEROFILL", "INT UNSIGNED", INC, X),
    ("DECIMAL(10,2)", "DECIMAL(10,2)", 0, "DECIMAL(10,2)"),
    ("DECIMAL(10,2)", "DECIMAL(12,2)", -1, "DECIMAL(12,2)"),
    ("DECIMAL(10,2)", "DECIMAL(10,4)", INC, "DECIMAL(12,4)"),
    ("DECIMAL(10,2) UNSIGNED", "DECIMAL(10,2)", -1, "DECIMAL(10,2)"),
    ("DECIMAL(65,0)", "DECIMAL(10,5)", INC, X),
    ("FLOAT", "DOUBLE", -1, "DOUBLE"),
    ("FLOAT(7,3)", "FLOAT", INC, X),
    ("INT", "DECIMAL(10,0)", INC, X),
    # an integer's text fits VARCHAR(20): a retype between them holds no table (not DM: a conflict)
    ("INT", "VARCHAR(10)", INC, "VARCHAR(20)"),
    ("INT", "VARCHAR(255)", -1, "VARCHAR(255)"),
    ("BIGINT UNSIGNED", "VARCHAR(5)", INC, "VARCHAR(20)"),
    ("TINYINT", "VARCHAR(20)", -1, "VARCHAR(20)"),
    ("INT UNSIGNED ZEROFILL", "VARCHAR(30)", INC, X),
    ("INT", "CHAR(30)", INC, X),
    ("INT", "TEXT", INC, X),
    ("VARCHAR(10)", "VARCHAR(20)", -1, "VARCHAR(20)"),
    ("VARCHAR(255)", "VARCHAR(20)", 1, "VARCHAR(255)"),
    ("CHAR(10)", "VARCHAR(10)", INC, X),
    ("VARCHAR(100)", "TEXT", INC, X),
    ("TINYTEXT", "MEDIUMTEXT", -1, "MEDIUMTEXT"),
    ("LONGTEXT", "TEXT", 1, "LONGTEXT"),
    ("BLOB", "MEDIUMBLOB", -1, "MEDIUMBLOB"),
    ("TEXT", "BLOB", INC, X),
    ("BINARY(4)", "BINARY(8)", -1, "BINARY(8)"),
    ("VARBINARY(4)", "VARCHAR(4)", INC, X),
    ("ENUM('a','b')", "ENUM('a','b','c')", -1, "ENUM('a','b','c')"),
    ("ENUM('a','b')", "ENUM('b','a')", INC, X),
    ("ENUM('a','b')", "ENUM('a','c')", INC, X),
    ("SET('x')", "SET('x','y')", -1, "SET('x','y')"),
    ("ENUM('x')", "SET('x')", INC, X),
    ("DATETIME", "DATETIME(6)", -1, "DATETIME(6)"),
    ("TIMESTAMP(3) NULL", "TIMESTAMP NULL", 1, "TIMESTAMP(3) NULL"),
    ("DATETIME", "TIMESTAMP NULL", INC, X),
    ("DATE", "DATETIME", INC, X),
    ("TIME(1)", "TIME(2)", -1, "TIME(2)"),
    ("YEAR", "YEAR", 0, "YEAR"),
    ("BIT(1)", "BIT(8)", -1, "BIT(8)"),
    ("INT NOT NULL", "INT", -1, "INT"),
    ("INT NOT NULL", "INT NOT NULL DEFAULT 5", -1, "INT NOT NULL DEFAULT 5"),
    ("INT NOT NULL DEFAULT 5", "INT NOT NULL DEFAULT 6", INC, MIXED),
    # DM's rule: no explicit default < DEFAULT v; two explicit defaults have no join in DM, ours
    # is a top (the lock, not the lattice, decides when disagreeing is a conflict)
    ("INT", "INT DEFAULT 5", -1, "INT DEFAULT 5"),
    ("INT DEFAULT 0", "INT DEFAULT -1", INC, MIXED),
    ("INT DEFAULT 0", "INT DEFAULT 6", INC, MIXED),
    ("VARCHAR(5) DEFAULT ''", "VARCHAR(5) DEFAULT 'x'", INC, MIXED),
    # the documented deviation: a NOT NULL column's zero is also what lift_missing synthesises
    ("INT NOT NULL DEFAULT 0", "INT NOT NULL DEFAULT 6", -1, "INT NOT NULL DEFAULT 6"),
    ("INT NOT NULL DEFAULT 5", "INT DEFAULT NULL", INC, "INT DEFAULT 5"),
    ("INT NOT NULL DEFAULT 0", "INT DEFAULT NULL", -1, "INT DEFAULT NULL"),
    ("INT DEFAULT 5", "BIGINT DEFAULT '5'", -1, "BIGINT DEFAULT 5"),
    ("DECIMAL(5,1) DEFAULT 1.5", "DECIMAL(6,2) DEFAULT 1.50", -1, "DECIMAL(6,2) DEFAULT 1.50"),
    ("VARCHAR(5) DEFAULT 'x'", "VARCHAR(5) DEFAULT 'y'", INC, MIXED),
    ("VARCHAR(5) CHARACTER SET utf8", "VARCHAR(5) CHARACTER SET utf8mb4", -1,
     "VARCHAR(5) CHARACTER SET utf8mb4"),
    ("VARCHAR(5) CHARACTER SET latin1 COLLATE latin1_general_ci",
     "VARCHAR(5) CHARACTER SET utf8 COLLATE utf8_general_ci", INC,
     "VARCHAR(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"),
    ("VARCHAR(5) COLLATE utf8mb4_bin", "VARCHAR(5) COLLATE utf8mb4_general_ci", 1,
     "VARCHAR(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"),
    # charset/collation never conflict (DM tolerates them, issue 12 §2.4): superset charset,
    # the smaller collation name when they sort differently
    ("VARCHAR(5) CHARACTER SET latin1", "VARCHAR(5) CHARACTER SET utf8mb4", -1,
     "VARCHAR(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"),
    ("VARCHAR(5) CHARACTER SET gbk", "VARCHAR(5) CHARACTER SET utf8mb4", -1,
     "VARCHAR(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"),
    ("INT COMMENT 'x'", "INT COMMENT 'y'", 0, "INT COMMENT 'x'"),
    ("INT NOT NULL AUTO_INCREMENT", "INT NOT NULL", INC, X),
    ("TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP",
     "TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP", INC, X),
    ("DATETIME NOT NULL DEFAULT '0000-00-00 00:00:00'", "DATETIME(3) NOT NULL DEFAULT NOW(3)", -1,
     "DATETIME(3) NOT NULL DEFAULT NOW(3)"),
]


def table(coldef: str | None, extra: str = "") -> TableSchema:
    cols = "id INT NOT NULL" + (f", c {coldef}" if coldef else "") + extra
    return parse_create_table(f"CREATE TABLE t ({cols}) DEFAULT CHARSET=utf8mb4")


@pytest.mark.parametrize("a,b,order,joined", CASES, ids=[f"{a} | {b}" for a, b, _, _ in CASES])
def test_column_case(a, b, order, joined):
    ta, tb = table(a), table(b)
    if order == INC:
        with pytest.raises(Incomparable):
            compare(ta, tb)
    else:
        assert compare(ta, tb) == order
        assert compare(tb, ta) == -order
    if joined == MIXED:
        j = join(ta, tb)
        assert j.column("c").default == MIXED_DEFAULT and join(tb, ta).same_as(j)
        # the top: joining either side again changes nothing
        assert join(j, ta).same_as(j) and join(tb, j).same_as(j)
        assert compare(ta, j) == -1 and compare(j, tb) == 1
    elif joined == X:
        with pytest.raises(SchemaConflict) as ei:
            join(ta, tb, a_label="shard1.t1", b_label="shard2.t2")
        assert ei.value.column == "c"
        assert "shard1.t1" in str(ei.value) and "shard2.t2" in str(ei.value)
    else:
        j = join(ta, tb)
        assert j.same_as(table(joined)), j.to_create_sql("t")
        assert join(tb, ta).same_as(j)


def test_conflict_message_names_column_types_and_labels():
    with pytest.raises(SchemaConflict) as ei:
        join(table("INT"), table("DATE"), a_label="shard1.t1", b_label="shard2.t2")
    assert str(ei.value).startswith("column `c` is INT(11) on shard1.t1 but DATE on shard2.t2")
    assert ei.value.context() == {"column": "c", "a_label": "shard1.t1", "b_label": "shard2.t2"}


@pytest.mark.parametrize("coldef,order,joined", [
    ("INT", 1, "INT"),                                     # nullable: implicit DEFAULT NULL
    ("INT NOT NULL DEFAULT 3", 1, "INT NOT NULL DEFAULT 3"),
    ("INT NOT NULL", INC, "INT NOT NULL DEFAULT 0"),        # synthetic zero default
    ("VARCHAR(3) NOT NULL", INC, "VARCHAR(3) NOT NULL DEFAULT ''"),
    ("ENUM('x','y') NOT NULL", INC, "ENUM('x','y') NOT NULL DEFAULT 'x'"),
    ("DATETIME(2) NOT NULL", INC, "DATETIME(2) NOT NULL DEFAULT '0000-00-00 00:00:00.00'"),
])
def test_missing_column(coldef, order, joined):
    with_c, without = table(coldef), table(None)
    if order == INC:
        with pytest.raises(Incomparable) as ei:
            compare(with_c, without)
        assert ei.value.column == "c"
    else:
        assert compare(with_c, without) == order
    assert join(with_c, without).same_as(table(joined))
    assert join(without, with_c).same_as(table(joined))


def test_indexes_side_with_index_is_smaller():
    plain, indexed = table("INT"), table("INT", ", KEY k (c)")
    assert compare(indexed, plain) == -1
    assert join(indexed, plain).same_as(plain)
    other = table("INT", ", KEY k (id)")
    with pytest.raises(Incomparable) as ei:
        compare(indexed, other)
    assert ei.value.index == "k"
    assert join(indexed, other).same_as(plain)   # incompatible same-named index: dropped


def test_auto_increment_needs_common_key():
    a = parse_create_table("CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT, PRIMARY KEY (id))")
    b = parse_create_table("CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT, UNIQUE KEY u (id))")
    with pytest.raises(SchemaConflict) as ei:
        join(a, b)
    assert ei.value.column == "id"


def test_contradicting_orders():
    a = table("INT", ", d INT")          # extra nullable column d: a larger
    b = table("BIGINT")                  # wider c: b larger
    with pytest.raises(Incomparable) as ei:
        compare(a, b)
    assert "contradicting" in str(ei.value)
    assert join(a, b).same_as(table("BIGINT", ", d INT"))


def test_table_charset_widens():
    a = parse_create_table("CREATE TABLE t (a INT) DEFAULT CHARSET=utf8")
    b = parse_create_table("CREATE TABLE t (a INT) DEFAULT CHARSET=utf8mb4")
    assert compare(a, b) == -1
    assert join(a, b).charset == "utf8mb4"


def test_classify():
    from coordinator.schema import classify_ddl
    s = table("INT")
    assert classify_ddl(s, "ALTER TABLE t ADD d INT")[1] == "widening"
    assert classify_ddl(s, "ALTER TABLE t ADD d INT NOT NULL")[1] == "conflicting"
    assert classify_ddl(s, "ALTER TABLE t ADD INDEX k (c)")[1] == "narrowing"
    assert classify_ddl(s, "ALTER TABLE t MODIFY c BIGINT")[1] == "widening"
    assert classify_ddl(s, "ALTER TABLE t MODIFY c INT COMMENT 'x'")[1] == "neutral"
    assert classify_ddl(s, "ALTER TABLE t CHANGE c c2 INT")[1] == "conflicting"


def test_an_unknown_charset_never_conflicts_and_never_shows_as_none():
    """Issue 19: `None` means "not known" - it takes the known side, it is no conflict, and no
    message ever says "charset utf8mb4 and None"."""
    from dataclasses import replace

    a = table("VARCHAR(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    col = a.column("c")
    unknown = replace(a, columns=tuple(replace(c, type=replace(c.type, charset=None, collation=None))
                                       if c.name == "c" else c for c in a.columns))
    j = join(a, unknown)
    assert (j.column("c").type.charset, j.column("c").type.collation) == (col.type.charset, col.type.collation)
    assert join(unknown, a).same_as(j)
