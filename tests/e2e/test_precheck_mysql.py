"""End to end on MySQL, real processes: the master's `shardctl check-task` passes on a
well-configured MySQL 9.7 source (flavor detected) and names MySQL's fix for a bad binlog setting
flipped for real; `start-task` refuses the task meanwhile with nothing written, and starts it (full
load and binlog into the MySQL downstream, EQUAL) once the setting is back."""
from __future__ import annotations

import json

import pytest

from tests.precheck.test_checks import global_var

from .conftest import Cluster, Scenario, running
from .test_precheck import not_stored, results, shardctl

MYSQL_ITEMS = ("mysql_version", "mysql_server_id", "mysql_binlog_enable", "mysql_binlog_format",
               "mysql_binlog_row_image", "mysql_binlog_row_metadata", "mysql_binlog_transaction_compression",
               "mysql_binlog_row_value_options", "mysql_gtid", "source db dump privilege checker",
               "source db replication privilege checker", "downstream_connection", "meta_schema_writable")


@pytest.fixture(scope="module")
def mysql_cluster(services, etcd_client, tmp_path_factory):
    """Master and one worker; source s1 is the first MySQL upstream (its config names no flavor)."""
    with running(lambda prefix, work: Cluster(services, prefix, work, sources={"s1": "mysql1"}), etcd_client,
                 "e2e-pre-my", tmp_path_factory.mktemp("e2e-pre-my")) as c:
        yield c


def test_check_task_on_mysql_passes_names_the_fix_and_the_task_runs(mysql_cluster, mysql1_db, mysql_downstream_db,
                                                                     tmp_path):
    c = mysql_cluster
    sc = Scenario(c, {"s1": mysql1_db}, mysql_downstream_db, tmp_path, rows=3, mode="all")
    rc, out, err = shardctl(c, "check-task", sc.task_file)
    assert rc == 0, (out, err)
    doc = json.loads(out)
    by = results(doc)
    for name in MYSQL_ITEMS:
        assert by[name]["state"] == "success", by[name]
    assert "version 9.7" in by["mysql_version"]["extra"]

    with global_var(mysql1_db.params, "binlog_row_image", "MINIMAL"):
        rc, out, err = shardctl(c, "check-task", sc.task_file)
        assert rc == 1, (out, err)
        item = results(json.loads(out))["mysql_binlog_row_image"]
        assert item["state"] == "fail" and "binlog_row_image is MINIMAL" in item["errors"][0]["short_error"]
        assert item["instruction"].startswith("SET PERSIST binlog_row_image = FULL"), item
        rc, doc = c.ctl("start-task", sc.task_file)
        assert rc == 1 and "pre-check failed" in doc["msg"] and "SET PERSIST binlog_row_image = FULL" in doc["msg"]
        assert not_stored(c, sc.name)

    c.task_name = sc.name
    rc, doc = c.ctl("start-task", sc.task_file)
    assert rc == 0, doc
    try:
        sc.wait_running()
        sc.insert("s1", "orders_01", [9_000_001, 9_000_002])
        assert sc.wait_equal()["equal"] is True
        sc.stop()
    finally:
        c.ctl("stop-task", sc.name)
        c.task_name = ""


@pytest.fixture(scope="module")
def private_cluster(services, private_mysql_server, etcd_client, tmp_path_factory):
    """Master and one worker; source s1 is the MySQL server private to the run (binlogs purged)."""
    from tests.conftest import Services
    svc = Services(etcd=services.etcd, mysql={**services.mysql, "private": private_mysql_server})
    with running(lambda prefix, work: Cluster(svc, prefix, work, sources={"s1": "private"}), etcd_client,
                 "e2e-purged", tmp_path_factory.mktemp("e2e-purged")) as c:
        yield c


def test_a_task_starting_at_a_purged_gtid_stops_in_error_with_the_fix(private_cluster, private_mysql_db,
                                                                       mysql_downstream_db, tmp_path):
    """The task's meta names a GTID set whose successors the server purged: the real worker's
    subtask stops in Error (not retried) saying which transactions are gone and what to do, and
    no checkpoint is written."""
    from pathlib import Path

    import yaml

    from worker import gtid
    c, db = private_cluster, private_mysql_db
    old = gtid.canonical(db.execute("SELECT @@GLOBAL.gtid_executed")[0][0])
    sc = Scenario(c, {"s1": db}, mysql_downstream_db, tmp_path, rows=3)      # transactions after `old`
    with db.connect() as conn, conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW BINARY LOG STATUS")
        cur.execute(f"PURGE BINARY LOGS TO '{cur.fetchone()[0]}'")
        cur.execute("SELECT @@GLOBAL.gtid_purged")
        purged = gtid.canonical(cur.fetchone()[0])
    assert not gtid.contains(old, purged)
    Path(sc.task_file).write_text(yaml.safe_dump(sc._task({"s1": ("", 0, old)})))
    c.task_name = sc.name
    try:
        rc, doc = c.ctl("start-task", sc.task_file)
        assert rc == 0, doc
        c.wait(lambda: sc.subtasks().get("s1", {}).get("stage") == "Error", 120, "subtask in Error")
        st = sc.subtasks()["s1"]
        assert "purged binlogs the task still needs" in st["error"], st
        assert f"@@gtid_purged is {purged!r}" in st["error"] and "task-mode: all" in st["error"], st
        assert st["waitingFor"] == "", st                  # not a wait-and-retry
        cp = f"`{mysql_downstream_db.name}`.`{sc.name}_syncer_checkpoint`"
        # only the fencing claim's row, with no position in it
        assert mysql_downstream_db.execute(f"SELECT COUNT(*) FROM {cp} WHERE binlog_name <> '' OR binlog_gtid <> ''"
                                           ) == [(0,)]
    finally:
        c.ctl("stop-task", sc.name)
        c.task_name = ""
