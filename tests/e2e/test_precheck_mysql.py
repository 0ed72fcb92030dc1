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
