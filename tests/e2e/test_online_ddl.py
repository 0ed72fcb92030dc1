"""Issue 17: online schema change tools on the shards, with task option ``online-ddl: true``,
against real `shardctl master`/`worker` processes and real MariaDB sources.

* the real ``pt-online-schema-change`` (Debian's percona-toolkit) on one shard table of each
  source while rows are written: the merged table gets the new column once, EQUAL, no shadow
  table downstream, no lock left;
* gh-ost (not packaged here) as the statements it issues, run on the real MariaDB, with a
  worker SIGKILLed between the shadow ALTER and the cut-over (its checkpoint already past the
  ALTER, so only the stored memory of it can bring it to the cut-over), and query-status
  showing the online schema change in progress.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.e2e.conftest import _master_status

ONE = {"s1": ("orders_01",), "s2": ("orders_01",)}


def _online_scenario(scenario):
    sc = scenario(shards=ONE, rows=300)
    doc = yaml.safe_load(Path(sc.task_file).read_text())
    doc["online-ddl"] = True
    Path(sc.task_file).write_text(yaml.safe_dump(doc))
    return sc


def _locks(sc) -> list:
    rc, doc = sc.c.ctl("shard-ddl-lock", sc.name)
    return doc.get("locks", []) if isinstance(doc, dict) else []


def _down_tables(sc) -> list[str]:
    return sorted(r[0] for r in sc.down.execute("SHOW TABLES"))


def _pt_osc(db, table: str, alter: str) -> str:
    assert shutil.which("pt-online-schema-change"), "pt-online-schema-change missing: scripts/bootstrap " \
                                                    "installs Debian's percona-toolkit"
    p = db.params
    dsn = f"h={p['host']},P={p['port']},u={p['user']},p={p['password']},D={db.name},t={table}"
    r = subprocess.run(["pt-online-schema-change", "--alter", alter, dsn, "--execute", "--no-version-check",
                        "--recursion-method=none", "--chunk-size=100"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"pt-online-schema-change failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_pt_online_schema_change_on_two_sources_while_rows_are_written(scenario):
    sc = _online_scenario(scenario)
    sc.start()
    sc.start_writers(tables=ONE)
    for sid in ("s1", "s2"):
        sc.c.context = f"pt-online-schema-change on {sid}.orders_01"
        out = _pt_osc(sc.dbs[sid], "orders_01", "ADD COLUMN note VARCHAR(20) DEFAULT 'x'")
        assert "Successfully altered" in out and "_orders_01_new" in out
    sc.stop_writers()
    sc.wait_equal(timeout=180, columns=["id", "v", "note"])
    assert not [t for t in _down_tables(sc) if t.startswith("_orders")], _down_tables(sc)
    sc.c.wait(lambda: _locks(sc) == [], 60, "no shard-DDL lock left")
    # status writes are rate-limited and an idle worker writes its next one within a poll interval
    sc.c.wait(lambda: all(s["stage"] == "Running" and "onlineDDL" not in s["sync"] for s in sc.subtasks().values()),
              30, "query-status Running, without an online schema change in progress")
    # the tool's table copy (INSERT ... SELECT into the shadow) and trigger rows were not replicated
    # to a table of their own, and the target holds exactly the shards' rows (check EQUAL above)
    rows = sc.down.execute("SELECT COUNT(*) FROM orders")[0][0]
    ups = sum(sc.dbs[s].execute("SELECT COUNT(*) FROM orders_01")[0][0] for s in ("s1", "s2"))
    assert rows == ups
    sc.stop()


def _gh_ost_start(db, alter: str) -> None:
    """gh-ost's statements up to the row copy: changelog table, shadow, its ALTER, the copy."""
    for q in ("create /* gh-ost */ table `{db}`.`_orders_01_ghc` (id bigint auto_increment, "
              "last_update timestamp not null default current_timestamp on update current_timestamp, "
              "hint varchar(64) charset ascii not null, value varchar(4096) charset ascii not null, "
              "primary key(id), unique key hint_uidx(hint)) auto_increment=256",
              "insert /* gh-ost */ into `{db}`.`_orders_01_ghc` (id, hint, value) values (2, 'state', 'GhostTableMigrated')",
              "create /* gh-ost */ table `{db}`.`_orders_01_gho` like `{db}`.`orders_01`",
              "alter /* gh-ost */ table `{db}`.`_orders_01_gho` " + alter,
              "insert /* gh-ost */ ignore into `{db}`.`_orders_01_gho` (id, v) select id, v from `{db}`.`orders_01`"):
        db.execute(q.format(db=db.name))


def _gh_ost_cut_over(db) -> None:
    for q in ("create /* gh-ost */ table `{db}`.`_orders_01_del` (id int auto_increment primary key) "
              "engine=InnoDB comment='ghost-cut-over-sentry'",
              "drop /* gh-ost */ table if exists `{db}`.`_orders_01_del`",
              "rename /* gh-ost */ table `{db}`.`orders_01` to `{db}`.`_orders_01_del`, "
              "`{db}`.`_orders_01_gho` to `{db}`.`orders_01`",
              "drop /* gh-ost */ table if exists `{db}`.`_orders_01_ghc`",
              "drop /* gh-ost */ table if exists `{db}`.`_orders_01_del`"):
        db.execute(q.format(db=db.name))


def _global_point(sc, sid: str) -> tuple[str, int]:
    rows = sc.down.execute(f"SELECT binlog_name, binlog_pos FROM `{sc.name}_syncer_checkpoint` "
                           f"WHERE id = %s AND is_global = 1", (sid,))
    return (rows[0][0], int(rows[0][1])) if rows else ("", 0)


def test_gh_ost_statements_with_a_worker_killed_between_shadow_alter_and_cut_over(scenario):
    sc = _online_scenario(scenario)
    sc.start()
    alter = "add column note varchar(20) default 'x'"
    s1 = sc.dbs["s1"]
    _gh_ost_start(s1, alter)
    after_alter = _master_status(s1)[:2]
    # gh-ost's own applier writes the rows that arrive meanwhile to both tables
    s1.execute("insert into orders_01 (id, v) values (900001, 1), (900002, 2)")
    s1.execute("insert into _orders_01_gho (id, v) values (900001, 1), (900002, 2)")

    def shown():
        # the shadow table shows up at its CREATE; its ALTER may be read in a later batch, and
        # status writes are rate-limited, so wait for the status that includes the ALTER
        st = sc.subtasks().get("s1", {})
        got = st.get("sync", {}).get("onlineDDL")
        return got if got and got[0].get("ddls") else None
    seen = sc.c.wait(shown, 90, "query-status showing the online schema change of s1.orders_01")
    assert seen == [{"table": f"{s1.name}.orders_01", "shadow": "_orders_01_gho", "stage": "in progress",
                     "ddls": [f"alter /* gh-ost */ table `{s1.name}`.`orders_01` {alter}"]}], seen
    assert sc.down_columns() == ["id", "v"]            # nothing ran downstream yet
    # the worker's checkpoint passes the shadow ALTER: a restart does not read it again
    sc.c.wait(lambda: _global_point(sc, "s1") > after_alter, 90, "s1's global checkpoint past the shadow ALTER")
    sc.c.workers["s1"].kill()                          # SIGKILL
    sc.c.restart_worker("s1")
    sc.wait_running()
    _gh_ost_cut_over(s1)
    s1.execute("insert into orders_01 (id, v, note) values (900003, 3, 'after')")
    sc.c.wait(lambda: sc.down_columns() == ["id", "v", "note"], 90, "the remembered ALTER run at s1's cut-over")
    sc.c.wait(lambda: len(_locks(sc)) == 1, 60, "an optimistic lock waiting for s2's orders_01")
    s2 = sc.dbs["s2"]
    _gh_ost_start(s2, alter)
    _gh_ost_cut_over(s2)
    sc.wait_equal(timeout=120, columns=["id", "v", "note"])
    sc.c.wait(lambda: _locks(sc) == [], 60, "the lock resolved")
    assert sc.down.execute("SELECT note FROM orders WHERE id = 900003") == [("after",)]
    assert not [t for t in _down_tables(sc) if t.startswith("_orders")], _down_tables(sc)
    # status writes are rate-limited and an idle worker writes its next one within a poll interval
    sc.c.wait(lambda: all("onlineDDL" not in s["sync"] for s in sc.subtasks().values()), 30,
              "query-status without an online schema change in progress")
    sc.stop()
