"""Spark data source ``mysql-binlog``: a batch read of one upstream's binlog between two positions.

``spark.read.format("mysql-binlog").options(**read_options(...)).load()`` gives one row per row
change (and one per statement event) in binlog order.  Offsets are binlog positions, never a
Spark checkpoint directory: the syncer's checkpoints in the downstream are the one source of
truth for where to resume.

Why one partition: a binlog range is a single sequential stream; parallelism comes after the
read, when the syncer repartitions the changes by (target, key hash).

Rows:
* DML (``insert``/``update``/``delete``): one per changed row, ``pos`` = end of its
  transaction (so all changes of a transaction share one position), ``cols`` the column names
  from the row image (binlog_row_metadata=FULL), ``before``/``after`` the images as JSON lists,
  ``keys`` the key columns used, ``khash`` a stable hash of (target, key values).  An update
  that changes the key is emitted as a delete of the old key then an insert of the new one, so
  hashing by key keeps every key's changes in order.
* ``ddl``: any statement event other than BEGIN/COMMIT; ``query``, the session ``up_schema``,
  ``sfile/spos/sgtid`` = position before it, ``file/pos/gtid`` = after it.
* ``end``: always last; the position the read stopped at (a transaction boundary).
Tables filtered out by the task's block-allow-list produce no rows.
"""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import pickle
import random
import time
import zlib

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from coordinator.errors import ShardMergeError
from worker.events import DDL, DELETE, END, INSERT, UPDATE, advance_gtid_set

FORMAT = "mysql-binlog"
STALL_SECONDS = 60


class BinlogReadError(ShardMergeError):
    """The binlog could not be read up to the requested end; names source and position."""

EVENT_SCHEMA = ("seq long, kind string, up_schema string, up_table string, tgt_schema string, "
                "tgt_table string, file string, pos long, gtid string, ts long, cols string, "
                "keys string, before string, after string, khash int, query string, "
                "sfile string, spos long, sgtid string")


# ------------------------------------------------------------------ value encoding
def enc(v):
    """A binlog value as JSON: types JSON lacks are tagged so apply gets them back exactly."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, decimal.Decimal):
        return {"$n": str(v)}
    if isinstance(v, (bytes, bytearray)):
        return {"$b": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return {"$s": v.isoformat(sep=" ") if isinstance(v, dt.datetime) else v.isoformat()}
    if isinstance(v, dt.timedelta):
        total = int(v.total_seconds())
        sign, total = ("-" if total < 0 else ""), abs(total)
        micro = abs(v.microseconds) if v.days >= 0 else (1_000_000 - v.microseconds) % 1_000_000
        s = f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"
        return {"$s": s + (f".{micro:06d}" if micro else "")}
    if isinstance(v, (set, frozenset)):
        return {"$s": ",".join(sorted(v))}
    if isinstance(v, (dict, list)):
        return {"$s": json.dumps(v, ensure_ascii=False, default=str)}
    return {"$s": str(v)}


def dec(v):
    """Inverse of :func:`enc` into values pymysql can bind."""
    if isinstance(v, dict):
        if "$b" in v:
            return base64.b64decode(v["$b"])
        if "$n" in v:
            return decimal.Decimal(v["$n"])
        if "$s" in v:
            return v["$s"]
    return v


def key_hash(target: str, key_values: list) -> int:
    return zlib.crc32(json.dumps([target, key_values], separators=(",", ":"), default=str).encode()) & 0x7FFFFFFF


# ------------------------------------------------------------------ options
def read_options(*, db_kwargs: dict, source_id: str, instance, meta_schema: str, start, end=None,
                 server_id: int = 0, max_events: int = 0, keys: dict | None = None) -> dict:
    """Options for one read.  ``instance`` is the task's ``coordinator.config.Instance`` (its
    routes and block-allow-list run in the executor); ``keys`` maps "schema.table" of a target
    to the key columns the downstream identifies rows by."""
    return {
        "conn": base64.b64encode(pickle.dumps(db_kwargs)).decode(),
        "mapper": base64.b64encode(pickle.dumps((instance, meta_schema))).decode(),
        "source_id": source_id,
        "start_file": start.file, "start_pos": str(start.pos), "start_gtid": start.gtid,
        "end_file": end.file if end else "", "end_pos": str(end.pos if end else 0),
        "server_id": str(server_id), "max_events": str(max_events),
        "keys": json.dumps(keys or {}),
    }


class BinlogDataSource(DataSource):
    @classmethod
    def name(cls):
        return FORMAT

    def schema(self):
        return EVENT_SCHEMA

    def reader(self, schema):
        return BinlogReader(dict(self.options))


class BinlogReader(DataSourceReader):
    def __init__(self, options: dict):
        self.o = options

    def partitions(self):
        return [InputPartition(0)]

    def read(self, partition):
        yield from read_range(self.o)


def _pk_list(pk) -> list[str]:
    if not pk:
        return []
    return [pk] if isinstance(pk, str) else list(pk)


def read_range(o: dict):
    """Generator of event tuples (EVENT_SCHEMA order) for one read; runs in the executor."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import MariadbGtidEvent, QueryEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    from coordinator.routing import TableMapper
    from worker.events import Position

    conn = pickle.loads(base64.b64decode(o["conn"]))
    instance, meta_schema = pickle.loads(base64.b64decode(o["mapper"]))
    mapper = TableMapper(instance, meta_schema)
    keys = {k.lower(): [c.lower() for c in v] for k, v in json.loads(o.get("keys") or "{}").items()}
    end = Position(o.get("end_file", ""), int(o.get("end_pos") or 0))
    max_events = int(o.get("max_events") or 0)
    server_id = int(o.get("server_id") or 0) or random.randint(1_000_000, 2_000_000_000)
    settings = {"host": conn["host"], "port": int(conn["port"]), "user": conn["user"],
                "passwd": conn.get("password", "")}
    # Blocking dump, stopped by us at ``end`` (which exists: it came from SHOW MASTER STATUS).
    # The non-blocking dump of MariaDB drops the connection mid-stream on larger ranges, and
    # every event is taken (no only_events) so the end check runs after each one; heartbeats
    # let a stalled read notice it.
    kw = dict(connection_settings=settings, server_id=server_id, blocking=bool(end.file),
              is_mariadb=True, slave_heartbeat=1)
    # MariaDB: the dump always starts from a GTID state (the server ignores file/pos), so the
    # start GTID set is what positions the stream; file/pos bound the end and order events.
    kw.update(auto_position=o.get("start_gtid") or "")
    gtid_set = o.get("start_gtid", "")
    boundary = Position(o.get("start_file", ""), int(o.get("start_pos") or 0), gtid_set)
    stream = BinLogStreamReader(**kw)
    seq = 0
    emitted = 0
    txn: list[list] = []
    txn_gtid = ""
    route_cache: dict = {}

    def route(schema, table):
        k = (schema, table)
        if k not in route_cache:
            route_cache[k] = mapper.target(schema, table)
        return route_cache[k]

    def here() -> Position:
        return Position(stream.log_file or "", int(stream.log_pos or 0), gtid_set)

    def done() -> bool:
        return bool(end.file) and here() >= end

    try:
        if done():
            return
        last_progress = (here().key, time.monotonic())
        for ev in stream:
            if isinstance(ev, MariadbGtidEvent):
                txn, txn_gtid = [], ev.gtid
                continue
            if not isinstance(ev, (QueryEvent, XidEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                if not txn_gtid and done():
                    break
                now = here().key
                if now != last_progress[0]:
                    last_progress = (now, time.monotonic())
                elif time.monotonic() - last_progress[1] > STALL_SECONDS:
                    raise BinlogReadError(f"binlog read stalled at {here()} before reaching {end}",
                                          source=o.get("source_id"), position=str(here()))
                continue
            if isinstance(ev, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                tgt = route(ev.schema, ev.table)
                if tgt is None:
                    continue
                tname = f"{tgt.schema}.{tgt.table}"
                cols = [c.name for c in ev.columns]
                kcols = keys.get(tname.lower())
                lower = [c.lower() for c in cols]
                if kcols and all(k in lower for k in kcols):
                    kidx = [lower.index(k) for k in kcols]
                else:
                    pk = [c.lower() for c in _pk_list(getattr(ev, "primary_key", None))]
                    kidx = [lower.index(k) for k in pk if k in lower] if pk and all(k in lower for k in pk) \
                        else list(range(len(cols)))
                kjson = json.dumps([cols[i] for i in kidx])
                cjson = json.dumps(cols)
                for r in ev.rows:
                    if isinstance(ev, UpdateRowsEvent):
                        b = [enc(r["before_values"].get(c)) for c in cols]
                        a = [enc(r["after_values"].get(c)) for c in cols]
                        kb, ka = [b[i] for i in kidx], [a[i] for i in kidx]
                        if kb == ka:
                            txn.append([UPDATE, ev.schema, ev.table, tgt.schema, tgt.table, cjson, kjson,
                                        json.dumps(b), json.dumps(a), key_hash(tname, ka), ev.timestamp])
                        else:
                            txn.append([DELETE, ev.schema, ev.table, tgt.schema, tgt.table, cjson, kjson,
                                        json.dumps(b), None, key_hash(tname, kb), ev.timestamp])
                            txn.append([INSERT, ev.schema, ev.table, tgt.schema, tgt.table, cjson, kjson,
                                        None, json.dumps(a), key_hash(tname, ka), ev.timestamp])
                    else:
                        img = [enc(r["values"].get(c)) for c in cols]
                        kind = INSERT if isinstance(ev, WriteRowsEvent) else DELETE
                        txn.append([kind, ev.schema, ev.table, tgt.schema, tgt.table, cjson, kjson,
                                    None if kind == INSERT else json.dumps(img),
                                    json.dumps(img) if kind == INSERT else None,
                                    key_hash(tname, [img[i] for i in kidx]), ev.timestamp])
                continue
            is_commit = isinstance(ev, XidEvent)
            if isinstance(ev, QueryEvent):
                q = ev.query if isinstance(ev.query, str) else ev.query.decode("utf-8", "replace")
                qs = q.strip().upper()
                if qs == "BEGIN":
                    continue
                if qs == "COMMIT":
                    is_commit = True
                else:
                    if txn_gtid:
                        gtid_set = advance_gtid_set(gtid_set, txn_gtid)
                        txn_gtid = ""
                    p = here()
                    schema = ev.schema if isinstance(ev.schema, str) else ev.schema.decode()
                    seq += 1
                    yield (seq, DDL, schema, None, None, None, p.file, p.pos, p.gtid, ev.timestamp,
                           None, None, None, None, 0, q, boundary.file, boundary.pos, boundary.gtid)
                    boundary = p
                    if done():
                        break
                    continue
            if is_commit:
                if txn_gtid:
                    gtid_set = advance_gtid_set(gtid_set, txn_gtid)
                    txn_gtid = ""
                p = here()
                for kind, us, ut, ts_, tt, cj, kj, b, a, kh, ts in txn:
                    seq += 1
                    yield (seq, kind, us, ut, ts_, tt, p.file, p.pos, p.gtid, ts, cj, kj, b, a, kh,
                           None, None, None, None)
                emitted += len(txn)
                txn = []
                boundary = p
                if done() or (max_events and emitted >= max_events):
                    break
    finally:
        stream.close()
    seq += 1
    yield (seq, END, None, None, None, None, boundary.file, boundary.pos, boundary.gtid, 0,
           None, None, None, None, 0, None, None, None, None)


_registered: set[int] = set()


def register(spark) -> None:
    """Register the data source with a Spark session (idempotent per session)."""
    if id(spark) not in _registered:
        spark.dataSource.register(BinlogDataSource)
        _registered.add(id(spark))
