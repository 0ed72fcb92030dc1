"""scripts/services: idempotent start, status with addresses, ports off the defaults."""
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args):
    return subprocess.run([str(ROOT / "scripts" / "services"), *args], capture_output=True, text=True, timeout=300)


def test_start_is_idempotent_and_status_reports_all_up(services):
    again = _run("start", "--json")
    assert again.returncode == 0, again.stderr
    info = json.loads(again.stdout)
    assert info["etcd"] == services.etcd
    st = _run("status", "--json")
    assert st.returncode == 0
    assert json.loads(st.stdout)["up"] == {"etcd": True, "source1": True, "source2": True, "downstream": True,
                                           "mysql1": True, "mysql2": True, "mysql-downstream": True}


def test_mysql_servers_are_mysql_9_with_gtid_and_row_binlog(services):
    """The MySQL set (scripts/devservices.py, run from its chroot) is a real MySQL: the
    upstreams with GTID and ROW binlogs, the downstream without a binlog."""
    import pymysql
    for name in ("mysql1", "mysql2", "mysql-downstream"):
        with pymysql.connect(**services.mysql[name]) as c, c.cursor() as cur:
            cur.execute("SELECT VERSION(), @@log_bin, @@gtid_mode, @@binlog_format")
            version, log_bin, gtid_mode, fmt = cur.fetchone()
        assert version.startswith("9.") and "mariadb" not in version.lower(), (name, version)
        if name == "mysql-downstream":
            assert log_bin == 0, name
        else:
            assert (log_bin, gtid_mode, fmt) == (1, "ON", "ROW"), name


def test_ports_avoid_defaults_and_listen_on_loopback(services):
    ports = [services.etcd_port] + [p["port"] for p in services.mysql.values()]
    assert not {3306, 2379, 2380} & set(ports)
    assert len(set(ports)) == len(ports)
    assert {p["host"] for p in services.mysql.values()} == {"127.0.0.1"}


def test_bad_command_is_rejected_with_usage():
    r = _run("launch")
    assert r.returncode == 2 and "invalid choice: 'launch'" in r.stderr
