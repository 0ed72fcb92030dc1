"""The HTTP API against real masters (no workers): sources, bad input, a follower forwarding
writes to the leader, the served spec, HTTPS."""
from __future__ import annotations

import uuid
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.api.conftest import Http, http_of, q
from tests.master.conftest import run_cli, wait_for


def _source(services, name: str) -> dict:
    p = services.mysql["source1"]
    return {"source_name": name, "host": p["host"], "port": p["port"], "user": p["user"],
            "password": p["password"], "enable_gtid": True, "flavor": "mariadb"}


def test_follower_forwards_source_writes_to_the_leader(lone_masters, services, capsys, tmp_path):
    leader, follower = lone_masters(2, tmp_path)
    assert follower.leader_info().is_leader is False
    fh, lh = http_of(follower), http_of(leader)
    # a write sent to the follower is forwarded by its gRPC service to the leader
    st, doc = fh.post("/api/v1/sources", {"source": _source(services, "s-http")})
    assert st == 201, doc
    assert doc["source_name"] == "s-http" and doc["port"] == services.mysql["source1"]["port"], doc
    assert "password" not in doc
    # visible through the leader, over HTTP and through shardctl (one behaviour)
    st, doc = lh.get("/api/v1/sources/s-http")
    assert st == 200 and doc["host"] == services.mysql["source1"]["host"] and doc["enable_gtid"] is True, doc
    rc, cli, _ = run_cli(capsys, leader, "operate-source", "show")
    assert rc == 0 and [s["source"] for s in cli["sources"]] == ["s-http"], cli
    rc, cfg, _ = run_cli(capsys, leader, "get-config", "source", "s-http")
    stored = yaml.safe_load(cfg["cfg"])
    assert stored["source-id"] == "s-http" and stored["from"]["password"] == "******", stored
    st, doc = fh.get("/api/v1/sources?with_status=true")
    assert st == 200 and doc["total"] == 1 and doc["data"][0]["status_list"][0]["worker_name"] == "", doc
    # the source YAML text is accepted too (what `operate-source create FILE` sends)
    text = yaml.safe_dump({"source-id": "s-yaml", "from": {k: services.mysql["source2"][k]
                                                           for k in ("host", "port", "user", "password")}})
    st, doc = fh.post("/api/v1/sources", {"source_yaml": text})
    assert st == 201 and doc["source_name"] == "s-yaml", doc
    # a duplicate is refused with the master's message; nothing changes
    st, doc = fh.post("/api/v1/sources", {"source": _source(services, "s-http")})
    assert st == 400 and "s-http" in doc["error_msg"], doc
    # DM's PUT: an update is checked like a new source (a wrong password is refused, the old config
    # stays); the body must be for the path's source; a good one replaces the config
    bad = {**_source(services, "s-http"), "password": "wrong"}
    st, doc = fh.put("/api/v1/sources/s-http", {"source": bad})
    assert st == 400 and "source 's-http' not updated" in doc["error_msg"] and "Access denied" in doc["error_msg"], doc
    st, doc = fh.put("/api/v1/sources/s-http", {"source": _source(services, "s-other")})
    assert st == 400 and "not 's-http' of the path" in doc["error_msg"], doc
    st, doc = fh.put("/api/v1/sources/s-http", {"source": {**_source(services, "s-http"), "enable_gtid": False}})
    assert st == 200 and doc["source_name"] == "s-http" and doc["enable_gtid"] is False, doc
    st, doc = lh.get("/api/v1/sources/s-http")
    assert st == 200 and doc["enable_gtid"] is False, doc
    # remove through the follower
    st, doc = fh.delete("/api/v1/sources/s-http")
    assert st == 200 and doc["result"] is True, doc
    st, doc = lh.get("/api/v1/sources/s-http")
    assert st == 404 and doc["error_msg"] == "source 's-http' not found", doc
    # cluster members through the follower: every master (each on its own lease), the leader first
    st, doc = wait_for(lambda: (r := fh.get("/api/v1/cluster/masters")) and r[1].get("total") == 2 and r,
                       what="both masters registered")
    assert st == 200 and doc["data"] == [{"name": "api-m1", "alive": True, "leader": True, "addr": leader.addr},
                                         {"name": "api-m2", "alive": True, "leader": False, "addr": follower.addr}], doc
    rc, cli, _ = run_cli(capsys, leader, "list-member")
    assert cli["members"][0] == {"leader": {"msg": "", "name": "api-m1", "addr": leader.addr}}, cli
    assert [(m["name"], m["leader"]) for m in cli["members"][1]["masters"]["masters"]] == [("api-m1", True),
                                                                                         ("api-m2", False)], cli
    # dmctl's filters: one part only, or the named members
    rc, cli, _ = run_cli(capsys, follower, "list-member", "--leader")
    assert rc == 0 and cli["members"] == [{"leader": {"msg": "", "name": "api-m1", "addr": leader.addr}}], cli
    rc, cli, _ = run_cli(capsys, follower, "list-member", "--master", "-n", "api-m2")
    assert [list(p) for p in cli["members"]] == [["masters"]], cli
    assert [m["name"] for m in cli["members"][0]["masters"]["masters"]] == ["api-m2"], cli
    rc, cli, _ = run_cli(capsys, follower, "list-member", "--worker")
    assert cli["members"] == [{"workers": {"msg": "", "workers": []}}], cli
    st, doc = fh.get("/api/v1/cluster/workers")
    assert st == 200 and doc == {"total": 0, "data": []}, doc
    # a killed follower leaves the list when its lease expires
    follower.kill(signal.SIGKILL)
    wait_for(lambda: [m["name"] for m in lh.get("/api/v1/cluster/masters")[1]["data"]] == ["api-m1"],
             timeout=30, what="the killed follower gone from the members")


def _etcd_state(h: Http) -> tuple:
    return h.get("/api/v1/sources")[1], h.get("/api/v1/tasks")[1], h.get("/api/v1/ddl-locks")[1]


BAD = [
    # (method, path, JSON body, raw body and its content type, status, words the message must contain)
    ("GET", "/api/v1/tasks/no-such-task/status", None, None, 404, ["task 'no-such-task' not found"]),
    ("GET", "/api/v1/tasks/no-such-task", None, None, 404, ["task 'no-such-task' not found"]),
    ("DELETE", "/api/v1/tasks/no-such-task", None, None, 404, ["task 'no-such-task' not found"]),
    ("POST", "/api/v1/tasks/no-such-task/pause", None, None, 404, ["task 'no-such-task' not found"]),
    ("POST", "/api/v1/tasks/no-such-task/resume", {"source_name_list": ["s1"]}, None, 404, ["no-such-task"]),
    ("POST", "/api/v1/tasks/no-such-task/stop", None, None, 404, ["task 'no-such-task' not found"]),
    ("POST", "/api/v1/tasks/no-such-task/start", {"source_name_list": ["s1"]}, None, 404, ["no-such-task"]),
    ("POST", "/api/v1/tasks/no-such-task/start", {"remove_meta": True}, None, 400, ["remove_meta", "POST /api/v1/tasks"]),
    ("POST", "/api/v1/tasks/no-such-task/stop", {"timeout": 3}, None, 400, ["unknown field(s) 'timeout'"]),
    ("GET", "/api/v1/sources/no-such-source", None, None, 404, ["source 'no-such-source' not found"]),
    ("DELETE", "/api/v1/sources/no-such-source", None, None, 404, ["source 'no-such-source' not found"]),
    ("DELETE", "/api/v1/ddl-locks/" + q("t-`a`.`b`"), None, None, 404, ["lock with ID t-`a`.`b` not found"]),
    ("POST", "/api/v1/ddl-locks/" + q("t-`a`.`b`") + "/unlock",
     {"source": "s1", "database": "a", "table": "b"}, None, 404, ["lock with ID t-`a`.`b` not found"]),
    ("POST", "/api/v1/ddl-locks/" + q("t-`a`.`b`") + "/unlock",
     {"source": "s1", "database": "a", "table": "b", "action": "drop"}, None, 400, ["only exec/skip"]),
    ("POST", "/api/v1/ddl-locks/" + q("t-`a`.`b`") + "/remove-table", {"source": "s1"}, None, 400,
     ["needs database, table"]),
    ("POST", "/api/v1/tasks", None, (b"{not json", "application/json"), 400, ["not valid JSON"]),
    ("POST", "/api/v1/tasks", {"task": "name: t1\ntask-mode: [unclosed"}, None, 400,
     ["body of POST /api/v1/tasks"]),
    ("POST", "/api/v1/tasks", None, (b"name: t1\n  bad: indent: here\n", "application/yaml"), 400,
     ["body of POST /api/v1/tasks"]),
    ("POST", "/api/v1/tasks", {"task": {"name": "t1", "task-mode": "all"}}, None, 400, ["mysql-instances"]),
    ("POST", "/api/v1/tasks", {"task": "name: t1", "sources": ["s1"]}, None, 400,
     ["unknown field(s) 'sources'", "source_name_list"]),
    ("POST", "/api/v1/tasks", {"task": 7}, None, 400, ["field task", "YAML text"]),
    ("POST", "/api/v1/tasks", None, (b"name: t1", "text/plain"), 415, ["Content-Type 'text/plain'"]),
    ("POST", "/api/v1/sources", {"source": {"source_name": "x", "host": "h", "port": 70000, "user": "u"}}, None,
     400, ["port", "70000"]),
    ("POST", "/api/v1/sources", {"source": {"source_name": "x", "host": "h", "port": "3306", "user": "u"}}, None,
     400, ["field port", "integer"]),
    ("POST", "/api/v1/sources", {"source_yaml": "source-id: [x"}, None, 400, ["body of POST /api/v1/sources"]),
    ("POST", "/api/v1/sources", {}, None, 400, ["exactly one of source", "source_yaml"]),
    ("GET", "/api/v1/tasks?with_status=maybe", None, None, 400, ["with_status must be true or false"]),
    ("GET", "/api/v1/tasks?nope=1", None, None, 400, ["unknown query parameter(s) 'nope'"]),
    ("GET", "/api/v1/sources/%FF", None, None, 400, ["source-name", "UTF-8"]),
    ("PUT", "/api/v1/tasks", {"task": "x"}, None, 405, ["PUT is not supported", "GET, POST"]),
    ("GET", "/api/v1/no-such-endpoint", None, None, 404, ["no API endpoint /api/v1/no-such-endpoint"]),
]


def test_methods_and_paths_outside_the_api(lone_masters, tmp_path):
    """HEAD / OPTIONS / unknown methods answer 405; only the exact probe paths are probes."""
    import http.client
    (m,) = lone_masters(1, tmp_path)
    for method, path in (("HEAD", "/api/v1/tasks"), ("HEAD", "/metrics"), ("OPTIONS", "/api/v1/tasks"),
                         ("PATCH", "/api/v1/tasks"), ("BREW", "/api/v1/tasks")):
        c = http.client.HTTPConnection("127.0.0.1", m.mport, timeout=10)
        c.request(method, path)
        r = c.getresponse()
        r.read()
        assert r.status == 405, (method, path, r.status)
        c.close()
    h = http_of(m)
    for path in ("/metricsX", "/metrics/x", "/healthzz", "/readyz-now"):
        st, doc = h.get(path)
        assert st == 404 and isinstance(doc, dict) and "no API endpoint" in doc["error_msg"], (path, st, doc)
    assert h.get("/metrics")[0] == 200 and h.get("/healthz")[0] == 200 and h.get("/metrics?name[]=x")[0] == 200
    # no authentication configured: a proxy's own Authorization header in front is not a refusal
    req = urllib.request.Request(f"http://127.0.0.1:{m.mport}/api/v1/tasks", headers={"Authorization": "Basic b3A6cHc="})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200


def test_bad_input_gets_4xx_naming_the_input_and_writes_nothing(lone_masters, tmp_path):
    leader, follower = lone_masters(2, tmp_path)
    for m in (leader, follower):
        h = http_of(m)
        before = _etcd_state(h)
        for method, path, body, raw, status, words in BAD:
            kw = {"raw": raw[0], "content_type": raw[1]} if raw else {}
            st, doc = h.request(method, path, body, **kw)
            assert st == status, (m.name, method, path, st, doc)
            assert isinstance(doc, dict) and doc["error_code"] == status, (method, path, doc)
            for w in words:
                assert w in doc["error_msg"], (method, path, w, doc["error_msg"])
        assert _etcd_state(h) == before, f"a refused request changed something on {m.name}"


def test_spec_is_served_and_matches_the_routes(lone_masters, tmp_path):
    (m,) = lone_masters(1, tmp_path)
    st, spec = http_of(m).get("/api/v1/openapi.json")
    from coordinator.api.app import ROUTES
    from coordinator.api.spec import PUBLIC, build_spec
    assert st == 200 and spec == build_spec(ROUTES)
    served = {(method, path) for method, path in ROUTES}
    documented = {(verb.upper(), path) for path, ops in spec["paths"].items() for verb in ops}
    assert served == documented - PUBLIC
    # the roles in the spec are the ones the server enforces: every write is an operator action
    for path, ops in spec["paths"].items():
        for verb, op in ops.items():
            if (verb.upper(), path) not in PUBLIC:
                assert op["x-shardmerge-role"] == ("read" if verb == "get" else "operator"), (verb, path)
                assert {"401", "403"} <= set(op["responses"]), (verb, path)
    assert set(spec["components"]["securitySchemes"]) == {"bearerToken", "clientCertificate"}
    st, docs = http_of(m).get("/api/v1/docs")
    assert st == 200 and "<title>shardmerge HTTP API</title>" in docs and "/api/v1/openapi.json" in docs
    st, page = http_of(m).get("/")
    assert st == 200 and "<title>shardmerge</title>" in page and "/api/v1/ddl-locks" in page


def _cert(tmp: Path) -> tuple[str, str]:
    key, crt = tmp / "http.key", tmp / "http.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return str(crt), str(key)


def test_https_when_given_a_certificate(services, tmp_path, etcd_client):
    from tests.master.conftest import MasterProc
    crt, key = _cert(tmp_path)
    prefix = f"/shardmerge-test/api-tls-{uuid.uuid4().hex[:8]}/"
    m = MasterProc(services.etcd, prefix, ttl=3, name="api-tls", log_dir=tmp_path)
    m.args += ["--http-cert", crt, "--http-key", key]
    m.start()
    try:
        h = Http(f"https://127.0.0.1:{m.mport}", context=ssl.create_default_context(cafile=crt))
        st, doc = wait_for(lambda: (r := h.get("/api/v1/cluster/masters")) and r[0] == 200 and r[1]["total"] == 1
                           and r, 30, what="the HTTPS API to answer with the leader")
        assert doc["data"][0]["name"] == "api-tls"
        with pytest.raises(OSError):     # no plain-text fallback (reset or a refused handshake)
            urllib.request.urlopen(f"http://127.0.0.1:{m.mport}/api/v1/tasks", timeout=5).read()
    finally:
        m.kill()
        etcd_client.delete_prefix(prefix)
    # half a certificate: the master refuses to start and names the flag
    bad = subprocess.run(m.args[:-4] + ["--http-cert", crt], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "--http-key" in bad.stderr, bad.stderr
