"""start-task / query-status / stop-task, operate-source and source bindings, end to end:
CLI -> running master process -> real etcd; workers simulated through the etcdproto Store."""
from __future__ import annotations

import re
import time

from coordinator.etcdproto import SubtaskStatus, WorkerRegistration
from worker.events import Position
from worker.status import dm_positions

from .conftest import DOWNSTREAM_PORT, run_cli, source_yaml, task_yaml, wait_for, write


def _sources(capsys, m, tmp_path, *ids):
    files = [write(tmp_path, f"{s}.yaml", source_yaml(s)) for s in ids]
    rc, doc, err = run_cli(capsys, m, "operate-source", "create", *files)
    assert rc == 0, (doc, err)


def test_task_lifecycle_with_status_from_worker(leader, store, capsys, tmp_path):
    _sources(capsys, leader, tmp_path, "s1", "s2")
    f = write(tmp_path, "task.yaml", task_yaml("t1", extra="enable-heartbeat: true\n"))
    rc, doc, err = run_cli(capsys, leader, "start-task", f)
    assert rc == 0, (doc, err)
    assert doc["result"] is True
    assert "`enable-heartbeat` has no effect in shardmerge" in doc["msg"]
    assert f in doc["msg"]                                   # warnings name the file
    assert store.get_task("t1").sources == ["s1", "s2"]

    # no worker yet: stage New, and it says what it waits for
    rc, doc, _ = run_cli(capsys, leader, "query-status", "t1")
    assert rc == 0
    sub = {s["sourceStatus"]["source"]: s["subTaskStatus"][0] for s in doc["sources"]}
    assert sub["s1"]["stage"] == "New"
    assert sub["s1"]["waitingFor"].startswith("no worker bound to source s1")

    # a worker registers: the master binds both sources to it; then it reports status for s1
    lease = store.register_worker(WorkerRegistration("w1", "127.0.0.1:9"), ttl=5)
    try:
        wait_for(lambda: {b.source: b.worker for b in store.list_bindings().items} == {"s1": "w1", "s2": "w1"},
                 what="bindings to w1")
        store.put_status(SubtaskStatus("t1", "s1", "Paused", worker="w1", conflict_msg="boom",
                                       detail={"lock_id": "t1-`shop`.`orders`", "synced_position": "0-101-7",
                                               "error": {"type": "ShardConflict", "message": "x", "position": "0-101-8"},
                                               "lag_seconds": 1.5}))
        # s2 reports as a streaming worker does (worker.status.dm_positions): DM's sync fields
        store.put_status(SubtaskStatus("t1", "s2", "Running", worker="w1", detail={
            "unit": "Sync", **dm_positions(Position("bin.000003", 900, "0-102-40"), Position("bin.000003", 900, "0-102-40"),
                                           1200, 10.0, True)}))
        rc, doc, _ = run_cli(capsys, leader, "query-status", "t1")
        sub = {s["sourceStatus"]["source"]: s["subTaskStatus"][0] for s in doc["sources"]}
        assert sub["s1"]["stage"] == "Paused" and sub["s1"]["worker"] == "w1"
        assert sub["s1"]["unresolvedDDLLockID"] == "t1-`shop`.`orders`"
        assert sub["s1"]["error"].startswith("ShardConflict: x") and sub["s1"]["sync"]["errorBinlog"] == "0-101-8"
        assert sub["s1"]["sync"]["syncerBinlog"] == "0-101-7" and sub["s1"]["conflictMsg"] == "boom"
        assert sub["s1"]["result"]["errors"][0]["Message"].startswith("ShardConflict: x")
        assert sub["s1"]["result"]["errors"][0]["RawCause"] == "x" and "binlog skip" in \
            sub["s1"]["result"]["errors"][0]["Workaround"]
        assert sub["s2"]["stage"] == "Running" and "result" not in sub["s2"]
        assert {k: sub["s2"]["sync"][k] for k in ("masterBinlog", "masterBinlogGtid", "syncerBinlog", "syncerBinlogGtid",
                                                   "synced", "totalEvents", "totalTps")} == {
            "masterBinlog": "(bin.000003, 900)", "masterBinlogGtid": "0-102-40", "syncerBinlog": "(bin.000003, 900)",
            "syncerBinlogGtid": "0-102-40", "synced": True, "totalEvents": 1200, "totalTps": 120}
        # operate-source show: what was last seen of each source, not only its worker's "online"
        rc, doc, _ = run_cli(capsys, leader, "operate-source", "show")
        shown = {x["source"]: x for x in doc["sources"]}
        assert shown["s1"]["worker"] == "w1" and shown["s1"]["result"] is True, doc
        assert re.match(r"checked \d{4}-\d\d-\d\dT[\d:]+Z: \d+ checks passed", shown["s1"]["msg"]), shown["s1"]
        assert "task t1: Paused at " in shown["s1"]["msg"] and "(x)" in shown["s1"]["msg"], shown["s1"]
        assert "task t1: Running at " in shown["s2"]["msg"], shown["s2"]
        # all tasks view
        rc, doc, _ = run_cli(capsys, leader, "query-status")
        assert doc["tasks"][0]["taskName"] == "t1" and doc["tasks"][0]["taskStatus"] == "Paused"
        # the HTTP API's sync_status carries the same fields, DM's snake_case
        from tests.api.conftest import Http
        st, hdoc = Http(f"http://127.0.0.1:{leader.mport}").get("/api/v1/tasks/t1/status")
        s2 = next(x for x in hdoc["data"] if x["source_name"] == "s2")["sync_status"]
        assert (s2["master_binlog"], s2["syncer_binlog_gtid"], s2["synced"], s2["total_tps"]) == \
            ("(bin.000003, 900)", "0-102-40", True, 120), s2
        # table view
        rc, out, _ = run_cli(capsys, leader, "query-status", "t1", fmt="table")
        assert rc == 0 and "Paused" in out and "SOURCE" in out
    finally:
        lease.revoke()

    # starting it again is refused; stop-task removes it
    rc, doc, _ = run_cli(capsys, leader, "start-task", f)
    assert rc == 1 and "already running" in doc["msg"]
    # ... also when its prechecks would fail now (here: the downstream is unreachable): the answer is
    # that it runs, not the checks' findings
    down = write(tmp_path, "t1-down.yaml", task_yaml("t1").replace(f"port: {DOWNSTREAM_PORT}", "port: 1"))
    rc, doc, _ = run_cli(capsys, leader, "start-task", down)
    assert rc == 1 and "already running" in doc["msg"] and "pre-check" not in doc["msg"], doc
    # a source the task does not replicate is an error, not an empty success
    rc, doc, _ = run_cli(capsys, leader, "query-status", "t1", "-s", "nosuchsrc")
    assert rc == 1 and doc["result"] is False, doc
    assert doc["msg"] == "source(s) nosuchsrc not found in task 't1' (its sources: s1, s2)", doc
    rc, doc, _ = run_cli(capsys, leader, "query-status", "t1", "-s", "s1")
    assert rc == 0 and [s["sourceStatus"]["source"] for s in doc["sources"]] == ["s1"], doc
    rc, doc, _ = run_cli(capsys, leader, "stop-task", "t1")
    assert rc == 0 and doc["result"] is True
    assert store.get_task("t1") is None and store.list_status("t1").items == []
    rc, doc, _ = run_cli(capsys, leader, "query-status", "t1")
    assert rc == 1 and doc["msg"] == "task 't1' not found"


def test_start_task_config_errors_name_file_and_key(leader, store, capsys, tmp_path):
    _sources(capsys, leader, tmp_path, "s1")
    bad = write(tmp_path, "bad.yaml", task_yaml("t1", sources=("s1",)).replace("task-mode: incremental",
                                                                               "task-mode: sometimes"))
    rc, doc, _ = run_cli(capsys, leader, "start-task", bad)
    assert rc == 1
    assert doc["msg"] == f"`task-mode` must be one of all, full, incremental, got 'sometimes' [file={bad}, key=task-mode]"
    # a source that is not registered
    f = write(tmp_path, "t.yaml", task_yaml("t1", sources=("s1", "s9")))
    rc, doc, _ = run_cli(capsys, leader, "start-task", f)
    assert rc == 1 and "s9" in doc["msg"] and "operate-source create" in doc["msg"]
    # unreadable file: one line on stderr, exit 1
    rc, out, err = run_cli(capsys, leader, "start-task", str(tmp_path / "missing.yaml"))
    assert rc == 1 and "cannot read task file" in err and "missing.yaml" in err
    # every error of a file in one answer, a typo with its "did you mean", for both commands
    good = task_yaml("t1", sources=("s1",))
    many = write(tmp_path, "many.yaml", good.replace("task-mode: incremental", "task-mode: sometimes")
                 .replace("target-database:", "tagret-database:") + "timezone: Asia/Shanghai\n")
    for cmd in ("check-task", "start-task"):
        rc, doc, _ = run_cli(capsys, leader, cmd, many)
        assert rc == 1, (cmd, doc)
        msg = doc["msg"]
        assert msg.startswith(f"4 errors in {many}:"), msg
        for words in ("`task-mode` must be one of", "unknown key `tagret-database` (did you mean `target-database`?)",
                      "`target-database` is required", "`timezone` is not supported"):
            assert words in msg, (cmd, words, msg)
    # a key given twice, a name too long for the checkpoint table, bytes that are not UTF-8
    twice = write(tmp_path, "twice.yaml", good.replace("task-mode: incremental", "task-mode: incremental\n"
                                                                                 "task-mode: full"))
    rc, doc, _ = run_cli(capsys, leader, "start-task", twice)
    assert rc == 1 and "`task-mode` is given twice" in doc["msg"], doc
    long = write(tmp_path, "long.yaml", good.replace("name: t1", "name: " + "t" * 50))
    rc, doc, _ = run_cli(capsys, leader, "start-task", long)
    assert rc == 1 and "`name` is 50 characters; at most 46" in doc["msg"], doc
    (tmp_path / "latin1.yaml").write_bytes(good.replace("name: t1", "name: t\u00e91").encode("latin-1"))
    rc, out, err = run_cli(capsys, leader, "start-task", str(tmp_path / "latin1.yaml"))
    assert rc == 1 and "not valid UTF-8 at line" in err and "byte 0xe9" in err and "Traceback" not in err
    assert store.get_task("t1") is None and store.get_task("t" * 50) is None    # nothing was started


def test_dead_worker_source_moves_to_live_worker(leader, store, capsys, tmp_path):
    _sources(capsys, leader, tmp_path, "s1", "s2")
    l1 = store.register_worker(WorkerRegistration("w1"), ttl=30)
    l2 = None
    try:
        wait_for(lambda: {b.source: b.worker for b in store.list_bindings().items} == {"s1": "w1", "s2": "w1"},
                 what="both sources bound to the only worker")
        l2 = store.register_worker(WorkerRegistration("w2"), ttl=30)
        time.sleep(0.5)   # a new worker does not steal bound sources (moving one interrupts it)
        assert {b.worker for b in store.list_bindings().items} == {"w1"}
        l1.revoke()       # w1 dies: its sources move to the live worker
        wait_for(lambda: {b.source: b.worker for b in store.list_bindings().items} == {"s1": "w2", "s2": "w2"},
                 what="sources to move to w2")
        survivor = "w2"
        rc, doc, _ = run_cli(capsys, leader, "operate-source", "show")
        assert {s["source"]: s["worker"] for s in doc["sources"]} == {"s1": survivor, "s2": survivor}
        assert all(s["workerState"] == "online" for s in doc["sources"])
        rc, doc, _ = run_cli(capsys, leader, "list-member")
        workers = doc["members"][2]["workers"]["workers"]
        assert {w["name"]: w["sources"] for w in workers} == {survivor: ["s1", "s2"]}
        assert workers[0]["stage"] == "bound" and workers[0]["source"] == ""     # two sources: DM's field empty
        # dmctl's offline-member: a live member is refused, a gone one is reported offline
        rc, doc, _ = run_cli(capsys, leader, "offline-member", "--type", "worker", "--name", survivor)
        assert rc == 1 and "is online" in doc["msg"], doc
        rc, doc, _ = run_cli(capsys, leader, "offline-member", "--type", "worker", "--name", "w1")
        assert rc == 0 and "'w1' is offline" in doc["msg"], doc
    finally:
        for lease in (l1, l2):
            try:
                if lease is None:
                    continue
                lease.revoke()
            except Exception:
                pass


def test_operate_source_and_get_config(leader, store, capsys, tmp_path):
    _sources(capsys, leader, tmp_path, "s1")
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "create", write(tmp_path, "again.yaml", source_yaml("s1")))
    assert rc == 1 and "already exists" in doc["sources"][0]["msg"]
    bad = write(tmp_path, "bad.yaml", "source-id: s2\nfrom: {host: h, port: 99999}\n")
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "create", bad)
    assert rc == 1 and doc["msg"].startswith("`from.port` must be a TCP port") and f"file={bad}" in doc["msg"]
    # dmctl's `config master NAME`: what the master registered (it is configured by its flags)
    rc, doc, _ = run_cli(capsys, leader, "config", "master", leader.name)
    assert rc == 0 and f"name: {leader.name}" in doc["cfg"] and "command-line flags" in doc["cfg"], doc
    rc, doc, _ = run_cli(capsys, leader, "config", "worker", "nosuchworker")
    assert rc == 1 and "worker 'nosuchworker' not found" in doc["msg"], doc
    rc, doc, _ = run_cli(capsys, leader, "get-config", "source", "s1")
    assert rc == 0 and "source-id: s1" in doc["cfg"] and "shardmerge" not in doc["cfg"].split("password:")[1]
    # a source used by a task cannot be removed; after stop-task it can
    rc, doc, _ = run_cli(capsys, leader, "start-task", write(tmp_path, "t.yaml", task_yaml("t1", sources=("s1",))))
    assert rc == 0, doc
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "stop", "s1")
    assert rc == 1 and "used by task(s) t1" in doc["msg"]
    # operate-source update (dmctl's): refused while a task uses the source, checked like a new one
    newer = write(tmp_path, "s1-new.yaml", source_yaml("s1").replace("enable-gtid: true", "enable-gtid: true\nserver-id: 4242"))
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "update", newer)
    assert rc == 1 and "used by task(s) t1; stop-task them first" in doc["msg"], doc
    assert run_cli(capsys, leader, "stop-task", "t1")[0] == 0
    wrong = write(tmp_path, "s1-wrong.yaml", source_yaml("s1").replace("password: shardmerge", "password: nope"))
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "update", wrong)
    assert rc == 1 and "source 's1' not updated" in doc["msg"] and "Access denied" in doc["msg"], doc
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "update", newer)
    assert rc == 0, doc
    assert "server-id: 4242" in store.get_source("s1").yaml
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "update", write(tmp_path, "s5.yaml", source_yaml("s5")))
    assert rc == 1 and "source 's5' not found" in doc["msg"], doc
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "stop", "s1")
    assert rc == 0 and store.get_source("s1") is None


def test_unreachable_master_is_one_clear_line(capsys):
    from .conftest import free_port
    addr = f"127.0.0.1:{free_port()}"
    rc, out, err = run_cli(capsys, addr, "query-status")
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and f"cannot reach master at {addr}" in err


def test_shardctl_binary_against_running_master(leader):
    """The installed entry point, as an operator runs it."""
    import json
    import subprocess

    from .conftest import SHARDCTL
    r = subprocess.run([SHARDCTL, "--master-addr", leader.addr, "query-status"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"result": True, "msg": "no task is running", "tasks": []}
    r = subprocess.run([SHARDCTL, "--master-addr", leader.addr, "stop-task", "nope"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and json.loads(r.stdout)["msg"] == "task 'nope' not found"


def test_worker_offered_source_is_registered_and_bound_to_that_worker(etcd_client, etcd_prefix):
    """A worker started with --source registers that source through the master, and the
    binder prefers it for that source over a less loaded pool worker."""
    from coordinator.etcdproto import Store, WorkerRegistration
    from coordinator.master.cluster import Cluster
    store = Store(etcd_client, etcd_prefix)
    fence = store.campaign("m1", "127.0.0.1:1", ttl=10)
    src = "source-id: offered\nfrom: {host: 127.0.0.1, port: 3306, user: u, password-env: X}\n"
    store.register_worker(WorkerRegistration(worker="a-pool"), ttl=10)
    store.register_worker(WorkerRegistration(worker="z-dedicated", source="offered", source_yaml=src), ttl=10)
    store.register_worker(WorkerRegistration(worker="bad", source="broken", source_yaml="source-id: [x"), ttl=10)
    changes = Cluster(store).reconcile_bindings(fence)
    assert "registered source offered offered by its worker" in changes
    assert {s.source for s in store.list_sources().items} == {"offered"}   # the broken file is not registered
    assert store.get_binding("offered").worker == "z-dedicated"


def test_refused_dm_keys_through_start_task_and_check_task(leader, capsys, tmp_path):
    """Issue 30: a DM key that would change the data is refused by the running master at
    start-task and check-task, naming the file, the key and what to do instead."""
    _sources(capsys, leader, tmp_path, "s1")
    base = task_yaml("t30", sources=("s1",))
    cases = [
        (base.replace("shard-mode: optimistic\n", "is-sharding: true\n"), "is-sharding", "pessimistic"),
        (base + "column-mappings: {c: {schema-pattern: 'shop_*'}}\n", "column-mappings", "column mapping"),
        (base + "mydumpers: {g: {extra-args: '-B shop'}}\n", "mydumpers.g.extra-args", "block-allow-list"),
        (base + "filters: {f: {schema-pattern: 'shop_*', events: [erase], action: Ignore}}\n", "filters.f.events[0]",
         "binlog event types"),
    ]
    for i, (text, key, words) in enumerate(cases):
        f = write(tmp_path, f"dm{i}.yaml", text)
        for cmd in ("start-task", "check-task"):
            rc, doc, err = run_cli(capsys, leader, cmd, f)
            msg = (doc or {}).get("msg", "") if isinstance(doc, dict) else str(doc) + err
            assert rc == 1 and f"key={key}" in msg and f"file={f}" in msg and words in msg, (cmd, key, doc, err)


def test_operate_source_create_checks_the_source_and_refuses_a_bad_one(leader, store, capsys, tmp_path):
    """As DM: a source is registered only after the master connected to it with the config's own
    user and password and checked what the binlog reader needs; a wrong password or a host that
    is down is refused with the server's answer and what to do, and is not listed by `show`."""
    wrong = write(tmp_path, "wrong.yaml", source_yaml("s7").replace("password: shardmerge", "password: nope"))
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "create", wrong)
    assert rc == 1 and doc["result"] is False, doc
    msg = doc["sources"][0]["msg"]
    assert "source 's7' not registered" in msg and "Access denied" in msg and "check `from`" in msg, msg
    down = write(tmp_path, "down.yaml", source_yaml("s8", port=1))      # nothing listens on port 1
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "create", down)
    assert rc == 1 and "source 's8' not registered" in doc["sources"][0]["msg"], doc
    assert "127.0.0.1:1" in doc["sources"][0]["msg"]
    assert store.get_source("s7") is None and store.get_source("s8") is None
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "show")
    assert not {"s7", "s8"} & {s.get("source") for s in doc.get("sources", [])}, doc
    # a good one still registers
    _sources(capsys, leader, tmp_path, "s9")
    assert store.get_source("s9") is not None
    # a password encrypted as `dmctl encrypt` / `shardctl encrypt` does: the check connects with it
    from coordinator import dm_encrypt
    enc = write(tmp_path, "enc.yaml", source_yaml("s6").replace("password: shardmerge",
                                                                 f"password: {dm_encrypt.encrypt('shardmerge')}"))
    rc, doc, _ = run_cli(capsys, leader, "operate-source", "create", enc)
    assert rc == 0, doc
