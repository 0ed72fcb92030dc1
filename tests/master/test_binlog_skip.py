"""`binlog skip` / `handle-error` on the master side: the BinlogSkip record in real etcd (round
trip, guarded worker marks, validation), and the CLI -> running master -> etcd path with the
errors an operator sees (unknown task/source, bad -b, nothing stopped and no -b)."""
from __future__ import annotations

import pytest

from coordinator.etcdproto import BinlogSkip, GarbageRecord, SubtaskStatus, parse_binlog_pos

from .conftest import run_cli, source_yaml, task_yaml, write


def test_record_round_trip_and_validation(store):
    fence = store.campaign("test-master")
    rec = BinlogSkip("t1", "s1", "mysql-bin.000003", 1234, statement="ALTER TABLE o DROP PARTITION p0",
                     requested_at="2026-01-01T00:00:00Z")
    rev = store.put_binlog_skip(fence, rec)
    got = store.get_binlog_skip("t1", "s1", "mysql-bin.000003", 1234)
    assert got == rec and got.revision == rev and got.position == "mysql-bin.000003:1234"
    assert [r.position for r in store.list_binlog_skips("t1", "s1").items] == ["mysql-bin.000003:1234"]
    assert store.list_binlog_skips("t2").items == []

    done = store.finish_binlog_skip(got, "done", statement="ALTER TABLE o DROP PARTITION p0", worker="w1")
    assert done.state == "done" and store.get_binlog_skip("t1", "s1", "mysql-bin.000003", 1234).state == "done"
    assert store.finish_binlog_skip(got, "passed") is None          # read before the done mark: refused
    with pytest.raises(ValueError, match="state"):
        store.finish_binlog_skip(done, "bogus")

    for text in ("", "mysql-bin.000003", "mysql-bin.000003:abc", ":12", "f:3"):
        with pytest.raises(ValueError, match="FILE:POS"):
            parse_binlog_pos(text)
    assert parse_binlog_pos("mysql-bin.000003:1234 gtid=101-101-9") == ("mysql-bin.000003", 1234)

    key = store.keys.binlog_skip("t1", "s1", "f.000001", 99)
    for raw in (b'{"v":1,"task":"t1","source":"s1","file":"f.000001","pos":2}',            # pos < 4
                b'{"v":1,"task":"t1","source":"s1","file":"f.000001","pos":99,"op":"replace"}',
                b'{"v":1,"task":"t1","source":"s2","file":"f.000001","pos":99}'):          # not its key
        store.client.put(key, raw)
        with pytest.raises(GarbageRecord):
            store.get_binlog_skip("t1", "s1", "f.000001", 99)
        assert len(store.list_binlog_skips("t1").bad) == 1


def _error_status(store, position="mysql-bin.000003:1234 gtid=101-101-9", end="mysql-bin.000003:1400"):
    err = {"type": "UnsupportedShardDDL", "message": "cannot split DDL", "position": position,
           "statement_end": end, "statement": "ALTER TABLE orders_01 DROP PARTITION p0"}
    store.put_status(SubtaskStatus("t1", "s1", "Error", worker="w1", detail={"error": err}))


def test_cli_binlog_skip_and_its_errors(leader, store, capsys, tmp_path, source1_db):
    # both sources are the test's source1 server: -b positions are checked on its binlog
    files = [write(tmp_path, f"{s}.yaml", source_yaml(s, port=source1_db.params["port"])) for s in ("s1", "s2")]
    assert run_cli(capsys, leader, "operate-source", "create", *files)[0] == 0
    assert run_cli(capsys, leader, "start-task", write(tmp_path, "t1.yaml", task_yaml("t1")))[0] == 0

    rc, doc, _ = run_cli(capsys, leader, "binlog", "skip", "t1")          # DM's form: every stopped source
    assert rc == 1 and "no source of task 't1' is stopped at a statement" in doc["msg"], doc
    rc, _, err = run_cli(capsys, leader, "binlog", "revert", "t1")
    assert rc == 1 and "exactly one source" in err
    rc, _, err = run_cli(capsys, leader, "binlog", "skip", "t1", "-s", "s1", "-s", "s2")
    assert rc == 1 and "exactly one source" in err
    rc, doc, _ = run_cli(capsys, leader, "binlog", "skip", "nope", "-s", "s1")
    assert rc == 1 and doc["result"] is False and "task 'nope' not found" in doc["msg"]
    rc, doc, _ = run_cli(capsys, leader, "binlog", "skip", "t1", "-s", "s9")
    assert rc == 1 and "does not run on source(s) s9" in doc["msg"]
    rc, _, err = run_cli(capsys, leader, "binlog", "skip", "t1", "-s", "s1", "-b", "mysql-bin.3")
    assert rc == 1 and "'mysql-bin.3'" in err and "FILE:POS" in err
    from protos import master_pb2 as pb                      # the master validates too (other clients)
    resp = leader.stub().HandleError(pb.HandleErrorRequest(task="t1", source="s1", op="skip", binlog_pos="x:y"),
                                     timeout=10)
    assert not resp.result and "'x:y'" in resp.msg and "FILE:POS" in resp.msg

    # nothing stopped: without -b there is nothing to skip
    rc, doc, _ = run_cli(capsys, leader, "binlog", "skip", "t1", "-s", "s1")
    assert rc == 1 and "not stopped in Error at a DDL" in doc["msg"] and "-b FILE:POS" in doc["msg"]
    store.put_status(SubtaskStatus("t1", "s1", "Error", detail={"error": {"type": "SyncError", "message": "boom",
                                                                          "position": "mysql-bin.000003:99"}}))
    rc, doc, _ = run_cli(capsys, leader, "binlog", "skip", "t1", "-s", "s1")
    assert rc == 1 and "not at a statement event (error: boom)" in doc["msg"]
    assert store.list_binlog_skips("t1").items == []

    # stopped at a DDL: skip it; the task record gets a new revision (the failed subtask restarts)
    _error_status(store)
    rev0 = store.get_task("t1").revision
    rc, doc, _ = run_cli(capsys, leader, "binlog", "skip", "t1", "-s", "s1")
    assert rc == 0, doc
    assert doc["sources"] == [{"result": True, "msg": "skip armed at mysql-bin.000003:1234", "source": "s1"}]
    assert "DROP PARTITION p0" in doc["msg"] and "restarts" in doc["msg"]
    (rec,) = store.list_binlog_skips("t1", "s1").items
    assert (rec.file, rec.pos, rec.state, rec.statement, rec.gtid) == (
        "mysql-bin.000003", 1234, "pending", "ALTER TABLE orders_01 DROP PARTITION p0", "101-101-9")
    task = store.get_task("t1")
    assert task.revision > rev0 and task.stage_of("s1") == "running"

    # DM's runbook form without -s: the stopped source is skipped, the other has no error
    rc, doc, _ = run_cli(capsys, leader, "binlog", "skip", "t1")
    assert rc == 0, doc
    assert {"result": False, "msg": "source 's2' has no error", "source": "s2"} in doc["sources"], doc
    assert "already armed" in doc["msg"]

    # the legacy form, naming the statement by its end position: the same skip
    rc, doc, _ = run_cli(capsys, leader, "handle-error", "t1", "skip", "-s", "s1", "-b", "mysql-bin.000003:1400")
    assert rc == 0 and "already armed" in doc["msg"]
    assert [r.position for r in store.list_binlog_skips("t1", "s1").items] == ["mysql-bin.000003:1234"]

    # -b must name where a DDL starts in the source's real binlog (s2's config points at source1)
    from worker.upstream import master_status
    source1_db.execute("CREATE TABLE pre (id INT PRIMARY KEY)")
    source1_db.execute("INSERT INTO pre VALUES (1)")
    at_ddl = master_status(source1_db.params)
    source1_db.execute("ALTER TABLE pre ADD COLUMN c INT")
    at_dml = master_status(source1_db.params)
    source1_db.execute("INSERT INTO pre VALUES (2, 2)")
    for bad, why in ((f"{at_dml.file}:{at_dml.pos}", "not the start of a DDL statement"),
                     (f"{at_ddl.file}:{at_ddl.pos + 3}", "not an event position"),
                     ("mysql-bin.999999:4", "not an event position")):
        rc, doc, _ = run_cli(capsys, leader, "binlog", "skip", "t1", "-s", "s2", "-b", bad)
        assert rc == 1 and why in doc["msg"] and bad in doc["msg"] and "nothing armed" in doc["msg"], (bad, doc)
    assert store.list_binlog_skips("t1", "s2").items == []

    # pre-armed for a statement not reached yet; table output; revert
    where = f"{at_ddl.file}:{at_ddl.pos}"
    rc, out, _ = run_cli(capsys, leader, "binlog", "skip", "t1", "-s", "s2", "-b", where, fmt="table")
    assert rc == 0 and out.startswith(f"OK: the statement at {where} will be skipped when source s2"), out
    assert f"s2: ok - skip armed at {where}" in out
    rc, doc, _ = run_cli(capsys, leader, "binlog", "revert", "t1", "-s", "s2")
    assert rc == 0 and where in doc["msg"] and store.list_binlog_skips("t1", "s2").items == []
    rc, doc, _ = run_cli(capsys, leader, "binlog", "revert", "t1", "-s", "s2")
    assert rc == 1 and "nothing to revert" in doc["msg"]

    # stop-task takes the task's skip records with it
    assert run_cli(capsys, leader, "stop-task", "t1")[0] == 0
    assert store.list_binlog_skips("t1").items == []


def test_cli_binlog_replace_and_list(leader, store, capsys, tmp_path, source1_db):
    files = [write(tmp_path, f"{s}.yaml", source_yaml(s, port=source1_db.params["port"])) for s in ("s1", "s2")]
    assert run_cli(capsys, leader, "operate-source", "create", *files)[0] == 0
    assert run_cli(capsys, leader, "start-task", write(tmp_path, "t1.yaml", task_yaml("t1")))[0] == 0
    rc, doc, _ = run_cli(capsys, leader, "binlog", "list", "t1")
    assert rc == 0 and "no binlog skip, replace or inject armed for task 't1'" in doc["msg"]

    with pytest.raises(SystemExit):                                   # argparse: the statements are required
        run_cli(capsys, leader, "binlog", "replace", "t1", "-s", "s1")
    assert "required: SQL" in capsys.readouterr().err
    _error_status(store)
    for sql, why in (("select 1", "is not a DDL on a table"),
                     ("create index i on orders_01 (a); alter table orders_01 add c int", "one ALTER TABLE")):
        rc, doc, _ = run_cli(capsys, leader, "binlog", "replace", "t1", "-s", "s1", sql)
        assert rc == 1 and why in doc["msg"] and sql.split(";")[0] in doc["msg"], (sql, doc)
    assert store.list_binlog_skips("t1").items == []
    with pytest.raises(SystemExit):                                   # skip takes no SQL
        run_cli(capsys, leader, "binlog", "skip", "t1", "-s", "s1", "alter table x add c int")

    # DM's form: several statements on one table; without -s: every stopped source (s1 here)
    sql = "alter table orders_01 add column c int; alter table orders_01 add unique (c);"
    rc, doc, _ = run_cli(capsys, leader, "binlog", "replace", "t1", sql)
    assert rc == 0, doc
    assert "replaced by" in doc["msg"] and "restarts and runs it in its place" in doc["msg"], doc
    (rec,) = store.list_binlog_skips("t1", "s1").items
    assert (rec.op, rec.state, rec.replace_with, rec.position) == ("replace", "pending", [sql],
                                                                     "mysql-bin.000003:1234")
    rc, doc, _ = run_cli(capsys, leader, "binlog", "list", "t1")
    assert rc == 0 and f"s1 mysql-bin.000003:1234 replace pending with {sql}" in doc["msg"], doc
    # a skip at the same place overwrites the replace, and says so
    rc, doc, _ = run_cli(capsys, leader, "handle-error", "t1", "skip", "-s", "s1")
    assert rc == 0 and "the replace armed there before is overwritten" in doc["msg"], doc
    assert store.list_binlog_skips("t1", "s1").items[0].op == "skip"
