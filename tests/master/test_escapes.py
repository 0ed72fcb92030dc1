"""What shardctl prints is what the terminal shows: a shard table whose name carries an escape
sequence (MariaDB allows any character but NUL in a quoted name) reaches the operator as
``\\x1b[2J``, not as a cleared screen; in JSON too (C1 controls as ``\\u009b``)."""
from __future__ import annotations

import json

from coordinator.etcdproto import SubtaskStatus, WorkerRegistration

from tests.support.probes import shardctl

from .conftest import run_cli, source_yaml, task_yaml, wait_for, write


def test_control_characters_from_names_are_escaped_in_table_and_json(leader, store, capsys, tmp_path):
    rc, doc, err = run_cli(capsys, leader, "operate-source", "create", write(tmp_path, "s1.yaml", source_yaml("s1")))
    assert rc == 0, (doc, err)
    rc, doc, err = run_cli(capsys, leader, "start-task", "--skip-precheck",
                           write(tmp_path, "t.yaml", task_yaml("t1", sources=("s1",))))
    assert rc == 0, (doc, err)
    lease = store.register_worker(WorkerRegistration("w1", "127.0.0.1:9"), ttl=5)
    try:
        wait_for(lambda: any(b.worker == "w1" for b in store.list_bindings().items), what="s1 bound to w1")
        evil = "orders_\x1b[2J\x1b[31mok\u009b"
        store.put_status(SubtaskStatus("t1", "s1", "Paused", worker="w1", detail={
            "error": {"type": "ApplyError", "message": f"cannot apply rows of shop_01.{evil}"}}))
        rc, out, _ = run_cli(capsys, leader, "query-status", "t1", fmt="table")
        assert "\x1b" not in out and "\u009b" not in out, repr(out)
        assert "orders_\\x1b[2J\\x1b[31mok\\x9b" in out, out
        rc, raw, _ = shardctl(leader.addr, "query-status", "t1")      # the bytes printed, not parsed
        assert "\x1b" not in raw and "\u009b" not in raw, repr(raw)
        assert "\\u001b[2J" in raw and "\\u009b" in raw, raw
        assert any(evil in v for v in _strings(json.loads(raw)))             # the name itself is kept, escaped
    finally:
        lease.revoke()


def _strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)
