"""Passwords at rest in etcd, on a real master and etcd: with the operator's key
(``SHARDMERGE_DM_SECRET_KEY_PATH``) neither a source's nor a task's password is in what
``etcdctl get --prefix`` prints; every reader with the key decrypts them (the master's check of
the stored source connects with it); without a key the master says at start that they are
stored as given."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid

import yaml

from coordinator import dm_encrypt
from tests.master.conftest import MasterProc, task_yaml
from tests.security.test_no_password_leaks import _user
from tests.support.probes import shardctl, wait_for


def test_passwords_are_sealed_in_etcd_with_the_operators_key(services, etcd_client, tmp_path, monkeypatch):
    key = tmp_path / "secret.key"
    key.write_text(os.urandom(32).hex() + "\n")
    key.chmod(0o600)
    src_pw, down_pw = f"SrcPw-{uuid.uuid4().hex[:10]}", f"DownPw-{uuid.uuid4().hex[:10]}"
    user = f"seal_{uuid.uuid4().hex[:8]}"
    up, down = services.mysql["source1"], services.mysql["downstream"]
    _user(up, user, src_pw, grant=True)
    _user(down, user, down_pw, grant=True)
    prefix = f"/shardmerge-test/sealed-{uuid.uuid4().hex[:8]}/"
    m = MasterProc(services.etcd, prefix, ttl=3, name="sealed-m1", log_dir=tmp_path)
    m.env[dm_encrypt.KEY_ENV] = str(key)
    m.start()
    try:
        m.wait_ready(40)
        src = tmp_path / "s1.yaml"
        src.write_text(yaml.safe_dump({"source-id": "s1", "flavor": "mariadb", "enable-gtid": True, "from": {
            "host": up["host"], "port": up["port"], "user": user, "password": src_pw}}))
        rc, out, err = shardctl(m.addr, "operate-source", "create", str(src))
        assert rc == 0, (out, err)
        task = yaml.safe_load(task_yaml("t1", sources=("s1",)))
        task["target-database"].update(user=user, password=down_pw)
        tf = tmp_path / "t.yaml"
        tf.write_text(yaml.safe_dump(task))
        rc, out, err = shardctl(m.addr, "start-task", "--skip-precheck", str(tf))
        assert rc == 0, (out, err)
        dump = subprocess.run([shutil.which("etcdctl") or "/usr/bin/etcdctl", f"--endpoints={services.etcd}",
                               "get", "--prefix", prefix], capture_output=True, text=True, timeout=30,
                              env={**os.environ, "ETCDCTL_API": "3"})
        assert dump.returncode == 0 and "source-id: s1" in dump.stdout and "t1" in dump.stdout, dump.stderr
        assert src_pw not in dump.stdout and down_pw not in dump.stdout, "a password is stored in plain text"
        # what is stored decrypts, with the key, to the password given
        monkeypatch.setenv(dm_encrypt.KEY_ENV, str(key))
        stored = _record_yaml(dump.stdout, "source-id: s1")
        assert dm_encrypt.decrypt(stored["from"]["password"]) == src_pw
        task_rec = _record_yaml(dump.stdout, "target-database")
        assert dm_encrypt.decrypt(task_rec["target-database"]["password"]) == down_pw
        # a reader of the stored records (the master's check of the registered source) uses it
        rc, out, err = shardctl(m.addr, "check-task", str(tf))
        assert rc == 0 and "pre-check passed" in out and "Access denied" not in out + err, (out, err)
    finally:
        m.kill(signal.SIGTERM)
        etcd_client.delete_prefix(prefix)
        _user(up, user, "", drop=True)
        _user(down, user, "", drop=True)
    assert "stored in etcd as given" not in m.log_path.read_text()


def _record_yaml(dump: str, marker: str) -> dict:
    """The YAML text of the JSON record in ``etcdctl get`` output that holds ``marker``."""
    import json
    for line in dump.splitlines():
        if line.startswith("{") and marker in line:
            return yaml.safe_load(json.loads(line)["yaml"])
    raise AssertionError(f"no record with {marker!r} in {dump[:500]}")


def test_without_a_key_the_master_says_passwords_are_stored_as_given(services, tmp_path, etcd_client):
    prefix = f"/shardmerge-test/unsealed-{uuid.uuid4().hex[:8]}/"
    m = MasterProc(services.etcd, prefix, ttl=3, name="unsealed-m1", log_dir=tmp_path)
    m.env.pop(dm_encrypt.KEY_ENV, None)
    m.start()
    try:
        wait_for(lambda: "stored in etcd as given" in m.log_path.read_text(), 30, "the warning at start")
    finally:
        m.kill(signal.SIGTERM)
        etcd_client.delete_prefix(prefix)
