"""`binlog-schema` and `binlog inject` on the master side, real etcd and a real master process: the
SchemaOp record (round trip, guarded worker answer, validation), every refusal an operator can
meet (exit 1, the input named, nothing written), a request no worker answers being withdrawn,
and `binlog inject` armed, listed and reverted like a replace."""
from __future__ import annotations

import threading
import time

import pytest

from coordinator.etcdproto import GarbageRecord, SchemaOp, SourceBinding, SourceTables, SubtaskStatus, WorkerRegistration
from coordinator.master.cluster import Cluster
from coordinator.master.schema_ops import operate_schema

from .conftest import run_cli, source_yaml, task_yaml, write

CREATE = "CREATE TABLE orders_01 (id INT PRIMARY KEY, v INT, c INT)"


def test_record_round_trip_and_validation(store):
    fence = store.campaign("test-master")
    rec = SchemaOp("t1", "s1", "shop_01", "orders_01", "update", "r1", create_sql=CREATE, flush=True, sync=True)
    rev = store.put_schema_op(fence, rec)
    got = store.get_schema_op("t1", "s1", "shop_01", "orders_01")
    assert got == rec and got.revision == rev and got.state == "pending"
    assert [r.up_table for r in store.list_schema_ops("t1", "s1").items] == ["orders_01"]
    done = store.finish_schema_op(got, "done", result="ok", worker="w1")
    assert done is not None and store.get_schema_op("t1", "s1", "shop_01", "orders_01").state == "done"
    assert store.finish_schema_op(got, "failed", result="late") is None      # read before the answer: refused
    assert not store.delete_schema_op(fence, got)                            # changed since: kept
    SchemaOp("t1", "s1", "d", "t", "update", "r", from_target=True).validate()
    for bad in (dict(op="update"), dict(op="list", create_sql=CREATE), dict(op="rename"), dict(state="bogus"),
                dict(op="update", create_sql=CREATE, from_source=True), dict(op="delete", from_source=True)):
        with pytest.raises(ValueError):
            SchemaOp("t1", "s1", "d", "t", **{"op": "list", "request_id": "r", **bad}).validate()
    key = store.keys.key("schema-op", "t1", "s1", "d", "t")
    store.client.put(key, b'{"v":1,"task":"t1","source":"s1","up_schema":"d","up_table":"t","op":"update",'
                          b'"request_id":"r"}')                              # an update without its CREATE TABLE
    with pytest.raises(GarbageRecord):
        store.get_schema_op("t1", "s1", "d", "t")
    store.delete_schema_ops(fence, "t1")
    assert store.list_schema_ops("t1").items == [] and store.list_schema_ops("t1").bad == []


def test_cli_binlog_schema_refusals(leader, store, capsys, tmp_path, source1_db):
    files = [write(tmp_path, f"{s}.yaml", source_yaml(s, port=source1_db.params["port"])) for s in ("s1", "s2")]
    assert run_cli(capsys, leader, "operate-source", "create", *files)[0] == 0
    assert run_cli(capsys, leader, "start-task", write(tmp_path, "t1.yaml", task_yaml("t1")))[0] == 0
    st = SourceTables("t1", "s1")
    st.add("shop_01", "orders_01", "shop", "orders")
    store.put_source_tables(st)
    good = write(tmp_path, "good.sql", CREATE)
    alter = write(tmp_path, "alter.sql", "ALTER TABLE orders_01 ADD COLUMN c INT")
    broken = write(tmp_path, "broken.sql", "CREATE TABLE orders_01 (id INT PRIMARY KEY, v INT")

    def refused(*argv, where="msg"):
        rc, doc, err = run_cli(capsys, leader, "binlog-schema", *argv)
        assert rc == 1, (argv, doc, err)
        return doc["msg"] if where == "msg" else err

    assert "task 'nope' not found" in refused("list", "nope", "-s", "s1", "shop_01", "orders_01")
    assert "does not run on source(s) s9" in refused("list", "t1", "-s", "s9", "shop_01", "orders_01")
    assert "exactly one source" in refused("list", "t1", "shop_01", "orders_01", where="err")
    msg = refused("list", "t1", "-s", "s1", "other", "orders_01")
    assert "`other`.`orders_01` is not an upstream table of task 't1' on source 's1'" in msg
    msg = refused("list", "t1", "-s", "s1", "shop_01", "orders_09")
    assert "`shop_01`.`orders_09` is not an upstream table" in msg and "case-sensitive" in msg
    assert "cannot read schema file" in refused("update", "t1", "-s", "s1", "shop_01", "orders_01",
                                                str(tmp_path / "missing.sql"), where="err")
    for path in (alter, broken):
        err = refused("update", "t1", "-s", "s1", "shop_01", "orders_01", path, where="err")
        assert path in err and "is not a valid `CREATE TABLE` statement" in err and "nothing changed" in err
    err = refused("update", "t1", "-s", "s1", "shop_01", "orders_01", good, "--from-target", where="err")
    assert "exactly one of: a SCHEMA_FILE, --from-source" in err
    assert "not a boolean" in refused("update", "t1", "-s", "s1", "shop_01", "orders_01", good, "--flush=maybe",
                                      where="err")
    # the master checks too (other clients): the same request without the CLI's checks
    from protos import master_pb2 as pb
    resp = leader.stub().OperateSchema(pb.OperateSchemaRequest(task="t1", source="s1", op="update", database="shop_01",
                                                               table="orders_01", schema="SELECT 1"), timeout=10)
    assert not resp.result and "is not a valid `CREATE TABLE` statement" in resp.msg
    resp = leader.stub().OperateSchema(pb.OperateSchemaRequest(task="t1", source="s1", op="list", database="shop_01",
                                                               table="orders_01", flush=True), timeout=10)
    assert not resp.result and "takes no --flush" in resp.msg
    resp = leader.stub().OperateSchema(pb.OperateSchemaRequest(task="t1", source="s1", op="update", database="shop_01",
                                                               table="orders_01", from_source=True, from_target=True),
                                       timeout=10)
    assert not resp.result and "exactly one of" in resp.msg and "got 2" in resp.msg
    # a change needs the subtask Paused or in Error; a request needs a live worker
    store.put_status(SubtaskStatus("t1", "s1", "Running", worker="w1"))
    msg = refused("update", "t1", "-s", "s1", "shop_01", "orders_01", good)
    assert "is Running" in msg and "pause-task t1 -s s1" in msg
    msg = refused("delete", "t1", "-s", "s1", "shop_01", "orders_01")
    assert "is Running" in msg
    store.put_status(SubtaskStatus("t1", "s1", "Paused", worker="w1"))
    assert "not bound to a live worker" in refused("update", "t1", "-s", "s1", "shop_01", "orders_01", good)
    assert store.list_schema_ops("t1").items == []


def test_a_request_nobody_answers_is_withdrawn(store, etcd_client):
    fence = store.campaign("test-master")
    cluster = Cluster(store)
    from coordinator.etcdproto import TaskRecord
    store.put_task(fence, TaskRecord("t1", task_yaml("t1"), ["s1", "s2"]))
    st = SourceTables("t1", "s1")
    st.add("shop_01", "orders_01", "shop", "orders")
    store.put_source_tables(st)
    store.put_status(SubtaskStatus("t1", "s1", "Error", worker="w-gone"))
    lease = store.register_worker(WorkerRegistration(worker="w-gone"), ttl=30)
    try:
        store.put_binding(fence, SourceBinding("s1", "w-gone"))
        out = operate_schema(cluster, fence, "t1", "s1", "update", "shop_01", "orders_01", CREATE, timeout=1.0)
        assert not out.ok and "worker w-gone did not answer within 1s" in out.msg and "withdrawn, nothing changed" in out.msg
        assert store.list_schema_ops("t1").items == []

        # a worker that took the request up (and may be applying it) is not withdrawn behind its back
        def take_up():
            for _ in range(100):
                got = store.list_schema_ops("t1", "s1").items
                if got:
                    store.finish_schema_op(got[0], "pending", worker="w-gone")
                    return
                time.sleep(0.02)
        th = threading.Thread(target=take_up)
        th.start()
        out = operate_schema(cluster, fence, "t1", "s1", "delete", "shop_01", "orders_01", timeout=1.5)
        th.join()
        assert not out.ok and "took the request up meanwhile" in out.msg, out.msg
        (left,) = store.list_schema_ops("t1").items
        assert (left.state, left.worker) == ("pending", "w-gone")
    finally:
        lease.revoke()


def test_cli_binlog_inject_armed_listed_reverted(leader, store, capsys, tmp_path, source1_db):
    files = [write(tmp_path, f"{s}.yaml", source_yaml(s, port=source1_db.params["port"])) for s in ("s1", "s2")]
    assert run_cli(capsys, leader, "operate-source", "create", *files)[0] == 0
    assert run_cli(capsys, leader, "start-task", write(tmp_path, "t1.yaml", task_yaml("t1")))[0] == 0
    err = {"type": "ShardDDLError", "message": "key column `c` doesn't exist", "position": "mysql-bin.000003:1234",
           "statement_end": "mysql-bin.000003:1400", "statement": "ALTER TABLE orders_01 ADD INDEX i (c)"}
    store.put_status(SubtaskStatus("t1", "s1", "Error", worker="w1", detail={"error": err}))
    rc, doc, _ = run_cli(capsys, leader, "binlog", "inject", "t1", "-s", "s1", "select 1")
    assert rc == 1 and "binlog inject: injected statement 'select 1' is not a DDL on a table" in doc["msg"]
    rc, doc, cerr = run_cli(capsys, leader, "binlog", "inject", "t1", "-s", "s1", "-b", "f.1", "alter table t add c int")
    assert rc == 1 and "'f.1'" in cerr and "FILE:POS" in cerr
    assert store.list_binlog_skips("t1").items == []

    sql = "alter table orders_01 add column c int"
    rc, doc, _ = run_cli(capsys, leader, "binlog", "inject", "t1", "-s", "s1", sql)
    assert rc == 0 and "will run just before the statement at mysql-bin.000003:1234" in doc["msg"], doc
    (rec,) = store.list_binlog_skips("t1", "s1").items
    assert (rec.op, rec.state, rec.replace_with) == ("inject", "pending", [sql])
    rc, doc, _ = run_cli(capsys, leader, "binlog", "list", "t1")
    assert rc == 0 and f"s1 mysql-bin.000003:1234 inject pending with {sql}" in doc["msg"]
    rc, doc, _ = run_cli(capsys, leader, "handle-error", "t1", "inject", sql, "-s", "s1")     # legacy form
    assert rc == 0 and "already armed" in doc["msg"]
    rc, doc, _ = run_cli(capsys, leader, "binlog", "revert", "t1", "-s", "s1")
    assert rc == 0 and store.list_binlog_skips("t1").items == []
