"""Binlog dumps positioned by file/pos (no GTID scan of the binlog file), checked against the GTID
state, and positioned by GTID whenever the check fails (real MariaDB)."""
from __future__ import annotations

import threading
import time

from coordinator.routing import TableMapper
from worker.binlog import source as src   # white-box: spies on the decoder's dumps
from worker.binlog.doorbell import wait_for_binlog
from worker.binlog import Statement, decode_range, dump_position, gtid_follows
from worker.events import Position
from worker.upstream import master_status

from .conftest import make_task


def test_dump_position_rules():
    assert dump_position(Position("mysql-bin.000003", 1234, "0-1-9")) == {
        "log_file": "mysql-bin.000003", "log_pos": 1234, "resume_stream": True, "is_mariadb": False}
    for p in (Position("", 0, "0-1-9"), Position("mysql-bin.000003", 1234, "0-1-9,1-1-4"),
              Position("mysql-bin.000003", 1234, "")):
        assert dump_position(p) == {"auto_position": p.gtid, "is_mariadb": True}
    assert gtid_follows("0-1-9", "0-2-10") and not gtid_follows("0-1-9", "0-1-11")
    assert not gtid_follows("0-1-9", "0-1-9") and not gtid_follows("0-1-9", "1-1-10")


def spy_dumps(monkeypatch) -> list[dict]:
    """The positioning arguments of every binlog dump ``decode_range`` opens, in order."""
    opened: list[dict] = []
    real = src._decode_range

    def spy(db_kwargs, mapper, start, end, how, *a):
        opened.append(how)
        return real(db_kwargs, mapper, start, end, how, *a)
    monkeypatch.setattr(src, "_decode_range", spy)
    return opened


def _flat(items):
    out = []
    for it in items:
        if isinstance(it, tuple):
            out.append((it[0].gtid, [(k, r.up_table, rows) for k, r, rows in it[1]]))
        elif isinstance(it, Statement):
            out.append(("stmt", it.query))
        else:
            out.append(("end", it.pos.gtid))
    return out


def test_file_pos_dump_reads_what_a_gtid_dump_reads_and_falls_back(source1_db, downstream_db, positions,
                                                                    monkeypatch):
    (p0,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p0})
    source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT)")
    source1_db.execute("INSERT INTO orders_1 VALUES (1, 1), (2, 2)")
    (p1,) = positions(source1_db)
    source1_db.execute("UPDATE orders_1 SET v = 5 WHERE id = 1")
    source1_db.execute("INSERT INTO orders_1 VALUES (3, 3)")
    end = master_status(source1_db.params)
    kw, mapper = srcs["s1"].db.pymysql_kwargs(), TableMapper(task.instance("s1"), task.meta_schema)
    opened = spy_dumps(monkeypatch)

    by_gtid = _flat(decode_range(kw, mapper, Position("", 0, p1.gtid), end))
    assert [h.get("log_file") for h in opened] == [None]
    assert len([i for i in by_gtid if i[0] != "end"]) == 2       # the UPDATE and the INSERT
    opened.clear()
    assert _flat(decode_range(kw, mapper, p1, end)) == by_gtid
    assert [h.get("log_file") for h in opened] == [p1.file]      # file/pos, and it checked out
    # file/pos of an EARLIER transaction with p1's GTID state: the first GTID read does not
    # follow the state, so it starts over by GTID and hands out exactly the same
    opened.clear()
    assert _flat(decode_range(kw, mapper, Position(p0.file, p0.pos, p1.gtid), end)) == by_gtid
    assert [h.get("log_file") for h in opened] == [p0.file, None]
    # a binlog file that does not exist (purged): by GTID
    opened.clear()
    assert _flat(decode_range(kw, mapper, Position("mysql-bin.000000", p1.pos, p1.gtid), end)) == by_gtid
    assert [h.get("log_file") for h in opened] == ["mysql-bin.000000", None]


def test_doorbell_by_file_pos_wakes_on_the_next_transaction(source1_db):
    source1_db.execute("CREATE TABLE w (id INT)")
    at = master_status(source1_db.params)
    timer = threading.Timer(0.5, source1_db.execute, ("INSERT INTO w VALUES (1)",))
    timer.start()
    t0 = time.monotonic()
    assert wait_for_binlog(dict(source1_db.params), at, 20.0, threading.Event())
    assert time.monotonic() - t0 < 15.0     # woken by the insert, not by the 20 s timeout
    timer.join()
    # a position in a file that does not exist: retried by GTID, still woken
    gone = Position("mysql-bin.000000", at.pos, master_status(source1_db.params).gtid)
    timer = threading.Timer(0.5, source1_db.execute, ("INSERT INTO w VALUES (2)",))
    timer.start()
    t0 = time.monotonic()
    assert wait_for_binlog(dict(source1_db.params), gone, 20.0, threading.Event())
    assert time.monotonic() - t0 < 15.0
    timer.join()
