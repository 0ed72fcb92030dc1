"""The background Spark start: peek never waits, get waits, a failed start is retried (the syncer
applies in the driver meanwhile) and reported to get() after GIVE_UP_AFTER failures."""
from __future__ import annotations

import pytest

import worker.spark_session as spark_session
from worker.spark_session import SparkStarter


class _Builder:
    """pyspark's builder API, failing the first ``fail`` starts (a JVM that exits at start)."""

    def __init__(self, fail: int, session=None):
        self.fail, self.session, self.calls = fail, session, 0

    def appName(self, name):          # noqa: N802 — pyspark's builder API
        self.calls += 1
        if self.calls <= self.fail:
            raise RuntimeError("[JAVA_GATEWAY_EXITED] no JVM here")
        return self

    def master(self, m):
        return self

    def config(self, k, v):
        return self

    def getOrCreate(self):            # noqa: N802
        return self.session


@pytest.fixture
def quick_backoff(monkeypatch):
    monkeypatch.setattr(spark_session, "_BACKOFF", (0.01,))


def test_a_start_that_keeps_failing_is_raised_by_get_but_never_by_peek(monkeypatch, quick_backoff):
    from pyspark.sql import SparkSession
    # a session of this test run may exist (getOrCreate would hand it back): make the start fail
    monkeypatch.setattr(SparkSession, "builder", _Builder(fail=10**9))
    s = SparkStarter("t")
    with pytest.raises(RuntimeError, match="JAVA_GATEWAY_EXITED"):
        s.get(timeout=120)
    assert s.failures >= spark_session.GIVE_UP_AFTER
    assert s.peek() is None and not s.started
    s.close()
    assert not s._thread.is_alive()


def test_a_failed_start_is_retried_and_the_session_comes_up(monkeypatch, quick_backoff, spark):
    from pyspark.sql import SparkSession
    b = _Builder(fail=1, session=spark)
    monkeypatch.setattr(SparkSession, "builder", b)
    s = SparkStarter("t").start()
    assert s.get(timeout=120) is spark
    assert s.failures == 1 and b.calls == 2 and s.peek() is spark
    s.close()


def test_the_session_comes_up_and_peek_then_returns_it(spark):
    # the shared session of the test run: getOrCreate hands it back, so this costs nothing
    s = SparkStarter("t", master=spark.sparkContext.master).start()
    got = s.get(timeout=120)
    assert got is spark and s.peek() is spark and s.started
