"""Property-based fuzzing of the HTTP API over its served spec (schemathesis): valid and invalid
requests for every operation against a real master; none may get a 5xx or hang, and every 4xx
says what was wrong (``error_msg``).  Bounded: a few examples per operation and mode.

schemathesis' own pytest integration (``from_fixture``) does not run under pytest 9, so each
operation's strategy drives a plain hypothesis test here."""
from __future__ import annotations

import json
import uuid

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from coordinator.api.app import SPEC_PATH
from tests.api.conftest import http_of

EXAMPLES = 10
POSITIVE, NEGATIVE = schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE


def _cases() -> list:
    """(method, path, mode): valid input for every operation; invalid input for those that take
    a query parameter or a body (a bare path like /api/v1/cluster/masters has no invalid form)."""
    out = []
    for path, ops in json.loads(SPEC_PATH.read_text())["paths"].items():
        for verb, op in ops.items():
            out.append(pytest.param(verb.upper(), path, POSITIVE, id=f"{verb.upper()} {path} positive"))
            if "requestBody" in op or any(p["in"] == "query" for p in op.get("parameters", [])):
                out.append(pytest.param(verb.upper(), path, NEGATIVE, id=f"{verb.upper()} {path} negative"))
    return out


@pytest.fixture(scope="module")
def fuzz_master(services, etcd_client, tmp_path_factory):
    from tests.master.conftest import MasterProc
    prefix = f"/shardmerge-test/api-fuzz-{uuid.uuid4().hex[:8]}/"
    etcd_client.delete_prefix(prefix)
    m = MasterProc(services.etcd, prefix, ttl=3, name="api-fuzz", log_dir=tmp_path_factory.mktemp("fuzz"))
    m.start().wait_ready(30)
    yield m
    m.kill()
    etcd_client.delete_prefix(prefix)


@pytest.fixture(scope="module")
def served_schema(fuzz_master):
    return schemathesis.openapi.from_url(f"http://127.0.0.1:{fuzz_master.mport}/api/v1/openapi.json")


def _check(case, base: str) -> None:
    response = case.call(base_url=base, timeout=30)      # a hang fails here (read timeout)
    where = f"{case.method} {case.formatted_path} query={case.query} body={case.body!r:.300}"
    assert response.status_code < 500, f"{where} -> {response.status_code}: {response.text[:500]}"
    if response.status_code >= 400:
        doc = response.json()
        assert isinstance(doc.get("error_msg"), str) and doc["error_msg"].strip(), f"{where} -> {doc}"
        assert doc["error_code"] == response.status_code, f"{where} -> {doc}"


@pytest.mark.parametrize("method,path,mode", _cases())
def test_no_request_gets_a_server_error_or_hangs(served_schema, fuzz_master, method, path, mode):
    op = served_schema[path][method]
    base = f"http://127.0.0.1:{fuzz_master.mport}"

    @given(case=op.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def fuzz(case):
        _check(case, base)
    fuzz()


def test_the_fuzzed_master_still_answers(fuzz_master):
    """Whatever the fuzzer sent, the master is alive and its API answers (runs after the fuzzing)."""
    st, doc = http_of(fuzz_master).get("/api/v1/cluster/masters")
    assert st == 200 and doc["data"][0]["name"] == "api-fuzz", doc
    assert fuzz_master.proc.poll() is None
