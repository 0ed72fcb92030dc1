import textwrap

import pytest

from coordinator.config import ConfigError, load_task, parse_source, parse_task

TASK = textwrap.dedent("""\
    name: shop
    task-mode: incremental
    shard-mode: optimistic
    meta-schema: dm_meta
    online-ddl: true
    heartbeat-update-interval: 1   # DM key we ignore -> warning
    target-database:
      host: 127.0.0.1
      port: 33063
      user: shardmerge
      password: secret
    mysql-instances:
      - source-id: s1
        route-rules: [orders]
        block-allow-list: bal
        syncer-config-name: global
        meta: {binlog-name: mysql-bin.000001, binlog-pos: 4}
      - source-id: s2
        route-rules: [orders]
    routes:
      orders:
        schema-pattern: shop_*
        table-pattern: orders_*
        target-schema: shop
        target-table: orders
    block-allow-list:
      bal:
        do-dbs: ["shop_*"]
    syncers:
      global: {worker-count: 8, batch: 100, safe-mode: false}
    """)


def test_full_task_parses():
    t = parse_task(TASK, "task.yaml")
    assert (t.name, t.task_mode, t.shard_mode, t.meta_schema) == ("shop", "incremental", "optimistic", "dm_meta")
    assert t.sources == ["s1", "s2"]
    assert t.instance("s1").routes[0].target_table == "orders"
    assert t.instance("s1").syncer.worker_count == 8 and t.instance("s2").syncer.worker_count == 4
    assert t.instance("s1").meta.binlog_pos == 4
    assert t.target.port == 33063 and t.target.password == "secret"
    assert any("heartbeat-update-interval" in w and "task.yaml" in w for w in t.warnings)
    assert t.instance("s1").online_ddl is not None and t.instance("s2").online_ddl is not None
    assert "secret" not in repr(t.target)


@pytest.mark.parametrize("change,key,words", [
    (("task-mode: incremental", "task-mode: sometimes"), "task-mode", "must be one of all, full, incremental"),
    (("shard-mode: optimistic", "shard-mode: pessimistic"), "shard-mode", "not supported"),
    (("port: 33063", "port: '33063'"), "target-database.port", "must be an integer"),
    (("port: 33063", "port: 99999"), "target-database.port", "TCP port"),
    (("route-rules: [orders]\n    block", "route-rules: [nope]\n    block"), "mysql-instances[0].route-rules[0]", "'nope' is not defined"),
    (("- source-id: s2", "- source-id: s1"), "mysql-instances[1].source-id", "listed twice"),
    (("name: shop", "nam: shop"), "name", "is required"),
    (("meta-schema: dm_meta", "meta-schema: dm_meta\nbogus-key: 1"), "bogus-key", "unknown key"),
    (("do-dbs: [\"shop_*\"]", "do-dbs: shop"), "block-allow-list.bal.do-dbs", "must be a list"),
    (("batch: 100", "batch: 0"), "syncers.global.batch", "at least 1"),
    (("batch: 100", "batch: 100, apply-mode: streaming"), "syncers.global.apply-mode", "must be stream or job"),
])
def test_errors_name_file_and_key(change, key, words):
    bad = TASK.replace(*change)
    assert bad != TASK
    with pytest.raises(ConfigError) as e:
        parse_task(bad, "task.yaml")
    assert e.value.context["file"] == "task.yaml"
    # one error, or all of the file's (a misspelt key is also "unknown", with a "did you mean")
    errs = getattr(e.value, "errors", [e.value])
    assert any(x.context.get("key") == key and words in str(x) for x in errs), str(e.value)


def test_malformed_yaml_points_at_line():
    with pytest.raises(ConfigError, match=r"not valid YAML at line 2"):
        parse_task("name: x\n  - : [\n", "t.yaml")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file") as e:
        load_task(str(tmp_path / "absent.yaml"))
    assert e.value.context["file"].endswith("absent.yaml")


def test_source_yaml_with_password_from_file_and_env(tmp_path, monkeypatch):
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    src = f"source-id: s1\nflavor: mariadb\nenable-gtid: true\nenable-relay: false\nfrom:\n  host: 127.0.0.1\n  port: 33061\n  user: u\n  password-file: {pw}\n"
    cfg = parse_source(src, "source.yaml")
    assert cfg.db.pymysql_kwargs()["password"] == "s3cret" and cfg.source_id == "s1"
    assert any("enable-relay" in w for w in cfg.warnings)
    # Indirect passwords stay indirect when stored, and are read where the connection is made.
    assert cfg.db.to_json()["password-file"] == str(pw) and "password" not in cfg.db.to_json()
    monkeypatch.setenv("SM_PW", "fromenv")
    assert parse_source(src.replace(f"password-file: {pw}", "password-env: SM_PW")).db.resolved_password() == "fromenv"
    unset = parse_source(src.replace(f"password-file: {pw}", "password-env: SM_NOPE"), "source.yaml")
    with pytest.raises(ConfigError, match="'SM_NOPE' .* is not set") as e:
        unset.db.pymysql_kwargs()
    assert e.value.context == {"file": "source.yaml", "key": "from.password-env"}
    with pytest.raises(ConfigError, match="only one of"):
        parse_source(src.replace(f"password-file: {pw}", f"password-file: {pw}\n  password: x"))
    with pytest.raises(ConfigError, match="flavor"):
        parse_source(src.replace("flavor: mariadb", "flavor: oracle"))
