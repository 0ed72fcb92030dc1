"""TLS and mutual TLS on the master's control plane, on real processes: a `shardctl master`
with --ssl-ca/--ssl-cert/--ssl-key, cert-allowed-cn (operators) and cert-read-only-cn, asked
by real `shardctl` subprocesses and an HTTPS client.  The right certificate works; no TLS, no
client certificate, a wrong CA (either side) or a wrong CN is refused with a sentence that says
which; a read-only certificate reads but its operator actions are refused and change nothing."""
from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
import uuid

import pytest

from tests.master.conftest import MasterProc, source_yaml, wait_for
from tests.support.certs import CA
from tests.support.procs import ROOT, SHARDCTL


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca, evil = CA(d / "ca"), CA(d / "evil", "sm-evil-ca")
    return {"ca": ca, "evil": evil, "master": ca.issue("sm-master"), "ops": ca.issue("ops"),
            "viewer": ca.issue("viewer"), "intruder": ca.issue("intruder"), "forged_ops": evil.issue("ops")}


def https_ready(m: MasterProc, cafile: str) -> bool:
    ctx = ssl.create_default_context(cafile=cafile)
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{m.mport}/readyz", timeout=2, context=ctx) as r:
            return r.status == 200
    except (OSError, urllib.error.HTTPError):
        return False


def start_master(services, tmp, name: str, prefix: str, extra: list[str], cafile: str | None) -> MasterProc:
    m = MasterProc(services.etcd, prefix, ttl=3, name=name, log_dir=tmp)
    m.args += extra
    m.start()
    if cafile:
        wait_for(lambda: https_ready(m, cafile), 40, what=f"{name} HTTPS /readyz")
    else:
        m.wait_ready(40)
    return m


@pytest.fixture(scope="module")
def tls_master(services, pki, tmp_path_factory, etcd_client_module):
    tmp = tmp_path_factory.mktemp("tlsmaster")
    prefix = f"/shardmerge-test/tls-{uuid.uuid4().hex[:8]}/"
    ca, master = pki["ca"], pki["master"]
    m = start_master(services, tmp, "tls-m1", prefix,
                     ["--ssl-ca", ca.cert, "--ssl-cert", master.cert, "--ssl-key", master.key,
                      "--cert-allowed-cn", "sm-master,ops", "--cert-read-only-cn", "viewer"], ca.cert)
    yield m
    m.kill(signal.SIGTERM)
    etcd_client_module.delete_prefix(prefix)


@pytest.fixture(scope="module")
def etcd_client_module(services):
    from coordinator.etcd_client import connect
    c = connect(services.etcd)
    yield c
    c.close()


def ctl(m: MasterProc, *argv: str, certs: list[str] | None = None, env: dict | None = None,
        addr: str | None = None) -> tuple[int, str, str]:
    """Run the real `shardctl` (a subprocess) against ``m``; (rc, stdout, stderr)."""
    cmd = [SHARDCTL, "--master-addr", addr or m.addr, *(certs or []), *argv]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=90,
                       env={**os.environ, **(env or {})})
    return r.returncode, r.stdout, r.stderr


def certs(pki, client: str | None, ca: str = "ca") -> list[str]:
    out = ["--ssl-ca", pki[ca].cert]
    if client:
        out += ["--ssl-cert", pki[client].cert, "--ssl-key", pki[client].key]
    return out


def test_right_client_certificate_works(tls_master, pki):
    rc, out, err = ctl(tls_master, "list-member", certs=certs(pki, "ops"))
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["result"] is True and "tls-m1" in out


def test_plain_text_client_is_told_the_master_wants_tls(tls_master):
    rc, out, err = ctl(tls_master, "list-member")
    assert rc == 1 and out == ""
    assert "serves TLS and this client speaks plain text" in err and "--ssl-ca" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_no_client_certificate_is_refused(tls_master, pki):
    rc, _, err = ctl(tls_master, "list-member", certs=certs(pki, None))
    assert rc == 1 and "requires a client certificate" in err and "--ssl-cert" in err, err


def test_wrong_ca_for_the_server_is_refused(tls_master, pki):
    rc, _, err = ctl(tls_master, "list-member", certs=certs(pki, "ops", ca="evil"))
    assert rc == 1 and "is not signed by --ssl-ca" in err, err


def test_client_certificate_of_another_ca_is_refused(tls_master, pki):
    rc, _, err = ctl(tls_master, "list-member", certs=["--ssl-ca", pki["ca"].cert, "--ssl-cert",
                                                       pki["forged_ops"].cert, "--ssl-key", pki["forged_ops"].key])
    assert rc == 1 and "refused this client certificate" in err, err


def test_wrong_cn_is_refused(tls_master, pki):
    rc, _, err = ctl(tls_master, "list-member", certs=certs(pki, "intruder"))
    assert rc == 1 and "CN 'intruder' is not allowed" in err and "cert-allowed-cn" in err, err


def test_read_only_cn_reads_but_cannot_operate(tls_master, pki, tmp_path):
    rc, out, err = ctl(tls_master, "operate-source", "show", certs=certs(pki, "viewer"))
    assert rc == 0, err
    assert json.loads(out)["sources"] == [] if "sources" in json.loads(out) else True
    src = tmp_path / "s-ro.yaml"
    src.write_text(source_yaml("s-ro"))
    rc, out, err = ctl(tls_master, "operate-source", "create", str(src), certs=certs(pki, "viewer"))
    assert rc == 1 and "OperateSource needs the operator role; cn=viewer has the read role" in err, err
    rc, out, err = ctl(tls_master, "stop-task", "any-task", certs=certs(pki, "viewer"))
    assert rc == 1 and "StopTask needs the operator role" in err, err
    # nothing was written: the source is not registered
    rc, out, err = ctl(tls_master, "operate-source", "show", certs=certs(pki, "ops"))
    assert rc == 0 and "s-ro" not in out, out
    # the operator certificate may
    rc, out, err = ctl(tls_master, "operate-source", "create", str(src), certs=certs(pki, "ops"))
    assert rc == 0, out + err
    rc, out, err = ctl(tls_master, "operate-source", "show", certs=certs(pki, "viewer"))
    assert rc == 0 and "s-ro" in out
    rc, out, err = ctl(tls_master, "operate-source", "stop", "s-ro", certs=certs(pki, "ops"))
    assert rc == 0, out + err


# ---------------------------------------------------------------------- HTTPS, same certificates
def https(m: MasterProc, pki, method: str, path: str, client: str | None, body: dict | None = None):
    ctx = ssl.create_default_context(cafile=pki["ca"].cert)
    if client:
        ctx.load_cert_chain(pki[client].cert, pki[client].key)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"https://127.0.0.1:{m.mport}{path}", data=data, method=method)
    if data is not None or method == "POST":           # a POST says JSON even when empty (cross_site.py)
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60, context=ctx) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_https_api_with_client_certificates(tls_master, pki):
    st, doc = https(tls_master, pki, "GET", "/api/v1/cluster/masters", "ops")
    assert st == 200 and doc["data"][0]["name"] == "tls-m1"
    st, doc = https(tls_master, pki, "GET", "/api/v1/cluster/masters", None)
    assert st == 401 and "authentication required" in doc["error_msg"]
    st, doc = https(tls_master, pki, "GET", "/api/v1/cluster/masters", "intruder")
    assert st == 403 and "CN 'intruder' is not allowed" in doc["error_msg"]
    with pytest.raises(OSError):         # a client certificate of another CA: the handshake is refused
        https(tls_master, pki, "GET", "/api/v1/cluster/masters", "forged_ops")
    wrong_ca = ssl.create_default_context(cafile=pki["evil"].cert)   # the client does not trust the master
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"https://127.0.0.1:{tls_master.mport}/api/v1/tasks", timeout=10, context=wrong_ca)
    st, doc = https(tls_master, pki, "GET", "/api/v1/sources", "viewer")
    assert st == 200 and doc["total"] == 0
    st, doc = https(tls_master, pki, "POST", "/api/v1/sources", "viewer",
                    {"source_yaml": source_yaml("s-http-ro")})
    assert st == 403 and "needs the operator role" in doc["error_msg"], doc
    st, doc = https(tls_master, pki, "DELETE", "/api/v1/tasks/nope", "viewer")
    assert st == 403, doc
    st, doc = https(tls_master, pki, "GET", "/api/v1/sources", "ops")
    assert st == 200 and doc["total"] == 0, doc      # the refused POST wrote nothing
    # the page and the probes are served; the page carries the token form for cert-less browsers
    ctx = ssl.create_default_context(cafile=pki["ca"].cert)
    with urllib.request.urlopen(f"https://127.0.0.1:{tls_master.mport}/", timeout=10, context=ctx) as r:
        page = r.read().decode()
    assert r.status == 200 and 'id="token"' in page and "Authorization" in page
    with pytest.raises(OSError):        # no plain-text fallback on the HTTP port either
        urllib.request.urlopen(f"http://127.0.0.1:{tls_master.mport}/api/v1/tasks", timeout=5).read()


def test_follower_forwards_to_the_leader_over_mutual_tls(services, pki, tmp_path, etcd_client):
    ca, master = pki["ca"], pki["master"]
    prefix = f"/shardmerge-test/tls-fw-{uuid.uuid4().hex[:8]}/"
    flags = ["--ssl-ca", ca.cert, "--ssl-cert", master.cert, "--ssl-key", master.key,
             "--cert-allowed-cn", "sm-master,ops", "--cert-read-only-cn", "viewer"]
    m1 = start_master(services, tmp_path, "fw-m1", prefix, flags, ca.cert)
    # the second master takes the same settings from its config file, DM's key names
    cfg = tmp_path / "m2.yaml"
    cfg.write_text(f"ssl-ca: {ca.cert}\nssl-cert: {master.cert}\nssl-key: {master.key}\n"
                   f"cert-allowed-cn: [sm-master, ops]\ncert-read-only-cn: viewer\n")
    m2 = start_master(services, tmp_path, "fw-m2", prefix, ["--config", str(cfg)], ca.cert)
    try:
        # a write asked of the follower is answered by the leader (forwarded over mutual TLS)
        rc, out, err = ctl(m2, "stop-task", "no-such-task", certs=certs(pki, "ops"))
        doc = json.loads(out)
        assert rc == 1 and "not found" in doc["msg"] and "forwarding failed" not in doc["msg"], out + err
        # a read-only caller is refused by the follower itself
        rc, out, err = ctl(m2, "stop-task", "no-such-task", certs=certs(pki, "viewer"))
        assert rc == 1 and "needs the operator role" in err, err
        # --master-addr as a list: a dead address first, then the follower
        dead = "127.0.0.1:1"
        rc, out, err = ctl(m2, "list-member", certs=certs(pki, "ops"), addr=f"{dead},{m2.addr}")
        assert rc == 0 and "fw-m1" in out and "fw-m2" in out, err
    finally:
        for m in (m2, m1):
            m.kill(signal.SIGTERM)
        etcd_client.delete_prefix(prefix)


def test_master_refuses_half_or_unreadable_tls_settings(services, pki, tmp_path):
    base = [SHARDCTL, "master", "--etcd", services.etcd, "--listen", "127.0.0.1:0"]
    r = subprocess.run(base + ["--ssl-cert", pki["master"].cert], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "ssl-key" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run(base + ["--cert-allowed-cn", "ops"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "give ssl-ca" in r.stderr, r.stderr
    r = subprocess.run(base + ["--ssl-ca", str(tmp_path / "missing.pem"), "--ssl-cert", pki["master"].cert,
                               "--ssl-key", pki["master"].key], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "No such file" in r.stderr and "key=ssl-ca" in r.stderr, r.stderr
    cfg = tmp_path / "master.yaml"
    cfg.write_text(f"etcd: {services.etcd}\nssl-cert: {pki['master'].cert}\nssl-kee: x\n")
    r = subprocess.run([SHARDCTL, "master", "--config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and f"file={cfg}" in r.stderr and "key=ssl-kee" in r.stderr, r.stderr


def test_masters_sharing_a_service_name_certificate(services, pki, tmp_path, etcd_client):
    """One certificate for a Service name (no IP SAN) on masters advertising their IP: without
    --ssl-peer-name the follower's forwarding and the HTTP API's own call fail the name check (and
    say so); with it they work."""
    ca = pki["ca"]
    shared = ca.issue("sm-master", sans="DNS:shardmerge-master")
    ops = pki["ops"]
    ctx = ssl.create_default_context(cafile=ca.cert)
    ctx.check_hostname = False            # this test's HTTPS client: the name is what is under test server-side
    ctx.load_cert_chain(ops.cert, ops.key)

    def post_stop(m):
        req = urllib.request.Request(f"https://127.0.0.1:{m.mport}/api/v1/tasks/no-such-task/stop", method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60, context=ctx) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    for peer_name, expect in (([], 503), (["--ssl-peer-name", "shardmerge-master"], 404)):
        prefix = f"/shardmerge-test/tls-peer-{uuid.uuid4().hex[:8]}/"
        flags = ["--ssl-ca", ca.cert, "--ssl-cert", shared.cert, "--ssl-key", shared.key,
                 "--cert-allowed-cn", "sm-master,ops", *peer_name]
        ms = []
        try:
            for i in (1, 2):
                m = MasterProc(services.etcd, prefix, ttl=3, name=f"peer{expect}-m{i}", log_dir=tmp_path)
                m.args += flags
                m.start()
                ms.append(m)
                insecure = ssl.create_default_context(cafile=ca.cert)
                insecure.check_hostname = False
                wait_for(lambda m=m, c=insecure: _ready(m, c), 40, what=f"{m.name} HTTPS /readyz")
            st, doc = post_stop(ms[1])           # the follower: HTTP -> its own gRPC -> forwarded to the leader
            assert st == expect, (peer_name, st, doc)
            if expect == 404:
                assert "task 'no-such-task' not found" in doc["error_msg"], doc
            else:
                print("refused as expected:", doc["error_msg"])
                assert "cannot reach this master's gRPC endpoint" in doc["error_msg"], doc
        finally:
            for m in reversed(ms):
                m.kill(signal.SIGTERM)
            etcd_client.delete_prefix(prefix)


def _ready(m: MasterProc, ctx) -> bool:
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{m.mport}/readyz", timeout=2, context=ctx) as r:
            return r.status == 200
    except (OSError, urllib.error.HTTPError):
        return False


def test_shardctl_asks_the_leader_itself_when_a_follower_cannot_forward(services, pki, tmp_path, etcd_client):
    """The follower's forwarding is refused by the leader (the leader does not allow the
    follower's CN), so the follower answers "not leader, leader is X": shardctl then asks X
    directly with its own certificate, and the call is done there."""
    ca, master = pki["ca"], pki["master"]
    prefix = f"/shardmerge-test/tls-redirect-{uuid.uuid4().hex[:8]}/"
    tls = ["--ssl-ca", ca.cert, "--ssl-cert", master.cert, "--ssl-key", master.key]
    m1 = start_master(services, tmp_path, "rd-m1", prefix, tls + ["--cert-allowed-cn", "ops"], ca.cert)
    m2 = start_master(services, tmp_path, "rd-m2", prefix, tls + ["--cert-allowed-cn", "ops,sm-master"], ca.cert)
    try:
        src = tmp_path / "s-rd.yaml"
        src.write_text(source_yaml("s-rd"))
        rc, out, err = ctl(m2, "operate-source", "create", str(src), certs=certs(pki, "ops"))
        assert rc == 0 and json.loads(out)["result"] is True, out + err
        rc, out, err = ctl(m1, "operate-source", "show", certs=certs(pki, "ops"))
        assert "s-rd" in out, out + err
        rc, out, err = ctl(m2, "operate-source", "stop", "s-rd", certs=certs(pki, "ops"))
        assert rc == 0, out + err
        # the follower really could not forward: the leader's log names the refused CN
        assert "CN 'sm-master' is not allowed" in m1.output(), m1.tail()
    finally:
        for m in (m2, m1):
            m.kill(signal.SIGTERM)
        etcd_client.delete_prefix(prefix)
