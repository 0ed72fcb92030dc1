"""The binlog readers keep one contract (``worker.binlog.contract``): the registry and the config
name the same readers, every registered reader hands out the same items for one binlog range of the
real MariaDB source, and the items, the route arguments and the full load's value encoding keep the
bytes they travel and are stored as (decoder pipe, Spark rows and options, load bounds)."""
import datetime as dt
import decimal
import json
import pickle

import pytest
import yaml

from coordinator.config import BINLOG_READERS, parse_task
from tests.worker.conftest import make_task
from worker.binlog import READERS, BinlogPrefetch, Chunk, DecoderProcess, End, RouteArgs, RowsTable, Statement, Unfinished, make_reader
from worker.binlog.spark_reader import _blob, _unblob, read_options
from worker.events import INSERT, UPDATE, Position
from worker.load.values import dec, enc
from worker.upstream import master_status


def test_registry_and_config_name_the_same_readers():
    assert set(READERS) == set(BINLOG_READERS)


def test_unknown_reader_names_the_known_ones():
    with pytest.raises(KeyError, match="'kafka' is unknown; use one of process, spark"):
        make_reader("kafka", None, "s1")


def _transactions(items) -> list:
    """Items -> one entry per transaction / statement, then the End position (chunk boundaries
    depend on timing, the stream does not)."""
    out: list = []
    for it in items:
        if isinstance(it, Chunk):
            out += [("txn", pos, type(ch) is Unfinished, [(k, ref, list(rows)) for k, ref, rows in ch])
                    for pos, ch in it.txns]
        elif isinstance(it, Statement):
            out.append(("stmt", it.query, it.schema, it.start, it.end))
        else:
            assert isinstance(it, End), it
            out.append(("end", it.pos))
    return out


def _read(name: str, spark, kw: dict, route: RouteArgs, start: Position, end: Position, **opts) -> list:
    reader = make_reader(name, spark, "s1")
    reader.prepare()
    try:
        with reader.open(kw, route, start, end, source_id="s1", **opts) as rng:
            items = list(rng.items())
    finally:
        reader.close()
    assert isinstance(items[-1], End) and not any(isinstance(i, End) for i in items[:-1])
    assert all(c.rows <= opts.get("max_rows", 20_000) + 40 for c in items if isinstance(c, Chunk))
    return _transactions(items)


def test_every_reader_hands_out_the_same_items(spark, source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    db = source1_db
    db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, v INT, s VARCHAR(20), d DECIMAL(8,2))")
    db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i}, {i}, 's{i}', {i}.25)" for i in range(40)))
    db.execute("UPDATE orders_1 SET v = v + 1 WHERE id % 3 = 0")
    db.execute("ALTER TABLE orders_1 ADD COLUMN note VARCHAR(20) NOT NULL DEFAULT 'n'")
    db.execute("DELETE FROM orders_1 WHERE id % 7 = 0")
    db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i}, {i}, 'x', 1.5, 'after')" for i in range(40, 60)))
    end = master_status(db.params)
    kw, route = srcs["s1"].db.pymysql_kwargs(), RouteArgs(task.instance("s1"), task.meta_schema)
    assert set(READERS) == {"process", "spark"}
    whole = {name: _read(name, spark, kw, route, p1, end, max_rows=25) for name in READERS}
    first = whole["process"]
    assert [e[0] for e in first].count("txn") >= 4 and any(e[0] == "stmt" and "ADD COLUMN note" in e[1] for e in first)
    assert first[-1][0] == "end" and first[-1][1].same_point(end)
    for name, got in whole.items():
        assert got == first, name
    # a read limited to some rows stops at the same transaction boundary in every reader
    limited = {name: _read(name, spark, kw, route, p1, end, max_events=50) for name in READERS}
    assert limited["process"] != first and limited["process"][-1][1] < end
    for name, got in limited.items():
        assert got == limited["process"], name


# ----------------------------------------------------------------------------- bytes on the wire
P1, P2 = Position("mysql-bin.000001", 4, "0-1-2"), Position("mysql-bin.000001", 90, "0-1-3")
_RT = RowsTable("db", "t", "tdb", "tt", ("id", "v"), ("id",))
# pickles of the items as the decoder wrote them before the contract had its own module (issue 32):
# a decoder (process or Spark executor) and a syncer of either version read each other's items
WIRE = [
    (Chunk([(P2, [(INSERT, _RT, [(1, "a")])]), (P1, Unfinished([(UPDATE, _RT, [((1, "a"), (1, "b"))])]))], 2, P2),
     "8005953f010000000000008c14776f726b65722e62696e6c6f672e736f75726365948c054368756e6b9493942981947d94288c0474786e73945d94288c0d776f726b65722e6576656e7473948c08506f736974696f6e9493942981947d94288c0466696c65948c106d7973716c2d62696e2e303030303031948c03706f73944b5a8c0467746964948c05302d312d339475625d948c06696e736572749468008c09526f77735461626c65949394288c026462948c0174948c03746462948c027474948c026964948c01769486946819859429749481945d944b018c016194869461879461869468092981947d9428680c680d680e4b04680f8c05302d312d3294756268008c0a556e66696e69736865649493942981948c0675706461746594681e5d9468214b018c01629486948694618794618694658c04726f7773944b028c03656e6494680a75622e"),
    (Statement("ALTER TABLE t ADD c INT", "db", 5, P1, P2),
     "800595e5000000000000008c14776f726b65722e62696e6c6f672e736f75726365948c0953746174656d656e749493942981947d94288c057175657279948c17414c544552205441424c45207420414444206320494e54948c06736368656d61948c026462948c027473944b058c057374617274948c0d776f726b65722e6576656e7473948c08506f736974696f6e9493942981947d94288c0466696c65948c106d7973716c2d62696e2e303030303031948c03706f73944b048c0467746964948c05302d312d329475628c03656e6494680d2981947d94286810681168124b5a68138c05302d312d3394756275622e"),
    (End(P2, 0.5),
     "8005959a000000000000008c14776f726b65722e62696e6c6f672e736f75726365948c03456e649493942981947d94288c03706f73948c0d776f726b65722e6576656e7473948c08506f736974696f6e9493942981947d94288c0466696c65948c106d7973716c2d62696e2e3030303030319468054b5a8c0467746964948c05302d312d339475628c0e6465636f64655f7365636f6e647394473fe000000000000075622e"),
]


@pytest.mark.parametrize("item,wire", WIRE, ids=["chunk", "statement", "end"])
def test_items_keep_their_pickled_bytes(item, wire):
    assert pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL).hex() == wire
    back = pickle.loads(bytes.fromhex(wire))
    assert back == item and type(back) is type(item)
    if isinstance(item, Chunk):
        assert type(back.txns[1][1]) is Unfinished


def test_route_arguments_travel_as_the_plain_tuple():
    inst = make_task_instance()
    route = RouteArgs(inst, "meta")
    opts = read_options({"host": "h"}, route, P1, P2)
    assert opts["mapper"] == _blob((inst, "meta"))
    assert type(_unblob(opts["mapper"])) is tuple and RouteArgs(*_unblob(opts["mapper"])) == route
    assert route.mapper().source_id == inst.source_id
    # the decoder process's request holds the same plain tuple (not started: no process, no thread)
    assert type(BinlogPrefetch(DecoderProcess("s1"), {}, route, P1, P2)._req["mapper"]) is tuple
    # an operator's skip of a rows event travels as a third member, only when one is armed
    skipping = RouteArgs(inst, "meta", frozenset({("mysql-bin.000001", 1234)}))
    back = RouteArgs(*_unblob(read_options({"host": "h"}, skipping, P1, P2)["mapper"]))
    assert back == skipping and back.mapper().skip_rows == {("mysql-bin.000001", 1234)}


def make_task_instance():
    task = parse_task(yaml.safe_dump({"name": "t", "task-mode": "incremental", "target-database": {"host": "h", "user": "u"},
                       "mysql-instances": [{"source-id": "s1", "block-allow-list": "bl", "route-rules": ["r"]}],
                       "block-allow-list": {"bl": {"do-dbs": ["db"]}},
                       "routes": {"r": {"schema-pattern": "db", "target-schema": "tdb"}}}))
    return task.instance("s1")


def test_load_bounds_keep_their_json():
    vals = [None, True, 3, 1.5, "s", decimal.Decimal("1.20"), b"\x00\xff", dt.datetime(2024, 1, 2, 3, 4, 5, 6),
            dt.date(2024, 1, 2), dt.time(1, 2, 3), dt.timedelta(hours=-1, seconds=1), {"a"}, {"k": [1]}, [1, 2]]
    assert json.dumps([enc(v) for v in vals]) == (
        '[null, true, 3, 1.5, "s", {"$n": "1.20"}, {"$b": "AP8="}, {"$s": "2024-01-02 03:04:05.000006"}, '
        '{"$s": "2024-01-02"}, {"$s": "01:02:03"}, {"$s": "-00:59:59"}, {"$s": "a"}, {"$s": "{\\"k\\": [1]}"}, '
        '{"$s": "[1, 2]"}]')
    assert [dec(enc(v)) for v in vals[:7]] == vals[:7]
