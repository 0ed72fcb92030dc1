"""Row values that used to stop a source for good (an endless retry, no name in the message):
a valid latin1 byte Python's cp1252 does not define, and MariaDB's compressed columns."""
from __future__ import annotations

import codecs

import pytest

from worker.binlog import charsets
from worker.sync.syncer import Syncer

from .conftest import make_task


_SAMPLE = ("AZaz09 ~é€ü¥£©®ÆßЖщ中文日本語한국어ไทยאבגαβγ😀" + "".join(chr(i) for i in range(0x80, 0x100)))


@pytest.mark.parametrize("server", ["source1_db", "mysql1_db"])
def test_every_character_set_decodes_as_the_server_converts_it(request, server):
    """For every character set the server has and Python has a codec for: each byte of a
    single-byte set, and a sample of text in a multi-byte one, decodes to the characters the
    server itself converts it to (latin1's 0x81, cp866's 0xFD, utf16's byte order...).  A byte
    the server leaves undefined (NULL, '?' or U+FFFD there) is not compared."""
    db = request.getfixturevalue(server)
    wrong = []
    for cs, maxlen in db.execute("SELECT character_set_name, maxlen FROM information_schema.character_sets"):
        enc = charsets.encoding(cs)
        try:
            codecs.lookup(enc)
        except LookupError:
            continue          # no codec: the bytes are kept, and the downstream stores them as they are
        if maxlen == 1:        # byte by byte: a byte the set leaves undefined is NULL or '?' there
            [server] = db.execute("SELECT " + ", ".join(
                f"CONVERT(CAST(X'{b:02x}' AS CHAR CHARACTER SET {cs}) USING utf8mb4)" for b in range(256)))
            for b, theirs in enumerate(server):
                try:
                    mine = bytes([b]).decode(enc)
                except UnicodeDecodeError:
                    mine = None
                if theirs not in (None, "?", "\ufffd") and mine != theirs:
                    wrong.append((cs, enc, hex(b), mine, theirs))
            continue
        [(hx, text)] = db.execute(f"SELECT HEX(CONVERT(%s USING {cs})), CONVERT(CONVERT(%s USING {cs}) "
                                  "USING utf8mb4)", (_SAMPLE, _SAMPLE))
        try:
            mine = bytes.fromhex(hx).decode(enc)
        except UnicodeDecodeError as e:
            mine = f"<{e}>"
        if mine != text:
            wrong.append((cs, enc, [(i, a, b) for i, (a, b) in enumerate(zip(mine, text)) if a != b][:3]))
    assert wrong == []
    assert charsets.encoding("latin1") == "mysql_latin1" and charsets.encoding("utf8mb4") == "utf8"


def test_values_whose_set_python_reads_otherwise_replicate_unchanged(spark, source1_db, downstream_db, positions):
    """Through the syncer's own decoder: latin1's 0x81 (refused by Python's cp1252, which stopped
    the source for good), cp866's 0xFC 0xFD and greek's 0xA1 (other characters in Python's
    tables), and utf16/utf32/ucs2 (big-endian without a byte-order mark: Python's codecs read
    them as little-endian, silently)."""
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    sets = ("latin1", "cp866", "greek", "utf16", "utf32", "ucs2", "utf16le")
    source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, "
                       + ", ".join(f"{cs}_v VARCHAR(20) CHARACTER SET {cs}" for cs in sets) + ")")
    source1_db.execute("INSERT INTO orders_1 VALUES (1, X'41818D8F909D80E9', X'41FCFD', X'41A1A2', "
                       "'Añ中😀', 'Añ中😀', 'Añ中', 'Añ中😀')")
    syncer = Syncer(spark, task, srcs["s1"])
    try:
        syncer.sync_until_caught_up()
        q = "SELECT id, " + ", ".join(f"HEX({cs}_v)" for cs in sets) + " FROM {}"
        assert downstream_db.execute(q.format("orders")) == source1_db.execute(q.format("orders_1"))
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


@pytest.mark.parametrize("reader", ["process", "spark"])
def test_a_rows_event_that_cannot_be_decoded_stops_naming_it_and_binlog_skip_passes_over_it(
        spark, etcd_client, etcd_prefix, source1_db, downstream_db, positions, reader):
    """tis620 leaves 0xDB undefined, yet MariaDB stores it from a hex literal; Python's codec
    refuses it.  Before, the batch was retried for ever with a message naming neither table nor
    event; now the subtask stops with a typed error that names both and where the event ends,
    through either reader (the error crosses a pipe or a Spark job as text).  The operator's skip
    of that position passes over exactly that event: the other table's rows in the same
    transaction, and the rows after it, are applied."""
    from coordinator.etcdproto import BinlogSkip, Store
    from worker.binlog.contract import RowDecodeError
    from worker.subtask import _retryable
    from worker.sync.binlog_skip import BinlogSkips
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v VARCHAR(5) CHARACTER SET tis620)")
    source1_db.execute("CREATE TABLE orders_2 (id INT PRIMARY KEY, v VARCHAR(5) CHARACTER SET tis620)")
    [(f, p)] = [r[:2] for r in source1_db.execute("SHOW MASTER STATUS")]
    with source1_db.connect() as c, c.cursor() as cur:       # one transaction, two rows events
        cur.execute("BEGIN")
        cur.execute("INSERT INTO orders_2 VALUES (10, 'A')")
        cur.execute("INSERT INTO orders_1 VALUES (1, X'41DB'), (2, 'B')")
        cur.execute("INSERT INTO orders_2 VALUES (11, 'C')")
        cur.execute("COMMIT")
    source1_db.execute("INSERT INTO orders_1 VALUES (3, 'D')")
    store = Store(etcd_client, etcd_prefix)
    skips = BinlogSkips(store, task.name, "s1", worker="w1")
    syncer = Syncer(spark, task, srcs["s1"], skips=skips, reader=reader)
    try:
        with pytest.raises(RowDecodeError) as ei:
            syncer.sync_until_caught_up()
    finally:
        syncer.close()
    msg = str(ei.value)
    assert f"`{source1_db.name}`.`orders_1`" in msg and "insert rows" in msg and f"{f}:" in msg, msg
    assert "column `v`" in msg, msg
    assert "UnicodeDecodeError" in msg and "binlog skip" in msg and "block-allow-list" in msg, msg
    assert not _retryable(ei.value)
    err = ei.value.to_dict()
    assert err["event"] == "rows" and err["table"] == f"{source1_db.name}.orders_1", err
    end_file, end_pos = err["position"].split(":")
    events = source1_db.execute(f"SHOW BINLOG EVENTS IN '{end_file}' FROM {p}")
    ends = {int(e[4]): str(e[2]) for e in events}
    assert "rows" in ends[int(end_pos)].lower(), (err, events)   # the end of a rows event, exactly

    fence = store.campaign("test-master")
    store.put_binlog_skip(fence, BinlogSkip(task.name, "s1", end_file, int(end_pos), event="rows",
                                            statement=f"rows of {err['table']}"))
    again = Syncer(spark, task, srcs["s1"], skips=skips, reader=reader)
    try:
        again.sync_until_caught_up()
    finally:
        again.close()
    got = downstream_db.execute("SELECT id, v FROM orders ORDER BY id")
    assert [tuple(r) for r in got] == [(3, "D"), (10, "A"), (11, "C")], got
    rec = store.get_binlog_skip(task.name, "s1", end_file, int(end_pos))
    assert rec.state == "done" and rec.event == "rows" and rec.worker == "w1", rec
