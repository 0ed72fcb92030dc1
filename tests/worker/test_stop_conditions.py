"""Conditions that stop a subtask up front or for good instead of retrying or guessing: an upstream
of another flavor than its source config names, binlog settings the reader cannot decode, a
start position the upstream purged, a checkpoint that does not match the upstream's binlog
(failover), a DDL the downstream refuses."""
from __future__ import annotations

import contextlib
import dataclasses

import pymysql
import pytest

from coordinator.errors import ConfigError
from worker.sync.errors import StartUnavailable, SyncError
from worker.upstream import check_upstream, require_flavor


def test_mariadb_and_mysql_upstreams_pass_and_their_flavor_is_detected(source1_db, mysql1_db):
    assert check_upstream(source1_db.params, "s1") == "mariadb"
    assert check_upstream(source1_db.params, "s1", "mariadb") == "mariadb"
    assert check_upstream(mysql1_db.params, "m1") == "mysql"
    assert check_upstream(mysql1_db.params, "m1", "mysql") == "mysql"


@pytest.mark.parametrize("server, configured, actual", [("source1", "mysql", "mariadb"), ("mysql1", "mariadb", "mysql")])
def test_a_wrong_configured_flavor_is_refused_with_the_fix(services, server, configured, actual):
    from worker.subtask import _retryable
    p = services.mysql[server]
    with pytest.raises(ConfigError) as ei:
        check_upstream(p, "s9", configured)
    assert not _retryable(ei.value)          # the source config must change: retrying cannot help
    msg = str(ei.value)
    assert f"upstream 127.0.0.1:{p['port']} is {actual}, but the source config says flavor: {configured}" in msg
    assert f"set `flavor: {actual}` (or leave it empty to detect it)" in msg and "source=s9" in msg


def test_require_flavor_accepts_the_empty_flavor():
    require_flavor("mysql", "", "s1")
    require_flavor("mariadb", "", "s1")
    require_flavor("mysql", "mysql", "s1")
    with pytest.raises(ConfigError, match="10.0.0.5:3306 is mariadb"):
        require_flavor("mariadb", "mysql", "s1", "10.0.0.5:3306")


@contextlib.contextmanager
def global_var(params: dict, name: str, value):
    with pymysql.connect(**params, autocommit=True) as c, c.cursor() as cur:
        cur.execute(f"SELECT @@GLOBAL.{name}")
        old = cur.fetchone()[0]
        cur.execute(f"SET GLOBAL {name} = %s", (value,))
    try:
        yield
    finally:
        with pymysql.connect(**params, autocommit=True) as c, c.cursor() as cur:
            cur.execute(f"SET GLOBAL {name} = %s", (old,))


@pytest.mark.parametrize("var, bad, fix", [("binlog_transaction_compression", "ON", "set it to OFF"),
                                           ("binlog_row_value_options", "PARTIAL_JSON", "set it to ''")])
def test_mysql_binlog_forms_the_reader_cannot_decode_are_refused(mysql1_db, var, bad, fix):
    with global_var(mysql1_db.params, var, bad):
        with pytest.raises(SyncError) as ei:
            check_upstream(mysql1_db.params, "m1")      # a new connection: sessions keep their old values
    msg = str(ei.value)
    assert "cannot decode" in msg and f"{var}={bad}" in msg and fix in msg and "source=m1" in msg
    assert check_upstream(mysql1_db.params, "m1") == "mysql"


def _gtid_executed(params: dict) -> str:
    with pymysql.connect(**params) as c, c.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.gtid_executed")
        return str(cur.fetchone()[0]).replace("\n", "")


def test_a_purged_start_gtid_stops_the_subtask_with_the_purged_set(spark, private_mysql_db, downstream_db):
    """A task whose meta starts at a GTID the server purged: the syncer stops at start with a
    typed, non-retryable error naming the start set, @@gtid_purged and what to do, and writes
    no checkpoint; with a start that contains @@gtid_purged it starts."""
    from tests.worker.conftest import make_task
    from worker.events import Position
    from worker.subtask import _retryable
    from worker.sync.syncer import Syncer

    db = private_mysql_db
    old = _gtid_executed(db.params)                   # the task starts here...
    db.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT)")
    db.execute("INSERT INTO items VALUES (1, 1), (2, 2)")
    with pymysql.connect(**db.params, autocommit=True) as c, c.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW BINARY LOG STATUS")
        newest = cur.fetchone()[0]
        cur.execute(f"PURGE BINARY LOGS TO '{newest}'")  # ...but the transactions after it are purged
        cur.execute("SELECT @@GLOBAL.gtid_purged")
        purged = str(cur.fetchone()[0]).replace("\n", "")
    task, srcs, _ = make_task(downstream_db, {"m1": db}, start={"m1": Position("", 0, old)})
    cp = f"`{downstream_db.name}`.`{task.name}_syncer_checkpoint`"
    syncer = Syncer(None, task, srcs["m1"], reader="process")
    try:
        with pytest.raises(StartUnavailable) as ei:
            syncer.start()
    finally:
        syncer.close()
    msg = str(ei.value)
    from worker import gtid
    assert f"the task's meta start is GTID set {gtid.canonical(old)!r}" in msg, msg
    assert f"@@gtid_purged is {gtid.canonical(purged)!r}" in msg and "purged binlogs the task still needs" in msg
    assert "task-mode: all" in msg and "binlog-gtid" in msg and "source=m1" in msg
    assert not _retryable(ei.value)
    assert downstream_db.execute(f"SELECT COUNT(*) FROM {cp}") == [(0,)]     # nothing written

    # a start that contains @@gtid_purged: replication starts (here at the current end)
    task2, srcs2, _ = make_task(downstream_db, {"m1": db}, start={"m1": Position("", 0, _gtid_executed(db.params))})
    task2 = dataclasses.replace(task2, name=task.name)
    downstream_db.execute("CREATE TABLE items (id INT PRIMARY KEY, v INT)")     # created before the start
    syncer = Syncer(spark, task2, srcs2["m1"], reader="process")
    try:
        syncer.start()
        db.execute("INSERT INTO items VALUES (3, 3)")
        syncer.sync_until_caught_up()
    finally:
        syncer.close()
    assert downstream_db.execute("SELECT id, v FROM items") == [(3, 3)]


def test_a_start_position_of_the_other_flavor_is_refused(source1_db, downstream_db):
    from tests.worker.conftest import make_task
    from worker.events import Position
    from worker.sync.syncer import Syncer

    mysql_set = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": Position("", 0, mysql_set)})
    syncer = Syncer(None, task, srcs["s1"], reader="process")
    try:
        with pytest.raises(StartUnavailable) as ei:
            syncer.start()
    finally:
        syncer.close()
    msg = str(ei.value)
    assert f"the task's meta start is the mysql GTID set {mysql_set!r}" in msg and "is mariadb" in msg, msg
    assert "@@gtid_binlog_pos" in msg


def test_checkpoints_taken_at_dml_and_ddl_boundaries_match_their_upstream(spark, source1_db, downstream_db):
    """Every global point the syncer stores (after a transaction, at a DDL) passes the check,
    and a restart succeeds; the same checkpoint with another server's GTID state, or a binlog
    file the server does not have, stops the syncer with a typed, non-retryable error."""
    from tests.worker.conftest import make_task
    from worker.subtask import _retryable
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
    from worker.subtask import _retryable
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


def test_a_meta_start_past_the_end_of_the_binlog_stops_the_subtask_with_the_servers_end(source1_db, downstream_db):
    """A task whose meta start is a position the server has not written (past the end of the
    current file): before, the subtask showed Running with lag 0 while nothing ever arrived.  Now
    the syncer stops at start with a typed, non-retryable error naming the position, the file's
    size and the server's end, and writes no checkpoint."""
    from tests.worker.conftest import make_task
    from worker.events import Position
    from worker.subtask import _retryable
    from worker.sync.syncer import Syncer
    from worker.upstream import master_status

    end = master_status(source1_db.params)
    past = Position(end.file, end.pos + 100_000, "")
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": past})
    syncer = Syncer(None, task, srcs["s1"], reader="process")
    try:
        with pytest.raises(StartUnavailable) as ei:
            syncer.start()
    finally:
        syncer.close()
    msg = str(ei.value)
    assert f"the task's meta start {past.file}:{past.pos} is past the end of upstream" in msg, msg
    assert f"{end.file} has " in msg and "the server's binlog ends at" in msg and "binlog-pos" in msg
    assert "source=s1" in msg and not _retryable(ei.value)
    cp = f"`{downstream_db.name}`.`{task.name}_syncer_checkpoint`"
    assert downstream_db.execute(f"SELECT COUNT(*) FROM {cp}") == [(0,)]       # nothing written
