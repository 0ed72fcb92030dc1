"""Issue 16 part 4: TLS to the upstream and the downstream.

A private MariaDB started with TLS (its own CA and server certificate, made by the test), binlog
on, acting as both the source and the downstream, with a user that has ``REQUIRE SSL``: a real
`shardctl master` and `worker` run a task (full load, binlog rows, a shard DDL, checkpoints)
with DM's ``security`` keys (paths for the source, certificate *content* for the downstream), and
`shardctl check` is EQUAL.  A wrong CA fails naming the server; TLS configured against a server
without TLS is refused, never plain text."""
from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pymysql
import pytest
import yaml

from coordinator.config import parse_source
from tests.conftest import devservices
from tests.e2e.conftest import Cluster, db_params, free_port

USER, PW = "sm_tls", "tls-secret"


def _openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=d)


@pytest.fixture(scope="module")
def tls_mariadb(tmp_path_factory):
    """{"host", "port", "ca", "wrong_ca", "dir"} of a private MariaDB that requires TLS of USER."""
    d = tmp_path_factory.mktemp("tls-mariadb")
    _ca(d, "ca")
    _ca(d, "wrong-ca")
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
             "-out", "server.csr", cwd=d)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.cnf", "-out", "server.crt", cwd=d)
    port = free_port()
    m = devservices.MariaDB("tls", port, 301, True)
    m_dir = d / "server"
    m_dir.mkdir()
    sock, pid = m_dir / "mysqld.sock", m_dir / "mysqld.pid"
    cnf = m_dir / "my.cnf"
    cnf.write_text("\n".join([
        "[mariadbd]", f"datadir={m_dir / 'data'}", f"socket={sock}", f"port={port}", "bind-address=127.0.0.1",
        f"pid-file={pid}", f"log-error={m_dir / 'error.log'}", "server_id=301", "skip-name-resolve",
        "character-set-server=utf8mb4", "innodb_buffer_pool_size=32M", "innodb_flush_log_at_trx_commit=2",
        "log-bin=mysql-bin", "binlog_format=ROW", "binlog_row_image=FULL", "binlog_row_metadata=FULL",
        "gtid_domain_id=301", "gtid_strict_mode=ON",
        f"ssl-ca={d / 'ca.crt'}", f"ssl-cert={d / 'server.crt'}", f"ssl-key={d / 'server.key'}"]) + "\n")
    as_root = ["--user=root"] if hasattr(__import__("os"), "geteuid") and __import__("os").geteuid() == 0 else []
    r = subprocess.run([shutil.which("mariadb-install-db") or "mariadb-install-db", f"--defaults-file={cnf}",
                        *as_root, "--skip-test-db", "--auth-root-authentication-method=normal"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    proc = subprocess.Popen([shutil.which("mariadbd") or "/usr/sbin/mariadbd", f"--defaults-file={cnf}", *as_root],
                            stdout=open(m_dir / "stdout.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)

    def root(sql: str) -> subprocess.CompletedProcess:
        return subprocess.run([shutil.which("mariadb") or "mariadb", "--no-defaults", f"--socket={sock}", "-uroot",
                               "-N", "-e", sql], capture_output=True, text=True, timeout=30)
    deadline = time.monotonic() + 60
    while root("SELECT 1").returncode != 0:
        assert time.monotonic() < deadline and proc.poll() is None, (m_dir / "error.log").read_text()[-3000:]
        time.sleep(0.3)
    r = root(f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PW}' REQUIRE SSL;"
             f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'127.0.0.1'; SELECT @@have_ssl")
    assert r.returncode == 0 and "YES" in r.stdout, (r.stdout, r.stderr)
    try:
        yield {"host": "127.0.0.1", "port": port, "ca": str(d / "ca.crt"), "wrong_ca": str(d / "wrong-ca.crt"),
               "dir": d, "m": m}
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _conn(tls, **kw):
    return pymysql.connect(host=tls["host"], port=tls["port"], user=USER, password=PW, autocommit=True, **kw)


def test_the_server_requires_tls_of_our_user(tls_mariadb):
    with pytest.raises(pymysql.err.OperationalError) as e:
        _conn(tls_mariadb, ssl_disabled=True)
    assert e.value.args[0] == 1045            # REQUIRE SSL: plain text is refused
    with _conn(tls_mariadb, ssl={"ca": tls_mariadb["ca"]}) as c, c.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        assert cur.fetchone()[1]


def test_task_over_tls_full_load_binlog_ddl_and_check(tls_mariadb, services, etcd_client, tmp_path):
    tls = tls_mariadb
    up, down = f"tls_up_{uuid.uuid4().hex[:6]}", f"tls_down_{uuid.uuid4().hex[:6]}"
    with _conn(tls, ssl={"ca": tls["ca"]}) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE {up}")
        cur.execute(f"CREATE DATABASE {down}")
        for t in ("orders_01", "orders_02"):
            cur.execute(f"CREATE TABLE {up}.{t} (id INT PRIMARY KEY, v INT)")
            base = 0 if t == "orders_01" else 100_000
            cur.execute(f"INSERT INTO {up}.{t} VALUES " + ", ".join(f"({base + i}, {i})" for i in range(200)))
    prefix = f"/shardmerge-test/tls-{uuid.uuid4().hex[:10]}/"
    c = Cluster(services, prefix, tmp_path)
    # the source by path, the downstream by certificate content (DM's ssl-ca-bytes)
    src = {"source-id": "s1", "enable-gtid": True, "flavor": "mariadb",
           "from": {"host": tls["host"], "port": tls["port"], "user": USER, "password": PW,
                    "security": {"ssl-ca": tls["ca"]}}}
    Path(c.source_files["s1"]).write_text(yaml.safe_dump(src))
    target = {"host": tls["host"], "port": tls["port"], "user": USER, "password": PW,
              "security": {"ssl-ca-bytes": Path(tls["ca"]).read_text()}}
    task = {"name": f"tls_{uuid.uuid4().hex[:6]}", "task-mode": "all", "shard-mode": "optimistic", "meta-schema": down,
            "target-database": target,
            "routes": {"r": {"schema-pattern": up, "table-pattern": "orders_*", "target-schema": down,
                             "target-table": "orders"}},
            "block-allow-list": {"b": {"do-dbs": [up]}},
            "mysql-instances": [{"source-id": "s1", "route-rules": ["r"], "block-allow-list": "b"}]}
    task_file = tmp_path / "task.yaml"
    task_file.write_text(yaml.safe_dump(task))
    try:
        c.start()
        c.task_name = task["name"]
        c.ctl_ok("start-task", str(task_file))
        with _conn(tls, ssl={"ca": tls["ca"]}) as conn, conn.cursor() as cur:
            def down_rows():
                cur.execute(f"SELECT COUNT(*) FROM {down}.orders")
                return cur.fetchone()[0]
            c.wait(lambda: down_rows() == 400, 180, "the full load over TLS")
            cur.execute(f"INSERT INTO {up}.orders_01 VALUES (500, 1), (501, 2)")
            for t in ("orders_01", "orders_02"):
                cur.execute(f"ALTER TABLE {up}.{t} ADD COLUMN note VARCHAR(10) DEFAULT 'tls'")
            cur.execute(f"INSERT INTO {up}.orders_02 VALUES (100500, 3, 'x')")
            c.wait(lambda: down_rows() == 403, 120, "binlog rows and the shard DDL over TLS")
            cur.execute(f"SELECT COUNT(*) FROM {down}.`{task['name']}_syncer_checkpoint` WHERE id = 's1'")
            assert cur.fetchone()[0] >= 3            # global + one row per table, written over TLS

        def equal():
            rc, rep = c.ctl("check", "--task-file", str(task_file), "--source-file", c.source_files["s1"])
            return rc == 0 and isinstance(rep, dict) and rep.get("equal")
        c.wait(equal, 120, "shardctl check EQUAL over TLS")
        c.ctl_ok("stop-task", task["name"])
    finally:
        c.stop()
        etcd_client.delete_prefix(prefix)


def test_a_wrong_ca_fails_naming_the_server(tls_mariadb, tmp_path):
    tls = tls_mariadb
    src_file = tmp_path / "s9.yaml"
    src_file.write_text(yaml.safe_dump({"source-id": "s9", "from": {
        "host": tls["host"], "port": tls["port"], "user": USER, "password": PW,
        "security": {"ssl-ca": tls["wrong_ca"]}}}))
    task_file = tmp_path / "t9.yaml"
    task_file.write_text(yaml.safe_dump({
        "name": "t9", "target-database": {"host": tls["host"], "port": tls["port"], "user": USER, "password": PW,
                                          "security": {"ssl-ca": tls["ca"]}},
        "mysql-instances": [{"source-id": "s9"}]}))
    r = subprocess.run([str(Path(__file__).resolve().parents[2] / ".venv/bin/shardctl"), "check", "--task-file",
                        str(task_file), "--source-file", str(src_file)], capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert f"{tls['host']}:{tls['port']}" in out and "certificate verify failed" in out.lower(), out
    assert "ssl-ca" in out and "s9.yaml" in out, out


def test_configured_tls_never_falls_back_to_plain_text(services):
    plain = services.mysql["source2"]          # the shared dev server offers no TLS
    cfg = parse_source(yaml.safe_dump({"source-id": "s9", "from": {**db_params(plain),
                                                                   "security": {"ssl-ca": "/etc/ssl/certs/ca-certificates.crt"}}}),
                       "s9.yaml")
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(**cfg.db.pymysql_kwargs())
    assert "SSL" in str(e.value) or "TLS" in str(e.value)


def _src(security: dict):
    return parse_source(yaml.safe_dump({"source-id": "s9", "from": {"host": "h", "port": 1, "user": "u",
                                                                    "password": "p", "security": security}}),
                        "s9.yaml")


def test_security_keys_are_checked_and_content_becomes_a_private_file():
    import os
    from coordinator.errors import ConfigError
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    with pytest.raises(ConfigError, match=r"only one of `ssl-ca` and `ssl-ca-bytes`.*from.security"):
        _src({"ssl-ca": "/x.crt", "ssl-ca-bytes": pem})
    with pytest.raises(ConfigError, match=r"from.security.ssl-ca-bytes.*must be PEM text"):
        _src({"ssl-ca-bytes": "/path/to/ca.crt"})
    with pytest.raises(ConfigError, match=r"needs `ssl-key`"):
        _src({"ssl-ca": "/x.crt", "ssl-cert": "/c.crt"})
    cfg = _src({"ssl-ca-bytes": pem})
    path = cfg.db.pymysql_kwargs()["ssl"]["ca"]
    assert Path(path).read_text() == pem and (os.stat(path).st_mode & 0o777) == 0o600
    assert pem not in repr(cfg) and cfg.db.tls
    assert cfg.db.to_json()["security"] == {"ssl-ca-bytes": pem}     # stored for the worker, like DM


def test_get_config_masks_a_private_key_given_as_content():
    from coordinator.master.cluster import _mask
    text = yaml.safe_dump({"source-id": "s1", "from": {"host": "h", "password": "pw", "security": {
        "ssl-ca-bytes": "-----BEGIN CERTIFICATE-----", "ssl-key-bytes": "-----BEGIN PRIVATE KEY-----\nsecret"}}})
    out = _mask(text, [("from", "password"), ("from", "security", "ssl-key-bytes")])
    assert "secret" not in out and "PRIVATE KEY" not in out and "BEGIN CERTIFICATE" in out
