"""Table of (start table, DDL, expected table) covering every supported DDL
kind.  test_ddl.py checks the model; test_mariadb.py replays the same DDL
on a real MariaDB and checks the model agrees with the server."""

BASE = ("CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT, a INT DEFAULT NULL, b VARCHAR(10) NOT NULL, "
        "c TEXT, PRIMARY KEY (id), KEY ka (a)) DEFAULT CHARSET=utf8mb4")


def _t(cols: str, keys: str = "PRIMARY KEY (id), KEY ka (a)", opts: str = "DEFAULT CHARSET=utf8mb4"):
    return f"CREATE TABLE t ({cols}{', ' + keys if keys else ''}) {opts}"


ID = "id INT NOT NULL AUTO_INCREMENT"
A, B, C = "a INT DEFAULT NULL", "b VARCHAR(10) NOT NULL", "c TEXT"

DDL_CASES = [
    # (name, start, ddl, expected)
    ("add column at end", BASE, "ALTER TABLE t ADD COLUMN d INT", _t(f"{ID}, {A}, {B}, {C}, d INT")),
    ("add column first", BASE, "ALTER TABLE t ADD d INT NOT NULL DEFAULT 3 FIRST",
     _t(f"d INT NOT NULL DEFAULT 3, {ID}, {A}, {B}, {C}")),
    ("add column after", BASE, "ALTER TABLE t ADD COLUMN d DATETIME(3) AFTER `a`",
     _t(f"{ID}, {A}, d DATETIME(3), {B}, {C}")),
    ("add generated columns after", BASE,
     "ALTER TABLE t ADD COLUMN g INT AS (id + 2) VIRTUAL AFTER a, ADD p INT AS (a * 2) PERSISTENT FIRST",
     _t(f"p INT AS (a * 2) STORED, {ID}, {A}, g INT GENERATED ALWAYS AS (id + 2) VIRTUAL, {B}, {C}")),
    ("add several columns", BASE, "ALTER TABLE t ADD COLUMN d INT AFTER id, ADD e CHAR(2) FIRST",
     _t(f"e CHAR(2), {ID}, d INT, {A}, {B}, {C}")),
    ("add column list", BASE, "ALTER TABLE t ADD COLUMN (d INT, e ENUM('x','y') NOT NULL)",
     _t(f"{ID}, {A}, {B}, {C}, d INT, e ENUM('x','y') NOT NULL")),
    ("add column with latin1", BASE, "ALTER TABLE t ADD d VARCHAR(5) CHARACTER SET latin1",
     _t(f"{ID}, {A}, {B}, {C}, d VARCHAR(5) CHARACTER SET latin1")),
    ("drop column", BASE, "ALTER TABLE t DROP COLUMN b", _t(f"{ID}, {A}, {C}")),
    ("drop indexed column", BASE, "ALTER TABLE t DROP a", _t(f"{ID}, {B}, {C}", "PRIMARY KEY (id)")),
    ("drop two columns", BASE, "ALTER TABLE t DROP COLUMN b, DROP COLUMN c", _t(f"{ID}, {A}")),
    ("modify type", BASE, "ALTER TABLE t MODIFY COLUMN a BIGINT UNSIGNED NOT NULL",
     _t(f"{ID}, a BIGINT UNSIGNED NOT NULL, {B}, {C}")),
    ("modify and move", BASE, "ALTER TABLE t MODIFY b VARCHAR(20) NOT NULL FIRST",
     _t(f"b VARCHAR(20) NOT NULL, {ID}, {A}, {C}")),
    ("modify to nullable", BASE, "ALTER TABLE t MODIFY b VARCHAR(10) NULL",
     _t(f"{ID}, {A}, b VARCHAR(10) DEFAULT NULL, {C}")),
    ("change rename", BASE, "ALTER TABLE t CHANGE COLUMN a a2 INT DEFAULT 5",
     _t(f"{ID}, a2 INT DEFAULT 5, {B}, {C}", "PRIMARY KEY (id), KEY ka (a2)")),
    ("change same name", BASE, "ALTER TABLE t CHANGE b b VARCHAR(30) NOT NULL AFTER c",
     _t(f"{ID}, {A}, {C}, b VARCHAR(30) NOT NULL")),
    ("rename column", BASE, "ALTER TABLE t RENAME COLUMN a TO z",
     _t(f"{ID}, z INT DEFAULT NULL, {B}, {C}", "PRIMARY KEY (id), KEY ka (z)")),
    ("set default", BASE, "ALTER TABLE t ALTER COLUMN b SET DEFAULT 'x'",
     _t(f"{ID}, {A}, b VARCHAR(10) NOT NULL DEFAULT 'x', {C}")),
    ("set numeric default", BASE, "ALTER TABLE t ALTER a SET DEFAULT '7'",
     _t(f"{ID}, a INT DEFAULT 7, {B}, {C}")),
    ("drop default", _t(f"{ID}, {A}, b VARCHAR(10) NOT NULL DEFAULT 'q', {C}"),
     "ALTER TABLE t ALTER COLUMN b DROP DEFAULT", BASE),
    ("add index", BASE, "ALTER TABLE t ADD INDEX kb (b, c(10))",
     _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id), KEY ka (a), KEY kb (b, c(10))")),
    ("add unnamed key", BASE, "ALTER TABLE t ADD KEY (b)",
     _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id), KEY ka (a), KEY b (b)")),
    ("drop index", BASE, "ALTER TABLE t DROP INDEX ka", _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id)")),
    ("drop key", BASE, "ALTER TABLE t DROP KEY `ka`", _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id)")),
    ("add unique", BASE, "ALTER TABLE t ADD UNIQUE KEY ub (b)",
     _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id), KEY ka (a), UNIQUE KEY ub (b)")),
    ("add unique constraint", BASE, "ALTER TABLE t ADD CONSTRAINT ub UNIQUE (b)",
     _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id), KEY ka (a), UNIQUE KEY ub (b)")),
    ("drop unique", _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id), KEY ka (a), UNIQUE KEY ub (b)"),
     "ALTER TABLE t DROP INDEX ub", BASE),
    ("drop and add primary key", "CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, PRIMARY KEY (a))",
     "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (b, a)",
     "CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, PRIMARY KEY (b, a))"),
    ("add primary key makes not null", "CREATE TABLE t (a INT, b INT) DEFAULT CHARSET=utf8mb4",
     "ALTER TABLE t ADD PRIMARY KEY (a)",
     "CREATE TABLE t (a INT NOT NULL, b INT, PRIMARY KEY (a)) DEFAULT CHARSET=utf8mb4"),
    ("drop primary key", "CREATE TABLE t (a INT NOT NULL, b INT, PRIMARY KEY (a)) DEFAULT CHARSET=utf8mb4",
     "ALTER TABLE t DROP PRIMARY KEY", "CREATE TABLE t (a INT NOT NULL, b INT) DEFAULT CHARSET=utf8mb4"),
    ("rename index", BASE, "ALTER TABLE t RENAME INDEX ka TO kz",
     _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id), KEY kz (a)")),
    ("rename key", BASE, "ALTER TABLE t RENAME KEY ka TO kz",
     _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id), KEY kz (a)")),
    ("table default charset", BASE, "ALTER TABLE t DEFAULT CHARSET=latin1",
     _t(f"{ID}, {A}, b VARCHAR(10) CHARACTER SET utf8mb4 NOT NULL, c TEXT CHARACTER SET utf8mb4",
        opts="DEFAULT CHARSET=latin1")),
    ("table collation", BASE, "ALTER TABLE t COLLATE utf8mb4_bin",
     _t(f"{ID}, {A}, b VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, "
        f"c TEXT COLLATE utf8mb4_general_ci", opts="DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")),
    ("convert charset", "CREATE TABLE t (a VARCHAR(5), b TEXT, c INT) DEFAULT CHARSET=latin1",
     "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
     "CREATE TABLE t (a VARCHAR(5), b MEDIUMTEXT, c INT) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci"),
    ("multi clause", BASE,
     "ALTER TABLE t ADD COLUMN d INT NOT NULL DEFAULT 0, DROP COLUMN c, MODIFY a BIGINT, ADD UNIQUE (d), "
     "DROP INDEX ka",
     _t(f"{ID}, a BIGINT, {B}, d INT NOT NULL DEFAULT 0", "PRIMARY KEY (id), UNIQUE KEY d (d)")),
    ("engine and comment", BASE, "ALTER TABLE t ENGINE=InnoDB COMMENT='hello'",
     _t(f"{ID}, {A}, {B}, {C}", opts="ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='hello'")),
    ("algorithm is a no-op", BASE, "ALTER TABLE t ADD COLUMN d INT, ALGORITHM=INPLACE, LOCK=NONE",
     _t(f"{ID}, {A}, {B}, {C}, d INT")),
    ("create index statement", BASE, "CREATE UNIQUE INDEX ub ON t (b)",
     _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id), KEY ka (a), UNIQUE KEY ub (b)")),
    ("drop index statement", BASE, "DROP INDEX ka ON t", _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id)")),
    ("create index if not exists, new", BASE, "CREATE INDEX IF NOT EXISTS kb ON t (b)",
     _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id), KEY ka (a), KEY kb (b)")),
    ("create index if not exists, present", BASE, "CREATE INDEX IF NOT EXISTS ka ON t (a)", BASE),
    ("drop index if exists, present", BASE, "DROP INDEX IF EXISTS ka ON t", _t(f"{ID}, {A}, {B}, {C}", "PRIMARY KEY (id)")),
    ("drop index if exists, absent", BASE, "DROP INDEX IF EXISTS zz ON t", BASE),
    ("truncate", BASE, "TRUNCATE TABLE t", BASE),
]
