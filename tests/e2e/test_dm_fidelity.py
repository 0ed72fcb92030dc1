"""DM's everyday optimistic cases that shardmerge used to get wrong (issue 12 §2), with real
`shardctl master`/`worker` processes, 2 sources x 4 shards -> 1 target.  Each failed before its
fix: the default rules (a nullable column's implicit DEFAULT NULL conflicted with DEFAULT 5;
DEFAULT 0 vs DEFAULT -1 joined silently), charset/collation (a conflict), unique AUTO_INCREMENT
(applied downstream, merged rows collide)."""
from __future__ import annotations

from .conftest import ID_BASE, SHARDS


def _paused(sc, sid: str) -> dict:
    return sc.c.wait(lambda: (st := sc.subtasks().get(sid)) and st["stage"] == "Paused" and st, 90,
                     f"{sid} Paused on a held shard DDL")


def test_no_default_joined_with_default_v_gives_default_v(scenario):
    """s1's shards add `c` without a default (a nullable column: DEFAULT NULL), s2's with
    DEFAULT 5: they join (DEFAULT 5) instead of conflicting.  The shards start empty: an ADD
    COLUMN's backfill of existing rows is not in the binlog (as in DM), so old rows would differ."""
    sc = scenario()
    sc.start()
    for sid in sc.dbs:
        for t in SHARDS:
            sc.dbs[sid].execute(f"DELETE FROM {t}")
    for t in SHARDS:
        sc.dbs["s1"].execute(f"ALTER TABLE {t} ADD COLUMN c INT")
        sc.insert("s1", t, [ID_BASE["s1"] + 900_000 + SHARDS.index(t)])
    for t in SHARDS:
        sc.dbs["s2"].execute(f"ALTER TABLE {t} ADD COLUMN c INT DEFAULT 5")
        sc.insert("s2", t, [ID_BASE["s2"] + 900_000 + SHARDS.index(t)])
    sc.wait_running()
    sc.wait_equal(columns=["id", "v", "c"])
    assert all(st["stage"] == "Running" for st in sc.subtasks().values()), sc.subtasks()
    sc.stop()


def test_two_different_explicit_defaults_are_a_conflict_held_for_the_operator(scenario):
    sc = scenario()
    sc.start()
    sc.dbs["s1"].execute("ALTER TABLE orders_01 ADD COLUMN c INT DEFAULT 0")
    sc.c.wait(lambda: "c" in sc.down_columns(), 60, "s1's ADD COLUMN c downstream")
    sc.dbs["s2"].execute("ALTER TABLE orders_01 ADD COLUMN c INT DEFAULT -1")
    st = _paused(sc, "s2")
    assert "there will be conflicts if DDLs ALTER TABLE" in st["error"], st
    assert "DEFAULT 0" in st["error"] and "DEFAULT -1" in st["error"] and "different defaults" in st["error"], st
    assert "shard-ddl-lock unlock" in st["error"], st
    assert "`c` int(11) DEFAULT 0" in sc.show_create()          # nothing was joined silently
    sc.stop()


def test_a_column_charset_or_collation_differing_between_shards_is_tolerated(scenario):
    sc = scenario()
    sc.start()
    for t in SHARDS:
        sc.dbs["s1"].execute(f"ALTER TABLE {t} ADD COLUMN n VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        sc.dbs["s1"].execute(f"INSERT INTO {t} (id, v, n) VALUES ({ID_BASE['s1'] + 900_000 + SHARDS.index(t)}, 1, 'Ab')")
        sc.dbs["s2"].execute(f"ALTER TABLE {t} ADD COLUMN n VARCHAR(10) CHARACTER SET latin1")
        sc.dbs["s2"].execute(f"INSERT INTO {t} (id, v, n) VALUES ({ID_BASE['s2'] + 900_000 + SHARDS.index(t)}, 2, 'cD')")
    sc.wait_running()
    sc.wait_equal(columns=["id", "v", "n"])
    assert all(st["stage"] == "Running" for st in sc.subtasks().values())
    sc.stop()


def test_unique_auto_increment_added_on_shards_is_held(scenario):
    sc = scenario()
    sc.start()
    for sid in sc.dbs:
        sc.dbs[sid].execute("ALTER TABLE orders_01 ADD COLUMN new_col INT UNIQUE AUTO_INCREMENT")
    for sid in sc.dbs:
        st = _paused(sc, sid)
        assert "there will be conflicts if DDLs" in st["error"] and "AUTO_INCREMENT" in st["error"], st
        assert "binlog skip" in st["error"], st
    assert "new_col" not in sc.down_columns()
    sc.stop()
