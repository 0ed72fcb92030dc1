"""DM's everyday optimistic cases that shardmerge used to get wrong (issue 12 §2), with real
`shardctl master`/`worker` processes, 2 sources x 4 shards -> 1 target.  Each failed before its
fix: the default rules (a nullable column's implicit DEFAULT NULL conflicted with DEFAULT 5;
DEFAULT 0 vs DEFAULT -1 joined silently), charset/collation (a conflict), unique AUTO_INCREMENT
(applied downstream, merged rows collide)."""
from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("restart_at", range(6))
def test_dm_drop_add_column_case(scenario, restart_at):
    """DM's `DM_DropAddColumn_CASE` (issue 19), at each of its master-restart points 0-5: source 1
    drops `c` and `b`, adds `c`, then re-adds `b` while source 2 never dropped `b`; the re-add
    is held with DM's phrases, `binlog skip TASK` (no -s, DM's runbook form) skips it where it is
    stopped and reports the other source has no error; the data ends equal."""
    sc = scenario(columns="id INT PRIMARY KEY, b INT, c INT", rows=0, shards=("orders_01",))
    s1, s2 = sc.dbs["s1"], sc.dbs["s2"]

    def point(n: int) -> None:
        if restart_at == n:
            sc.c.master.kill()
            sc.c.restart_master()

    sc.start()
    s1.execute("INSERT INTO orders_01 VALUES (1, 1, 1)")
    s2.execute("INSERT INTO orders_01 VALUES (2, 2, 2)")
    sc.wait_equal(columns=["id", "b", "c"])
    s1.execute("ALTER TABLE orders_01 DROP COLUMN c")
    s1.execute("INSERT INTO orders_01 VALUES (3, 3)")
    point(1)
    s2.execute("ALTER TABLE orders_01 DROP COLUMN c")
    s2.execute("INSERT INTO orders_01 VALUES (4, 4)")
    point(2)
    sc.c.wait(lambda: sc.down_columns() == ["id", "b"], 90, "c fully dropped downstream")
    sc.c.wait(lambda: not sc.c.ctl_ok("shard-ddl-lock", sc.name).get("locks"), 60, "no DDL lock exists")
    s1.execute("ALTER TABLE orders_01 DROP COLUMN b")
    s1.execute("INSERT INTO orders_01 VALUES (5)")
    point(3)
    s1.execute("ALTER TABLE orders_01 ADD COLUMN c INT")
    s1.execute("INSERT INTO orders_01 VALUES (6, 6)")
    point(4)
    sc.wait_running()
    s1.execute("ALTER TABLE orders_01 ADD COLUMN b INT AFTER id")
    point(5)
    st = sc.c.wait(lambda: (x := sc.subtasks().get("s1")) and x["stage"] == "Paused" and x, 90, "s1 Paused")
    assert "because schema conflict detected" in st["error"], st
    assert st["error"].count("add column b that wasn't fully dropped in downstream") == 1, st
    assert sc.subtasks()["s2"]["stage"] == "Running"
    doc = sc.c.ctl_ok("binlog", "skip", sc.name)
    assert {"result": False, "msg": "source 's2' has no error", "source": "s2"} in doc["sources"], doc
    sc.c.wait(lambda: sc.subtasks()["s1"]["stage"] == "Running", 90, "s1 Running after binlog skip")
    for a in (1, 3, 4, 6):
        s1.execute(f"UPDATE orders_01 SET b = {a} WHERE id = {a}")
    s2.execute("ALTER TABLE orders_01 ADD COLUMN c INT")
    s2.execute("INSERT INTO orders_01 VALUES (7, 7, 7)")
    sc.wait_running()
    sc.wait_equal(columns=["id", "b", "c"])
    sc.stop()


def test_dm_exec_error_skip_case(scenario):
    """DM's `DM_EXEC_ERROR_SKIP_CASE` (optimistic): the downstream refuses both sources' ADD UNIQUE
    (rows written straight downstream collide); the error shows the server's text as DM does;
    `binlog skip TASK` skips it on both sources and replication goes on."""
    sc = scenario(columns="id INT PRIMARY KEY, a INT, b INT", rows=0, shards=("orders_01",))
    sc.start()
    sc.dbs["s1"].execute("INSERT INTO orders_01 VALUES (1, 1, 1)")
    sc.dbs["s2"].execute("INSERT INTO orders_01 VALUES (2, 2, 2)")
    # the target exists once the shards' rows arrive (a subtask can report Running first)
    sc.c.wait(lambda: sc.down.execute("SELECT COUNT(*) FROM orders")[0][0] == 2, 90, "2 rows downstream")
    sc.down.execute("INSERT INTO orders VALUES (3, 1, 1), (4, 2, 2)")
    sc.c.wait(lambda: sc.down.execute("SELECT COUNT(*) FROM orders")[0][0] == 4, 60, "4 rows downstream")
    for sid in sc.dbs:
        sc.dbs[sid].execute("ALTER TABLE orders_01 ADD UNIQUE INDEX ua(a)")
    # the first source to run it meets the refusal; the other's identical ADD waits on the lock
    # until that one is done, then meets the same refusal: each is skipped where it stopped
    sc.c.wait(lambda: any(x["stage"] == "Error" for x in sc.subtasks().values()), 90, "the downstream's refusal")
    skips = 0
    while True:
        state = sc.c.wait(lambda: (st := sc.subtasks()) and (
            [x["error"] for x in st.values() if x["stage"] == "Error"] or
            (all(x["stage"] == "Running" for x in st.values())
             and not sc.c.ctl_ok("shard-ddl-lock", sc.name).get("locks") and "done")), 90, "an Error or all done")
        if state == "done":
            break
        assert all("Error 1062 (23000): Duplicate entry" in e and "ADD UNIQUE INDEX `ua`(`a`)" in e for e in state), state
        stopped = {sid for sid, x in sc.subtasks().items() if x["stage"] == "Error"}
        assert sc.c.ctl_ok("binlog", "skip", sc.name)["result"] is True
        skips += 1
        # the skipped sources restart; their status says Error until the new subtask reports, so
        # wait for that before looking for the next refusal (else the same one is skipped twice)
        sc.c.wait(lambda stopped=stopped: all(x["stage"] != "Error" or sid not in stopped
                                              for sid, x in sc.subtasks().items()),
                  90, "the skipped sources running again")
        assert skips <= 2, "more skips than sources"
    assert skips >= 1
    sc.wait_running()
    sc.down.execute("INSERT INTO orders VALUES (5, 3, 3), (6, 4, 4)")
    sc.dbs["s1"].execute("INSERT INTO orders_01 VALUES (7, 7, 7)")
    sc.c.wait(lambda: sc.down.execute("SELECT COUNT(*) FROM orders")[0][0] == 7, 60, "7 rows downstream")
    sc.stop()


def test_partitioned_shard_tables_are_tracked_and_coordinated(scenario):
    """Issue 12 §2.11: shard tables partitioned upstream (their SHOW CREATE TABLE ends in a
    PARTITION BY clause sqlglot cannot parse) are tracked without the clause; their shard DDLs
    are coordinated like any other and the data ends equal."""
    sc = scenario(table_options="PARTITION BY HASH (id) PARTITIONS 3")
    sc.start()
    sc.start_writers()
    sc.alter_all("ADD COLUMN c INT DEFAULT 4", between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i]))
    assert sc.stop_writers() > 0
    sc.wait_running()
    sc.wait_equal(columns=["id", "v", "c"])
    sc.stop()
