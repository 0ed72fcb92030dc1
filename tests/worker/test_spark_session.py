"""The background Spark start: peek never waits, get waits, a failed start is reported to both."""
from __future__ import annotations

import pytest

from worker.spark_session import SparkStarter


def test_a_failed_start_is_raised_to_whoever_asks(monkeypatch):
    from pyspark.sql import SparkSession

    class Refusing:
        def appName(self, name):          # noqa: N802 — pyspark's builder API
            raise RuntimeError("no JVM here")
    # a session of this test run may exist (getOrCreate would hand it back): make the start fail
    monkeypatch.setattr(SparkSession, "builder", Refusing())
    s = SparkStarter("t")
    with pytest.raises(RuntimeError, match="no JVM here"):
        s.get(timeout=120)
    with pytest.raises(RuntimeError, match="no JVM here"):
        s.peek()
    assert not s.started


def test_the_session_comes_up_and_peek_then_returns_it(spark):
    # the shared session of the test run: getOrCreate hands it back, so this costs nothing
    s = SparkStarter("t", master=spark.sparkContext.master).start()
    got = s.get(timeout=120)
    assert got is spark and s.peek() is spark and s.started
