"""Every precheck passing and failing for real, against the private MariaDB servers: server
variables are changed with SET GLOBAL (restored after), users with too few privileges are
created and dropped, shard tables are created with conflicting columns and colliding keys."""
from __future__ import annotations

import contextlib
import uuid

import pymysql
import pytest

from coordinator.config import parse_source, parse_task
from coordinator.precheck import FAIL, SUCCESS, WARN, run_prechecks
from tests.support.ports import free_port as _free_port


@contextlib.contextmanager
def global_var(params: dict, name: str, value):
    """SET GLOBAL name = value on the server of ``params`` for the block, then restore it."""
    with pymysql.connect(**params, autocommit=True) as c, c.cursor() as cur:
        cur.execute(f"SELECT @@GLOBAL.{name}")
        old = cur.fetchone()[0]
        cur.execute(f"SET GLOBAL {name} = %s", (value,))
    try:
        yield
    finally:
        with pymysql.connect(**params, autocommit=True) as c, c.cursor() as cur:
            cur.execute(f"SET GLOBAL {name} = %s", (old,))


@contextlib.contextmanager
def user(params: dict, *grants: str):
    """A user on the server of ``params`` with only ``grants`` (``GRANT <g> TO`` it); yields its
    connection params."""
    name = f"pre_{uuid.uuid4().hex[:8]}"
    with pymysql.connect(**params, autocommit=True) as c, c.cursor() as cur:
        cur.execute(f"CREATE USER '{name}'@'127.0.0.1' IDENTIFIED BY 'pw'")
        for g in grants:
            cur.execute(f"GRANT {g} TO '{name}'@'127.0.0.1'")
    try:
        yield {**params, "user": name, "password": "pw"}
    finally:
        with pymysql.connect(**params, autocommit=True) as c, c.cursor() as cur:
            cur.execute(f"DROP USER '{name}'@'127.0.0.1'")


def source(sid: str, p: dict, extra: str = ""):
    return parse_source(f"source-id: {sid}\n{extra}from: {{host: {p['host']}, port: {p['port']}, "
                        f"user: {p['user']}, password: '{p['password']}'}}\n")


def task(dbs: dict, down: dict, *, mode: str = "all", meta: str = "", name: str = "pre"):
    """One route per source: every ``orders_*`` table of its database -> ``shop_pre.orders``."""
    routes = "".join(f"  r{sid}: {{schema-pattern: {db.name}, table-pattern: 'orders_*', target-schema: "
                     f"shop_pre, target-table: orders}}\n" for sid, db in dbs.items())
    insts = "".join(f"  - {{source-id: {sid}, route-rules: [r{sid}], block-allow-list: b{sid}}}\n" for sid in dbs)
    bals = "".join(f"  b{sid}: {{do-dbs: [{db.name}]}}\n" for sid, db in dbs.items())
    return parse_task(f"name: {name}\ntask-mode: {mode}\nshard-mode: optimistic\n"
                      + (f"meta-schema: {meta}\n" if meta else "")
                      + f"target-database: {{host: {down['host']}, port: {down['port']}, user: {down['user']}, "
                        f"password: '{down['password']}'}}\nroutes:\n{routes}block-allow-list:\n{bals}"
                        f"mysql-instances:\n{insts}")


@pytest.fixture
def two(source1_db, source2_db, downstream_db):
    """Sources s1, s2 with one ``orders_1`` shard each (created by the test)."""
    return {"s1": source1_db, "s2": source2_db}, downstream_db


def run(dbs, down, *, srcs=None, **kw):
    srcs = srcs or {sid: source(sid, db.params) for sid, db in dbs.items()}
    return run_prechecks(task(dbs, down.params if hasattr(down, "params") else down, **kw), srcs)


def items(report, name: str, where: str = "") -> list:
    got = [i for i in report.items if i.name == name and where in i.extra]
    assert got, f"no item {name!r} ({where}) in {[i.name for i in report.items]}"
    return got


def state(report, name: str, where: str = "") -> str:
    (it,) = items(report, name, where)
    return it.state


def errors(report, name: str, where: str = "") -> str:
    return " | ".join(m for i in items(report, name, where) for _, m in i.errors)


def create(dbs, sql: str) -> None:
    for db in dbs.values():
        db.execute(sql)


SERVER_CHECKS = ("mysql_version", "mysql_server_id", "mysql_binlog_enable", "mysql_binlog_format",
                 "mysql_binlog_row_image", "mysql_binlog_row_metadata", "mysql_gtid",
                 "source db dump privilege checker", "source db replication privilege checker")


def test_every_check_passes_on_well_configured_servers(two):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    rep = run(dbs, down)
    for sid in dbs:
        for name in SERVER_CHECKS:
            assert state(rep, name, f"source {sid} ") == SUCCESS, (name, sid, errors(rep, name, f"source {sid} "))
    for name in ("table structure compatibility check", "optimistic sharding table `shop_pre`.`orders` "
                 "consistency checking", "auto-increment key checking", "downstream_connection",
                 "meta_schema_writable"):
        assert state(rep, name) == SUCCESS, (name, errors(rep, name))
    assert rep.passed and rep.count(WARN) == 0 and rep.count(FAIL) == 0
    doc = rep.to_json()
    assert doc["summary"] == {"passed": True, "total": len(rep.items), "successful": len(rep.items),
                              "failed": 0, "warning": 0}
    assert set(doc["results"][0]) == {"id", "name", "desc", "state", "errors", "instruction", "extra"}


@pytest.mark.parametrize("var, bad", [("binlog_format", "STATEMENT"), ("binlog_row_image", "MINIMAL"),
                                      ("binlog_row_metadata", "MINIMAL")])
def test_binlog_setting_fails_on_the_changed_source_only(two, var, bad):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    with global_var(dbs["s1"].params, var, bad):
        rep = run(dbs, down)
    assert state(rep, f"mysql_{var}", "source s1 ") == FAIL
    assert f"{var} is {bad}, and should be" in errors(rep, f"mysql_{var}", "source s1 ")
    assert f"SET GLOBAL {var} = " in items(rep, f"mysql_{var}", "source s1 ")[0].instructions[0]
    assert state(rep, f"mysql_{var}", "source s2 ") == SUCCESS
    assert not rep.passed
    assert state(run(dbs, down), f"mysql_{var}", "source s1 ") == SUCCESS     # restored: passes again


def test_binlog_checks_skipped_for_a_full_load_task(two):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    with global_var(dbs["s1"].params, "binlog_row_image", "MINIMAL"):
        rep = run(dbs, down, mode="full")
    names = {i.name for i in rep.items}
    assert "mysql_binlog_row_image" not in names and "source db replication privilege checker" not in names
    assert rep.passed


def test_gtid_strict_mode_off_warns(two):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    with global_var(dbs["s2"].params, "gtid_strict_mode", "OFF"):
        rep = run(dbs, down)
    assert state(rep, "mysql_gtid", "source s2 ") == WARN
    assert "gtid_strict_mode is OFF" in errors(rep, "mysql_gtid", "source s2 ")
    assert state(rep, "mysql_gtid", "source s1 ") == SUCCESS
    assert rep.passed                   # a warning does not stop a task


def test_server_without_binlog_fails(services, source1_db, downstream_db):
    """The downstream server has no binlog: pointed at as a source, binlog_enable fails.
    (server_id 0 cannot be set on MariaDB 10.11, it is clamped to 1: the server_id check's
    failure is the source's `server-id` equal to the upstream's, below.)"""
    down_params = dict(services.mysql["downstream"])
    dbs = {"s1": source1_db}
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    srcs = {"s1": source("s1", down_params)}
    rep = run(dbs, downstream_db, srcs=srcs)
    assert state(rep, "mysql_binlog_enable") == FAIL
    assert "log_bin is OFF" in errors(rep, "mysql_binlog_enable")
    assert state(rep, "mysql_server_id") == SUCCESS
    assert not rep.passed


def test_source_server_id_equal_to_upstream_fails(two):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    with pymysql.connect(**dbs["s1"].params) as c, c.cursor() as cur:
        cur.execute("SELECT @@server_id")
        sid = cur.fetchone()[0]
    srcs = {"s1": source("s1", dbs["s1"].params, f"server-id: {sid}\n"), "s2": source("s2", dbs["s2"].params)}
    rep = run(dbs, down, srcs=srcs)
    assert state(rep, "mysql_server_id", "source s1 ") == FAIL
    assert f"`server-id` {sid} equals the upstream's server_id" in errors(rep, "mysql_server_id", "source s1 ")


def test_privileges_too_few_fail(two):
    dbs, down = two
    s1 = dbs["s1"]
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    s1.execute("CREATE TABLE orders_2 (id BIGINT PRIMARY KEY, v INT)")
    # SELECT on the shard schema only: the dump may read, replication may not
    with user(s1.params, f"SELECT ON `{s1.name}`.*") as p:
        rep = run({"s1": s1}, down, srcs={"s1": source("s1", p)})
    assert state(rep, "source db dump privilege checker") == SUCCESS
    assert state(rep, "source db replication privilege checker") == FAIL
    text = errors(rep, "source db replication privilege checker")
    assert "REPLICATION SLAVE" in text and "BINLOG MONITOR" in text
    # INSERT (no SELECT) on one table: the dump cannot read it
    with user(s1.params, f"SELECT ON `{s1.name}`.`orders_1`", f"INSERT ON `{s1.name}`.`orders_2`",
              "REPLICATION SLAVE, BINLOG MONITOR ON *.*") as p:
        rep = run({"s1": s1}, down, srcs={"s1": source("s1", p)})
        assert state(rep, "source db replication privilege checker") == SUCCESS
        assert state(rep, "source db dump privilege checker") == FAIL
        assert errors(rep, "source db dump privilege checker") == \
            f"lack of SELECT privilege on `{s1.name}`.`orders_2`"
        # an incremental task does not dump: the dump privilege is not checked
        rep = run({"s1": s1}, down, srcs={"s1": source("s1", p)}, mode="incremental")
        assert "source db dump privilege checker" not in {i.name for i in rep.items}
        assert rep.passed


def test_conflicting_shard_columns_are_named(two):
    dbs, down = two
    dbs["s1"].execute("CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, a INT, c INT, d DATE, w INT)")
    dbs["s2"].execute("CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, a INT, c VARCHAR(10), d DATETIME, w BIGINT)")
    rep = run(dbs, down)
    name = "optimistic sharding table `shop_pre`.`orders` consistency checking"
    assert state(rep, name) == FAIL
    text = errors(rep, name)
    assert "column `c` is INT(11) on s1:" in text and "VARCHAR(10) on s2:" in text
    assert "column `d` is DATE on s1:" in text and "DATETIME on s2:" in text
    assert "`a`" not in text and "`w`" not in text      # equal, and a widening (INT -> BIGINT): joinable
    assert not rep.passed


def test_shards_starting_with_different_defaults_or_int_against_text_fail(two):
    """The lattice joins two explicit defaults (to its top) and an integer with text (to
    VARCHAR(20)) so that a shard *changing* one holds no table; shards that start out that way
    are still DM's failed check, naming each column."""
    dbs, down = two
    dbs["s1"].execute("CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, d INT DEFAULT 1, k INT)")
    dbs["s2"].execute("CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, d INT DEFAULT 2, k VARCHAR(10))")
    rep = run(dbs, down)
    name = "optimistic sharding table `shop_pre`.`orders` consistency checking"
    assert state(rep, name) == FAIL
    text = errors(rep, name)
    assert "column `d` has DEFAULT 1 on s1:" in text and "DEFAULT 2 on s2:" in text
    assert "column `k` is INT(11) on s1:" in text and "VARCHAR(10) on s2:" in text


def test_joinable_shards_pass(two):
    """Shards that differ but join (an extra nullable column, a wider integer) pass."""
    dbs, down = two
    dbs["s1"].execute("CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, w INT)")
    dbs["s2"].execute("CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, w BIGINT, extra VARCHAR(5))")
    rep = run(dbs, down)
    assert state(rep, "optimistic sharding table `shop_pre`.`orders` consistency checking") == SUCCESS


def test_keyless_shards_warn(two):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (a INT, b INT)")
    rep = run(dbs, down)
    assert state(rep, "table structure compatibility check") == WARN
    text = errors(rep, "table structure compatibility check")
    assert f"s1:`{dbs['s1'].name}`.`orders_1` has no primary/unique key" in text
    assert f"s2:`{dbs['s2'].name}`.`orders_1` has no primary/unique key" in text
    assert rep.passed


def test_auto_increment_collision_fails_with_the_colliding_keys(two):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    dbs["s1"].execute("INSERT INTO orders_1 (v) VALUES (1), (2), (3)")          # ids 1, 2, 3
    dbs["s2"].execute("INSERT INTO orders_1 (id, v) VALUES (3, 1), (4, 1)")      # 3 collides
    rep = run(dbs, down)
    assert state(rep, "auto-increment key checking") == FAIL
    assert "both hold rows with AUTO_INCREMENT key `id` = 3:" in errors(rep, "auto-increment key checking")
    # an incremental task does not load: the shard consistency checks are not run (as DM)
    rep = run(dbs, down, mode="incremental")
    assert not {"auto-increment key checking", "optimistic sharding table `shop_pre`.`orders` consistency "
                "checking"} & {i.name for i in rep.items}
    assert rep.passed


def test_auto_increment_same_sequence_warns_and_interleaved_passes(two):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    dbs["s1"].execute("INSERT INTO orders_1 (v) VALUES (1), (2)")                # 1, 2
    dbs["s2"].execute("ALTER TABLE orders_1 AUTO_INCREMENT = 1000")
    dbs["s2"].execute("INSERT INTO orders_1 (v) VALUES (1)")                     # 1000: no collision yet
    rep = run(dbs, down)
    assert state(rep, "auto-increment key checking") == WARN
    assert "from the same sequence: new rows will collide" in errors(rep, "auto-increment key checking")
    # auto_increment_increment 2 with offsets 1 and 2: the sequences never meet
    with global_var(dbs["s1"].params, "auto_increment_increment", 2), \
            global_var(dbs["s2"].params, "auto_increment_increment", 2), \
            global_var(dbs["s1"].params, "auto_increment_offset", 1), \
            global_var(dbs["s2"].params, "auto_increment_offset", 2):
        rep = run(dbs, down)
    assert state(rep, "auto-increment key checking") == SUCCESS


def test_unreachable_source_and_downstream_fail(two):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    gone = {**down.params, "port": _free_port()}
    rep = run(dbs, gone)
    assert state(rep, "downstream_connection") == FAIL
    assert f"cannot connect to the downstream at 127.0.0.1:{gone['port']}" in errors(rep, "downstream_connection")
    assert "meta_schema_writable" not in {i.name for i in rep.items}
    srcs = {"s1": source("s1", {**dbs["s1"].params, "port": gone["port"]}), "s2": source("s2", dbs["s2"].params)}
    rep = run(dbs, down, srcs=srcs)
    assert state(rep, "source_connection") == FAIL
    assert "cannot connect to source s1" in errors(rep, "source_connection")
    assert state(rep, "mysql_binlog_row_image", "source s2 ") == SUCCESS
    # the table checks could not see s1's tables: they say so, never "success"
    assert state(rep, "table structure compatibility check") == WARN
    assert "not checked: the tables of source(s) s1" in errors(rep, "table structure compatibility check")


def _schemas(params: dict) -> set[str]:
    with pymysql.connect(**params) as c, c.cursor() as cur:
        cur.execute("SHOW DATABASES")
        return {r[0] for r in cur.fetchall()}


def test_meta_schema_writable_leaves_nothing_behind(two):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    fresh = f"pre_meta_{uuid.uuid4().hex[:8]}"
    rep = run(dbs, down, meta=fresh)
    assert state(rep, "meta_schema_writable") == SUCCESS
    assert fresh not in _schemas(down.params)                  # created for the probe, dropped again
    rep = run(dbs, down, meta=down.name)                        # an existing meta schema keeps no probe table
    assert state(rep, "meta_schema_writable") == SUCCESS
    assert down.execute("SHOW TABLES") == []


def test_meta_schema_not_writable_fails(two):
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    with user(down.params, f"SELECT ON `{down.name}`.*") as p:
        rep = run(dbs, p, meta=down.name)
    assert state(rep, "downstream_connection") == SUCCESS
    assert state(rep, "meta_schema_writable") == FAIL
    assert f"cannot write to meta schema `{down.name}`" in errors(rep, "meta_schema_writable")
    assert down.execute("SHOW TABLES") == []


def test_secret_the_master_lacks_skips_the_checks_with_a_warning(two, monkeypatch):
    """`password-env` is read where the connection is made: a worker may hold it, the master not."""
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id BIGINT PRIMARY KEY, v INT)")
    monkeypatch.delenv("PRECHECK_TEST_PW", raising=False)
    p = dbs["s1"].params
    s1 = parse_source(f"source-id: s1\nfrom: {{host: {p['host']}, port: {p['port']}, user: {p['user']}, "
                      f"password-env: PRECHECK_TEST_PW}}\n")
    rep = run(dbs, down, srcs={"s1": s1, "s2": source("s2", dbs["s2"].params)})
    assert state(rep, "source_connection") == WARN
    assert "the master cannot read the password of source s1" in errors(rep, "source_connection")
    assert "PRECHECK_TEST_PW" in errors(rep, "source_connection")
    assert not [i for i in rep.items if "source s1 " in i.extra and i.name != "source_connection"]
    assert rep.passed
    monkeypatch.setenv("PRECHECK_TEST_PW", p["password"])
    rep = run(dbs, down, srcs={"s1": s1, "s2": source("s2", dbs["s2"].params)})
    assert "source_connection" not in {i.name for i in rep.items}
    assert state(rep, "mysql_binlog_row_image", "source s1 ") == SUCCESS


def test_auto_increment_keys_unreadable_warn_not_checked(source1_db, downstream_db):
    s1 = source1_db
    for t in ("orders_1", "orders_2"):
        s1.execute(f"CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    with user(s1.params, f"SELECT ON `{s1.name}`.`orders_1`", f"INSERT ON `{s1.name}`.`orders_2`",
              "REPLICATION SLAVE, BINLOG MONITOR ON *.*") as p:
        rep = run({"s1": s1}, downstream_db, srcs={"s1": source("s1", p)})
    assert state(rep, "auto-increment key checking") == WARN
    assert "the key values could not be read" in errors(rep, "auto-increment key checking")
    assert state(rep, "source db dump privilege checker") == FAIL


def test_a_meta_start_past_the_end_or_in_a_missing_file_fails(two):
    """An incremental task's meta start must be a position the source has written: past the end
    of its file, or in a file it does not list, check-task fails it (the worker would refuse to
    start for the same reason); a position it has passes."""
    import dataclasses

    from coordinator.config import BinlogMeta
    from worker.upstream import master_status
    dbs, down = two
    create(dbs, "CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT)")
    end = master_status(dbs["s1"].params)
    srcs = {sid: source(sid, db.params) for sid, db in dbs.items()}

    def with_meta(meta):
        t = task(dbs, down.params, mode="incremental")
        return dataclasses.replace(t, instances=(dataclasses.replace(t.instances[0], meta=meta),) + t.instances[1:])

    rep = run_prechecks(with_meta(BinlogMeta(end.file, end.pos + 100_000)), srcs)
    assert state(rep, "binlog_start_position", "source s1") == "fail"
    assert f"{end.file}:{end.pos + 100_000} is past the end of that file" in errors(rep, "binlog_start_position")
    rep = run_prechecks(with_meta(BinlogMeta("no-such-bin.000001", 4)), srcs)
    assert state(rep, "binlog_start_position", "source s1") == "fail"
    assert "has no binlog file no-such-bin.000001" in errors(rep, "binlog_start_position")
    rep = run_prechecks(with_meta(BinlogMeta(end.file, end.pos)), srcs)
    assert state(rep, "binlog_start_position", "source s1") == "success"
