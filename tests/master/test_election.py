"""Leader election and fencing with real master processes on the real etcd."""
from __future__ import annotations

import time

import pytest

from coordinator.etcdproto import Fenced, SourceRecord, Store
from coordinator.master.election import Election
from protos import master_pb2 as pb

from .conftest import run_cli, source_yaml, wait_for


def test_two_masters_one_leader_and_takeover_after_kill(masters, store):
    a = masters(ttl=2, name="ma")
    a.wait_ready()
    b = masters(ttl=2, name="mb")
    b.wait_ready()
    la, lb = a.leader_info(), b.leader_info()
    assert la.is_leader and not lb.is_leader
    assert la.leader == lb.leader == a.addr
    assert store.leader().member == "ma"
    # the follower answers /readyz too (leader known) and reports leadership 0 in metrics
    assert "follower, leader is " + a.addr in b.readyz()[1]
    assert "shardmerge_master_is_leader 0.0" in b.metrics()
    assert "shardmerge_master_is_leader 1.0" in a.metrics()

    a.kill()  # SIGKILL: no resign, the lease must expire
    t0 = time.monotonic()
    wait_for(lambda: b.leader_info().is_leader, timeout=2 * 2 + 5, what="mb to take over")
    assert time.monotonic() - t0 < 2 * 2 + 3   # within TTL (+ poll slack), not a timing oracle
    assert store.leader().member == "mb"
    b.wait_ready()


def test_follower_forwards_writes_to_leader(masters, store, capsys, tmp_path):
    a = masters(name="ma")
    a.wait_ready()
    b = masters(name="mb")
    b.wait_ready()
    f = tmp_path / "s1.yaml"
    f.write_text(source_yaml("s1"))
    rc, doc, err = run_cli(capsys, b, "operate-source", "create", str(f))   # sent to the follower
    assert rc == 0, (doc, err)
    assert doc["result"] is True and doc["sources"][0]["source"] == "s1"
    assert [s.source for s in store.list_sources().items] == ["s1"]
    # reads are served by the follower itself
    rc, doc, _ = run_cli(capsys, b, "operate-source", "show")
    assert rc == 0 and doc["sources"][0]["source"] == "s1"


def test_fenced_old_leader_write_is_rejected(etcd_client, etcd_prefix):
    """A leader whose lease expired (another master elected meanwhile) can write nothing."""
    store = Store(etcd_client, etcd_prefix)
    deposed = []
    old = Election(store, "old", "127.0.0.1:1", ttl=1, on_elected=lambda f: None,
                   on_deposed=lambda: deposed.append(1))
    old._follow()                      # campaign once, without the refresh loop
    fence = old.fence
    assert fence is not None
    store.put_source(fence, SourceRecord("s1", source_yaml("s1")))    # still the leader: accepted
    # the lease expires (the old leader is paused, e.g. a long GC) and another master wins
    wait_for(lambda: store.leader() is None, timeout=10, what="old leader lease to expire")
    new = store.campaign("new", "127.0.0.1:2", ttl=5)
    assert new is not None and new.revision != fence.revision
    with pytest.raises(Fenced) as exc:
        store.put_source(fence, SourceRecord("s1", source_yaml("s1", 1)))
    assert "no longer the leader" in str(exc.value)
    assert store.get_source("s1").yaml == source_yaml("s1")            # unchanged
    # the election loop notices and steps down
    old._keep()
    assert not old.is_leader and deposed == [1]
    store.resign(new)


def test_follower_never_forwards_a_forwarded_call(masters):
    """A call already forwarded once is answered "not leader, leader is X" (no forwarding loops)."""
    a = masters(name="ma")
    a.wait_ready()
    b = masters(name="mb")
    b.wait_ready()
    from coordinator.master import service
    resp = b.stub().StopTask(pb.StopTaskRequest(name="x"), timeout=10, metadata=((service.FORWARDED, "test"),))
    assert not resp.result and resp.msg == f"not leader, leader is {a.addr}" and resp.leader == a.addr
