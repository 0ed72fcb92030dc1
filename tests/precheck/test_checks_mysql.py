"""The prechecks against real MySQL 9.7 servers: every item passing on the well-configured
upstreams, and each bad setting flipped for real (SET GLOBAL on a shared server, restored after;
``gtid_mode``, which moves one step at a time, on a server private to the run), users with too
few privileges, a server without binlog, a wrong ``flavor:``.  Each failure must name MySQL's fix
(SET PERSIST, REPLICATION CLIENT), not MariaDB's.  The version rules (5.7, 8.0, 8.4, which
cannot be installed here) are unit-tested on ``VERSION()`` strings."""
from __future__ import annotations

import pymysql
import pytest

from coordinator.precheck import FAIL, SUCCESS, WARN
from coordinator.precheck.upstream import _version_tuple, version_problem
from tests.precheck.test_checks import SERVER_CHECKS, create, errors, global_var, items, run, source, state, user
from tests.support.ports import free_port

MYSQL_CHECKS = SERVER_CHECKS + ("mysql_binlog_transaction_compression", "mysql_binlog_row_value_options")
TABLE = "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)"


@pytest.fixture
def two_mysql(mysql1_db, mysql2_db, mysql_downstream_db):
    """MySQL sources m1, m2 and the MySQL downstream."""
    return {"m1": mysql1_db, "m2": mysql2_db}, mysql_downstream_db


def instruction(report, name: str, where: str = "") -> str:
    return " | ".join(x for i in items(report, name, where) for x in i.instructions)


def test_every_check_passes_on_well_configured_mysql_servers(two_mysql):
    dbs, down = two_mysql
    create(dbs, TABLE)
    rep = run(dbs, down)
    for sid in dbs:
        for name in MYSQL_CHECKS:
            assert state(rep, name, f"source {sid} ") == SUCCESS, (name, sid, errors(rep, name, f"source {sid} "))
    (v,) = items(rep, "mysql_version", "source m1 ")
    assert "version 9.7" in v.extra
    assert rep.passed and rep.count(WARN) == 0 and rep.count(FAIL) == 0, rep.to_json()


@pytest.mark.parametrize("var, bad", [("binlog_format", "STATEMENT"), ("binlog_row_image", "MINIMAL"),
                                      ("binlog_row_metadata", "MINIMAL"), ("binlog_transaction_compression", "ON"),
                                      ("binlog_row_value_options", "PARTIAL_JSON")])
def test_a_bad_binlog_setting_fails_with_set_persist(two_mysql, var, bad):
    dbs, down = two_mysql
    create(dbs, TABLE)
    with global_var(dbs["m1"].params, var, bad):
        rep = run(dbs, down)           # the precheck's own connection: it sees the new global value
    assert state(rep, f"mysql_{var}", "source m1 ") == FAIL
    assert f"{var} is" in errors(rep, f"mysql_{var}", "source m1 ")
    fix = instruction(rep, f"mysql_{var}", "source m1 ")
    assert fix.startswith(f"SET PERSIST {var} = ") and "SET GLOBAL" not in fix, fix
    assert state(rep, f"mysql_{var}", "source m2 ") == SUCCESS
    assert not rep.passed
    assert state(run(dbs, down), f"mysql_{var}", "source m1 ") == SUCCESS     # restored: passes again


def test_server_id_zero_and_equal_to_the_source_config_fail(two_mysql):
    dbs, down = two_mysql
    create(dbs, TABLE)
    with global_var(dbs["m1"].params, "server_id", 0):
        rep = run(dbs, down)
    assert state(rep, "mysql_server_id", "source m1 ") == FAIL
    assert "server_id is 0" in errors(rep, "mysql_server_id", "source m1 ")
    assert instruction(rep, "mysql_server_id", "source m1 ").startswith("SET PERSIST server_id = ")
    sid = dbs["m2"].execute("SELECT @@GLOBAL.server_id")[0][0]
    srcs = {"m1": source("m1", dbs["m1"].params), "m2": source("m2", dbs["m2"].params, f"server-id: {sid}\n")}
    rep = run(dbs, down, srcs=srcs)
    assert state(rep, "mysql_server_id", "source m2 ") == FAIL
    assert f"`server-id` {sid} equals the upstream's server_id" in errors(rep, "mysql_server_id", "source m2 ")
    assert state(rep, "mysql_server_id", "source m1 ") == SUCCESS


def test_a_mysql_server_without_binlog_fails(services, mysql1_db, mysql_downstream_db):
    """The MySQL downstream runs with --skip-log-bin: as a source, the binlog item fails with
    MySQL's fix (its binlog is on by default since 8.0: the option that turned it off goes)."""
    dbs = {"m1": mysql1_db}
    create(dbs, TABLE)
    rep = run(dbs, mysql_downstream_db, srcs={"m1": source("m1", services.mysql["mysql-downstream"])})
    assert state(rep, "mysql_binlog_enable") == FAIL
    assert "log_bin is OFF" in errors(rep, "mysql_binlog_enable")
    assert "skip-log-bin" in instruction(rep, "mysql_binlog_enable")
    assert state(rep, "mysql_server_id") == SUCCESS and state(rep, "mysql_version") == SUCCESS
    assert not rep.passed


def _apply(params: dict, fix: str) -> None:
    """Run the SET statements of a check's instruction, as an operator following it would."""
    steps = [s.strip() for s in fix.split(" (")[0].split("; then ")]
    assert steps and all(s.startswith("SET PERSIST ") for s in steps), fix
    for s in steps:
        with pymysql.connect(**params, autocommit=True) as c, c.cursor() as cur:
            cur.execute(s)


def test_gtid_mode_steps_fail_and_the_named_fix_restores_it(private_mysql_db, mysql_downstream_db):
    """gtid_mode stepped down for real (ON -> ON_PERMISSIVE -> OFF_PERMISSIVE -> OFF with
    enforce_gtid_consistency OFF) on a private server: each step fails, naming the steps still
    to go; running the instruction's statements brings the server back to ON and the check passes."""
    db = private_mysql_db
    dbs = {"m1": db}
    create(dbs, TABLE)

    def gtid_item():
        rep = run(dbs, mysql_downstream_db)
        return state(rep, "mysql_gtid"), errors(rep, "mysql_gtid"), instruction(rep, "mysql_gtid")

    assert gtid_item()[0] == SUCCESS
    try:
        expected = {"ON_PERMISSIVE": ["SET PERSIST gtid_mode = ON"],
                    "OFF_PERMISSIVE": ["SET PERSIST gtid_mode = ON_PERMISSIVE", "SET PERSIST gtid_mode = ON"],
                    "OFF": ["SET PERSIST enforce_gtid_consistency = ON", "SET PERSIST gtid_mode = OFF_PERMISSIVE",
                            "SET PERSIST gtid_mode = ON_PERMISSIVE", "SET PERSIST gtid_mode = ON"]}
        for mode in ("ON_PERMISSIVE", "OFF_PERMISSIVE", "OFF"):
            db.execute(f"SET GLOBAL gtid_mode = {mode}")
            if mode == "OFF":
                db.execute("SET GLOBAL enforce_gtid_consistency = OFF")
            st, err, fix = gtid_item()
            assert st == FAIL and f"gtid_mode is {mode}" in err, (mode, err)
            assert fix.split(" (")[0] == "; then ".join(expected[mode]), fix
        assert "(enforce_gtid_consistency OFF)" in err
        _apply(db.params, fix)
        assert gtid_item()[0] == SUCCESS
    finally:     # whatever failed above: back to ON for the rest of the run
        mode = db.execute("SELECT @@GLOBAL.gtid_mode")[0][0]
        db.execute("SET GLOBAL enforce_gtid_consistency = ON")
        for m in ("OFF_PERMISSIVE", "ON_PERMISSIVE", "ON")[("OFF", "OFF_PERMISSIVE", "ON_PERMISSIVE", "ON").index(mode):]:
            db.execute(f"SET GLOBAL gtid_mode = {m}")


def test_mysql_privileges_name_mysql_grants(two_mysql):
    dbs, down = two_mysql
    m1 = dbs["m1"]
    create({"m1": m1}, TABLE)
    with user(m1.params, f"SELECT ON `{m1.name}`.*") as p:
        rep = run({"m1": m1}, down, srcs={"m1": source("m1", p)})
    text = errors(rep, "source db replication privilege checker")
    assert state(rep, "source db replication privilege checker") == FAIL
    assert "REPLICATION SLAVE" in text and "REPLICATION CLIENT" in text and "BINLOG MONITOR" not in text
    assert "GRANT REPLICATION CLIENT ON *.*" in instruction(rep, "source db replication privilege checker")
    assert state(rep, "source db dump privilege checker") == FAIL
    assert "lack of RELOAD privilege" in errors(rep, "source db dump privilege checker")
    # BACKUP_ADMIN (LOCK INSTANCE FOR BACKUP) does not stop commits: not a substitute for RELOAD
    with user(m1.params, f"SELECT ON `{m1.name}`.*", "REPLICATION SLAVE, REPLICATION CLIENT ON *.*",
              "BACKUP_ADMIN ON *.*") as p:
        rep = run({"m1": m1}, down, srcs={"m1": source("m1", p)})
    assert state(rep, "source db replication privilege checker") == SUCCESS
    assert state(rep, "source db dump privilege checker") == FAIL
    assert "BACKUP_ADMIN is not enough" in errors(rep, "source db dump privilege checker")
    with user(m1.params, f"SELECT ON `{m1.name}`.*", "REPLICATION SLAVE, REPLICATION CLIENT, RELOAD ON *.*") as p:
        rep = run({"m1": m1}, down, srcs={"m1": source("m1", p)})
    for name in MYSQL_CHECKS:
        assert state(rep, name) == SUCCESS, (name, errors(rep, name))
    assert rep.passed, rep.to_json()


@pytest.mark.parametrize("server, configured, actual", [("mysql1", "mariadb", "mysql"), ("source1", "mysql", "mariadb")])
def test_a_wrong_flavor_in_the_source_config_fails_the_version_item(services, request, server, configured, actual):
    db = request.getfixturevalue({"mysql1": "mysql1_db", "source1": "source1_db"}[server])
    down = request.getfixturevalue("mysql_downstream_db")
    create({"s": db}, TABLE)
    rep = run({"s1": db}, down, srcs={"s1": source("s1", db.params, f"flavor: {configured}\n")})
    assert state(rep, "mysql_version") == FAIL
    assert f"the server is {actual} " in errors(rep, "mysql_version")
    assert f"says `flavor: {configured}`" in errors(rep, "mysql_version")
    assert f"set `flavor: {actual}` in the source config" in instruction(rep, "mysql_version")
    rep = run({"s1": db}, down, srcs={"s1": source("s1", db.params, f"flavor: {actual}\n")})
    assert state(rep, "mysql_version") == SUCCESS


def test_an_unreachable_mysql_source_fails_and_the_other_is_still_checked(two_mysql):
    dbs, down = two_mysql
    create(dbs, TABLE)
    gone = {**dbs["m1"].params, "port": free_port()}
    rep = run(dbs, down, srcs={"m1": source("m1", gone), "m2": source("m2", dbs["m2"].params)})
    assert state(rep, "source_connection") == FAIL
    assert f"cannot connect to source m1 at 127.0.0.1:{gone['port']}" in errors(rep, "source_connection")
    assert state(rep, "mysql_binlog_row_metadata", "source m2 ") == SUCCESS
    assert not rep.passed


# ------------------------------------------------------------------ versions (no server needed)
@pytest.mark.parametrize("version, numbers", [
    ("5.7.44-log", (5, 7, 44)), ("8.0.36", (8, 0, 36)), ("8.4.0-commercial", (8, 4, 0)), ("9.7.4-2", (9, 7, 4)),
    ("8.0.36-0ubuntu0.22.04.1", (8, 0, 36)), ("10.11.6-MariaDB-0+deb12u1-log", (10, 11, 6)),
    ("8.0.28-19.1", (8, 0, 28)), ("8.0.11rc", (8, 0, 11))])
def test_version_numbers_are_read_off_version(version, numbers):
    assert _version_tuple(version) == numbers


@pytest.mark.parametrize("version, refused, words", [
    ("5.7.44-log", True, "MySQL 5.7.44-log has no binlog_row_metadata"),
    ("5.6.51", True, "upgrade the upstream to MySQL 8.0"),
    ("8.0.0-dmr", True, "MySQL 8.0.0-dmr"),
    ("8.0.36", False, ""), ("8.4.0-commercial", False, ""), ("9.7.4-2", False, ""),
    ("10.4.32-MariaDB", True, "upgrade the upstream to MariaDB 10.5"),
    ("10.11.6-MariaDB-0+deb12u1-log", False, ""), ("11.4.2-MariaDB", False, ""),
    ("5.5.5-10.11.6-MariaDB", False, "")])       # the protocol's 5.5.5- prefix some proxies show
def test_version_rules(version, refused, words):
    got = version_problem(version)
    assert (got is not None) == refused, got
    if refused:
        assert words in " ".join(got)


def test_the_backup_lock_does_not_stop_commits(mysql1_db):
    """Why the dump item wants RELOAD and not BACKUP_ADMIN: under LOCK INSTANCE FOR BACKUP a
    transaction still commits (gtid_executed moves), so a snapshot opened under it and the binlog
    position read beside it may disagree; FLUSH TABLES WITH READ LOCK holds commits back."""
    mysql1_db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    with mysql1_db.connect() as lock, lock.cursor() as cur:
        cur.execute("LOCK INSTANCE FOR BACKUP")
        try:
            cur.execute("SELECT @@GLOBAL.gtid_executed")
            before = cur.fetchone()[0]
            mysql1_db.execute("INSERT INTO t VALUES (1)")           # another session commits meanwhile
            cur.execute("SELECT @@GLOBAL.gtid_executed")
            assert cur.fetchone()[0] != before
        finally:
            cur.execute("UNLOCK INSTANCE")
