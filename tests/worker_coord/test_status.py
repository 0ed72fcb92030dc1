"""StatusReporter: what query-status reads, written to the real etcd; a failed write never
stops replication and is retried with the next update."""
from coordinator.errors import ConfigError
from coordinator.etcdproto import EtcdUnavailable
from worker.shardddl import ShardDDLError, StrictConflict
from worker.subtask import _retryable
from worker.status import ERROR, NEW, PAUSED, RUNNING, STOPPED, StatusReporter


def _read(store, task="t", source="s"):
    return store._get("status", store.keys.key("status", task, source))[0]


def test_stage_changes_and_progress_in_etcd(store):
    r = StatusReporter(store, "t", "s", "w1", min_interval=3600)
    r.running()
    assert _read(store).stage == RUNNING and _read(store).worker == "w1"
    r.progress(synced_position="bin.000001:100", checkpoint="bin.000001:90", lag_seconds=0)
    assert "synced_position" not in _read(store).detail        # throttled (min_interval)
    r.paused(ShardDDLError("blocked", lock_id="t-`d`.`o`", position="bin.000001:120"),
             lock_id="t-`d`.`o`", position="bin.000001:120", owner="s-`u`.`o_1`", waiting_for="unlock")
    st = _read(store)
    assert st.stage == PAUSED and st.block_ddl_owner == "s-`u`.`o_1`" and st.conflict_msg == "blocked"
    assert st.detail["error"] == {"type": "ShardDDLError", "message": "blocked", "lock_id": "t-`d`.`o`",
                                  "position": "bin.000001:120"}
    assert st.detail["synced_position"] == "bin.000001:100"    # progress rides along
    r.running()
    st = _read(store)
    assert st.stage == RUNNING and "error" not in st.detail and st.conflict_msg == "" and st.block_ddl_owner == ""
    r.error(StrictConflict("strict", tables=["a", "b"], lock_id="L"))
    assert _read(store).stage == ERROR and _read(store).detail["error"]["tables"] == "a, b"
    r.stopped()
    assert _read(store).stage == STOPPED


def test_starting_is_visible_until_running_and_never_hides_an_error(store):
    r = StatusReporter(store, "t", "s", "w1", min_interval=3600)
    r.starting("starting the Spark session")
    st = _read(store)      # written at once, not throttled; New (no position yet), saying what it does
    assert st.stage == NEW and st.detail["waiting_for"] == "starting: starting the Spark session"
    r.running()
    assert "waiting_for" not in _read(store).detail
    r.retrying(ConnectionError("refused"), "waiting for downstream 127.0.0.1:1: refused")
    r.starting("reading checkpoints")       # the retry starts over: the problem stays visible
    st = _read(store)
    assert st.detail["waiting_for"].startswith("waiting for downstream") and st.detail["error"]["message"] == "refused"


class _FlakyStore:
    def __init__(self):
        self.fail, self.written = True, []

    def put_status(self, st, lease=None):
        if self.fail:
            raise EtcdUnavailable("etcd down")
        self.written.append(st)
        return 1


def test_failed_write_is_kept_and_retried():
    fs = _FlakyStore()
    r = StatusReporter(fs, "t", "s", min_interval=0)
    r.running()                       # does not raise
    assert r.write_errors == 1 and fs.written == []
    fs.fail = False
    r.progress(checkpoint="x")
    assert fs.written[-1].detail["checkpoint"] == "x" and fs.written[-1].stage == RUNNING


def test_retry_policy():
    assert _retryable(EtcdUnavailable("x"))
    assert _retryable(RuntimeError("spark hiccup"))
    assert not _retryable(ConfigError("bad", file="f"))
    assert not _retryable(StrictConflict("c", tables=["a"]))
    from worker.load import KeyCollision, SchemaChangedDuringLoad
    from worker.sync.errors import DownstreamDDLRejected, ReplicationKeyCollision, SyncError, UpstreamChanged
    for final in (KeyCollision("k"), SchemaChangedDuringLoad("altered"), ReplicationKeyCollision("dup"),
                  UpstreamChanged("failover"), DownstreamDDLRejected("1064")):
        assert not _retryable(final), final
    assert _retryable(SyncError("applying changes failed: lost connection"))


def test_gtid_behind_counts_transactions_per_domain():
    from worker.subtask import gtid_behind
    assert gtid_behind("101-101-50", "101-101-42") == 8
    assert gtid_behind("101-101-50,7-7-3", "101-101-50") == 3
    assert gtid_behind("101-101-50", "101-101-60") == 0
    assert gtid_behind("", "") == 0


def test_unit_follows_dm_and_changes_with_the_stage_in_one_write(store):
    """Dump -> Load -> Sync like DM; Running+Sync only in the write that starts the syncer."""
    from worker.status import DUMP, LOAD, SYNC
    seen = []

    class _Recording:
        def put_status(self, st, lease=None):
            seen.append((st.stage, st.detail.get("unit")))
            return store.put_status(st)

    r = StatusReporter(_Recording(), "t", "s", "w1", min_interval=3600)
    r.starting("reading checkpoints")
    r.running(unit=DUMP)
    assert _read(store).stage == RUNNING and _read(store).detail["unit"] == DUMP
    r.unit(LOAD)                                   # not throttled
    assert _read(store).detail["unit"] == LOAD
    r.progress(load={"phase": "finished"})
    r.running(unit=SYNC)
    assert _read(store).detail["unit"] == SYNC and _read(store).detail["load"] == {"phase": "finished"}
    assert seen == [(NEW, None), (RUNNING, DUMP), (RUNNING, LOAD), (RUNNING, SYNC)]
    r.running()                                    # a lock answered: the unit stays
    assert _read(store).detail["unit"] == SYNC


def test_unknown_unit_is_refused_by_name(store):
    import pytest
    r = StatusReporter(store, "t", "s", min_interval=3600)
    with pytest.raises(ValueError, match="'Copy'.*Dump, Load, Sync"):
        r.unit("Copy")


def test_settle_writes_a_throttled_update_before_going_idle(store):
    r = StatusReporter(store, "t", "s", "w1", min_interval=3600)
    r.running()
    r.progress(online_ddl=[{"table": "d.t", "shadow": "_t_new"}])
    assert "online_ddl" not in _read(store).detail              # throttled
    r.settle()
    assert _read(store).detail["online_ddl"] == [{"table": "d.t", "shadow": "_t_new"}]
    rev = store._get("status", store.keys.key("status", "t", "s"))[1]
    assert r.settle() and store._get("status", store.keys.key("status", "t", "s"))[1] == rev   # nothing pending


def test_a_short_wait_for_an_operation_is_not_written_a_long_one_is(store):
    """``waiting(after=)``: a shard DDL's Operation usually arrives in a few ms; the wait and
    the ``running()`` after it then write nothing (issue 33).  A wait still on after ``after``
    is written by itself, and ``running()`` then clears it."""
    import threading
    r = StatusReporter(store, "t", "s", "w1", min_interval=3600)
    r.running()
    before = _read(store)
    r.waiting("Operation for lock L (info revision 7)", lock_id="L", after=30)
    r.running()
    assert _read(store) == before                          # not written: nobody saw the wait
    r.waiting("Operation for lock L (info revision 8)", lock_id="L", after=0.2)
    seen = threading.Event()
    for _ in range(100):                                   # the timer writes it (no fixed sleep)
        if "waiting_for" in _read(store).detail:
            seen.set()
            break
        threading.Event().wait(0.05)
    assert seen.is_set()
    st = _read(store)
    assert st.detail["waiting_for"] == "Operation for lock L (info revision 8)" and st.detail["lock_id"] == "L"
    r.running()
    assert "waiting_for" not in _read(store).detail and "lock_id" not in _read(store).detail
    # a deferred wait is not deferred when the subtask is not cleanly running: written at once
    r.retrying(ConnectionError("refused"), "waiting for downstream")
    r.waiting("Operation for lock L (info revision 9)", lock_id="L", after=30)
    assert _read(store).detail["waiting_for"] == "Operation for lock L (info revision 9)"
