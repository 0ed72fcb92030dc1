"""Canonical DDL text (DM's display form, also what runs downstream): the expected text for the
everyday clauses, and on the real MariaDB every canonical statement has exactly the effect of
the statement it was made from (same SHOW CREATE TABLE afterwards), generated columns of both kinds
included."""
import pytest

from coordinator.schema.canonical import canonical_ddl

BASE = ("CREATE TABLE {t} (id INT NOT NULL, a INT DEFAULT 1, b VARCHAR(20), txt TEXT, "
        "PRIMARY KEY (id), KEY idx (b))")

CASES = [
    ("ALTER TABLE t ADD COLUMN c int default 1", "ALTER TABLE `t` ADD COLUMN `c` INT DEFAULT 1"),
    ("alter table t add c varchar(10) character set utf8mb4 collate utf8mb4_bin not null default 'x  y' after a",
     "ALTER TABLE `t` ADD COLUMN `c` VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL "
     "DEFAULT 'x  y' AFTER `a`"),
    ("ALTER TABLE t CHANGE a c INT FIRST", "ALTER TABLE `t` CHANGE COLUMN `a` `c` INT FIRST"),
    ("ALTER TABLE t CHANGE COLUMN b c VARCHAR(20) AFTER id", "ALTER TABLE `t` CHANGE COLUMN `b` `c` VARCHAR(20) AFTER `id`"),
    ("ALTER TABLE t MODIFY id int default 2", "ALTER TABLE `t` MODIFY COLUMN `id` INT DEFAULT 2"),
    ("ALTER TABLE t DROP COLUMN a", "ALTER TABLE `t` DROP COLUMN `a`"),
    ("ALTER TABLE t DROP a", "ALTER TABLE `t` DROP COLUMN `a`"),
    ("ALTER TABLE t ADD INDEX idx_a (a)", "ALTER TABLE `t` ADD INDEX `idx_a`(`a`)"),
    ("ALTER TABLE t ADD UNIQUE KEY u (a, b(10))", "ALTER TABLE `t` ADD UNIQUE KEY `u`(`a`, `b`(10))"),
    ("ALTER TABLE t DROP INDEX idx", "ALTER TABLE `t` DROP INDEX `idx`"),
    # generated columns in DM's form (issue 34): GENERATED ALWAYS AS, names quoted, VIRTUAL/STORED named
    ("ALTER TABLE t ADD COLUMN g INT AS (id + 2) VIRTUAL",
     "ALTER TABLE `t` ADD COLUMN `g` INT GENERATED ALWAYS AS (`id`+2) VIRTUAL"),
    ("alter table t add column s varchar(40) as (concat(b, '-', id)) persistent comment 'gen'",
     "ALTER TABLE `t` ADD COLUMN `s` VARCHAR(40) GENERATED ALWAYS AS (CONCAT(`b`, '-', `id`)) STORED COMMENT 'gen'"),
    ("ALTER TABLE t ADD p INT GENERATED ALWAYS AS (a - -1) STORED AFTER id",
     "ALTER TABLE `t` ADD COLUMN `p` INT GENERATED ALWAYS AS (`a`- -1) STORED AFTER `id`"),
    ("ALTER TABLE t ADD COLUMN v INT AS ((a > 1 AND id < -1) or b is null)",
     "ALTER TABLE `t` ADD COLUMN `v` INT GENERATED ALWAYS AS ((`a`>1 AND `id`<-1) OR `b` IS NULL) VIRTUAL"),
    ("ALTER TABLE t ADD COLUMN ts TIMESTAMP NOT NULL DEFAULT current_timestamp ON UPDATE current_timestamp",
     "ALTER TABLE `t` ADD COLUMN `ts` TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP"),
    ("ALTER TABLE t ALTER COLUMN a SET DEFAULT 5", "ALTER TABLE `t` ALTER COLUMN `a` SET DEFAULT 5"),
    ("ALTER TABLE t ALTER a DROP DEFAULT", "ALTER TABLE `t` ALTER COLUMN `a` DROP DEFAULT"),
    ("ALTER TABLE t ADD COLUMN e ENUM('x','y') DEFAULT 'x' COMMENT 'it''s'",
     "ALTER TABLE `t` ADD COLUMN `e` ENUM('x','y') DEFAULT 'x' COMMENT 'it''s'"),
    ("ALTER TABLE t ADD COLUMN d DECIMAL(10, 2) unsigned", "ALTER TABLE `t` ADD COLUMN `d` DECIMAL(10, 2) UNSIGNED"),
    ("ALTER TABLE t RENAME COLUMN a TO z", "ALTER TABLE `t` RENAME COLUMN `a` TO `z`"),
    ("ALTER TABLE t ADD INDEX i2 (b) USING BTREE", "ALTER TABLE `t` ADD INDEX i2 (b) USING BTREE"),
    # sqlglot reads a leading RENAME as a command: the clause alone once tidied to "RENAME idx2"
    ("ALTER TABLE t RENAME INDEX idx TO idx2", "ALTER TABLE `t` RENAME INDEX `idx` TO `idx2`"),
    ("alter table t rename key idx to k2", "ALTER TABLE `t` RENAME INDEX `idx` TO `k2`"),
]


@pytest.mark.parametrize("sql,want", CASES)
def test_canonical_text(sql, want):
    assert canonical_ddl(sql) == want
    assert canonical_ddl(want) == want          # canonical text is a fixed point


def test_canonical_statements_have_the_same_effect_on_mariadb(downstream_db):
    for n, (sql, _) in enumerate(CASES):
        orig, canon = f"o{n}", f"c{n}"
        for t in (orig, canon):
            downstream_db.execute(BASE.format(t=t))
        downstream_db.execute(sql.replace("TABLE t ", f"TABLE {orig} ").replace("table t ", f"table {orig} "))
        downstream_db.execute(canonical_ddl(sql).replace("TABLE `t` ", f"TABLE `{canon}` "))
        a = downstream_db.execute(f"SHOW CREATE TABLE {orig}")[0][1].replace(f"`{orig}`", "T")
        b = downstream_db.execute(f"SHOW CREATE TABLE {canon}")[0][1].replace(f"`{canon}`", "T")
        assert a == b, sql


def test_every_statement_of_the_simulation_grammar_keeps_its_effect_in_canonical_text():
    """The worker sends canonical text to the lock and runs it downstream; the simulation works
    on the statements as written.  Over the grammar's whole output the two must change the
    schema alike, or the simulation proves a protocol the workers do not run."""
    import random

    from coordinator.schema import parse_create_table
    from coordinator.schema.ddl import apply_ddl
    from coordinator.schema.split import split_ddl
    from tests.sim import grammar

    seen = 0
    for seed in range(150):
        rng = random.Random(seed)
        for change in grammar.changes(rng, 4):
            for path in change.paths:
                a = b = parse_create_table(grammar.BASE)
                for stmt in path:
                    whole = stmt if stmt.upper().startswith(("CREATE ", "DROP TABLE", "TRUNCATE")) \
                        else "ALTER TABLE t " + stmt                  # a clause of an ALTER
                    for one in split_ddl(whole):
                        a, b = apply_ddl(a, one), apply_ddl(b, canonical_ddl(one))
                        assert (a is None and b is None) or a.same_as(b), (one, canonical_ddl(one))
                        seen += 1
    assert seen > 500
