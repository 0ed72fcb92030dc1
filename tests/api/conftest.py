"""HTTP API test helpers: an HTTP client for a master's HTTP port (``--metrics-addr``), lone
masters on a private etcd prefix (real ``shardctl master`` subprocesses), and the e2e cluster
(master + 2 workers) for the tests that need tasks running."""
from __future__ import annotations

import json
import signal
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from tests.e2e.conftest import cluster, scenario  # noqa: F401 — fixtures used by the cluster tests
from tests.master.conftest import MasterProc


class Http:
    """JSON over HTTP to one master; every call returns (status, parsed body or text)."""

    def __init__(self, base: str, context=None):
        self.base = base.rstrip("/")
        self.context = context

    def request(self, method: str, path: str, body=None, *, raw: bytes | None = None,
                content_type: str = "application/json", timeout: float = 60) -> tuple[int, dict | str]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None or method == "POST":
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.context) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw)

    def post(self, path: str, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path: str, body=None, **kw):
        return self.request("PUT", path, body, **kw)

    def delete(self, path: str, **kw):
        return self.request("DELETE", path, **kw)


def q(name: str) -> str:
    """A path parameter, percent-encoded (lock IDs carry backticks)."""
    return urllib.parse.quote(name, safe="")


@pytest.fixture
def lone_masters(services, etcd_client):
    """Factory: ``lone_masters(n)`` starts n masters on a fresh private prefix; yields them with
    the first one elected (the others followers)."""
    started: list[MasterProc] = []
    prefixes: list[str] = []

    def start(n: int = 1, tmp=None, extra: list[str] | None = None) -> list[MasterProc]:
        prefix = f"/shardmerge-test/api-{uuid.uuid4().hex[:10]}/"
        prefixes.append(prefix)
        ms = []
        for i in range(n):
            m = MasterProc(services.etcd, prefix, ttl=3, name=f"api-m{i + 1}", log_dir=tmp)
            m.args += extra or []
            m.start()
            started.append(m)
            if i == 0:
                m.wait_ready(30)       # the first one leads
            ms.append(m)
        for m in ms[1:]:
            m.wait_ready(30)
        return ms
    yield start
    for m in started:
        m.kill(signal.SIGTERM)
    for p in prefixes:
        etcd_client.delete_prefix(p)


def http_of(master: MasterProc) -> Http:
    return Http(f"http://127.0.0.1:{master.mport}")
