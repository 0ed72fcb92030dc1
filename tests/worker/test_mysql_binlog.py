"""The binlog side on a real MySQL 9.7 upstream: its end and GTID state, the GTID at a position,
dumps by file/pos and by GTID reading the same transactions, the checkpoint check, and the event
forms the reader refuses (a compressed transaction, a partial JSON update) stopping the read
instead of losing rows."""
from __future__ import annotations

import pytest

from coordinator.routing import TableMapper
from worker import gtid
from worker.binlog import BinlogReadError, decode_range
from worker.events import Position
from worker.sync.errors import UpstreamChanged
from worker.upstream import check_checkpoint_on_upstream, check_upstream, gtid_at, master_status

from tests.conftest import Database, devservices
from tests.support.ports import free_port

from .conftest import make_task
from .test_dump_position import _flat, spy_dumps


@pytest.fixture(scope="module")
def private_mysql(services):
    """A MySQL upstream of this module's own (the chroot of scripts/devservices.py): the
    refused event forms are written to its binlog, where no other test's task reads."""
    import shutil
    m = devservices.MySQL("mysql-private", free_port(), 399, True)
    devservices.start_mysql(m)
    try:
        yield {"host": devservices.HOST, "port": m.port, "user": devservices.USER, "password": devservices.PASSWORD}
    finally:
        devservices._stop_pid(f"MySQL {m.name}", m.pidfile)
        shutil.rmtree(m.dir, ignore_errors=True)


def test_binlog_end_is_a_mysql_gtid_set_that_gtid_at_reproduces(mysql1_db):
    mysql1_db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    mid = master_status(mysql1_db.params)
    mysql1_db.execute("INSERT INTO t VALUES (1, 1)")
    mysql1_db.execute("ALTER TABLE t ADD COLUMN w INT")
    end = master_status(mysql1_db.params)
    assert gtid.flavor_of(end.gtid) == gtid.MYSQL and end > mid
    assert gtid.subtract_count(end.gtid, mid.gtid) == {next(iter(gtid.entries(end.gtid))): 2}   # the INSERT, the ALTER
    with mysql1_db.connect(None) as c, c.cursor() as cur:
        assert gtid_at(cur, mid.file, mid.pos) == mid.gtid
        assert gtid_at(cur, end.file, end.pos) == end.gtid
        assert gtid_at(cur, mid.file, mid.pos + 1) == ""                   # not an event boundary
    check_checkpoint_on_upstream(mysql1_db.params, mid, "s1")
    other = Position(mid.file, mid.pos, end.gtid)                         # another server's state there
    with pytest.raises(UpstreamChanged) as ei:
        check_checkpoint_on_upstream(mysql1_db.params, other, "s1")
    assert end.gtid in str(ei.value) and "does not follow it" in str(ei.value)
    with pytest.raises(UpstreamChanged) as ei:                            # not an event boundary
        check_checkpoint_on_upstream(mysql1_db.params, Position(mid.file, mid.pos + 1, mid.gtid), "s1")
    assert "is not a position in its binlog" in str(ei.value)
    foreign = Position(mid.file, mid.pos, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")   # never executed here
    with pytest.raises(UpstreamChanged) as ei:
        check_checkpoint_on_upstream(mysql1_db.params, foreign, "s1")
    assert "does not contain it" in str(ei.value)
    check_checkpoint_on_upstream(mysql1_db.params, end, "s1")             # the binlog's end: nothing follows
    assert check_upstream(mysql1_db.params, "s1") == "mysql"
    assert check_upstream(mysql1_db.params, "s1", "mysql") == "mysql"


def test_file_pos_and_gtid_dumps_read_the_same_on_mysql(mysql1_db, downstream_db, positions, monkeypatch):
    (p0,) = positions(mysql1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": mysql1_db}, start={"s1": p0})
    mysql1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT, j JSON)")
    mysql1_db.execute("INSERT INTO orders_1 VALUES (1, 1, '{\"a\": 1}'), (2, 2, NULL)")
    (p1,) = positions(mysql1_db)
    mysql1_db.execute("UPDATE orders_1 SET v = 5 WHERE id = 1")
    mysql1_db.execute("DELETE FROM orders_1 WHERE id = 2")
    mysql1_db.execute("ALTER TABLE orders_1 ADD COLUMN w INT")
    mysql1_db.execute("INSERT INTO orders_1 VALUES (3, 3, NULL, 7)")
    end = master_status(mysql1_db.params)
    kw, mapper = srcs["s1"].db.pymysql_kwargs(), TableMapper(task.instance("s1"), task.meta_schema)
    opened = spy_dumps(monkeypatch)

    by_gtid = _flat(decode_range(kw, mapper, Position("", 0, p1.gtid), end))
    assert opened == [{"auto_position": p1.gtid, "is_mariadb": False}]
    # (other tests' statements on the same server may fall in the range: only this table's count)
    kinds = [(i[1][0][0] if i[0] not in ("stmt", "end") else i[0]) for i in by_gtid
             if i[0] != "stmt" or "orders_1" in i[1]]
    assert kinds == ["update", "delete", "stmt", "insert", "end"]
    assert by_gtid[0][1] == [("update", "orders_1", [((1, 1, '{"a": 1}'), (1, 5, '{"a": 1}'))])]   # JSON as text
    assert by_gtid[-1] == ("end", end.gtid)                               # the GTID state advanced exactly
    opened.clear()
    assert _flat(decode_range(kw, mapper, p1, end)) == by_gtid
    assert [h.get("log_file") for h in opened] == [p1.file]               # file/pos, and it checked out
    opened.clear()                                                         # an earlier file/pos: by GTID
    assert _flat(decode_range(kw, mapper, Position(p0.file, p0.pos, p1.gtid), end)) == by_gtid
    assert [h.get("log_file") for h in opened] == [p0.file, None]


@pytest.mark.parametrize("setting, statement", [
    ("binlog_transaction_compression = ON", "INSERT INTO orders_1 VALUES (2, 2, '{\"a\": 2}')"),
    ("binlog_row_value_options = 'PARTIAL_JSON', SESSION binlog_row_image = 'MINIMAL'",
     "UPDATE orders_1 SET j = JSON_SET(j, '$.a', 9) WHERE id = 1"),
])
def test_events_the_reader_cannot_decode_stop_the_read_with_the_fix(private_mysql, downstream_db, positions,
                                                                     setting, statement):
    db = Database("mysql-private", f"t_refused_{free_port()}", private_mysql)
    with db.connect(None) as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db.name}`")
    task, srcs, _ = make_task(downstream_db, {"s1": db})
    db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT, j JSON)")
    db.execute(f"CREATE DATABASE `{db.name}_x`")
    db.execute(f"CREATE TABLE `{db.name}_x`.other (id INT PRIMARY KEY, j JSON)")   # a table the task does not read
    db.execute("INSERT INTO orders_1 VALUES (1, 1, '{\"a\": 1, \"b\": \"x\"}')")
    db.execute(f"INSERT INTO `{db.name}_x`.other VALUES (1, '{{\"a\": 1}}')")
    (p1,) = positions(db)
    with db.connect() as c, c.cursor() as cur:       # one session writes in the refused form
        cur.execute(f"SET SESSION {setting}")
        if "PARTIAL_JSON" in setting:                # a partial update of a table the task does not read
            cur.execute(f"UPDATE `{db.name}_x`.other SET j = JSON_SET(j, '$.a', 5) WHERE id = 1")
        cur.execute(statement)
    end = master_status(db.params)
    kw, mapper = srcs["s1"].db.pymysql_kwargs(), TableMapper(task.instance("s1"), task.meta_schema)
    with pytest.raises(BinlogReadError) as ei:
        list(decode_range(kw, mapper, p1, end, source_id="s1"))
    var = setting.split()[0]
    assert var in str(ei.value) and "SET PERSIST" in str(ei.value) and "source=s1" in str(ei.value)
    if "PARTIAL_JSON" in setting:                    # the unrouted table's partial update was passed over
        assert "orders_1" in str(ei.value)
