"""``shardctl`` waits out an election: a master answering "no leader yet" / "still rebuilding"
refused the command before running it, so the CLI sends it again for up to ``--leader-wait``.

The master here is a real gRPC server whose answers are scripted (the client's retry rule is
what is tested; the real masters' election is covered by ``tests/master/test_election.py`` and
every e2e test, which now rides through a lease lost on a loaded machine)."""
from __future__ import annotations

from concurrent import futures

import grpc
import pytest

from coordinator.cli import main
from coordinator import answers
from protos import master_pb2 as pb, master_pb2_grpc as pbg


class Scripted(pbg.MasterServicer):
    def __init__(self, refusals: list[str]):
        self.refusals = list(refusals)
        self.calls = 0

    def StopTask(self, request, context):
        self.calls += 1
        if self.refusals:
            return pb.CommonResponse(result=False, msg=self.refusals.pop(0))
        return pb.CommonResponse(result=True, msg=f"stopped {request.name}")


@pytest.fixture
def master():
    servers = []

    def start(refusals: list[str]) -> tuple[str, Scripted]:
        svc = Scripted(refusals)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pbg.add_MasterServicer_to_server(svc, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}", svc
    yield start
    for s in servers:
        s.stop(None)


def test_an_election_is_waited_out_and_said_once(master, capsys):
    addr, svc = master([answers.NO_LEADER, answers.NO_LEADER, answers.REBUILDING])
    rc = main(["--master-addr", addr, "stop-task", "t1"])
    out, err = capsys.readouterr()
    assert rc == 0 and "stopped t1" in out, (out, err)
    assert svc.calls == 4
    assert err.count("no master is leader yet") == 1 and "--leader-wait" in err, err


def test_leader_wait_zero_gives_the_refusal_at_once(master, capsys):
    addr, svc = master([answers.NO_LEADER] * 3)
    rc = main(["--master-addr", addr, "--leader-wait", "0", "stop-task", "t1"])
    out, _ = capsys.readouterr()
    assert rc == 1 and "no leader is elected yet" in out and svc.calls == 1


def test_waiting_ends_at_the_limit_with_the_last_refusal(master, capsys):
    addr, svc = master([answers.NO_LEADER] * 100)
    rc = main(["--master-addr", addr, "--leader-wait", "1.2", "stop-task", "t1"])
    out, _ = capsys.readouterr()
    assert rc == 1 and "no leader is elected yet" in out
    assert 2 <= svc.calls < 100


@pytest.mark.parametrize("msg", [f"{answers.LOST_LEADERSHIP}: fenced", "task t1 not found",
                                 "not leader, leader is 127.0.0.1:1 (forwarding failed: UNAVAILABLE: x)"])
def test_other_refusals_are_not_sent_again(master, capsys, msg):
    """A handler that ran (its fenced write refused) or a real refusal is reported as it is."""
    addr, svc = master([msg, msg])
    rc = main(["--master-addr", addr, "stop-task", "t1"])
    out, _ = capsys.readouterr()
    assert rc == 1 and svc.calls == 1, out


def test_leader_wait_is_a_duration():
    from coordinator.cli import build_parser
    p = build_parser()
    assert p.parse_args(["--leader-wait", "2m", "list-member"]).leader_wait == 120
    assert p.parse_args(["list-member", "--leader-wait", "0"]).leader_wait == 0
    with pytest.raises(SystemExit):
        p.parse_args(["--leader-wait", "-1", "list-member"])
