"""pause-task / resume-task: CLI -> running master process -> the task record in real etcd
(desired stage per source, a new revision on every resume), and the errors an operator sees."""
from __future__ import annotations

import json

from coordinator.etcdproto import SubtaskStatus

from .conftest import run_cli, source_yaml, task_yaml, write


def _raw(store, task: str) -> dict:
    """The stored JSON of a task record (to check the format version actually written)."""
    value, _ = store.client.get(store.keys.key("task", task))
    return json.loads(value)


def test_pause_and_resume_rewrite_the_task_record(leader, store, capsys, tmp_path):
    files = [write(tmp_path, f"{s}.yaml", source_yaml(s)) for s in ("s1", "s2")]
    assert run_cli(capsys, leader, "operate-source", "create", *files)[0] == 0
    task_file = write(tmp_path, "t1.yaml", task_yaml("t1"))
    assert run_cli(capsys, leader, "start-task", task_file)[0] == 0
    rev0 = store.get_task("t1").revision

    # pause one source: a per-source override (record format v2), the other keeps running
    rc, doc, err = run_cli(capsys, leader, "pause-task", "-s", "s1", "t1")
    assert rc == 0, (doc, err)
    assert doc == {"result": True, "msg": "", "sources": [{"result": True, "msg": "", "source": "s1"}]}
    rec = store.get_task("t1")
    assert (rec.stage_of("s1"), rec.stage_of("s2")) == ("paused", "running") and rec.revision > rev0
    assert _raw(store, "t1")["v"] == 2

    # pausing it again is fine, says so, and writes nothing
    rc, doc, _ = run_cli(capsys, leader, "pause-task", "-s", "s1", "t1")
    assert rc == 0 and "already paused" in doc["msg"] and doc["sources"][0]["msg"] == "already paused"
    assert store.get_task("t1").revision == rec.revision

    # pause the whole task (named by its file, like dmctl): one stage again, plain v1 record
    rc, doc, _ = run_cli(capsys, leader, "pause-task", task_file)
    assert rc == 0 and doc["msg"] == "paused s2; s1 already paused"
    assert [s["source"] for s in doc["sources"]] == ["s1", "s2"]
    rec = store.get_task("t1")
    assert rec.stage == "paused" and rec.source_stages == {} and _raw(store, "t1")["v"] == 1

    # no worker has acted yet: query-status says the pause is requested, not done
    rc, doc, _ = run_cli(capsys, leader, "query-status", "t1")
    sub = {s["sourceStatus"]["source"]: s["subTaskStatus"][0] for s in doc["sources"]}
    assert sub["s1"]["waitingFor"].startswith("pause-task requested")
    # a worker's Paused report is shown as is
    store.put_status(SubtaskStatus("t1", "s1", "Paused", worker="w1",
                                   detail={"paused_by": "operator", "waiting_for": "paused by pause-task"}))
    rc, doc, _ = run_cli(capsys, leader, "query-status", "t1")
    sub = {s["sourceStatus"]["source"]: s["subTaskStatus"][0] for s in doc["sources"]}
    assert sub["s1"]["stage"] == "Paused" and not sub["s1"]["waitingFor"].startswith("pause-task requested")

    # start-task on another source keeps the paused ones paused; stop-task -s keeps the rest
    assert run_cli(capsys, leader, "operate-source", "create", write(tmp_path, "s3.yaml", source_yaml("s3")))[0] == 0
    f3 = write(tmp_path, "t1-3.yaml", task_yaml("t1", sources=("s1", "s2", "s3")))
    assert run_cli(capsys, leader, "start-task", "-s", "s3", f3)[0] == 0
    rec = store.get_task("t1")
    assert {s: rec.stage_of(s) for s in rec.sources} == {"s1": "paused", "s2": "paused", "s3": "running"}
    assert run_cli(capsys, leader, "stop-task", "-s", "s3", "t1")[0] == 0
    rec = store.get_task("t1")
    assert rec.sources == ["s1", "s2"] and rec.stage == "paused" and rec.source_stages == {}

    # resume one source, then all; the status of a resumed-but-not-restarted source says so
    rc, doc, _ = run_cli(capsys, leader, "resume-task", "-s", "s1", "t1")
    assert rc == 0 and doc["msg"] == ""
    rec = store.get_task("t1")
    assert (rec.stage_of("s1"), rec.stage_of("s2")) == ("running", "paused")
    rc, doc, _ = run_cli(capsys, leader, "query-status", "t1")
    sub = {s["sourceStatus"]["source"]: s["subTaskStatus"][0] for s in doc["sources"]}
    assert sub["s1"]["waitingFor"].startswith("resume-task requested")
    rc, doc, _ = run_cli(capsys, leader, "resume-task", "t1")
    assert rc == 0 and "s1 was not paused" in doc["msg"]
    rec = store.get_task("t1")
    assert rec.stage == "running" and rec.source_stages == {}

    # resuming a running task still rewrites the record: a new revision restarts failed subtasks
    rc, doc, _ = run_cli(capsys, leader, "resume-task", "t1")
    assert rc == 0 and doc["result"] is True and "s1, s2 were not paused" in doc["msg"]
    assert store.get_task("t1").revision > rec.revision
    assert all(s["msg"] == "not paused; restarted if it stopped in Error" for s in doc["sources"])

    # table output
    rc, out, _ = run_cli(capsys, leader, "pause-task", "t1", fmt="table")
    assert rc == 0 and out.splitlines() == ["OK", "  s1: ok", "  s2: ok"]


def test_pause_and_resume_errors_name_task_and_source(leader, store, capsys, tmp_path):
    rc, doc, _ = run_cli(capsys, leader, "pause-task", "nope")
    assert rc == 1 and doc == {"result": False, "msg": "task 'nope' not found; no task is started"}
    files = [write(tmp_path, f"{s}.yaml", source_yaml(s)) for s in ("s1", "s2")]
    assert run_cli(capsys, leader, "operate-source", "create", *files)[0] == 0
    assert run_cli(capsys, leader, "start-task", write(tmp_path, "t1.yaml", task_yaml("t1")))[0] == 0
    rev = store.get_task("t1").revision

    rc, doc, _ = run_cli(capsys, leader, "resume-task", "nope")
    assert rc == 1 and doc["msg"] == "task 'nope' not found; tasks: t1"
    rc, doc, _ = run_cli(capsys, leader, "resume-task", "-s", "s9", "t1")
    assert rc == 1 and doc["msg"] == "task 't1' does not run on source(s) s9; its sources: s1, s2"
    rc, out, _ = run_cli(capsys, leader, "pause-task", "-s", "s1", "-s", "s9", "t1", fmt="table")
    assert rc == 1 and out.strip() == "FAILED: task 't1' does not run on source(s) s9; its sources: s1, s2"
    assert store.get_task("t1").revision == rev          # a refused request writes nothing


def test_pause_and_resume_sent_to_a_follower_are_forwarded(leader, masters, store, capsys, tmp_path):
    assert run_cli(capsys, leader, "operate-source", "create", write(tmp_path, "s1.yaml", source_yaml("s1")))[0] == 0
    assert run_cli(capsys, leader, "start-task", write(tmp_path, "t1.yaml", task_yaml("t1", sources=("s1",))))[0] == 0
    follower = masters(name="m2")
    assert follower.wait_leader_known() == leader.addr
    rc, doc, _ = run_cli(capsys, follower, "pause-task", "t1")
    assert rc == 0, doc
    assert store.get_task("t1").stage == "paused"
    rc, doc, _ = run_cli(capsys, follower, "resume-task", "t1")
    assert rc == 0 and store.get_task("t1").stage == "running"
