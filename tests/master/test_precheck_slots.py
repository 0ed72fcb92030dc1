"""A downstream that accepts connections and never answers: check-task calls hang on it for the
connect timeout, at most two at a time; the others are answered at once ("running already"),
and query-status keeps answering meanwhile (before, ten such calls took all 8 gRPC threads and
query-status timed out)."""
from __future__ import annotations

import socket
import threading

import grpc

from protos import master_pb2 as pb

from .conftest import run_cli, source_yaml, task_yaml, write


def test_hanging_prechecks_do_not_starve_query_status(leader, capsys, tmp_path):
    rc, doc, err = run_cli(capsys, leader, "operate-source", "create", write(tmp_path, "s1.yaml", source_yaml("s1")))
    assert rc == 0, (doc, err)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)                      # accepts (the kernel does), never answers the handshake
    port = silent.getsockname()[1]
    text = task_yaml("t1", sources=("s1",)).replace("port: ", f"port: {port}  # ", 1)
    assert f"port: {port}" in text
    stub = leader.stub()
    answers: list[str] = []

    def check():
        r = stub.CheckTask(pb.CheckTaskRequest(task_yaml=text, file="t.yaml"), timeout=60)
        answers.append(r.msg)

    threads = [threading.Thread(target=check) for _ in range(10)]
    try:
        for t in threads:
            t.start()
        # while the checks hang on the silent downstream, status reads still get a thread
        for _ in range(3):
            try:
                r = stub.QueryStatus(pb.QueryStatusRequest(name=""), timeout=3)
            except grpc.RpcError as e:
                raise AssertionError(f"query-status did not answer while prechecks hang: {e.code()}") from None
            assert r.result is True
        for t in threads:
            t.join(60)
    finally:
        silent.close()
    busy = [a for a in answers if "prechecks are running already" in a]
    assert len(answers) == 10 and len(busy) >= 8, answers
