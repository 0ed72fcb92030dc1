"""Both upstream servers write ROW binlog with full row metadata: an INSERT comes back with
column names and values, and a DDL comes back as a query event."""
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent, QueryEvent, MariadbGtidEvent
from pymysqlreplication.row_event import WriteRowsEvent


def _gtid_pos(db):
    # MariaDB dump requests start from a GTID state (file/pos are ignored with is_mariadb).
    return db.execute("SELECT @@gtid_binlog_pos")[0][0]


@pytest.mark.parametrize("fixture", ["source1_db", "source2_db"])
def test_row_binlog_with_full_metadata(fixture, request):
    db = request.getfixturevalue(fixture)
    fmt, image, meta = db.execute("SELECT @@binlog_format, @@binlog_row_image, @@binlog_row_metadata")[0]
    assert (fmt, image, meta) == ("ROW", "FULL", "FULL")
    start = _gtid_pos(db)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))")
    db.execute("INSERT INTO t VALUES (1, 'alice')")
    db.execute("ALTER TABLE t ADD COLUMN age INT")
    p = db.params
    stream = BinLogStreamReader(
        connection_settings={"host": p["host"], "port": p["port"], "user": p["user"], "password": p["password"]},
        server_id=9000 + p["port"] % 1000, auto_position=start, blocking=False, is_mariadb=True)
    rows, ddls, gtids = [], [], 0
    try:
        for ev in stream:
            if isinstance(ev, (GtidEvent, MariadbGtidEvent)):
                gtids += 1
            elif isinstance(ev, QueryEvent) and ev.schema.decode() == db.name:
                q = ev.query if isinstance(ev.query, str) else ev.query.decode()
                if q.upper() not in ("BEGIN", "COMMIT"):
                    ddls.append(q)
            elif isinstance(ev, WriteRowsEvent) and ev.schema == db.name:
                rows.extend(r["values"] for r in ev.rows)
    finally:
        stream.close()
    # Column names come from the binlog's own metadata (binlog_row_metadata=FULL).
    assert rows == [{"id": 1, "name": "alice"}]
    assert any("ADD COLUMN age" in q for q in ddls), ddls
    assert any(q.startswith("CREATE TABLE t") for q in ddls), ddls
    assert gtids >= 3  # every transaction carries a MariaDB GTID


def test_sources_have_distinct_server_ids(source1_db, source2_db):
    ids = {source1_db.execute("SELECT @@server_id")[0][0], source2_db.execute("SELECT @@server_id")[0][0]}
    assert len(ids) == 2
    assert source1_db.execute("SELECT @@gtid_strict_mode")[0][0] == 1
