"""End to end, real processes: `shardctl master` + one `shardctl worker` per source, 2 sources x 4
shard tables -> 1 target, driven by `shardctl`; every scenario ends with `shardctl check` equal
and the expected downstream schema (`SHOW COLUMNS` / `SHOW INDEX` of the target)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from .conftest import ID_BASE, SHARDS


def _lock(sc) -> dict | None:
    doc = sc.c.ctl_ok("show-ddl-locks", sc.name)
    return next(iter(doc.get("locks") or []), None)


def test_staggered_add_column_with_writes_between(scenario):
    sc = scenario()
    sc.start()
    sc.wait_equal(columns=["id", "v"])
    sc.start_writers()

    def between(sid, t, i):
        sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i], cols="id, v, c")
        other = SHARDS[(SHARDS.index(t) + 1) % 4]
        sc.insert(sid, other, [ID_BASE[sid] + 910_000 + i])       # a shard with or without c
    sc.alter_all("ADD COLUMN c INT DEFAULT 7", between=between)
    assert sc.stop_writers() > 0
    sc.wait_equal(columns=["id", "v", "c"])
    assert "`c` int(11) DEFAULT 7" in sc.show_create()
    _assert_worker_metrics(sc)
    sc.stop()


def _assert_worker_metrics(sc) -> None:
    """The worker's /metrics has this task's applied rows, lag gauges and per-stage batch time."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{sc.c.worker_metrics['s1']}/metrics", timeout=5) as r:
        text = r.read().decode()
    samples = {(smp.name, tuple(sorted(smp.labels.items()))): smp.value
               for fam in text_string_to_metric_families(text) for smp in fam.samples}

    def value(name: str, **extra) -> float:
        key = (name, tuple(sorted({"task": sc.name, "source": "s1", **extra}.items())))
        assert key in samples, f"{key} missing from worker /metrics: {sorted(k for k in samples if 'worker' in k[0])}"
        return samples[key]
    assert value("shardmerge_worker_rows_applied_total") > 0
    assert value("shardmerge_worker_lag_seconds") >= 0
    assert value("shardmerge_worker_events_behind") >= 0
    assert value("shardmerge_worker_batch_seconds_total", stage="apply") > 0


def test_staggered_drop_column(scenario):
    sc = scenario(columns="id INT PRIMARY KEY, v INT, c INT DEFAULT 3")
    sc.start()
    sc.wait_equal(columns=["id", "v", "c"])
    sc.start_writers()
    sc.alter_all("DROP COLUMN c", between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i]))
    sc.stop_writers()
    sc.wait_equal(columns=["id", "v"])
    sc.stop()


def test_add_index_on_every_shard(scenario):
    sc = scenario()
    sc.start()
    sc.start_writers()
    sc.alter_all("ADD INDEX idx_v (v)", between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i]))
    sc.stop_writers()
    sc.wait_equal(columns=["id", "v"], indexes={"PRIMARY": ["id"], "idx_v": ["v"]})
    sc.stop()


def test_multi_clause_alter_add_and_drop(scenario):
    """dm#613: one ALTER with ADD COLUMN and DROP COLUMN is split per clause before the lock."""
    sc = scenario(columns="id INT PRIMARY KEY, v INT, w INT DEFAULT 1")
    sc.start()
    sc.wait_equal(columns=["id", "v", "w"])
    sc.start_writers()
    sc.alter_all("ADD COLUMN d INT DEFAULT 5, DROP COLUMN w",
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i], cols="id, v, d"))
    sc.stop_writers()
    sc.wait_equal(columns=["id", "v", "d"])
    sc.stop()


def test_shard_table_created_mid_stream_joins_the_lock(scenario):
    sc = scenario(columns="id INT PRIMARY KEY, v INT, c INT DEFAULT 3")
    sc.start()
    sc.start_writers()
    sc.c.context = "CREATE TABLE orders_05 on s1 while writing"
    sc.dbs["s1"].execute("CREATE TABLE orders_05 (id INT PRIMARY KEY, v INT, c INT DEFAULT 3)")
    sc.insert("s1", "orders_05", [ID_BASE["s1"] + 500_000 + i for i in range(20)])
    # every shard but the new one drops c: the lock must wait for orders_05, so c stays
    sc.alter_all("DROP COLUMN c", between=lambda sid, t, i: sc.insert(sid, "orders_05", [ID_BASE[sid] + 510_000 + i])
                 if sid == "s1" else None)
    sc.stop_writers()
    sc.c.wait(lambda: (lk := _lock(sc)) and any("orders_05" in w["waitingFor"] for w in lk["waiting"]),
              60, "the lock to wait for the new shard orders_05")
    sc.wait_equal(columns=["id", "v", "c"])
    sc.start_writers()
    sc.dbs["s1"].execute("ALTER TABLE orders_05 DROP COLUMN c")
    sc.insert("s1", "orders_05", [ID_BASE["s1"] + 500_100])
    sc.stop_writers()
    sc.wait_equal(columns=["id", "v"])
    sc.stop()


def test_shard_table_dropped_mid_stream_leaves_the_lock(scenario):
    sc = scenario(columns="id INT PRIMARY KEY, v INT, c INT DEFAULT 3")
    sc.start()
    sc.start_writers()
    sc.insert("s2", "orders_04", [ID_BASE["s2"] + 800_000 + i for i in range(5)])
    sc.stop_writers()
    sc.c.context = "DROP TABLE s2.orders_04 (its rows deleted first, so the merge stays comparable)"
    sc.dbs["s2"].execute("DELETE FROM orders_04")
    sc.dbs["s2"].execute("DROP TABLE orders_04")
    sc.start_writers(tables={"s2": SHARDS[:3]})
    # the dropped shard no longer holds the lock: c goes once the 7 remaining shards dropped it
    rest = [(s, t) for s in ("s1", "s2") for t in SHARDS if (s, t) != ("s2", "orders_04")]
    sc.alter_all("DROP COLUMN c", order=rest,
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i]))
    sc.stop_writers()
    sc.wait_equal(columns=["id", "v"])
    sc.stop()


def test_conflicting_modify_column_paused_then_unlock_skip(scenario):
    sc = scenario()
    sc.start()
    sc.start_writers()
    lock_id = f"{sc.name}-`{sc.down.name}`.`orders`"
    up1, up2 = sc.dbs["s1"].name, sc.dbs["s2"].name
    # s1.orders_01 changes v to a type the other shards cannot join with: held until they
    # make the same change (skip-and-wait) while everything else keeps replicating
    sc.dbs["s1"].execute("ALTER TABLE orders_01 MODIFY v BIGINT UNSIGNED")
    sc.c.wait(lambda: (lk := _lock(sc)) and lk["state"] == "conflict" and lk, 60, "s1.orders_01 in conflict")
    # s2.orders_01 makes a different incompatible change: the two disagree -> detected, s2 pauses
    sc.dbs["s2"].execute("ALTER TABLE orders_01 MODIFY v VARBINARY(20)")
    paused = sc.c.wait(lambda: (st := sc.subtasks().get("s2")) and st["stage"] == "Paused" and st,
                       90, "s2 Paused on the conflict")
    assert paused["unresolvedDDLLockID"] == lock_id, paused
    assert "unlock" in paused["error"] and "orders_01" in paused["error"], paused
    assert "there will be conflicts if DDLs ALTER TABLE" in paused["error"], paused      # DM's phrase
    assert "MODIFY COLUMN `v` VARBINARY(20)" in paused["error"], paused                  # canonical text
    assert _lock(sc)["state"] == "conflict"
    # the operator keeps the target's INT: skip both changes
    sc.c.ctl_ok("unlock-ddl-lock", lock_id, "-s", "s2", "-d", up2, "-t", "orders_01", "--action", "skip")
    sc.c.wait(lambda: sc.subtasks()["s2"]["stage"] == "Running", 60, "s2 Running after unlock")
    if _lock(sc) is not None and any(up1 in w["table"] for w in _lock(sc)["waiting"]):
        sc.c.ctl_ok("unlock-ddl-lock", lock_id, "-s", "s1", "-d", up1, "-t", "orders_01", "--action", "skip")
    sc.dbs["s1"].execute("INSERT INTO orders_01 VALUES (777, '77')")
    sc.dbs["s2"].execute("INSERT INTO orders_01 VALUES (10000777, '78')")
    sc.stop_writers()
    sc.wait_running()
    sc.wait_equal(columns=["id", "v"])
    assert sc.down_column_type("v") == "int(11)"
    sc.c.wait(lambda: _lock(sc) is None, 60, "the lock resolved and removed")
    sc.stop()


def _worker_lag(sc, source: str) -> float:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{sc.c.worker_metrics[source]}/metrics", timeout=5) as r:
        text = r.read().decode()
    return next(smp.value for fam in text_string_to_metric_families(text) for smp in fam.samples
                if smp.name == "shardmerge_worker_lag_seconds" and smp.labels.get("task") == sc.name
                and smp.labels.get("source") == source)


def test_a_source_paused_at_a_lock_with_rows_waiting_is_not_synced_and_its_lag_grows(scenario):
    """s2 is Paused on a conflicting DDL while rows keep arriving upstream: query-status says
    not synced and its secondsBehindMaster grows, and so does the lag gauge the alert reads
    (before, both stayed at the last batch's "synced, 0").  After the exit it catches up."""
    import time
    sc = scenario()
    sc.start()
    sc.wait_equal(columns=["id", "v"])
    lock_id = f"{sc.name}-`{sc.down.name}`.`orders`"
    up1 = sc.dbs["s1"].name
    sc.dbs["s1"].execute("ALTER TABLE orders_01 MODIFY v BIGINT UNSIGNED")
    sc.c.wait(lambda: (lk := _lock(sc)) and lk["state"] == "conflict" and lk, 60, "s1.orders_01 in conflict")
    sc.dbs["s2"].execute("ALTER TABLE orders_01 MODIFY v VARBINARY(20)")
    sc.c.wait(lambda: (st := sc.subtasks().get("s2")) and st["stage"] == "Paused" and st, 90, "s2 Paused")
    sc.insert("s2", "orders_02", [ID_BASE["s2"] + 950_000])             # rows waiting upstream
    first = sc.c.wait(lambda: (st := sc.subtasks()["s2"]) and st["sync"].get("secondsBehindMaster", 0) > 0 and st,
                      30, "s2's lag reported while Paused")
    assert first["stage"] == "Paused" and first["sync"].get("synced") is False, first
    lag1, gauge1 = first["sync"]["secondsBehindMaster"], _worker_lag(sc, "s2")
    time.sleep(4)
    later = sc.c.wait(lambda: (st := sc.subtasks()["s2"]) and st["sync"]["secondsBehindMaster"] > lag1 and st,
                      30, "s2's lag growing while Paused")
    gauge2 = _worker_lag(sc, "s2")
    assert later["sync"]["synced"] is False and gauge1 > 0 and gauge2 > gauge1, (first["sync"], later["sync"], gauge1, gauge2)
    assert later["sync"]["eventsBehind"] > 0, later["sync"]
    print(f"paused at the lock: query-status sync {later['sync']}; shardmerge_worker_lag_seconds {gauge1} -> {gauge2}")
    # the exit the Paused status suggests, pasted into a shell as an operator would (the lock ID
    # holds back-quotes: unquoted, bash would run them)
    text = json.dumps(later)
    found = re.search(r"shardctl shard-ddl-lock unlock '[^']+' -s s2 -d \S+ -t orders_01 --action skip", text)
    assert found, text
    env = {**os.environ, "SHARDMERGE_MASTER_ADDR": sc.c.grpc_addr[sc.c.leader()],
           "PATH": f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '')}"}
    r = subprocess.run(["bash", "-c", found.group(0)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and lock_id in r.stdout, (found.group(0), r.stdout, r.stderr)
    if _lock(sc) is not None and any(up1 in w["table"] for w in _lock(sc)["waiting"]):
        sc.c.ctl_ok("unlock-ddl-lock", lock_id, "-s", "s1", "-d", up1, "-t", "orders_01", "--action", "skip")
    sc.wait_running()
    sc.wait_equal(columns=["id", "v"])
    done = sc.c.wait(lambda: (st := sc.subtasks()["s2"]) and st["sync"].get("synced") is True and st, 60,
                     "s2 synced after the exit")
    print(f"after the exit: query-status sync {done['sync']}; shardmerge_worker_lag_seconds {_worker_lag(sc, 's2')}")
    sc.stop()
    # each worker's log (Spark's JVM lines included) is one JSON object per line
    for sid, w in sc.c.workers.items():
        lines = [ln for ln in w.log_path.read_text(errors="replace").splitlines()
                 if ln.strip() and not ln.startswith("---- start #")]       # the harness's own marker
        bad = [ln for ln in lines if not ln.startswith("{") or not isinstance(json.loads(ln), dict)]
        assert lines and not bad, (sid, bad[:5])
        assert any('"component": "stderr"' in ln for ln in lines), sid     # the JVM's lines, wrapped


def test_rename_column_on_every_shard_runs_once_downstream(scenario):
    """Issue 12 §2.1: every shard of both sources renames a column (with a new position): the
    lock holds the first renames (skip-and-wait), the last one runs the rename downstream and
    the held tables' replays run nothing, so no second ``CHANGE a c`` meets "Unknown column 'a'"."""
    sc = scenario(columns="id INT PRIMARY KEY, v INT, a INT DEFAULT 1")
    sc.start()
    sc.wait_equal(columns=["id", "v", "a"])
    sc.start_writers()
    sc.alter_all("CHANGE COLUMN a c INT DEFAULT 1 AFTER id",
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i]))
    assert sc.stop_writers() > 0
    sc.wait_running()
    sc.wait_equal(columns=["id", "c", "v"])
    assert all(st["stage"] == "Running" for st in sc.subtasks().values()), sc.subtasks()
    sc.c.wait(lambda: _lock(sc) is None, 60, "the lock resolved and removed")
    sc.stop()


def test_readd_of_a_column_not_fully_dropped_paused_then_binlog_skip(scenario):
    """Issue 19, DM's runbook for a shard-DDL conflict: source 1 drops `b`, adds `c`, then re-adds
    `b` while source 2 never dropped it.  The re-add is held with DM's phrase; `binlog skip` on the
    Paused subtask withdraws it from the lock and the subtask continues by itself."""
    sc = scenario(columns="id INT PRIMARY KEY, v INT, b INT")
    sc.start()
    sc.wait_equal(columns=["id", "v", "b"])
    s1 = sc.dbs["s1"]
    s1.execute("ALTER TABLE orders_01 DROP COLUMN b")
    sc.insert("s1", "orders_01", [101])
    s1.execute("ALTER TABLE orders_01 ADD COLUMN c INT")
    sc.insert("s1", "orders_01", [102], cols="id, v, c")
    s1.execute("ALTER TABLE orders_01 ADD COLUMN b INT AFTER v")
    paused = sc.c.wait(lambda: (st := sc.subtasks().get("s1")) and st["stage"] == "Paused" and st, 90,
                       "s1 Paused on the re-add")
    assert "add column b that wasn't fully dropped in downstream" in paused["error"], paused
    assert "binlog skip" in paused["error"], paused
    sc.insert("s2", "orders_02", [ID_BASE["s2"] + 103], cols="id, v, b")   # s2 keeps replicating
    sc.c.ctl_ok("binlog", "skip", sc.name, "-s", "s1")
    sc.c.wait(lambda: sc.subtasks()["s1"]["stage"] == "Running", 60, "s1 Running after binlog skip")
    sc.insert("s1", "orders_01", [104], cols="id, v, b, c")
    for sid in sc.dbs:                       # the other shards catch up with `c`
        for t in SHARDS:
            if (sid, t) != ("s1", "orders_01"):
                sc.dbs[sid].execute(f"ALTER TABLE {t} ADD COLUMN c INT")
    sc.wait_running()
    sc.wait_equal(columns=["id", "v", "b", "c"])
    sc.c.wait(lambda: _lock(sc) is None, 60, "the lock resolved and removed")
    sc.stop()


def test_rename_table_of_a_shard_stops_every_source_with_dms_phrase_then_binlog_skip(scenario):
    """Issue 19: `RENAME TABLE` of a shard table is refused in optimistic mode on every source
    that meets it, with DM's phrase; `binlog skip` on each lets the sources continue."""
    sc = scenario()
    sc.start()
    for sid in sc.dbs:
        sc.dbs[sid].execute("RENAME TABLE orders_04 TO orders_44")
    for sid in sc.dbs:    # (a skip restarts the task's failed subtasks: the other meets it again)
        st = sc.c.wait(lambda sid=sid: (x := sc.subtasks().get(sid)) and x["stage"] == "Error" and x, 90,
                       f"{sid} in Error")
        assert "`RENAME TABLE` statement not supported in optimistic mode" in st["error"], st
        assert f"binlog skip {sc.name} -s {sid}" in st["error"], st
        sc.c.ctl_ok("binlog", "skip", sc.name, "-s", sid)
        sc.c.wait(lambda sid=sid: sc.subtasks()[sid]["stage"] == "Running", 90, f"{sid} Running after binlog skip")
    sc.wait_running()
    for sid in sc.dbs:
        sc.insert(sid, "orders_44", [ID_BASE[sid] + 940_000])
    sc.wait_equal(columns=["id", "v"])
    sc.stop()


def test_generated_column_added_then_dropped_shard_by_shard_with_writes(scenario):
    """Issue 12 §2.2, real processes: a STORED generated column is added on every shard with
    writes between (rows of shards with and without it), then dropped shard by shard; DML never
    writes it and the downstream computes it."""
    sc = scenario()
    sc.start()
    sc.start_writers()
    sc.alter_all("ADD COLUMN g INT AS (id + 2) STORED",
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i]))
    assert sc.stop_writers() > 0
    sc.wait_equal(columns=["id", "v", "g"])
    assert "`g` int(11) GENERATED ALWAYS AS (`id` + 2) STORED" in sc.show_create()
    sc.start_writers()
    sc.alter_all("DROP COLUMN g", between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 950_000 + i]))
    assert sc.stop_writers() > 0
    sc.wait_running()
    sc.wait_equal(columns=["id", "v"])
    sc.stop()


def test_add_column_keeps_first_and_after_downstream(scenario):
    """Issue 12 §2.7: the first DDL that runs downstream keeps its position clause.  Every shard
    adds `c` AFTER id, then `f` FIRST; for `e` the first shard says AFTER c and the others AFTER
    v: the downstream keeps the first one's (the later adds change nothing there)."""
    sc = scenario()
    sc.start()
    sc.start_writers()
    sc.alter_all("ADD COLUMN c INT DEFAULT 4 AFTER id",
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i], cols="id, v, c"))
    assert sc.stop_writers() > 0
    sc.wait_equal(columns=["id", "c", "v"])
    sc.start_writers()
    sc.alter_all("ADD COLUMN f INT DEFAULT 1 FIRST",
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 920_000 + i], cols="id, v, c, f"))
    assert sc.stop_writers() > 0
    sc.wait_equal(columns=["f", "id", "c", "v"])
    first = ("s2", "orders_03")
    sc.alter_all("ADD COLUMN e INT AFTER c", order=[first])
    sc.insert("s2", "orders_03", [ID_BASE["s2"] + 940_000], cols="id, v, e")
    sc.wait_equal(columns=["f", "id", "c", "e", "v"])
    sc.start_writers()
    sc.alter_all("ADD COLUMN e INT AFTER v", order=[(s, t) for s in sc.dbs for t in SHARDS if (s, t) != first],
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 950_000 + i], cols="id, v, e"))
    assert sc.stop_writers() > 0
    sc.wait_running()
    sc.wait_equal(columns=["f", "id", "c", "e", "v"])
    sc.c.wait(lambda: _lock(sc) is None, 60, "the lock resolved and removed")
    sc.stop()


def test_virtual_column_from_the_start_and_generated_column_added_after(scenario):
    """Issue 12 §2.2/§2.7: shard tables created (in the binlog) with a VIRTUAL column, a VIRTUAL
    column added AFTER id shard by shard with writes between; rows from shards with and without
    it; the downstream computes both and keeps the position."""
    sc = scenario(columns="id INT PRIMARY KEY, v INT, dv INT AS (v * 2) VIRTUAL")
    sc.start()
    sc.start_writers()
    sc.alter_all("ADD COLUMN g INT AS (id + 2) VIRTUAL AFTER id",
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i]))
    assert sc.stop_writers() > 0
    sc.wait_running()
    sc.wait_equal(columns=["id", "g", "v", "dv"])
    create = sc.show_create()
    assert "`g` int(11) GENERATED ALWAYS AS (`id` + 2) VIRTUAL" in create, create
    assert "`dv` int(11) GENERATED ALWAYS AS (`v` * 2) VIRTUAL" in create, create
    (n, right), = sc.down.execute("SELECT COUNT(*), SUM(g = id + 2 AND dv = v * 2) FROM orders")
    assert n > 0 and right == n, (n, right)
    sc.stop()


def test_rows_that_no_longer_fit_after_a_skipped_rename_name_the_fix_not_just_resume(scenario):
    """A held rename skipped with ``unlock --action skip``: the shard's next rows carry the new
    column name, which the downstream does not have.  The subtask stops in Error and its
    workaround says to make the downstream fit first (a resume alone replays the same rows);
    the advice line is a comment, so pasting the whole workaround into a shell is harmless."""
    sc = scenario(columns="id INT PRIMARY KEY, v INT, a INT DEFAULT 1")
    sc.start()
    sc.wait_equal(columns=["id", "v", "a"])
    lock_id = f"{sc.name}-`{sc.down.name}`.`orders`"
    up1 = sc.dbs["s1"].name
    sc.dbs["s1"].execute("ALTER TABLE orders_01 CHANGE COLUMN a c INT DEFAULT 1")
    sc.c.wait(lambda: (lk := _lock(sc)) and any(up1 in w["table"] and w["waitingFor"].startswith("skip-and-wait")
                                               for w in lk["waiting"]), 60, "the rename held")
    sc.c.ctl_ok("unlock-ddl-lock", lock_id, "-s", "s1", "-d", up1, "-t", "orders_01", "--action", "skip")
    sc.insert("s1", "orders_01", [ID_BASE["s1"] + 960_000], cols="id, v, c")
    st = sc.c.wait(lambda: (s := sc.subtasks().get("s1")) and s["stage"] == "Error" and s, 180, "s1 in Error")
    err = st["result"]["errors"][0]
    assert "Unknown column" in err["Message"] or "1054" in err["Message"], err
    assert err["Workaround"].startswith("# the downstream table does not fit these rows"), err
    assert err["Workaround"].endswith(f"shardctl resume-task -s s1 {sc.name}"), err
    sc.stop()


def test_two_renames_packed_in_opposite_orders_are_agreed_without_an_operator(scenario):
    """Source s1's shards rename ``a`` then ``b`` in one ALTER, s2's ``b`` then ``a``.  Each
    change is its own Info; the first tables are held on ``a``, and s2's tables would be held
    on ``b``: two different renames pending at once, which waited for each other (DM: detected,
    an operator's skip loses one column's values).  The lock asks s2's tables for their
    ``RENAME a`` first (``Operation.first``: a later change of the same ALTER, no row between),
    so every table makes both renames in one order and each runs once downstream."""
    sc = scenario(columns="id INT PRIMARY KEY, v INT, a INT DEFAULT 1, b INT DEFAULT 2")
    sc.start()
    sc.wait_equal(columns=["id", "v", "a", "b"])
    sc.start_writers()
    for sid, clause in (("s1", "RENAME COLUMN a TO a2, RENAME COLUMN b TO b2"),
                        ("s2", "RENAME COLUMN b TO b2, RENAME COLUMN a TO a2")):
        sc.alter_all(clause, order=[(sid, t) for t in SHARDS],
                     between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i]))
    assert sc.stop_writers() > 0
    sc.wait_running()
    sc.wait_equal(columns=["id", "v", "a2", "b2"])
    assert all(st["stage"] == "Running" for st in sc.subtasks().values()), sc.subtasks()
    sc.c.wait(lambda: _lock(sc) is None, 60, "the lock resolved and removed")
    sc.stop()


def test_renames_in_opposite_orders_across_statements_with_rows_between_are_combined(scenario):
    """Source s1's shards rename ``a`` then ``b`` in two statements, s2's ``b`` then ``a``, each
    table writing a row after each rename.  Held on its first rename, each table's stream reads
    past it and sends its next statement as look-ahead (``Info.ahead``); the lock then asks a
    table to run both renames as one ALTER (``Operation.combine``) and the rest to agree.  The
    rows written between the renames reach the downstream under the new names (checkpoint rule
    11), the folded statements run nowhere again, and no operator is needed (DM: detected, a
    skip loses one column's values)."""
    sc = scenario(columns="id INT PRIMARY KEY, v INT, a INT DEFAULT 1, b INT DEFAULT 2")
    sc.start()
    sc.wait_equal(columns=["id", "v", "a", "b"])
    steps = {"s1": [("RENAME COLUMN a TO a2", "id, v, a2, b"), ("RENAME COLUMN b TO b2", "id, v, a2, b2")],
             "s2": [("RENAME COLUMN b TO b2", "id, v, a, b2"), ("RENAME COLUMN a TO a2", "id, v, a2, b2")]}
    for sid in ("s1", "s2"):
        for n, t in enumerate(SHARDS):
            for k, (clause, cols) in enumerate(steps[sid]):
                sc.c.context = f"task {sc.name}: ALTER TABLE {sid}.{t} {clause}"
                sc.dbs[sid].execute(f"ALTER TABLE {t} {clause}")
                sc.insert(sid, t, [ID_BASE[sid] + 900_000 + 10 * n + k], cols=cols)
    sc.wait_running()
    sc.wait_equal(columns=["id", "v", "a2", "b2"])
    assert all(st["stage"] == "Running" for st in sc.subtasks().values()), sc.subtasks()
    sc.c.wait(lambda: _lock(sc) is None, 60, "the lock resolved and removed")
    between = ID_BASE["s2"] + 900_010       # s2's second table, after its rename of b only
    assert sc.down.execute(f"SELECT a2, b2 FROM orders WHERE id = {between}") == [(between % 89,) * 2]
    sc.stop()


def test_a_shard_that_drops_a_column_the_others_rename_takes_no_side_and_the_rename_runs(scenario):
    """Source s1's shards rename ``a`` to ``a2``; s2's shards drop ``a`` (they will never rename
    it).  A table that has neither column takes no side in the rename: the last DROP completes
    the agreement, a held s1 table runs the rename (s1's values carried), and the DROPs run
    nothing downstream.  The lock then waits only for s2's tables to get ``a2``, as for any
    column some shards added.  Before, the renames waited for s2's tables forever (DM: a
    conflict), s1's rows with them, and the only exits lost s1's values of ``a``."""
    sc = scenario(columns="id INT PRIMARY KEY, v INT, a INT DEFAULT 1")
    sc.start()
    sc.wait_equal(columns=["id", "v", "a"])
    old = ID_BASE["s1"] + 800_000
    sc.insert("s1", SHARDS[0], [old], cols="id, v, a")
    sc.start_writers()
    sc.alter_all("RENAME COLUMN a TO a2", order=[("s1", t) for t in SHARDS],
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i], cols="id, v, a2"))
    sc.alter_all("DROP COLUMN a", order=[("s2", t) for t in SHARDS],
                 between=lambda sid, t, i: sc.insert(sid, t, [ID_BASE[sid] + 900_000 + i]))
    assert sc.stop_writers() > 0
    sc.wait_running()
    sc.wait_equal(columns=["id", "v", "a2"])
    assert all(st["stage"] == "Running" for st in sc.subtasks().values()), sc.subtasks()
    assert sc.down.execute(f"SELECT a2 FROM orders WHERE id = {old}") == [(old % 89,)]
    lock = _lock(sc)
    assert lock is not None and not lock["error"], lock
    assert {w["waitingFor"] for w in lock["waiting"]} == {"has not added column `a2` yet (other tables have it)"}, lock
    assert {w["table"].split("-")[0] for w in lock["waiting"]} == {"s2"}, lock
    sc.stop()
