"""End to end, real master + worker processes, the operator's tools for a table changed upstream
outside the binlog (``SET sql_log_bin=0``), after which the worker's tracked structure is wrong
and the next DDL on that table stops the subtask in Error:

* ``binlog inject`` (pre-armed with ``-b``, listed, reverted; then at the stopped statement)
  runs the missing change just before that DDL, coordinated on the shard-DDL lock;
* ``binlog-schema list|update|delete``: the tracked ``CREATE TABLE``, its override with the right
  one from a file, ``--from-source`` or ``--from-target`` (``--flush`` survives a worker
  restart, with ``--flush=false`` the worker forgets it; ``--sync`` puts it into the lock's etcd
  Info), ``delete`` makes the worker read the upstream again;
* bad input: unknown task / source / table, malformed ``-b``, SQL that does not parse, a schema
  file that does not exist or is not a CREATE TABLE, a change while the subtask streams: exit 1,
  an error naming the input, nothing written.
"""
from __future__ import annotations

import signal

import pytest

from coordinator.etcdproto import LockKey, Store, TableRef

from .conftest import ID_BASE, Scenario, running
from .test_operator_commands import one_source_cluster


@pytest.fixture(scope="module")
def cluster1(services, etcd_client, tmp_path_factory):
    with running(lambda prefix, work: one_source_cluster(services, prefix, work), etcd_client, "e2e-bsch",
                 tmp_path_factory.mktemp("e2e-bsch")) as c:
        yield c


def _outside_binlog(db, sql: str) -> None:
    """The operator's change upstream that the binlog never sees."""
    with db.connect() as c, c.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute(sql)
        cur.execute("SET SESSION sql_log_bin = 1")


def _position(db) -> str:
    with db.connect(None) as c, c.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        f, p = cur.fetchone()[:2]
    return f"{f}:{p}"


def _stage(sc: Scenario) -> str:
    return sc.subtasks().get("s1", {}).get("stage", "")


def _wait_error(c, sc: Scenario, what: str) -> dict:
    return c.wait(lambda: (s := sc.subtasks().get("s1", {})).get("stage") == "Error" and s, 120, what)


def _failed(c, *argv) -> str:
    rc, doc = c.ctl(*argv)
    assert rc == 1, f"shardctl {' '.join(argv)} should fail: {doc}"
    return doc["msg"] if isinstance(doc, dict) else str(doc)


def test_binlog_inject_runs_the_missing_change_before_the_stopping_ddl(cluster1, source1_db, downstream_db,
                                                                       tmp_path):
    c, up = cluster1, source1_db
    sc = Scenario(c, {"s1": up}, downstream_db, tmp_path, rows=5)
    try:
        sc.start()
        sc.wait_equal()
        add_c = f"ALTER TABLE `{up.name}`.orders_01 ADD COLUMN d INT"
        # bad input: nothing is armed
        assert "not found" in _failed(c, "binlog", "inject", "no_such_task", "-s", "s1", add_c)
        assert "does not run on source(s) s9" in _failed(c, "binlog", "inject", sc.name, "-s", "s9", "-b",
                                                        "mysql-bin.000001:4", add_c)
        assert "-b binlog position 'bin.000001-77'" in _failed(c, "binlog", "inject", sc.name, "-s", "s1", "-b",
                                                                "bin.000001-77", add_c)
        msg = _failed(c, "binlog", "inject", sc.name, "-s", "s1", "-b", "mysql-bin.000001:4", "ALTER TABLE ((")
        assert "injected statement 'ALTER TABLE ((' cannot be parsed" in msg
        assert "no binlog skip, replace or inject armed" in c.ctl_ok("binlog", "list", sc.name)["msg"]

        # the table changes outside the binlog, then a DDL on the new column stops the subtask
        c.ctl_ok("pause-task", sc.name)
        c.wait(lambda: _stage(sc) == "Paused", 60, "Paused")
        _outside_binlog(up, "ALTER TABLE orders_01 ADD COLUMN d INT")
        at = _position(up)
        up.execute("ALTER TABLE orders_01 ADD INDEX idx_d (d)")
        up.execute(f"INSERT INTO orders_01 (id, v, d) VALUES ({ID_BASE['s1'] + 900_001}, 1, 3)")

        # pre-armed at the DDL's start (-b), listed, reverted: the subtask then stops on it
        add_d = f"ALTER TABLE `{up.name}`.orders_01 ADD COLUMN d INT"
        doc = c.ctl_ok("binlog", "inject", sc.name, "-s", "s1", "-b", at, add_d)
        assert "will run just before the statement at" in doc["msg"]
        listed = c.ctl_ok("binlog", "list", sc.name)["msg"]
        assert f"s1 {at} inject pending with {add_d}" in listed
        c.ctl_ok("binlog", "revert", sc.name, "-s", "s1", "-b", at)
        assert "no binlog skip, replace or inject armed" in c.ctl_ok("binlog", "list", sc.name)["msg"]
        c.ctl_ok("resume-task", sc.name)
        st = _wait_error(c, sc, "subtask Error at the ADD INDEX on a column the tracker does not know")
        assert "idx_d" in st["error"]

        # inject at the stopped statement: the column is added (coordinated), then the index
        doc = c.ctl_ok("binlog", "inject", sc.name, "-s", "s1", add_d)
        assert "ADD INDEX idx_d" in doc["msg"]
        sc.wait_running()
        for t in ("orders_02", "orders_03", "orders_04"):
            up.execute(f"ALTER TABLE {t} ADD COLUMN d INT, ADD INDEX idx_d (d)")
        sc.insert("s1", "orders_03", [ID_BASE["s1"] + 910_000 + i for i in range(5)])
        report = sc.wait_equal(columns=["id", "v", "d"])
        assert report["equal"] is True
        assert sc.down_indexes()["idx_d"] == ["d"]
        assert downstream_db.execute(f"SELECT d FROM orders WHERE id = {ID_BASE['s1'] + 900_001}") == [(3,)]
        listed = c.ctl_ok("binlog", "list", sc.name)["msg"]
        assert f"s1 {at} inject done with {add_d}" in listed
        assert "statements injected before a binlog statement" in c.workers["s1"].log_path.read_text(errors="replace")
        sc.stop()
    finally:
        sc.stop_writers()
        c.ctl("stop-task", sc.name)
        c.task_name = ""


def test_binlog_schema_list_update_delete(cluster1, source1_db, downstream_db, tmp_path, etcd_client):
    c, up, db = cluster1, source1_db, source1_db.name
    sc = Scenario(c, {"s1": up}, downstream_db, tmp_path, rows=5)
    right = tmp_path / "orders_01.sql"
    right.write_text("CREATE TABLE orders_01 (id INT PRIMARY KEY, v INT, c INT)")
    try:
        sc.start()
        sc.wait_equal()
        doc = c.ctl_ok("binlog-schema", "list", sc.name, "-s", "s1", db, "orders_01")
        tracked = doc["sources"][0]["msg"]
        assert tracked.startswith("CREATE TABLE `orders_01`") and "`v` int" in tracked and "`c`" not in tracked
        msg = _failed(c, "binlog-schema", "update", sc.name, "-s", "s1", db, "orders_01", str(right))
        assert "is Running" in msg and "Paused or stopped in Error" in msg

        # every shard gains column c outside the binlog (the downstream too, by the operator)
        for t in ("orders_01", "orders_02", "orders_03", "orders_04"):
            _outside_binlog(up, f"ALTER TABLE {t} ADD COLUMN c INT")
        downstream_db.execute("ALTER TABLE orders ADD COLUMN c INT")
        up.execute("ALTER TABLE orders_01 ADD INDEX idx_c (c)")
        st = _wait_error(c, sc, "subtask Error: the tracked orders_01 has no column c")
        assert "idx_c" in st["error"] and f"binlog-schema update {sc.name} -s s1 {db} orders_01 FILE" in st["error"]

        # bad input: an error naming it, nothing written
        bad = tmp_path / "bad.sql"
        bad.write_text("ALTER TABLE orders_01 ADD COLUMN c INT")
        cases = [
            (("update", "no_such_task", "-s", "s1", db, "orders_01", str(right)), "task 'no_such_task' not found"),
            (("update", sc.name, "-s", "s9", db, "orders_01", str(right)), "does not run on source(s) s9"),
            (("update", sc.name, "-s", "s1", db, "no_such_table", str(right)), "`no_such_table` is not an upstream table"),
            (("update", sc.name, "-s", "s1", "other_db", "orders_01", str(right)), "is not replicated by task"),
            (("update", sc.name, "-s", "s1", db, "orders_01", str(tmp_path / "missing.sql")), "cannot read schema file"),
            (("update", sc.name, "-s", "s1", db, "orders_01", str(bad)), "is not a valid `CREATE TABLE` statement: "),
            (("list", sc.name, db, "orders_01"), "needs exactly one source"),
            (("update", sc.name, "-s", "s1", db, "orders_01", str(right), "--from-source"), "exactly one of"),
            (("delete", sc.name, "-s", "s1", db, "no_such_table"), "`no_such_table` is not an upstream table"),
        ]
        for argv, expect in cases:
            msg = _failed(c, "binlog-schema", *argv)
            assert expect in msg, (argv, msg)
        assert c.ctl_ok("binlog-schema", "list", sc.name, "-s", "s1", db, "orders_01")["sources"][0]["msg"] == tracked

        # the right structure, written to the checkpoint and sent to the lock
        store = Store(etcd_client, c.prefix)
        lock, table = LockKey(sc.name, downstream_db.name, "orders"), TableRef("s1", db, "orders_01")
        assert store.get_info(lock, table) is None
        doc = c.ctl_ok("binlog-schema", "update", sc.name, "-s", "s1", db, "orders_01", str(right), "--flush", "--sync")
        assert "written to the checkpoint" in doc["sources"][0]["msg"] and "shard-DDL lock" in doc["sources"][0]["msg"]
        info = store.get_info(lock, table)
        assert info is not None and info.ignore_conflict and info.ddls == []
        assert [col["name"] for col in info.before["columns"]] == ["id", "v", "c"]
        locks = c.ctl_ok("show-ddl-locks", sc.name)
        assert any(lk["ID"].startswith(f"{sc.name}-") for lk in locks.get("locks", [])), locks
        # orders_02 from the upstream table as it is now, --flush=false: kept by the worker only;
        # orders_04 from the downstream target
        doc = c.ctl_ok("binlog-schema", "update", sc.name, "-s", "s1", db, "orders_02", "--from-source", "--flush=false")
        assert "kept by the worker" in doc["sources"][0]["msg"]
        assert "`c` int" in c.ctl_ok("binlog-schema", "list", sc.name, "-s", "s1", db, "orders_02")["sources"][0]["msg"]
        c.ctl_ok("binlog-schema", "update", sc.name, "-s", "s1", db, "orders_04", "--from-target")
        four = c.ctl_ok("binlog-schema", "list", sc.name, "-s", "s1", db, "orders_04")["sources"][0]["msg"]
        assert four.startswith("CREATE TABLE `orders_04`") and "`c` int" in four

        # a worker restart (paused first: a subtask in Error would simply start again): the
        # flushed structure stays, the other one is forgotten
        c.ctl_ok("pause-task", sc.name)
        c.wait(lambda: _stage(sc) == "Paused", 60, "Paused")
        c.workers["s1"].kill(signal.SIGTERM)
        c.restart_worker("s1")
        c.wait_bound()

        def listed(t):
            rc, d = c.ctl("binlog-schema", "list", sc.name, "-s", "s1", db, t)
            return d["sources"][0]["msg"] if rc == 0 else ""
        assert "`c` int" in c.wait(lambda: listed("orders_01"), 90, "list after the worker restart")
        assert "`c`" not in listed("orders_02") and "`c` int" in listed("orders_04")
        c.ctl_ok("binlog-schema", "update", sc.name, "-s", "s1", db, "orders_02", "--from-source", "--flush=false")

        c.ctl_ok("resume-task", sc.name)
        sc.wait_running()
        sc.insert("s1", "orders_01", [ID_BASE["s1"] + 920_000 + i for i in range(5)], cols="id, v, c")
        sc.insert("s1", "orders_02", [ID_BASE["s1"] + 930_000 + i for i in range(5)], cols="id, v, c")
        report = sc.wait_equal(columns=["id", "v", "c"])
        assert report["equal"] is True
        now = c.ctl_ok("binlog-schema", "list", sc.name, "-s", "s1", db, "orders_01")["sources"][0]["msg"]
        assert "`c` int" in now and "idx_c" in now          # the live tracker followed the ADD INDEX

        # delete: the worker reads the table from the upstream again (column c is there)
        c.ctl_ok("pause-task", sc.name)
        c.wait(lambda: _stage(sc) == "Paused", 60, "Paused")
        assert "`c`" not in listed("orders_03")
        c.ctl_ok("binlog-schema", "delete", sc.name, "-s", "s1", db, "orders_03")
        assert "has no tracked structure" in _failed(c, "binlog-schema", "list", sc.name, "-s", "s1", db, "orders_03")
        c.ctl_ok("resume-task", sc.name)
        sc.wait_running()
        assert "`c` int" in c.wait(lambda: listed("orders_03"), 60, "orders_03 re-read from the upstream")
        sc.insert("s1", "orders_03", [ID_BASE["s1"] + 940_000 + i for i in range(5)], cols="id, v, c")
        assert sc.wait_equal(columns=["id", "v", "c"])["equal"] is True
        sc.stop()
    finally:
        sc.stop_writers()
        c.ctl("stop-task", sc.name)
        c.task_name = ""


def test_binlog_schema_update_reaches_a_subtask_waiting_on_its_lock(cluster1, source1_db, downstream_db, tmp_path,
                                                                    etcd_client):
    """DM_153's situation on one source: orders_01 re-adds a column the other shard never dropped
    (a conflict: the subtask waits on its lock, Paused); the structure taken from the downstream
    goes straight into the waiting subtask's tracker and to the lock, and the replacement of the
    blocked DDL is previewed on it."""
    c, up, db = cluster1, source1_db, source1_db.name
    sc = Scenario(c, {"s1": up}, downstream_db, tmp_path, rows=0, columns="id INT PRIMARY KEY, c INT",
                  shards={"s1": ("orders_01", "orders_02")})
    try:
        sc.start()
        for sql in ("insert into orders_01 values(1,1)", "insert into orders_02 values(2,2)",
                    "alter table orders_01 add column b int, drop column c",
                    "insert into orders_01 values(4,4)", "insert into orders_02 values(5,5)",
                    "alter table orders_01 add column c int, drop column b",
                    "insert into orders_01 values(7,7)", "insert into orders_02 values(8,8)"):
            up.execute(sql)
        c.wait(lambda: (s := sc.subtasks().get("s1", {})).get("stage") == "Paused"
               and "wasn't fully dropped in downstream" in s.get("error", ""), 90, "Paused on the re-add conflict")

        def listed():
            return c.ctl_ok("binlog-schema", "list", sc.name, "-s", "s1", db, "orders_01")["sources"][0]["msg"]
        before = listed()
        assert "`b` int" in before and "`c`" not in before            # the tracker after the first ALTER
        doc = c.ctl_ok("binlog-schema", "update", sc.name, "-s", "s1", db, "orders_01", "--from-target")
        assert "uses it now" in doc["sources"][0]["msg"] and "shard-DDL lock" in doc["sources"][0]["msg"]
        now = listed()
        assert "`c` int" in now and "`b` int" in now                  # the downstream table: id, c, b
        info = Store(etcd_client, c.prefix).get_info(LockKey(sc.name, downstream_db.name, "orders"),
                                                      TableRef("s1", db, "orders_01"))
        assert info.ignore_conflict and [col["name"] for col in info.before["columns"]] == ["id", "c", "b"]

        c.ctl_ok("binlog", "replace", sc.name, "-s", "s1", f"alter table {db}.orders_01 drop column b")
        sc.wait_running()
        after = c.wait(lambda: "`b`" not in (t := listed()) and t, 60, "the replacement applied to the tracker")
        assert "`c` int" in after
        downstream_db.execute("update orders set c = null where id = 1")   # c was dropped and re-added upstream
        assert sc.wait_equal(columns=["id", "c"])["equal"] is True
        sc.stop()
    finally:
        sc.stop_writers()
        c.ctl("stop-task", sc.name)
        c.task_name = ""
