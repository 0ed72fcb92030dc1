import pymysql
import pytest

from coordinator.errors import ConfigError
from coordinator.retry import RetryExhausted, WaitBoard, is_transient, retry


def test_retries_transient_until_success_and_reports_wait():
    board, calls, seen = WaitBoard(), [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionRefusedError(111, "Connection refused")
        return "ok"

    def sleep(d):
        seen.append(board.summary())

    assert retry(flaky, what="downstream 127.0.0.1:1", board=board, sleep=sleep) == "ok"
    assert len(calls) == 3
    assert "downstream 127.0.0.1:1: ConnectionRefusedError" in seen[0] and "attempt 1" in seen[0]
    assert board.summary() == ""


def test_non_transient_raises_at_once():
    calls = []

    def bad():
        calls.append(1)
        raise ConfigError("bad key", file="t.yaml", key="x")

    with pytest.raises(ConfigError):
        retry(bad, what="x", sleep=lambda d: None)
    assert calls == [1]


def test_deadline_bounds_retries():
    clock = [0.0]

    def sleep(d):
        clock[0] += d

    import coordinator.retry as r
    real = r.time.monotonic
    r.time.monotonic = lambda: clock[0]
    try:
        with pytest.raises(RetryExhausted, match="etcd still failing after") as e:
            retry(lambda: (_ for _ in ()).throw(TimeoutError("slow")), what="etcd", deadline=3, sleep=sleep, source="s1")
    finally:
        r.time.monotonic = real
    assert e.value.context["source"] == "s1"


def test_classification():
    assert is_transient(pymysql.err.OperationalError(2003, "Can't connect"))
    assert is_transient(pymysql.err.OperationalError(2013, "Lost connection"))
    assert not is_transient(pymysql.err.OperationalError(1045, "Access denied"))  # wrong password: fail fast
    assert not is_transient(pymysql.err.ProgrammingError(1064, "syntax"))
    assert not is_transient(ValueError("x"))


def test_real_unreachable_mysql_is_transient():
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(host="127.0.0.1", port=1, user="x", password="y", connect_timeout=2)
    assert is_transient(e.value)


def test_real_wrong_password_is_not_transient(services):
    p = dict(services.mysql["downstream"], password="definitely-wrong")
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(**p, connect_timeout=5)
    assert not is_transient(e.value)
