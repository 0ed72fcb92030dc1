"""DM's binlog event filters (task `filters` + instance `filter-rules`) on real `shardctl master` /
`worker` processes: 2 sources x 4 shards -> one merged table, plus an unsharded database on s1.

Each assertion has a control beside it that the filter does not cover (a table whose DELETE or
TRUNCATE does reach the downstream), so a filter that did nothing fails the test."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pymysql
import yaml

from .conftest import ID_BASE, SHARDS


def _with_filters(sc, filters: dict, rules: dict, extra_dbs=()) -> None:
    task = yaml.safe_load(Path(sc.task_file).read_text())
    task["filters"] = filters
    for inst in task["mysql-instances"]:
        inst["filter-rules"] = rules[inst["source-id"]]
    for name, bal in task["block-allow-list"].items():
        bal["do-dbs"] += [d for d in extra_dbs if name == "bal-s1"]
    Path(sc.task_file).write_text(yaml.safe_dump(task))


def _count(db, sql: str) -> int:
    return int(db.execute(sql)[0][0])


def _down(sc, sql: str):
    with pymysql.connect(**sc.down.params, autocommit=True) as c, c.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def test_delete_and_truncate_filters_keep_rows_downstream(scenario):
    sc = scenario()                      # incremental: everything below comes from the binlog
    s1, s2 = sc.dbs["s1"], sc.dbs["s2"]
    xdb = f"{s1.name}_x"                 # unsharded (no route): DELETE and TRUNCATE would reach downstream
    s1.execute(f"CREATE DATABASE `{xdb}`")
    try:
        for t in ("keep", "ctl"):
            s1.execute(f"CREATE TABLE `{xdb}`.{t} (id INT PRIMARY KEY, v INT)")
            s1.execute(f"INSERT INTO `{xdb}`.{t} VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 6)))
        _with_filters(sc, {
            "no-delete-s1": {"schema-pattern": s1.name, "table-pattern": "orders_*", "events": ["delete"],
                             "action": "Ignore"},
            "no-delete-s2": {"schema-pattern": s2.name, "table-pattern": "orders_*", "events": ["DELETE"],
                             "action": "Ignore"},
            "no-truncate": {"schema-pattern": xdb, "table-pattern": "keep", "events": ["truncate table"],
                            "action": "Ignore"},
        }, {"s1": ["no-delete-s1", "no-truncate"], "s2": ["no-delete-s2"]}, extra_dbs=[xdb])
        sc.start()
        sc.c.wait(lambda: _count(sc.down, "SELECT COUNT(*) FROM orders") == 80
                  and _down(sc, f"SELECT COUNT(*) FROM `{xdb}`.ctl")[0][0] == 5
                  and _down(sc, f"SELECT COUNT(*) FROM `{xdb}`.keep")[0][0] == 5, 120, "initial rows downstream")

        gone = {"s1": ID_BASE["s1"] + 3, "s2": ID_BASE["s2"] + 100_000 + 4}     # orders_01 / orders_02 rows
        s1.execute(f"DELETE FROM orders_01 WHERE id = {gone['s1']}")
        s2.execute(f"DELETE FROM orders_02 WHERE id = {gone['s2']}")
        s1.execute(f"UPDATE orders_01 SET v = 777 WHERE id = {ID_BASE['s1']}")     # other DML still flows
        s1.execute(f"DELETE FROM `{xdb}`.keep WHERE id = 1")     # keep's DELETE is not filtered
        s1.execute(f"TRUNCATE TABLE `{xdb}`.keep")               # ... its TRUNCATE is
        s1.execute(f"TRUNCATE TABLE `{xdb}`.ctl")                # control: reaches the downstream
        marker = {sid: ID_BASE[sid] + 990_000 for sid in sc.dbs}
        for sid in sc.dbs:
            sc.insert(sid, SHARDS[0], [marker[sid]])
        sc.c.wait(lambda: _count(sc.down, f"SELECT COUNT(*) FROM orders WHERE id IN ({marker['s1']}, "
                                          f"{marker['s2']})") == 2
                  and _down(sc, f"SELECT COUNT(*) FROM `{xdb}`.ctl")[0][0] == 0, 120,
                  "markers downstream and ctl truncated")

        assert _count(sc.down, f"SELECT COUNT(*) FROM orders WHERE id IN ({gone['s1']}, {gone['s2']})") == 2
        assert _count(sc.down, "SELECT COUNT(*) FROM orders") == 82
        assert _count(s1, "SELECT COUNT(*) FROM orders_01") == 10        # upstream really deleted one (+marker)
        assert _count(sc.down, f"SELECT v FROM orders WHERE id = {ID_BASE['s1']}") == 777
        keep = [r[0] for r in _down(sc, f"SELECT id FROM `{xdb}`.keep ORDER BY id")]
        assert keep == [2, 3, 4, 5], keep          # the DELETE ran, the TRUNCATE was ignored
        assert _count(s1, f"SELECT COUNT(*) FROM `{xdb}`.keep") == 0
        subs = sc.subtasks()
        assert all(st["stage"] == "Running" for st in subs.values()), subs
        sc.stop()
    finally:
        s1.execute(f"DROP DATABASE IF EXISTS `{xdb}`")
        with contextlib.suppress(Exception):
            _down(sc, f"DROP DATABASE IF EXISTS `{xdb}`")


def test_do_rule_keeps_only_named_events_and_an_ignored_shard_ddl_sends_no_info(scenario):
    """`action: Do` with `events: [all dml]` (DM's task_advanced.yaml `user-filter-2`): DML flows,
    every DDL of the matched tables is ignored, as DM does: the shards' ADD INDEX is neither run
    downstream nor coordinated (no shard-DDL lock), the subtasks keep running and later rows apply."""
    sc = scenario()
    s1, s2 = sc.dbs["s1"], sc.dbs["s2"]
    _with_filters(sc, {
        "dml-only-s1": {"schema-pattern": s1.name, "events": ["all dml"], "action": "Do"},
        "dml-only-s2": {"schema-pattern": s2.name, "events": ["all dml"], "action": "Do"},
    }, {"s1": ["dml-only-s1"], "s2": ["dml-only-s2"]})
    # the shards' CREATE TABLEs are ignored too: the merged table must exist downstream first
    sc.down.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
    sc.start()
    sc.c.wait(lambda: _count(sc.down, "SELECT COUNT(*) FROM orders") == 80, 120, "initial rows downstream")
    for sid, t in [(s, t) for s in sc.dbs for t in SHARDS[:2]]:     # only some shards: a lock would wait
        sc.dbs[sid].execute(f"ALTER TABLE {t} ADD INDEX idx_v (v)")
    marker = {sid: ID_BASE[sid] + 990_000 for sid in sc.dbs}
    for sid in sc.dbs:
        sc.insert(sid, SHARDS[3], [marker[sid]])
        sc.dbs[sid].execute(f"DELETE FROM {SHARDS[2]} WHERE id = {ID_BASE[sid] + 200_000}")
    sc.c.wait(lambda: _count(sc.down, f"SELECT COUNT(*) FROM orders WHERE id IN ({marker['s1']}, "
                                      f"{marker['s2']})") == 2, 120, "rows after the ignored DDLs")
    assert _count(sc.down, "SELECT COUNT(*) FROM orders") == 80     # +2 markers, -2 deletes: DML is "Do"
    assert sc.down_indexes() == {"PRIMARY": ["id"]}                # the ADD INDEX never ran downstream
    assert not sc.c.ctl_ok("shard-ddl-lock", sc.name).get("locks")  # and took no lock
    subs = sc.subtasks()
    assert all(st["stage"] == "Running" for st in subs.values()), subs
    sc.stop()


def test_ignored_drop_column_on_one_source_and_the_lock(scenario):
    """An ignored DDL sends no Info, but the shard's checkpoint carries its followed schema (as
    DM's skipQueryEvent tracks the DDL and saves the table point), and the master reads a shard
    that sent no Info from its checkpoint (as DM's FetchTableInfos).  s1 ignores its shards'
    DROP COLUMN c: no lock is opened (unfiltered, the DROPs would open one waiting for s2) and c
    stays downstream; once s2's shards drop c, the lock sees every shard without c, c is dropped
    downstream and no lock stays."""
    sc = scenario(columns="id INT PRIMARY KEY, v INT, c INT")
    s1 = sc.dbs["s1"]
    _with_filters(sc, {"no-drop-col": {"schema-pattern": s1.name, "table-pattern": "orders_*",
                                       "events": ["drop column"], "action": "Ignore"}},
                  {"s1": ["no-drop-col"], "s2": []})
    sc.start()
    sc.wait_equal()
    for t in SHARDS:
        s1.execute(f"ALTER TABLE {t} DROP COLUMN c")
    sc.insert("s1", SHARDS[0], [ID_BASE["s1"] + 990_000])
    sc.c.wait(lambda: _count(sc.down, f"SELECT COUNT(*) FROM orders WHERE id = {ID_BASE['s1'] + 990_000}") == 1,
              120, "s1's row after its ignored DROPs")
    assert "c" in sc.down_columns()
    assert not sc.c.ctl_ok("shard-ddl-lock", sc.name).get("locks")      # no Info, no lock
    for t in SHARDS:
        sc.dbs["s2"].execute(f"ALTER TABLE {t} DROP COLUMN c")
    sc.insert("s2", SHARDS[0], [ID_BASE["s2"] + 990_000])
    sc.c.wait(lambda: "c" not in sc.down_columns() and _count(
        sc.down, f"SELECT COUNT(*) FROM orders WHERE id = {ID_BASE['s2'] + 990_000}") == 1,
        120, "c dropped downstream once s2's shards dropped it too")
    sc.c.wait(lambda: not sc.c.ctl_ok("shard-ddl-lock", sc.name).get("locks"), 60, "no lock left")
    subs = sc.subtasks()
    assert all(st["stage"] == "Running" for st in subs.values()), subs
    sc.stop()
