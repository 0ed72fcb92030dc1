"""End to end, real processes: `shardctl check-task` run by the master against the real
sources and downstream (the real CLI binary's exit codes and dmctl's JSON shape; bad input
refused with nothing written), and `start-task` refusing a task whose shard schemas conflict (a
full-load task: as in DM the shards' consistency is checked when the task loads), then starting it with `--skip-precheck`; warnings are printed and the task starts.  One worker
(source s1, its four shard tables) is enough: the checks run in the master."""
from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, SHARDCTL, Scenario, running
from .test_operator_commands import one_source_cluster


@pytest.fixture(scope="module")
def cluster1(services, etcd_client, tmp_path_factory):
    with running(lambda prefix, work: one_source_cluster(services, prefix, work), etcd_client, "e2e-pre",
                 tmp_path_factory.mktemp("e2e-pre")) as c:
        yield c


def shardctl(cluster, *argv: str) -> tuple[int, str, str]:
    """The installed `shardctl` binary (a real process, its real exit code)."""
    p = subprocess.run([SHARDCTL, "--master-addr", cluster.master_addr, *argv], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def results(doc: dict) -> dict:
    return {r["name"]: r for r in doc["checkResult"]["results"]}


def not_stored(cluster, name: str) -> bool:
    rc, doc = cluster.ctl("query-status", name)
    return rc == 1 and f"task {name!r} not found" in doc["msg"]


def test_check_task_cli_passes_then_fails_on_conflicting_shards(cluster1, source1_db, downstream_db, tmp_path):
    sc = Scenario(cluster1, {"s1": source1_db}, downstream_db, tmp_path, rows=3, mode="all")
    rc, out, err = shardctl(cluster1, "check-task", sc.task_file)
    assert rc == 0, (out, err)
    doc = json.loads(out)
    assert doc["result"] is True and doc["msg"].startswith("pre-check passed")
    summary = doc["checkResult"]["summary"]
    assert summary["passed"] is True and summary["failed"] == 0 and summary["total"] == summary["successful"]
    by = results(doc)
    target = f"optimistic sharding table `{downstream_db.name}`.`orders` consistency checking"
    for name in ("mysql_binlog_row_image", "mysql_binlog_row_metadata", "mysql_gtid",
                 "source db replication privilege checker", target, "downstream_connection", "meta_schema_writable"):
        assert by[name]["state"] == "success", by[name]
    assert not_stored(cluster1, sc.name)             # check-task writes nothing

    source1_db.execute("ALTER TABLE orders_03 MODIFY v BIGINT UNSIGNED")
    rc, out, err = shardctl(cluster1, "check-task", sc.task_file)
    assert rc == 1, (out, err)
    doc = json.loads(out)
    assert doc["result"] is False and doc["checkResult"]["summary"]["failed"] == 1
    item = results(doc)[target]
    assert item["state"] == "fail" and item["instruction"]
    (e,) = item["errors"]
    assert e["severity"] == "fail"
    assert "column `v` is INT(11) on" in e["short_error"]
    assert f"BIGINT(20) unsigned on s1:`{source1_db.name}`.`orders_03`" in e["short_error"]

    rc, out, err = shardctl(cluster1, "--format", "table", "check-task", sc.task_file)
    assert rc == 1 and "FAILED: pre-check failed" in out and "fail: column `v`" in out

    with urllib.request.urlopen(f"http://127.0.0.1:{cluster1.mmetrics}/metrics", timeout=5) as r:
        metrics = r.read().decode()
    counts = {o: float(m.group(1)) for o in ("passed", "failed")
              if (m := re.search(rf'^shardmerge_master_prechecks_total{{outcome="{o}"}} (\S+)$', metrics, re.M))}
    assert counts.get("passed", 0) >= 1 and counts.get("failed", 0) >= 2, counts


def test_check_task_bad_input_is_refused_with_nothing_written(cluster1, tmp_path, source1_db, downstream_db):
    missing = str(tmp_path / "nope.yaml")
    rc, out, err = shardctl(cluster1, "check-task", missing)
    assert rc == 1 and f"cannot read task file {missing}" in err and out == ""

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    rc, out, err = shardctl(cluster1, "check-task", str(bad))
    assert rc == 1
    doc = json.loads(out)
    assert doc["result"] is False and "not valid YAML" in doc["msg"] and f"file={bad}" in doc["msg"]
    assert "checkResult" not in doc

    sc = Scenario(cluster1, {"s1": source1_db}, downstream_db, tmp_path, rows=0)
    data = yaml.safe_load(Path(sc.task_file).read_text())
    data["mysql-instances"].append({**data["mysql-instances"][0], "source-id": "s9"})
    unknown = tmp_path / "unknown-source.yaml"
    unknown.write_text(yaml.safe_dump(data))
    for cmd in ("check-task", "start-task"):
        rc, out, err = shardctl(cluster1, cmd, str(unknown))
        assert rc == 1, (cmd, out, err)
        doc = json.loads(out)
        assert "source(s) s9 of task" in doc["msg"] and "operate-source create" in doc["msg"], doc
    assert not_stored(cluster1, sc.name)


def test_start_task_refuses_on_a_failed_check_and_skip_precheck_starts_a_load_that_names_it(
        cluster1, source1_db, downstream_db, tmp_path):
    sc = Scenario(cluster1, {"s1": source1_db}, downstream_db, tmp_path, rows=3, mode="all")
    source1_db.execute("ALTER TABLE orders_02 MODIFY v BIGINT UNSIGNED")
    rc, doc = cluster1.ctl("start-task", sc.task_file)
    assert rc == 1
    assert f"task {sc.name!r} not started: pre-check failed" in doc["msg"]
    assert "column `v` is INT(11) on" in doc["msg"] and "BIGINT(20) unsigned on s1:" in doc["msg"]
    assert "--skip-precheck" in doc["msg"]
    assert not_stored(cluster1, sc.name)

    cluster1.task_name = sc.name
    rc, doc = cluster1.ctl("start-task", "--skip-precheck", sc.task_file)
    assert rc == 0, doc
    # Skipped, the check's finding surfaces where the shards meet: the full load stops before it
    # creates the target, naming both shards (the stage may or may not show Running first).
    st = cluster1.wait(lambda: (s := sc.subtasks().get("s1", {})).get("stage") == "Error" and s,
                       180, f"task {sc.name} stopped by the load on s1")
    assert st["unit"] == "Dump", st
    assert "cannot be merged: column `v` is INT(11) on" in st["error"], st
    assert "make their schemas compatible before the full load" in st["error"], st
    sc.stop()


def test_start_task_starts_with_warnings_printed(cluster1, source1_db, downstream_db, tmp_path):
    sc = Scenario(cluster1, {"s1": source1_db}, downstream_db, tmp_path, rows=3, columns="id INT, v INT")
    cluster1.task_name = sc.name
    rc, doc = cluster1.ctl("start-task", sc.task_file)
    assert rc == 0, doc
    assert "pre-check warning: table structure compatibility check" in doc["msg"]
    assert f"s1:`{source1_db.name}`.`orders_01` has no primary/unique key" in doc["msg"]
    sc.wait_running()
    sc.wait_equal()
    sc.stop()


def test_ignore_checking_items_as_dm_and_check_task_counts_the_task_files_warnings(cluster1, source1_db,
                                                                                 downstream_db, tmp_path):
    """The same conflicting shards: with DM's `schema_of_shard_tables` in `ignore-checking-items`
    the consistency item is not run and check-task passes; the task file's own warnings (a key
    with no effect) are counted by check-task as start-task prints them; a typo is refused with
    DM's item names and a "did you mean"."""
    sc = Scenario(cluster1, {"s1": source1_db}, downstream_db, tmp_path, rows=3, mode="all")
    source1_db.execute("ALTER TABLE orders_04 MODIFY v BIGINT UNSIGNED")
    data = yaml.safe_load(Path(sc.task_file).read_text())
    target = f"optimistic sharding table `{downstream_db.name}`.`orders` consistency checking"

    def write(name: str, **keys) -> str:
        f = tmp_path / name
        f.write_text(yaml.safe_dump({**data, **keys}))
        return str(f)

    rc, out, _ = shardctl(cluster1, "check-task", write("plain.yaml"))
    assert rc == 1 and results(json.loads(out))[target]["state"] == "fail"
    rc, out, err = shardctl(cluster1, "check-task", write("ignored.yaml", **{
        "ignore-checking-items": ["schema_of_shard_tables", "online_ddl"], "enable-heartbeat": True}))
    assert rc == 0, (out, err)
    doc = json.loads(out)
    by = results(doc)
    assert target not in by and by["mysql_binlog_format"]["state"] == "success"
    warned = " | ".join(e["short_error"] for e in by["task_config"]["errors"])
    assert "`enable-heartbeat` has no effect" in warned and "online_ddl" in warned, warned
    assert doc["checkResult"]["summary"]["warning"] >= 1
    rc, out, _ = shardctl(cluster1, "check-task", write("all.yaml", **{"ignore-checking-items": ["all"]}))
    assert rc == 0 and target not in results(json.loads(out))
    typo = write("typo.yaml", **{"ignore-checking-items": ["binlog_formt"]})
    rc, out, _ = shardctl(cluster1, "check-task", typo)
    doc = json.loads(out)
    assert rc == 1 and "`ignore-checking-items[0]` 'binlog_formt' is not a checking item DM defines; did you " \
                       "mean 'binlog_format'?" in doc["msg"] and f"file={typo}" in doc["msg"], doc
    assert not_stored(cluster1, sc.name)
