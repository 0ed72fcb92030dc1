"""Conditions that stop a subtask up front or for good instead of retrying or guessing: a non-MariaDB
upstream, a checkpoint that does not match the upstream's binlog (failover), a DDL the downstream refuses."""
from __future__ import annotations

import dataclasses

import pytest

from worker.sync.errors import SyncError
from worker.upstream import check_upstream, require_mariadb


def test_the_local_mariadb_sources_pass(source1_db, source2_db):
    check_upstream(source1_db.params, "s1")
    check_upstream(source2_db.params, "s2")


@pytest.mark.parametrize("version", ["8.0.36", "8.4.0-commercial", "5.7.44-log"])
def test_a_mysql_upstream_is_refused_up_front(version):
    with pytest.raises(SyncError) as ei:
        require_mariadb(version, "s9", "10.0.0.5:3306")
    msg = str(ei.value)
    assert version in msg and "10.0.0.5:3306" in msg and "MariaDB upstreams only" in msg and "source=s9" in msg


def test_mariadb_version_strings_are_accepted():
    for v in ("10.11.6-MariaDB-0+deb12u1-log", "11.4.2-MariaDB"):
        require_mariadb(v, "s1")


def test_checkpoints_taken_at_dml_and_ddl_boundaries_match_their_upstream(spark, source1_db, downstream_db):
    """Every global point the syncer stores (after a transaction, at a DDL) passes the check,
    and a restart succeeds; the same checkpoint with another server's GTID state, or a binlog
    file the server does not have, stops the syncer with a typed, non-retryable error."""
    from tests.worker.conftest import make_task
    from worker.process import _retryable
    from worker.sync.syncer import Syncer
    from worker.sync.errors import UpstreamChanged
    from worker.upstream import check_checkpoint_on_upstream, master_status

    p1 = master_status(source1_db.params)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    cp = f"`{downstream_db.name}`.`{task.name}_syncer_checkpoint`"
    seen = []

    def global_point():
        (f, p, g), = downstream_db.execute(f"SELECT binlog_name, binlog_pos, binlog_gtid FROM {cp} WHERE is_global = 1")
        return f, p, g
    syncer = Syncer(spark, task, srcs["s1"])
    try:
        for sql in ("CREATE TABLE items (id INT PRIMARY KEY, v INT)", "INSERT INTO items VALUES (1, 1), (2, 2)",
                    "ALTER TABLE items ADD COLUMN w INT", "UPDATE items SET w = 3", "CREATE INDEX ix ON items (w)"):
            source1_db.execute(sql)
            syncer.sync_until_caught_up()
            seen.append(global_point())
    finally:
        syncer.close()
    from worker.events import Position
    for f, p, g in seen:
        assert g, (f, p)
        check_checkpoint_on_upstream(source1_db.params, Position(f, p, g), "s1")
    f, p, g = seen[-1]
    domain, server, seq = g.split(",")[-1].split("-")
    # a restart on the same server starts cleanly
    again = Syncer(spark, task, srcs["s1"])
    try:
        again.start()
    finally:
        again.close()
    for bad in (f"UPDATE {cp} SET binlog_gtid = '{domain}-{server}-{int(seq) + 7}' WHERE is_global = 1",
                f"UPDATE {cp} SET binlog_name = 'mysql-bin.999999', binlog_gtid = '{g}' WHERE is_global = 1"):
        downstream_db.execute(bad)
        s = Syncer(spark, task, srcs["s1"])
        try:
            with pytest.raises(UpstreamChanged) as ei:
                s.start()
        finally:
            s.close()
        msg = str(ei.value)
        assert "does not match the checkpoint" in msg and "source=s1" in msg and "failover" in msg, msg
        assert not _retryable(ei.value)
    # the documented way on: drop the source's checkpoint rows, start from the recorded GTID in
    # safe mode; rows written since are replicated and replayed ones are idempotent
    source1_db.execute("INSERT INTO items VALUES (3, 3, 3)")
    source1_db.execute("UPDATE items SET v = 9 WHERE id = 1")
    downstream_db.execute(f"DELETE FROM {cp} WHERE id = 's1'")
    from worker.check import check_task
    task2, srcs2, _ = make_task(downstream_db, {"s1": source1_db}, safe_mode=True,
                                start={"s1": Position("", 0, seen[1][2])})   # before the ALTER: a replay
    task2 = dataclasses.replace(task2, name=task.name)            # the same task, new config
    s = Syncer(spark, task2, srcs2["s1"])
    try:
        s.sync_until_caught_up()
    finally:
        s.close()
    assert check_task(task2, srcs2).equal
    assert sorted(downstream_db.execute("SELECT id, v, w FROM items")) == [(1, 9, 3), (2, 2, 3), (3, 3, 3)]


def test_a_ddl_the_downstream_refuses_stops_the_subtask_for_good(spark, source1_db, downstream_db):
    """A non-sharded table's ALTER that cannot apply downstream (here: a unique key over rows
    that only the downstream has twice) is not retried forever: typed, non-retryable, with the
    statement, position and both exits in the message."""
    from tests.worker.conftest import make_task
    from worker.process import _retryable
    from worker.sync.errors import DownstreamDDLRejected
    from worker.sync.syncer import Syncer
    from worker.upstream import master_status

    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": master_status(source1_db.params)})
    source1_db.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT)")
    source1_db.execute("INSERT INTO items VALUES (1, 1), (2, 2)")
    syncer = Syncer(spark, task, srcs["s1"])
    try:
        syncer.sync_until_caught_up()
        downstream_db.execute("INSERT INTO items VALUES (3, 1)")      # drift made by hand downstream
        source1_db.execute("ALTER TABLE items ADD UNIQUE KEY uk_v (v)")
        with pytest.raises(DownstreamDDLRejected) as ei:
            syncer.sync_until_caught_up()
    finally:
        syncer.close()
    msg = str(ei.value)
    assert "Duplicate entry" in msg and "uk_v" in msg and "binlog skip" in msg and "resume-task" in msg, msg
    assert "Error 1062 (23000): Duplicate entry" in msg, msg        # the server's code and SQLSTATE, like DM
    assert not _retryable(ei.value)
