"""`shardctl transfer-source` through a running master (the test registers the workers in etcd
and writes their status, acting as them): every refusal exits 1 naming the input and leaves the
bindings as they were; a transfer to a free worker moves the binding.  The transfer of a source
replicating under writes, with real workers, is in tests/e2e/test_ops_tools.py."""
from __future__ import annotations

from coordinator.etcdproto import SubtaskStatus, WorkerRegistration

from .conftest import run_cli, source_yaml, task_yaml, wait_for, write


def bindings(store) -> dict:
    return {b.source: b.worker for b in store.list_bindings().items}


def test_transfer_source_refusals_change_nothing_and_a_transfer_moves_the_binding(leader, store, capsys, tmp_path):
    files = [write(tmp_path, f"{s}.yaml", source_yaml(s)) for s in ("s1", "s2")]
    assert run_cli(capsys, leader, "operate-source", "create", *files)[0] == 0
    leases = [store.register_worker(WorkerRegistration("w1"), ttl=30)]
    try:
        wait_for(lambda: bindings(store) == {"s1": "w1", "s2": "w1"}, what="both sources on w1")
        leases.append(store.register_worker(WorkerRegistration("w2"), ttl=30))
        before = bindings(store)

        def refused(*argv) -> str:
            rc, doc, err = run_cli(capsys, leader, "transfer-source", *argv)
            assert rc == 1, (argv, doc, err)
            assert bindings(store) == before
            return doc["msg"] if isinstance(doc, dict) else err

        assert "source 's9' not found" in refused("s9", "w2") and "s1, s2" in refused("s9", "w2")
        msg = refused("s1", "w9")
        assert "worker 'w9' is not online" in msg and "w1, w2" in msg
        assert "already bound to worker 'w1'; nothing to transfer" in refused("s1", "w1")
        assert "SOURCE is empty" in refused("", "w2")
        # a running subtask of s1 still in the full load
        assert run_cli(capsys, leader, "start-task", write(tmp_path, "t.yaml", task_yaml("tt", ("s1",))))[0] == 0
        store.put_status(SubtaskStatus("tt", "s1", "Running", "w1", detail={"unit": "Load"}))
        msg = refused("s1", "w2")
        assert "still in the full load (tt (Load))" in msg
        store.put_status(SubtaskStatus("tt", "s1", "Running", "w1", detail={"unit": "Sync"}))

        rc, doc, _ = run_cli(capsys, leader, "transfer-source", "s1", "w2")
        assert rc == 0 and doc["result"] is True and "from w1 to w2" in doc["msg"], doc
        assert doc["sources"] == [{"result": True, "msg": "", "source": "s1"}]
        assert bindings(store) == {"s1": "w2", "s2": "w1"}
        # w2 is no longer free; the binder keeps the transferred binding (w2 is live)
        rc, doc, _ = run_cli(capsys, leader, "transfer-source", "s2", "w2")
        assert rc == 1 and "worker 'w2' is not free: it is bound to source(s) s1" in doc["msg"]
        rc, doc, _ = run_cli(capsys, leader, "operate-source", "show")
        assert {s["source"]: s["worker"] for s in doc["sources"]} == {"s1": "w2", "s2": "w1"}
        assert "shardmerge_master_source_transfers_total 1.0" in leader.metrics()
        # table output
        rc, out, _ = run_cli(capsys, leader, "transfer-source", "s1", "w1", fmt="table")
        assert rc == 1 and out.startswith("FAILED: worker 'w1' is not free")
    finally:
        for lease in leases:
            lease.revoke()
