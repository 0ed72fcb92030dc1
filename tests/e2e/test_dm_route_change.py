"""DM's `DM_UPDATE_BA_ROUTE_CASE` (issue 19) with real processes: two upstream schemas per source,
four `tb1` shard tables -> one target.  The task is restarted with a block-allow list that drops
the second schemas, changes schemas meanwhile, then restarted with both again: rows of the
returning tables name a column the downstream dropped, which stops both sources with the
server's "Error 1054 (42S22): Unknown column 'new_col1' in ..."; the operator adds the column downstream,
`resume-task`, and the data ends equal."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import yaml

from .conftest import db_params


@pytest.fixture
def second_dbs(source1_db, source2_db):
    """A second upstream schema on each source (dropped afterwards)."""
    made = {}
    for sid, db in (("s1", source1_db), ("s2", source2_db)):
        name = f"{db.name[:50]}_two"
        db.execute(f"CREATE DATABASE `{name}`")
        made[sid] = (db, name)
    yield {sid: name for sid, (_, name) in made.items()}
    for db, name in made.values():
        with contextlib.suppress(Exception):
            db.execute(f"DROP DATABASE `{name}`")


def _task(name: str, down, schemas: dict, both: bool) -> dict:
    routes, insts, bals = {}, [], {}
    for sid, (one, two) in schemas.items():
        dbs = [one, two] if both else [one]
        routes[f"r-{sid}"] = {"schema-pattern": f"{one[:40]}*", "table-pattern": "tb1",
                              "target-schema": down.name, "target-table": "tb"}
        bals[f"bal-{sid}"] = {"do-dbs": dbs}
        insts.append({"source-id": sid, "route-rules": [f"r-{sid}"], "block-allow-list": f"bal-{sid}",
                      "syncer": {"worker-count": 2, "batch": 100}})
    return {"name": name, "task-mode": "all", "shard-mode": "optimistic", "meta-schema": down.name,
            "target-database": db_params(down.params), "routes": routes, "block-allow-list": bals,
            "mysql-instances": insts}


def test_dm_update_ba_route_case(cluster, source1_db, source2_db, downstream_db, second_dbs, tmp_path):
    c = cluster
    name = "ba_route"
    up = {"s1": source1_db, "s2": source2_db}
    schemas = {sid: (up[sid].name, second_dbs[sid]) for sid in up}
    db1 = {sid: f"`{schemas[sid][0]}`.tb1" for sid in up}
    db2 = {sid: f"`{schemas[sid][1]}`.tb1" for sid in up}

    def run(sid, sql):
        up[sid].execute(sql)

    def count(n):
        # 180 s: the first count waits for the full load, which waits for the Spark session
        c.wait(lambda: downstream_db.execute("SELECT COUNT(*) FROM tb")[0][0] == n, 180, f"{n} rows downstream")

    def start(both: bool):
        f = Path(tmp_path) / f"task-{'both' if both else 'one'}.yaml"
        f.write_text(yaml.safe_dump(_task(name, downstream_db, schemas, both)))
        c.task_name = name
        c.ctl_ok("start-task", str(f))
        return str(f)

    def subtasks():
        rc, doc = c.ctl("query-status", name)
        return {s["sourceStatus"]["source"]: s["subTaskStatus"][0] for s in (doc.get("sources") or [])
                if s.get("subTaskStatus")} if isinstance(doc, dict) else {}

    for sid in up:
        run(sid, f"CREATE TABLE {db1[sid]} (id INT PRIMARY KEY)")
        run(sid, f"CREATE TABLE {db2[sid]} (id INT PRIMARY KEY)")
    try:
        start(both=True)
        run("s1", f"INSERT INTO {db1['s1']} VALUES (1)")
        run("s1", f"INSERT INTO {db2['s1']} VALUES (2)")
        run("s2", f"INSERT INTO {db1['s2']} VALUES (3)")
        run("s2", f"INSERT INTO {db2['s2']} VALUES (4)")
        for sid in up:
            run(sid, f"ALTER TABLE {db1[sid]} ADD COLUMN new_col1 INT")
            run(sid, f"ALTER TABLE {db2[sid]} ADD COLUMN new_col1 INT")
        run("s1", f"INSERT INTO {db1['s1']} VALUES (5, 5)")
        run("s1", f"INSERT INTO {db2['s1']} VALUES (6, 6)")
        run("s2", f"INSERT INTO {db1['s2']} VALUES (7, 7)")
        run("s2", f"INSERT INTO {db2['s2']} VALUES (8, 8)")
        # source1 db2.tb1 adds a column and drops it again
        run("s1", f"ALTER TABLE {db2['s1']} ADD COLUMN new_col2 INT")
        run("s1", f"INSERT INTO {db2['s1']} VALUES (9, 9, 9)")
        run("s1", f"ALTER TABLE {db2['s1']} DROP COLUMN new_col2")
        run("s1", f"INSERT INTO {db2['s1']} VALUES (10, 10)")
        # source1 db1.tb1 and source2 db2.tb1 add a column
        run("s1", f"ALTER TABLE {db1['s1']} ADD COLUMN new_col3 INT")
        run("s1", f"INSERT INTO {db1['s1']} VALUES (11, 11, 11)")
        run("s2", f"ALTER TABLE {db2['s2']} ADD COLUMN new_col3 INT")
        run("s2", f"INSERT INTO {db2['s2']} VALUES (12, 12, 12)")
        # source2 db1.tb1 drops a column
        run("s2", f"ALTER TABLE {db1['s2']} DROP COLUMN new_col1")
        run("s2", f"INSERT INTO {db1['s2']} VALUES (13)")
        count(13)

        # only the first schemas: source1 db1.tb1(id, new_col1, new_col3), source2 db1.tb1(id)
        c.ctl_ok("stop-task", name)
        start(both=False)
        c.wait(lambda: not c.ctl_ok("shard-ddl-lock", name).get("locks"), 60, "no DDL lock when the task begins")
        run("s1", f"INSERT INTO {db1['s1']} VALUES (14, 14, 14)")
        run("s2", f"INSERT INTO {db1['s2']} VALUES (15)")
        count(15)
        run("s1", f"ALTER TABLE {db1['s1']} DROP COLUMN new_col1")
        run("s2", f"ALTER TABLE {db1['s2']} ADD COLUMN new_col3 INT")
        run("s1", f"INSERT INTO {db1['s1']} VALUES (16, 16)")
        run("s2", f"INSERT INTO {db1['s2']} VALUES (17, 17)")
        count(17)

        # both schemas again: the returning tables still have new_col1, the downstream does not
        c.ctl_ok("stop-task", name)
        start(both=True)
        run("s1", f"INSERT INTO {db1['s1']} VALUES (18, 18)")
        run("s1", f"INSERT INTO {db2['s1']} VALUES (19, 19)")
        run("s2", f"INSERT INTO {db1['s2']} VALUES (20, 20)")
        run("s2", f"INSERT INTO {db2['s2']} VALUES (21, 21, 21)")
        errs = c.wait(lambda: (st := subtasks()) and len(st) == 2 and all(x["stage"] == "Error" for x in st.values())
                      and [x["error"] for x in st.values()], 120, "both sources stopped on the missing column")
        # DM (TiDB) words it "in 'field list'"; MariaDB 10.11 says "in 'INSERT INTO'": the server's text verbatim
        assert all("Error 1054 (42S22): Unknown column 'new_col1' in " in e for e in errs), errs
        downstream_db.execute("ALTER TABLE tb ADD COLUMN new_col1 INT")
        c.ctl_ok("resume-task", name)
        c.wait(lambda: (st := subtasks()) and all(x["stage"] == "Running" for x in st.values()), 120, "Running again")
        run("s1", f"ALTER TABLE {db2['s1']} DROP COLUMN new_col1")
        run("s2", f"ALTER TABLE {db2['s2']} DROP COLUMN new_col1")
        run("s1", f"ALTER TABLE {db2['s1']} ADD COLUMN new_col3 INT")
        run("s1", f"INSERT INTO {db1['s1']} VALUES (22, 22)")
        run("s1", f"INSERT INTO {db2['s1']} VALUES (23, 23)")
        run("s2", f"INSERT INTO {db1['s2']} VALUES (24, 24)")
        run("s2", f"INSERT INTO {db2['s2']} VALUES (25, 25)")
        count(25)
        files = [a for sid in up for a in ("--source-file", c.source_files[sid])]
        task_file = str(Path(tmp_path) / "task-both.yaml")
        c.wait(lambda: c.ctl("check", "--task-file", task_file, *files)[0] == 0, 90, "check equal")
    finally:
        with contextlib.suppress(Exception):
            c.ctl("stop-task", name)
        c.task_name = ""
