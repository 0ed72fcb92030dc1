"""etcd with TLS and authentication: a second, private etcd server (own CA and certificate,
auth enabled) that shardmerge's client and a real master process reach only with the right
CA, user and password file."""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from coordinator.etcd_client import EtcdEndpointError, EtcdSecurity, connect
from tests.support.ports import free_port as _free_port

ROOT = Path(__file__).resolve().parents[2]
SHARDCTL = str(ROOT / ".venv" / "bin" / "shardctl")


def _openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def secure_etcd(tmp_path_factory):
    d = tmp_path_factory.mktemp("secure-etcd")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=sm-test-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
             "-out", "server.csr", cwd=d)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.cnf", "-out", "server.crt", cwd=d)
    cport, pport = _free_port(), _free_port()
    url = f"https://127.0.0.1:{cport}"
    proc = subprocess.Popen(
        [shutil.which("etcd") or "/usr/bin/etcd", "--name", "sec", "--data-dir", str(d / "data"),
         "--listen-client-urls", url, "--advertise-client-urls", url,
         "--listen-peer-urls", f"http://127.0.0.1:{pport}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{pport}",
         "--initial-cluster", f"sec=http://127.0.0.1:{pport}",
         "--cert-file", str(d / "server.crt"), "--key-file", str(d / "server.key")],
        stdout=open(d / "etcd.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    ctl = [shutil.which("etcdctl") or "/usr/bin/etcdctl", f"--endpoints={url}", f"--cacert={d / 'ca.crt'}"]
    env = dict(os.environ, ETCDCTL_API="3")
    deadline = time.monotonic() + 30
    while subprocess.run(ctl + ["endpoint", "health"], env=env, capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, (d / "etcd.log").read_text()[-2000:]
        time.sleep(0.3)
    for cmd in (["user", "add", "root:s3cret-root"], ["user", "add", "sm:s3cret-sm"], ["role", "add", "sm"],
                ["role", "grant-permission", "sm", "--prefix=true", "readwrite", "/shardmerge/"],
                ["user", "grant-role", "sm", "sm"], ["auth", "enable"]):
        r = subprocess.run(ctl + cmd, env=env, capture_output=True, text=True)
        assert r.returncode == 0, (cmd, r.stderr)
    (d / "pw").write_text("s3cret-sm\n")
    yield {"endpoint": f"127.0.0.1:{cport}", "ca": str(d / "ca.crt"), "pwfile": str(d / "pw"), "dir": d}
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(10)


def test_tls_and_auth_with_the_right_credentials(secure_etcd):
    sec = EtcdSecurity(user="sm", password_file=secure_etcd["pwfile"], ca=secure_etcd["ca"])
    c = connect(secure_etcd["endpoint"], security=sec)
    c.put("/shardmerge/probe", "ok")
    assert c.get("/shardmerge/probe")[0] == b"ok"
    c.close()


def test_wrong_password_is_refused(secure_etcd, tmp_path):
    bad = tmp_path / "pw"
    bad.write_text("nope")
    with pytest.raises(Exception) as e:
        connect(secure_etcd["endpoint"], security=EtcdSecurity(user="sm", password_file=str(bad),
                                                               ca=secure_etcd["ca"])).get("/shardmerge/x")
    assert "authentication failed" in str(e.value).lower() or "invalid" in str(e.value).lower()


def test_without_credentials_nothing_is_readable(secure_etcd):
    c = connect(secure_etcd["endpoint"], security=EtcdSecurity(ca=secure_etcd["ca"]))
    with pytest.raises(Exception) as e:          # the etcd client's own error types vary by version
        c.get("/shardmerge/probe")
    assert "user name is empty" in str(e.value), repr(e.value)      # refused for lack of credentials


def test_missing_password_and_files_are_named():
    with pytest.raises(EtcdEndpointError, match="needs a password"):
        EtcdSecurity(user="sm").client_kwargs()
    with pytest.raises(EtcdEndpointError, match="--etcd-cacert file '/nonexistent/ca.crt' does not exist"):
        EtcdSecurity(ca="/nonexistent/ca.crt").client_kwargs()
    with pytest.raises(EtcdEndpointError, match="both --etcd-cert and --etcd-key"):
        EtcdSecurity(cert="/x").client_kwargs()
    assert "s3cret" not in repr(EtcdSecurity(user="u", password_file="/p"))


def test_master_process_runs_against_secure_etcd(secure_etcd):
    port, mport = _free_port(), _free_port()
    log = open(secure_etcd["dir"] / "master.log", "wb")
    proc = subprocess.Popen([SHARDCTL, "master", "--etcd", secure_etcd["endpoint"], "--listen", f"127.0.0.1:{port}",
                             "--metrics-addr", f"127.0.0.1:{mport}", "--election-ttl", "3",
                             "--etcd-user", "sm", "--etcd-password-file", secure_etcd["pwfile"],
                             "--etcd-cacert", secure_etcd["ca"]], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            r = subprocess.run([SHARDCTL, "--master-addr", f"127.0.0.1:{port}", "list-member"],
                               capture_output=True, text=True)
            if r.returncode == 0 and '"leader"' in r.stdout and f"127.0.0.1:{port}" in r.stdout:
                break
            assert proc.poll() is None, (secure_etcd["dir"] / "master.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (r.stdout, r.stderr, (secure_etcd["dir"] / "master.log").read_text()[-3000:])
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    text = (secure_etcd["dir"] / "master.log").read_text()
    assert "s3cret" not in text   # the password never reaches the log


def test_plain_text_to_etcd_by_mistake_is_refused(secure_etcd, tmp_path):
    """A client certificate without a CA, or an https:// endpoint without one, would have the etcd
    client open a plain-text channel without a word; each is refused, naming the flag."""
    d = secure_etcd["dir"]
    with pytest.raises(EtcdEndpointError, match="--etcd-cert without --etcd-cacert would talk to etcd in plain text"):
        connect(secure_etcd["endpoint"], security=EtcdSecurity(cert=str(d / "server.crt"), key=str(d / "server.key")))
    with pytest.raises(EtcdEndpointError, match="is https:// but no --etcd-cacert"):
        connect("https://" + secure_etcd["endpoint"], security=EtcdSecurity(user="sm", password_file=secure_etcd["pwfile"]))
    with pytest.raises(EtcdEndpointError, match="is http:// but --etcd-cacert is given"):
        connect("http://" + secure_etcd["endpoint"], security=EtcdSecurity(ca=secure_etcd["ca"]))
    # the same from a process's flags: the master does not start
    from tests.support.procs import SHARDCTL
    r = subprocess.run([SHARDCTL, "master", "--etcd", "https://" + secure_etcd["endpoint"], "--listen", "127.0.0.1:0",
                        "--etcd-user", "sm", "--etcd-password-file", secure_etcd["pwfile"]],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "is https:// but no --etcd-cacert" in r.stderr, r.stderr
    # with its CA it connects over TLS, https:// included
    c = connect("https://" + secure_etcd["endpoint"], security=EtcdSecurity(user="sm", password_file=secure_etcd["pwfile"],
                                                                             ca=secure_etcd["ca"]))
    c.put("/shardmerge/probe2", "ok")
    assert c.get("/shardmerge/probe2")[0] == b"ok"
    c.close()
