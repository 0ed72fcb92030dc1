"""Row values that used to stop a source for good (an endless retry, no name in the message):
a valid latin1 byte Python's cp1252 does not define, and MariaDB's compressed columns."""
from __future__ import annotations

import pytest

from worker.binlog import charsets
from worker.sync.syncer import Syncer

from .conftest import make_task


@pytest.mark.parametrize("server", ["source1_db", "mysql1_db"])
def test_mysql_latin1_is_the_servers_latin1_byte_for_byte(request, server):
    """Every latin1 byte decodes to the character the server itself converts it to."""
    db = request.getfixturevalue(server)
    [(text,)] = db.execute("SELECT CONVERT(CAST(UNHEX(%s) AS CHAR CHARACTER SET latin1) USING utf8mb4)", (bytes(range(256)).hex(),))
    assert bytes(range(256)).decode("mysql_latin1") == text
    assert text.encode("mysql_latin1") == bytes(range(256))
    assert charsets.encoding("latin1") == "mysql_latin1" and charsets.encoding("utf8mb4") == "utf8"


def test_latin1_bytes_cp1252_leaves_undefined_replicate_unchanged(spark, source1_db, downstream_db, positions):
    """MariaDB's latin1 is cp1252 with 0x81, 0x8D, 0x8F, 0x90 and 0x9D as the C1 controls
    U+0081..: Python's cp1252 codec refuses them."""
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, name VARCHAR(10) CHARACTER SET latin1)")
    source1_db.execute("INSERT INTO orders_1 VALUES (1, X'41818D8F909D80E9')")
    syncer = Syncer(spark, task, srcs["s1"])
    try:
        syncer.sync_until_caught_up()
        assert downstream_db.execute("SELECT id, HEX(name) FROM orders") == [(1, "41818D8F909D80E9")]
    finally:
        syncer.close()
@pytest.mark.parametrize("decoder", ["fast", "mysql-replication"])
def test_compressed_columns_replicate(spark, source1_db, downstream_db, positions, decoder):
    """MariaDB's compressed columns: text (utf8mb4 and latin1) and binary, short values stored
    as they are and long ones deflated, in inserts, updates and deletes.  A JSON column sends
    the rows to mysql-replication's decoder instead of ``fast_rows``; both must agree.  Before,
    the table map of such a table stopped the source's decoding for good."""
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    extra = ", j JSON" if decoder == "mysql-replication" else ""
    source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, body TEXT COMPRESSED, tag VARCHAR(200) COMPRESSED, "
                       "bin BLOB COMPRESSED, l1 VARCHAR(300) CHARACTER SET latin1 COMPRESSED" + extra + ")")
    source1_db.execute("INSERT INTO orders_1 (id, body, tag, bin, l1) VALUES "
                       "(1, REPEAT('hello ', 100), 'short', REPEAT(X'00FF', 400), REPEAT(X'81E9', 100)), "
                       "(2, '', NULL, X'', 'a'), (3, 'x', REPEAT('t', 150), NULL, NULL), (4, 'gone', 'gone', NULL, NULL)")
    source1_db.execute("UPDATE orders_1 SET body = REPEAT('ünï ✓', 300) WHERE id = 2")
    source1_db.execute("DELETE FROM orders_1 WHERE id = 4")
    syncer = Syncer(spark, task, srcs["s1"])
    try:
        syncer.sync_until_caught_up()
        q = "SELECT id, body, tag, HEX(bin), HEX(l1) FROM {} ORDER BY id"
        want = source1_db.execute(q.format("orders_1"))
        assert want[1][1] == "ünï ✓" * 300 and len(want) == 3
        assert downstream_db.execute(q.format("orders")) == want
    finally:
        syncer.close()
