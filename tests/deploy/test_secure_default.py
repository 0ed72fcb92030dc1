"""The base deployment's etcd is secure by default, tried on a real etcd server: the
certificates `deploy/k8s/make-secrets` makes, etcd started with the manifest's own TLS flags,
the auth Job's own script (twice: the second run finds auth on), and a client configured only by
the manifest's ConfigMap reads and writes `/shardmerge/` and nothing else."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from coordinator.etcd_client import EtcdSecurity, connect
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
ETCD = shutil.which("etcd") or "/usr/bin/etcd"
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def _etcd_args(d: Path, cport: int, pport: int) -> list[str]:
    """The StatefulSet's etcd flags, with this host's addresses and the files of ``d``."""
    sts = next(x for x in _docs("etcd.yaml") if x["kind"] == "StatefulSet")
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    out = []
    for a in args:
        a = a.split("#")[0].strip()
        if a.startswith(("--name", "--data-dir", "--initial-cluster=", "--advertise-client-urls",
                         "--initial-advertise-peer-urls", "--listen-metrics-urls")):
            continue
        a = a.replace("0.0.0.0:2379", f"127.0.0.1:{cport}").replace("0.0.0.0:2380", f"127.0.0.1:{pport}")
        a = a.replace("/etc/etcd/tls/tls.crt", str(d / "etcd.crt")).replace("/etc/etcd/tls/tls.key", str(d / "etcd.key"))
        out.append(a.replace("/etc/etcd/tls/ca.crt", str(d / "ca.crt")))
    return out + ["--name", "m0", "--data-dir", str(d / "data"),
                  "--advertise-client-urls", f"https://127.0.0.1:{cport}",
                  "--initial-advertise-peer-urls", f"https://127.0.0.1:{pport}",
                  "--initial-cluster", f"m0=https://127.0.0.1:{pport}"]


def _config_env(d: Path, cport: int) -> dict[str, str]:
    """ConfigMap `shardmerge`'s etcd variables, pointing at the mounted files' copies in ``d``."""
    cm = next(x for x in _docs("config.yaml") if x["metadata"]["name"] == "shardmerge")["data"]
    mounts = {"/etc/shardmerge/etcd/": d / "etcd-mount", "/etc/shardmerge/etcd-auth/": d / "auth-mount"}
    env = {}
    for k, v in cm.items():
        if not k.startswith("SHARDMERGE_ETCD"):
            continue
        for prefix, local in mounts.items():
            v = v.replace(prefix, f"{local}/")
        env[k] = v.replace("etcd-client:2379", f"127.0.0.1:{cport}")
    return env


def _mount(d: Path) -> None:
    """The Secrets as the pods see them: `shardmerge-etcd-client` and `shardmerge-etcd-auth`."""
    (d / "etcd-mount").mkdir()
    for key, f in (("ca.crt", "ca.crt"), ("tls.crt", "etcd-client.crt"), ("tls.key", "etcd-client.key")):
        shutil.copy(d / f, d / "etcd-mount" / key)
    (d / "auth-mount").mkdir()
    for f in ("root-password", "shardmerge-password"):
        shutil.copy(d / f, d / "auth-mount" / f)


def _job_script(d: Path) -> str:
    job = next(x for x in _docs("etcd-auth.yaml") if x["kind"] == "Job")
    script = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    return script.replace("/etc/shardmerge/etcd-auth/", f"{d / 'auth-mount'}/")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("secure-default")
    r = subprocess.run([str(K8S / "make-secrets"), str(d)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _mount(d)
    cport, pport = free_port(), free_port()
    proc = subprocess.Popen([ETCD, *_etcd_args(d, cport, pport)], stdout=open(d / "etcd.log", "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    env = dict(os.environ, **_config_env(d, cport))
    health = [ETCDCTL, f"--endpoints={env['SHARDMERGE_ETCD']}", f"--cacert={d / 'ca.crt'}",
              f"--cert={d / 'etcd-client.crt'}", f"--key={d / 'etcd-client.key'}", "endpoint", "health"]
    deadline = time.monotonic() + 30
    while subprocess.run(health, env=dict(env, ETCDCTL_API="3"), capture_output=True).returncode != 0:
        assert time.monotonic() < deadline and proc.poll() is None, (d / "etcd.log").read_text()[-2000:]
        time.sleep(0.3)
    yield d, env
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(10)


def test_the_auth_job_switches_auth_on_once_and_the_configmap_client_gets_only_its_prefix(made, monkeypatch):
    d, env = made
    first = subprocess.run(["sh", "-c", _job_script(d)], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Authentication Enabled" in first.stdout
    again = subprocess.run(["sh", "-c", _job_script(d)], env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "etcd auth is on already" in again.stdout, again.stdout + again.stderr

    for k, v in env.items():
        if k.startswith("SHARDMERGE_ETCD"):
            monkeypatch.setenv(k, v)
    sec = EtcdSecurity.from_env()
    assert sec.user == "shardmerge" and sec.cert and sec.ca
    c = connect(env["SHARDMERGE_ETCD"], security=sec)
    c.put("/shardmerge/probe", "ok")
    assert c.get("/shardmerge/probe")[0] == b"ok"
    with pytest.raises(Exception, match=re.compile("permission denied", re.I)):
        c.put("/elsewhere/probe", "no")
    c.close()
    # the CA but no client certificate: the server refuses the handshake
    bare = subprocess.run([ETCDCTL, f"--endpoints={env['SHARDMERGE_ETCD']}", f"--cacert={d / 'ca.crt'}",
                           "--dial-timeout=3s", "get", "/shardmerge/probe"],
                          env=dict(env, ETCDCTL_API="3"), capture_output=True, text=True)
    assert bare.returncode != 0 and "ok" not in bare.stdout
