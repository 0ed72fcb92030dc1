"""A `dmctl encrypt` password used by a real `shardctl` process against the real servers:
`shardctl check` connects to the upstream and the downstream with the decrypted password (DM's
built-in pre-v8.0 key, and a `secret-key-path` key file); a garbled ciphertext is refused
naming the file and key before any connection."""
from __future__ import annotations

import base64
import json
import os
import subprocess

import yaml

from coordinator import dm_encrypt
from tests.support.procs import ROOT, SHARDCTL, db_params


def _dmctl_encrypt(plain: str, key: bytes, iv: bytes) -> str:
    """dmctl encrypt's output for a password of at most one AES block (CFB: pt ^ E(iv))."""
    assert len(plain.encode()) <= 16
    ks = dm_encrypt._encrypt_block(dm_encrypt._expand(key), iv)
    return base64.b64encode(iv + b"@" + bytes(a ^ b for a, b in zip(plain.encode(), ks))).decode()


def _files(tmp_path, src_db, down_db, password: str):
    src = dict(db_params(src_db.params), password=password)
    down = dict(db_params(down_db.params), password=password)
    sfile, tfile = tmp_path / "s1.yaml", tmp_path / "task.yaml"
    sfile.write_text(yaml.safe_dump({"source-id": "s1", "flavor": "", "enable": True, "from": src}))
    tfile.write_text(yaml.safe_dump({
        "name": "pw", "task-mode": "all", "shard-mode": "optimistic", "target-database": down,
        "routes": {"r": {"schema-pattern": src_db.name, "table-pattern": "t_*", "target-schema": down_db.name,
                         "target-table": "t"}},
        "block-allow-list": {"b": {"do-dbs": [src_db.name]}},
        "mysql-instances": [{"source-id": "s1", "route-rules": ["r"], "block-allow-list": "b"}]}))
    return str(sfile), str(tfile)


def _check(sfile, tfile, env=None):
    p = subprocess.run([SHARDCTL, "check", "--task-file", tfile, "--source-file", sfile], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=120)
    return p.returncode, p.stdout, p.stderr


def test_encrypted_passwords_connect(source1_db, downstream_db, tmp_path):
    plain = source1_db.params["password"]
    assert plain == downstream_db.params["password"]
    source1_db.execute("CREATE TABLE t_1 (id INT PRIMARY KEY)")
    source1_db.execute("INSERT INTO t_1 VALUES (1), (2)")
    downstream_db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    downstream_db.execute("INSERT INTO t VALUES (1), (2)")
    env_free = {k: v for k, v in os.environ.items() if k != dm_encrypt.KEY_ENV}

    legacy = _dmctl_encrypt(plain, bytes.fromhex(dm_encrypt.LEGACY_KEY_HEX), os.urandom(16))
    sfile, tfile = _files(tmp_path, source1_db, downstream_db, legacy)
    p = subprocess.run([SHARDCTL, "check", "--task-file", tfile, "--source-file", sfile], capture_output=True,
                       text=True, cwd=ROOT, env=env_free, timeout=120)
    assert p.returncode == 0 and json.loads(p.stdout)["equal"] is True, (p.stdout, p.stderr)

    key = os.urandom(32)
    (tmp_path / "secret.key").write_text(key.hex())
    sfile, tfile = _files(tmp_path, source1_db, downstream_db, _dmctl_encrypt(plain, key, os.urandom(16)))
    rc, out, err = _check(sfile, tfile, {dm_encrypt.KEY_ENV: str(tmp_path / "secret.key")})
    assert rc == 0 and json.loads(out)["equal"] is True, (out, err)

    # the same ciphertext without the key file: the legacy key gives garbage -> refused, or a wrong
    # password the server rejects; never a silent success
    p = subprocess.run([SHARDCTL, "check", "--task-file", tfile, "--source-file", sfile], capture_output=True,
                       text=True, cwd=ROOT, env=env_free, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert ("dmctl encrypt" in p.stderr and ".password" in p.stderr) or "Access denied" in p.stderr, p.stderr
