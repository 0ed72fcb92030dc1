"""The leader's flushes in flight (coordinator/master/write_batch.py ``InFlight``): the order
rules, on plain functions (the etcd side is tests/master/test_batched_writes.py)."""
from __future__ import annotations

import threading
import time

import pytest

from coordinator.master.write_batch import InFlight


def _blocked(log: list, name: str, gate: threading.Event):
    def run() -> None:
        log.append(f"{name} start")
        assert gate.wait(10)
        log.append(f"{name} end")
    return run


def _submit_in_thread(fl: InFlight, fn, keys, barrier=False) -> threading.Thread:
    t = threading.Thread(target=fl.submit, args=(fn, frozenset(keys)), kwargs={"barrier": barrier})
    t.start()
    return t


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_distinct_keys_are_written_together_the_same_key_waits():
    fl, log = InFlight(), []
    gate_a = threading.Event()
    fl.submit(_blocked(log, "a", gate_a), frozenset({"k1"}), barrier=False)
    fl.submit(lambda: log.append("b"), frozenset({"k2"}), barrier=False)     # does not wait for a
    _until(lambda: "b" in log, "b written while a is still being written")
    c = _submit_in_thread(fl, lambda: log.append("c"), {"k1", "k3"})        # shares k1 with a
    time.sleep(0.2)
    assert c.is_alive() and "c" not in log
    gate_a.set()
    c.join(10)
    fl.wait()
    assert log.index("a end") < log.index("c")


def test_a_barrier_waits_for_all_and_everything_waits_for_it():
    fl, log = InFlight(), []
    gate = threading.Event()
    fl.submit(_blocked(log, "a", gate), frozenset({"k1"}), barrier=False)
    bar = _submit_in_thread(fl, lambda: log.append("clear"), set(), barrier=True)
    time.sleep(0.2)
    assert bar.is_alive() and "clear" not in log
    gate.set()
    bar.join(10)
    gate2 = threading.Event()
    fl.submit(_blocked(log, "clear2", gate2), frozenset(), barrier=True)
    after = _submit_in_thread(fl, lambda: log.append("d"), {"k9"})          # unrelated keys, still ordered
    time.sleep(0.2)
    assert after.is_alive()
    gate2.set()
    after.join(10)
    fl.wait()
    assert log.index("a end") < log.index("clear") and log.index("clear2 end") < log.index("d")


def test_at_most_depth_in_flight():
    fl, log = InFlight(), []
    gate = threading.Event()
    for i in range(InFlight.DEPTH):
        fl.submit(_blocked(log, f"f{i}", gate), frozenset({i}), barrier=False)
    extra = _submit_in_thread(fl, lambda: log.append("extra"), {"x"})
    time.sleep(0.2)
    assert extra.is_alive()
    gate.set()
    extra.join(10)
    fl.wait()
    assert "extra" in log


def test_a_failed_flush_calls_on_failed_and_wait_raises_it():
    failed = threading.Event()
    fl = InFlight(on_failed=failed.set)

    def boom() -> None:
        raise RuntimeError("etcd down (test)")

    fl.submit(boom, frozenset({"k"}), barrier=False)
    assert failed.wait(10)
    fl.submit(lambda: None, frozenset({"other"}), barrier=False)   # unrelated: not blocked by the failure
    with pytest.raises(RuntimeError, match="etcd down"):
        fl.wait()
    fl.wait()          # reported once; nothing in flight any more
    fl.submit(boom, frozenset({"k"}), barrier=False)
    fl.abandon()       # a rebuild follows: the error is dropped
