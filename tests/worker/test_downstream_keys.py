"""The key a target's rows are matched by: the one-table lookup the syncer makes after each DDL
(``SHOW INDEX``) gives what the server-wide information_schema query gives (real MariaDB)."""
import pytest

from worker.downstream import fetch_keys

TABLES = {
    "pk_and_unique": "(id BIGINT PRIMARY KEY, a INT, b INT AS (a + 1) VIRTUAL, UNIQUE KEY u(a))",
    "two_uniques": "(id BIGINT, a INT NOT NULL, b INT NOT NULL, UNIQUE KEY zz(a), UNIQUE KEY aa(b, a))",
    "mixed_case_names": "(a INT NOT NULL, b INT NOT NULL, UNIQUE KEY Zed(a), UNIQUE KEY alpha(b))",
    "nullable_unique": "(id BIGINT, a INT, UNIQUE KEY u(a))",
    "composite_pk": "(a INT NOT NULL, b VARCHAR(10) NOT NULL, c INT, PRIMARY KEY (b, a), UNIQUE KEY x(c))",
    "keyless": "(a INT)",
    "odd_names": "(`we``ird` INT NOT NULL, UNIQUE KEY `k``1`(`we``ird`))",
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_one_table_key_equals_server_wide(downstream_db, name):
    downstream_db.execute(f"CREATE TABLE `{name}` {TABLES[name]}")
    with downstream_db.connect() as c:
        full = fetch_keys(c).get(f"{downstream_db.name}.{name}")
        one = fetch_keys(c, (downstream_db.name, name))
    assert one == ({f"{downstream_db.name}.{name}": full} if full else {})
    if name == "keyless" or name == "nullable_unique":
        assert one == {}
    if name == "two_uniques":
        assert one[f"{downstream_db.name}.{name}"] == ["b", "a"]   # aa before zz


def test_missing_table_has_no_key(downstream_db):
    with downstream_db.connect() as c:
        assert fetch_keys(c, (downstream_db.name, "nope")) == {}


def test_load_plan_key_skips_prefix_keys_and_gives_types(source1_db):
    """The full load's chunk key (``worker.load.plan.table_key``): a key on a column prefix
    cannot bound a chunk, so the next whole-column key is used; the types come with it."""
    from worker.load.plan import table_key
    source1_db.execute("CREATE TABLE p (a VARCHAR(100) NOT NULL, b INT NOT NULL, c DATETIME NOT NULL, "
                       "PRIMARY KEY (a(10)), UNIQUE KEY u(b, c))")
    source1_db.execute("CREATE TABLE q (a BIGINT NOT NULL, PRIMARY KEY (a))")
    source1_db.execute("CREATE TABLE r (a TEXT NOT NULL, UNIQUE KEY u(a(20)))")
    with source1_db.connect() as c:
        assert table_key(c, source1_db.name, "p") == (["b", "c"], ["int", "datetime"])
        assert table_key(c, source1_db.name, "q") == (["a"], ["bigint"])
        assert table_key(c, source1_db.name, "r") == ([], [])
