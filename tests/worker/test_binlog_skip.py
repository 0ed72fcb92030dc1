"""`shardctl binlog skip` on the worker side, with a real Syncer in optimistic shard mode (real
etcd, MariaDB, Spark): a partition ALTER stops the syncer with the statement's position; a skip
record for it (and one pre-armed for a later ADD COLUMN) lets it continue without an Info, with
checkpoints past both statements and the tracked schema following the upstream; a crash between
the checkpoint and the done mark, and further restarts, neither re-skip nor re-fail.  A skipped DDL
that its lock had already answered (and the downstream refused) gets its Operation marked done."""
from __future__ import annotations

import json
import time

import pytest
from prometheus_client import REGISTRY

from coordinator.etcdproto import BinlogSkip, Stage, Store, parse_binlog_pos
from tests.worker.conftest import make_task, optimistic_syncer
from worker.sync.binlog_skip import BinlogSkips
from tests.worker_coord.conftest import AutoMaster
from worker.shardddl import UnsupportedShardDDL
from worker.sync.hooks import SimulatedCrash
from worker.sync.errors import SyncError


class CrashOnAddColumn(BinlogSkips):
    """Dies like a killed process after the checkpoint flush of the skipped ADD COLUMN, before
    its done mark."""

    def used(self, rec, statement, note=""):
        if "ADD COLUMN" in statement:
            raise SimulatedCrash(f"crash before marking {rec.position} done")
        super().used(rec, statement, note)


def _points(down, task) -> dict:
    rows = down.execute(f"SELECT cp_table, binlog_name, binlog_pos, table_info FROM `{task.name}_syncer_checkpoint`")
    return {t: ((f, int(p)), info) for t, f, p, info in rows}


def _skips_done(store, task) -> float:
    return REGISTRY.get_sample_value("shardmerge_worker_binlog_skips_total", {"task": task.name, "source": "s1"}) or 0


def test_skip_stops_nothing_twice(spark, etcd_client, etcd_prefix, source1_db, downstream_db, positions):
    db, down = source1_db, downstream_db
    db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
               "(PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200))")
    db.execute("CREATE TABLE orders_2 (id INT PRIMARY KEY, v INT)")
    down.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
    (p0,) = positions(db)
    task, srcs, _ = make_task(down, {"s1": db}, start={"s1": p0})
    store = Store(etcd_client, etcd_prefix)
    fence = store.campaign("test-master")
    db.execute("INSERT INTO orders_1 VALUES (1, 1), (150, 2)")
    (at_alter,) = positions(db)
    # (ADD/DROP PARTITION pass through since issue 34; REORGANIZE still stops for a binlog skip)
    db.execute("ALTER TABLE orders_1 REORGANIZE PARTITION p1 INTO "
               "(PARTITION p1 VALUES LESS THAN (200), PARTITION p2 VALUES LESS THAN (300))")
    (after_alter,) = positions(db)
    db.execute("INSERT INTO orders_1 VALUES (250, 3)")

    s1 = optimistic_syncer(spark, store, task, srcs["s1"])
    try:
        with pytest.raises(UnsupportedShardDDL) as ei:
            s1.sync_until_caught_up()
    finally:
        s1.close()
    ctx = ei.value.context
    assert parse_binlog_pos(ctx["position"]) == (at_alter.file, at_alter.pos)
    assert parse_binlog_pos(ctx["statement_end"]) == (after_alter.file, after_alter.pos)
    assert "REORGANIZE PARTITION" in ctx["statement"] and "binlog skip" in ei.value.message
    assert sorted(r[0] for r in down.execute("SELECT id FROM orders")) == [1, 150]
    assert s1.store.global_pos.same_point(at_alter)

    # the operator skips it, and pre-arms a skip for an ADD COLUMN that has not happened yet
    store.put_binlog_skip(fence, BinlogSkip(task.name, "s1", at_alter.file, at_alter.pos, gtid=at_alter.gtid))
    before = _skips_done(store, task)
    s2 = optimistic_syncer(spark, store, task, srcs["s1"], skips_cls=CrashOnAddColumn)
    try:
        s2.start()                                  # tracks orders_2 as it is now (no column c)
        (at_add,) = positions(db)
        store.put_binlog_skip(fence, BinlogSkip(task.name, "s1", at_add.file, at_add.pos))
        db.execute("ALTER TABLE orders_2 ADD COLUMN c INT DEFAULT 7")
        (after_add,) = positions(db)
        down.execute("ALTER TABLE orders ADD COLUMN c INT DEFAULT 7")   # the operator's own change
        db.execute("INSERT INTO orders_2 VALUES (1000, 1, 5)")
        db.execute("CREATE TABLE plain_t (id INT PRIMARY KEY)")         # a later statement
        with pytest.raises(SimulatedCrash):   # checkpoint flushed past ADD COLUMN, then "killed"
            s2.sync_until_caught_up()
    finally:
        s2.close()
    assert s2.store.global_pos.same_point(after_add)
    recs = {r.position: r for r in store.list_binlog_skips(task.name, "s1").items}
    alter, add = recs[f"{at_alter.file}:{at_alter.pos}"], recs[f"{at_add.file}:{at_add.pos}"]
    assert alter.state == "done" and "REORGANIZE PARTITION" in alter.statement and alter.worker == "w-test"
    assert add.state == "pending"                                     # its done mark was lost
    assert _skips_done(store, task) == before + 1
    pts = _points(down, task)
    cols = [c["name"] for c in json.loads(pts["orders_2"][1])["columns"]]
    assert cols == ["id", "v", "c"]                # the tracker applied the skipped ADD COLUMN
    assert pts["orders_1"][0] >= (after_alter.file, after_alter.pos)
    assert pts["orders_2"][0] >= (after_add.file, after_add.pos)

    s3 = optimistic_syncer(spark, store, task, srcs["s1"])
    try:
        s3.sync_until_caught_up()
    finally:
        s3.close()
    assert sorted(r[0] for r in down.execute("SELECT id FROM orders")) == [1, 150, 250, 1000]
    add = store.get_binlog_skip(task.name, "s1", at_add.file, at_add.pos)
    # the lost one is never applied to another statement: the stream passed its position
    assert add.state == "passed" and "passed" in add.note
    assert _skips_done(store, task) == before + 1
    assert store.list_infos(task.name).items == []          # neither DDL was coordinated
    assert "PARTITION" not in down.execute("SHOW CREATE TABLE orders")[0][1]
    assert down.execute("SHOW TABLES LIKE 'plain_t'")        # statements after the skips run

    # another restart: nothing is skipped or failed again, new rows flow
    db.execute("INSERT INTO orders_1 VALUES (2, 9)")
    s4 = optimistic_syncer(spark, store, task, srcs["s1"])
    try:
        s4.sync_until_caught_up()
    finally:
        s4.close()
    assert sorted(r[0] for r in down.execute("SELECT id FROM orders")) == [1, 2, 150, 250, 1000]
    assert _skips_done(store, task) == before + 1
    assert _points(down, task)[""][0] > (after_add.file, after_add.pos)


def test_skip_of_a_ddl_the_downstream_refused_finishes_its_operation(spark, etcd_client, etcd_prefix, source1_db,
                                                                     downstream_db, positions):
    db, down = source1_db, downstream_db
    (p0,) = positions(db)
    task, srcs, _ = make_task(down, {"s1": db}, start={"s1": p0})
    store = Store(etcd_client, etcd_prefix)
    master = AutoMaster(store, lambda info: (Stage.NONE, info.ddls))
    try:
        for n, t in enumerate(("orders_1", "orders_2")):
            db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
            db.execute(f"INSERT INTO {t} VALUES ({n + 1}, 7)")
        (at,) = positions(db)
        db.execute("ALTER TABLE orders_1 ADD UNIQUE KEY uv (v)")   # unique in the shard, not in the merged table
        db.execute("INSERT INTO orders_1 VALUES (3, 8)")
        s1 = optimistic_syncer(spark, store, task, srcs["s1"])
        try:
            with pytest.raises(SyncError, match="Duplicate entry") as ei:
                s1.sync_until_caught_up()
        finally:
            s1.close()
        assert parse_binlog_pos(ei.value.context["position"]) == (at.file, at.pos) and "binlog skip" in str(ei.value)
        (info,) = store.list_infos(task.name).items
        assert not store.get_operation(info.lock, info.table).done

        # armed with the GTID state of another server at that file:pos: not used, marked passed
        domain, server, seq = at.gtid.split(",")[-1].split("-")
        other = f"{domain}-{server}-{int(seq) + 1000}"
        store.put_binlog_skip(master.acting.fence, BinlogSkip(task.name, "s1", at.file, at.pos, gtid=other))
        s2 = optimistic_syncer(spark, store, task, srcs["s1"])
        try:
            with pytest.raises(SyncError, match="Duplicate entry"):
                s2.sync_until_caught_up()
        finally:
            s2.close()
        rec = store.get_binlog_skip(task.name, "s1", at.file, at.pos)
        assert rec.state == "passed" and "GTID state" in rec.note
        (info,) = store.list_infos(task.name).items              # the failed run re-sent its Info
        assert not store.get_operation(info.lock, info.table).done

        store.put_binlog_skip(master.acting.fence, BinlogSkip(task.name, "s1", at.file, at.pos, gtid=at.gtid))
        s2 = optimistic_syncer(spark, store, task, srcs["s1"])
        try:
            s2.sync_until_caught_up()
        finally:
            s2.close()
        assert store.get_operation(info.lock, info.table).done        # the lock is not left waiting
        assert [i.revision for i in store.list_infos(task.name).items] == [info.revision]   # no new Info
        assert sorted(r[0] for r in down.execute("SELECT id FROM orders")) == [1, 2, 3]
        assert "uv" not in down.execute("SHOW CREATE TABLE orders")[0][1]
        idx = [i["name"] for i in json.loads(_points(down, task)["orders_1"][1])["indexes"]]
        assert "uv" in idx                                            # the tracker follows the upstream
        assert store.get_binlog_skip(task.name, "s1", at.file, at.pos).state == "done"
    finally:
        master.close()


def test_skip_of_a_multi_change_alter_refused_at_its_second_change(spark, etcd_client, etcd_prefix, source1_db,
                                                                   downstream_db, positions):
    """``ADD a, ADD UNIQUE uv (v), ADD c`` is coordinated change by change: ``a`` runs, the
    UNIQUE fails on the merged rows.  The operator's ``binlog skip`` covers the change that
    failed: the UNIQUE's Operation is marked done (not run), ``ADD a`` is not coordinated or run
    again, and ``ADD c``, which the lock had not seen, is coordinated and run as usual (told to
    the lock as a forced schema instead, it moved the lock's join with nothing run downstream:
    a widening or an index the merged table then never got); the tracker has the whole
    statement."""
    db, down = source1_db, downstream_db
    (p0,) = positions(db)
    task, srcs, _ = make_task(down, {"s1": db}, start={"s1": p0})
    store = Store(etcd_client, etcd_prefix)
    # as the real master: an ignore-conflict Info sets the table's schema and is not answered
    master = AutoMaster(store, lambda info: None if info.ignore_conflict else (Stage.NONE, info.ddls))
    try:
        for n, t in enumerate(("orders_1", "orders_2")):
            db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
            db.execute(f"INSERT INTO {t} VALUES ({n + 1}, 7)")
        (at,) = positions(db)
        db.execute("ALTER TABLE orders_1 ADD COLUMN a INT, ADD UNIQUE KEY uv (v), ADD COLUMN c INT")
        db.execute("INSERT INTO orders_2 VALUES (4, 9)")
        s1 = optimistic_syncer(spark, store, task, srcs["s1"])
        try:
            with pytest.raises(SyncError, match="Duplicate entry"):
                s1.sync_until_caught_up()
        finally:
            s1.close()
        assert [" ".join(a[0].ddls).split("`orders` ")[-1] for a in master.answered] == [
            "ADD COLUMN `a` INT", "ADD UNIQUE KEY `uv`(`v`)"]
        (info,) = store.list_infos(task.name).items
        assert not store.get_operation(info.lock, info.table).done

        store.put_binlog_skip(master.acting.fence, BinlogSkip(task.name, "s1", at.file, at.pos, gtid=at.gtid))
        s2 = optimistic_syncer(spark, store, task, srcs["s1"])
        try:
            s2.sync_until_caught_up()
        finally:
            s2.close()
        assert store.get_operation(info.lock, info.table).done        # the lock is not left waiting
        (told,) = store.list_infos(task.name).items
        assert not told.ignore_conflict and told.ddls[0].endswith("ADD COLUMN `c` INT")
        assert [c["name"] for c in told.afters[-1]["columns"]] == ["id", "v", "a", "c"]
        # ADD a not coordinated again, ADD c coordinated once
        assert [" ".join(a[0].ddls).split("`orders` ")[-1] for a in master.answered][2:] == ["ADD COLUMN `c` INT"]
        assert store.get_operation(told.lock, told.table).done
        assert sorted(r[0] for r in down.execute("SELECT id FROM orders")) == [1, 2, 4]
        create = down.execute("SHOW CREATE TABLE orders")[0][1]
        assert "`a`" in create and "uv" not in create and "`c`" in create
        cols = [c["name"] for c in json.loads(_points(down, task)["orders_1"][1])["columns"]]
        assert cols == ["id", "v", "a", "c"]                          # the tracker follows the upstream
    finally:
        master.close()


def test_skip_of_a_combined_ddl_the_downstream_refused_finishes_its_operation_and_passes_what_it_folded(
        spark, etcd_client, etcd_prefix, source1_db, downstream_db, positions):
    """``RENAME a TO a2`` is held; the lock asks for the later ``RENAME b TO b2`` to be folded in
    (``Operation.combine``) and the combined ALTER fails downstream.  The operator fixes the
    target by hand and skips the statement: the skip covers the combined statement (the
    Operation is marked done, not run; the tracker takes both renames), and the folded
    statement is passed over when the stream reaches it (not coordinated, nothing run)."""
    db, down = source1_db, downstream_db
    (p0,) = positions(db)
    task, srcs, _ = make_task(down, {"s1": db}, start={"s1": p0})
    store = Store(etcd_client, etcd_prefix)

    def policy(info):
        text = " ".join(info.ddls)
        if info.ignore_conflict:
            return None
        if "a2" in text and "b2" in text:                  # the combined ALTER: refused downstream
            return Stage.NONE, [f"ALTER TABLE `{down.name}`.`orders` RENAME COLUMN `nope` TO `a2`"]
        if "a2" in text:
            k = next((i for i, s in enumerate(info.ahead) if "b2" in s), None)
            return (Stage.SKIP_AND_WAIT, []) if k is None else (Stage.SKIP_AND_WAIT, [], "", [k])
        return Stage.NONE, info.ddls
    master = AutoMaster(store, policy)
    try:
        db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT, a INT, b INT)")
        db.execute("INSERT INTO orders_1 VALUES (1, 1, 1, 1)")
        (at,) = positions(db)
        db.execute("ALTER TABLE orders_1 RENAME COLUMN a TO a2")
        db.execute("ALTER TABLE orders_1 RENAME COLUMN b TO b2")
        db.execute("INSERT INTO orders_1 VALUES (2, 2, 20, 21)")
        s1 = optimistic_syncer(spark, store, task, srcs["s1"])
        try:
            # held on RENAME a; the combine answer (put once the stream read RENAME b) rewinds
            # it, within this call or a later one, and the combined ALTER is refused
            with pytest.raises(SyncError, match="nope"):
                for _ in range(100):
                    s1.sync_until_caught_up()
                    time.sleep(0.1)
        finally:
            s1.close()
        (info,) = store.list_infos(task.name).items
        assert "b2" in " ".join(info.ddls) and not store.get_operation(info.lock, info.table).done
        answered = len(master.answered)

        down.execute("ALTER TABLE orders RENAME COLUMN a TO a2, RENAME COLUMN b TO b2")   # the operator's fix
        store.put_binlog_skip(master.acting.fence, BinlogSkip(task.name, "s1", at.file, at.pos, gtid=at.gtid))
        s2 = optimistic_syncer(spark, store, task, srcs["s1"])
        try:
            s2.sync_until_caught_up()
        finally:
            s2.close()
        assert store.get_operation(info.lock, info.table).done        # the lock is not left waiting
        assert len(master.answered) == answered                      # RENAME b not coordinated again
        assert down.execute("SELECT id, a2, b2 FROM orders ORDER BY id") == [(1, 1, 1), (2, 20, 21)]
        cols = [c["name"] for c in json.loads(_points(down, task)["orders_1"][1])["columns"]]
        assert cols == ["id", "v", "a2", "b2"]                        # the tracker follows the upstream
        assert not s2.store.tables[(db.name, "orders_1")].folded      # passed over, and gone from the list
        assert store.get_binlog_skip(task.name, "s1", at.file, at.pos).state == "done"
    finally:
        master.close()
