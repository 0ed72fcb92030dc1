"""Tokens and roles on the master's control plane, on a real `shardctl master` with
--auth-token-file (no TLS): gRPC via the real `shardctl`, HTTP via urllib.  No token -> 401 /
UNAUTHENTICATED; a read token reads, and its operator actions (create a source, stop a task,
unlock) are refused with 403 and change nothing; an operator token may."""
from __future__ import annotations

import json
import signal
import subprocess
import uuid

import pytest

from tests.api.conftest import Http
from tests.master.conftest import MasterProc, source_yaml, task_yaml
from tests.security.test_control_plane_tls import ctl

READ_TOKEN = "read-" + "r" * 20
OP_TOKEN = "oper-" + "o" * 20


@pytest.fixture
def token_master(services, tmp_path, etcd_client):
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f"# token,name,role\n{READ_TOKEN},dash,read\n{OP_TOKEN},alice,operator\n")
    tokens.chmod(0o600)
    prefix = f"/shardmerge-test/auth-{uuid.uuid4().hex[:8]}/"
    m = MasterProc(services.etcd, prefix, ttl=3, name="auth-m1", log_dir=tmp_path)
    m.args += ["--auth-token-file", str(tokens)]
    m.start()
    m.wait_ready(40)
    yield m
    m.kill(signal.SIGTERM)
    etcd_client.delete_prefix(prefix)


def token_file(tmp_path, token: str) -> list[str]:
    p = tmp_path / f"tok-{token[:4]}"
    p.write_text(token + "\n")
    p.chmod(0o600)
    return ["--token-file", str(p)]


def test_grpc_roles_by_token(token_master, tmp_path):
    m = token_master
    rc, out, err = ctl(m, "list-member")
    assert rc == 1 and "authentication required" in err and "--token-file" in err, err
    rc, out, err = ctl(m, "list-member", env={"SHARDMERGE_TOKEN": "not-a-known-token-at-all"})
    assert rc == 1 and "unknown token" in err, err
    rc, out, err = ctl(m, "list-member", certs=token_file(tmp_path, READ_TOKEN))
    assert rc == 0 and json.loads(out)["result"], err
    src = tmp_path / "s-tok.yaml"
    src.write_text(source_yaml("s-tok"))
    task = tmp_path / "t.yaml"
    task.write_text(task_yaml("t"))
    for argv in (["operate-source", "create", str(src)], ["stop-task", "t"], ["check-task", str(task)],
                 ["start-task", str(task)], ["pause-task", "t"], ["transfer-source", "s1", "w1"],
                 ["shard-ddl-lock", "unlock", "t-`a`.`b`", "-s", "s1", "-d", "a", "-t", "b", "--action", "skip"],
                 ["binlog", "skip", "t", "-s", "s1"]):
        rc, out, err = ctl(m, *argv, certs=token_file(tmp_path, READ_TOKEN))
        assert rc == 1 and "needs the operator role; token=dash has the read role" in err, (argv, err)
    # the global flags after the subcommand too, and the token from the environment
    rc, out, err = ctl(m, "operate-source", "show", env={"SHARDMERGE_TOKEN": READ_TOKEN})
    assert rc == 0 and "s-tok" not in out        # the refused create wrote nothing
    rc, out, err = ctl(m, "operate-source", "create", str(src), *token_file(tmp_path, OP_TOKEN))
    assert rc == 0, out + err
    rc, out, err = ctl(m, "operate-source", "stop", "s-tok", env={"SHARDMERGE_TOKEN": OP_TOKEN})
    assert rc == 0, out + err


class AuthHttp(Http):
    def __init__(self, base: str, token: str | None):
        super().__init__(base)
        self.token = token

    def request(self, method, path, body=None, **kw):
        import urllib.error
        import urllib.request
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None or method == "POST":       # a POST says JSON even when empty (cross_site.py)
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read() or b"null"), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null"), dict(e.headers)


def test_http_roles_by_token(token_master):
    base = f"http://127.0.0.1:{token_master.mport}"
    st, doc, hdr = AuthHttp(base, None).request("GET", "/api/v1/tasks")
    assert st == 401 and "authentication required" in doc["error_msg"] and "Bearer" in hdr["WWW-Authenticate"]
    st, doc, _ = AuthHttp(base, "wrong-token-wrong-token").request("GET", "/api/v1/tasks")
    assert st == 401 and "unknown token" in doc["error_msg"]
    reader, operator = AuthHttp(base, READ_TOKEN), AuthHttp(base, OP_TOKEN)
    st, doc, _ = reader.request("GET", "/api/v1/sources")
    assert st == 200 and doc["total"] == 0
    st, doc, _ = reader.request("POST", "/api/v1/sources", {"source_yaml": source_yaml("s-h")})
    assert st == 403 and "POST /api/v1/sources needs the operator role" in doc["error_msg"], doc
    st, doc, _ = reader.request("POST", "/api/v1/ddl-locks/x/unlock",
                                {"source": "s1", "database": "a", "table": "b", "action": "skip"})
    assert st == 403 and doc["result"] is False
    st, doc, _ = reader.request("GET", "/api/v1/sources")
    assert st == 200 and doc["total"] == 0           # nothing written
    st, doc, _ = operator.request("POST", "/api/v1/sources", {"source_yaml": source_yaml("s-h")})
    assert st == 201, doc
    st, doc, _ = operator.request("DELETE", "/api/v1/sources/s-h")
    assert st == 200, doc
    # the page and the spec need no credential (the page asks for a token when the API says 401)
    st, page = Http(base).get("/")
    assert st == 200 and 'id="token"' in page
    assert Http(base).get("/api/v1/openapi.json")[0] == 200


def test_bad_token_file_stops_the_master_naming_file_and_line(services, tmp_path):
    from tests.support.procs import SHARDCTL
    bad = tmp_path / "tokens.csv"
    bad.write_text(f"{OP_TOKEN},alice,operator\n{READ_TOKEN},bob,admin\n")
    bad.chmod(0o600)
    r = subprocess.run([SHARDCTL, "master", "--etcd", services.etcd, "--listen", "127.0.0.1:0",
                        "--auth-token-file", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and f"file={bad}:2" in r.stderr and "'admin'" in r.stderr, r.stderr
    assert READ_TOKEN not in r.stderr              # never the token itself


def test_tls_client_against_a_plain_text_master_is_told_so(token_master, tmp_path):
    from tests.support.certs import CA
    ca = CA(tmp_path / "pki")
    rc, out, err = ctl(token_master, "list-member", certs=["--ssl-ca", ca.cert])
    assert rc == 1 and out == "" and "does not speak TLS" in err and "drop --ssl-ca" in err, err


def test_shardctl_refuses_a_shared_token_file_and_warns_before_sending_one_in_plain_text(token_master, tmp_path):
    shared = tmp_path / "shared-token"
    shared.write_text(OP_TOKEN + "\n")
    shared.chmod(0o644)
    rc, out, err = ctl(token_master, "list-member", certs=["--token-file", str(shared)])
    assert rc == 1 and "readable or writable by every user" in err, err
    # loopback: no warning; any other address: one line on stderr before the call
    rc, out, err = ctl(token_master, "list-member", certs=token_file(tmp_path, OP_TOKEN))
    assert rc == 0 and "plain text" not in err, err
    from coordinator.cli import common
    common._WARNED.clear()
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        common._warn_plain_token((("authorization", "Bearer x"),), common.TlsFiles(), ["10.0.0.7:8261"])
        common._warn_plain_token((("authorization", "Bearer x"),), common.TlsFiles(), ["10.0.0.7:8261"])
    assert buf.getvalue().count("sending a bearer token to 10.0.0.7:8261 over plain text") == 1, buf.getvalue()


def test_a_caller_without_credentials_is_refused_before_its_body_is_read(token_master):
    """The refusal comes from the headers: a client that announces a large body and sends none
    is answered 401 at once (before, the master waited to read the body it was going to refuse)."""
    import socket
    s = socket.create_connection(("127.0.0.1", token_master.mport), timeout=10)
    try:
        s.sendall(f"POST /api/v1/sources HTTP/1.1\r\nHost: 127.0.0.1:{token_master.mport}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 900000\r\n\r\n".encode())
        s.settimeout(10)
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        assert data.startswith(b"HTTP/1.1 401"), data[:200]
        assert b"WWW-Authenticate: Bearer" in data
    finally:
        s.close()
    # a too-large task file through shardctl (gRPC) is refused naming the limit, nothing parsed
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write("name: big\n" + "# filler\n" * 40_000)
    rc, out, err = ctl(token_master, "check-task", f.name, certs=["--token-file", _op_token_file()])
    assert rc == 1 and "at most 256 KiB is accepted" in (out + err), (out, err)


def _op_token_file() -> str:
    import os
    import tempfile
    fd, path = tempfile.mkstemp()
    os.write(fd, (OP_TOKEN + "\n").encode())
    os.close(fd)                      # mkstemp makes it 0600
    return path
