"""The chosen etcd client (python3-etcd3) against the real etcd server: every primitive the
master and workers rely on."""
import threading
import time

import etcd3


def test_put_get_and_prefix(etcd_client, etcd_prefix):
    etcd_client.put(etcd_prefix + "info/a", "1")
    etcd_client.put(etcd_prefix + "info/b", "2")
    etcd_client.put(etcd_prefix + "other", "3")
    value, meta = etcd_client.get(etcd_prefix + "info/a")
    assert value == b"1" and meta.mod_revision > 0
    got = sorted((m.key.decode(), v.decode()) for v, m in etcd_client.get_prefix(etcd_prefix + "info/"))
    assert got == [(etcd_prefix + "info/a", "1"), (etcd_prefix + "info/b", "2")]
    assert etcd_client.get(etcd_prefix + "missing") == (None, None)


def test_transaction_compares_mod_revision(etcd_client, etcd_prefix):
    key = etcd_prefix + "lock"
    etcd_client.put(key, "v1")
    _, meta = etcd_client.get(key)
    rev = meta.mod_revision
    ok, _ = etcd_client.transaction(
        compare=[etcd_client.transactions.mod(key) == rev],
        success=[etcd_client.transactions.put(key, "v2")], failure=[])
    assert ok
    # The same compare is now stale: the write must be refused and the value kept.
    ok, _ = etcd_client.transaction(
        compare=[etcd_client.transactions.mod(key) == rev],
        success=[etcd_client.transactions.put(key, "v3")], failure=[])
    assert not ok
    assert etcd_client.get(key)[0] == b"v2"
    # create-if-absent: version == 0
    ok, _ = etcd_client.transaction(
        compare=[etcd_client.transactions.version(etcd_prefix + "new") == 0],
        success=[etcd_client.transactions.put(etcd_prefix + "new", "x")], failure=[])
    assert ok


def test_watch_from_revision_replays_history(etcd_client, etcd_prefix):
    etcd_client.put(etcd_prefix + "w/1", "a")
    start_rev = etcd_client.get(etcd_prefix + "w/1")[1].mod_revision
    etcd_client.put(etcd_prefix + "w/2", "b")
    etcd_client.delete(etcd_prefix + "w/1")
    events, cancel = etcd_client.watch_prefix(etcd_prefix + "w/", start_revision=start_rev)
    seen = []
    for ev in events:
        seen.append((type(ev).__name__, ev.key.decode().rsplit("/", 1)[1]))
        if len(seen) == 3:
            break
    cancel()
    assert seen == [("PutEvent", "1"), ("PutEvent", "2"), ("DeleteEvent", "1")]


def test_watch_sees_live_writes(etcd_client, etcd_prefix):
    events, cancel = etcd_client.watch_prefix(etcd_prefix + "live/")
    t = threading.Timer(0.3, lambda: etcd_client.put(etcd_prefix + "live/x", "hello"))
    t.start()
    ev = next(iter(events))
    cancel()
    t.join()
    assert ev.key.decode().endswith("live/x") and ev.value == b"hello"


def test_lease_expires_and_removes_key(etcd_client, etcd_prefix):
    lease = etcd_client.lease(ttl=2)
    key = etcd_prefix + "worker/w1"
    etcd_client.put(key, "alive", lease=lease)
    assert etcd_client.get(key)[0] == b"alive"
    lease.refresh()
    assert lease.remaining_ttl > 0
    lease.revoke()
    assert etcd_client.get(key)[0] is None
    short = etcd_client.lease(ttl=1)
    etcd_client.put(key, "again", lease=short)
    deadline = time.monotonic() + 10
    while etcd_client.get(key)[0] is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert etcd_client.get(key)[0] is None, "key bound to a 1s lease outlived it"


def test_client_version_is_the_maintained_fork():
    # The PyPI `etcd3` 0.12 release cannot import with protobuf 4+; the fork can.
    from importlib.metadata import distribution
    assert distribution("python3-etcd3").version >= "0.13"
    assert hasattr(etcd3, "client")


def test_broken_watch_stream_notifies_watchers(services):
    """A watch whose stream dies must report an error to its callback (the master re-reads
    then); python3-etcd3 0.13 needs coordinator.etcd_client's fix for that."""
    from coordinator.etcd_client import connect
    client = connect(services.etcd)
    got = []
    done = threading.Event()

    def cb(resp):
        got.append(resp)
        if isinstance(resp, Exception):
            done.set()

    client.add_watch_prefix_callback("/shardmerge-test/never-written/", cb)
    client.close()  # kills the stream under the watch thread
    assert done.wait(10), f"watcher was never told its stream broke (got {got!r})"


def test_endpoint_parsing_errors_name_the_input():
    import pytest
    from coordinator.etcd_client import EtcdEndpointError, parse_endpoints
    assert parse_endpoints("http://127.0.0.1:2379,10.0.0.2:2379") == [("127.0.0.1", 2379), ("10.0.0.2", 2379)]
    with pytest.raises(EtcdEndpointError, match="'localhost' .* is not HOST:PORT"):
        parse_endpoints("localhost")
