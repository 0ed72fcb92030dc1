"""A binlog dump whose common events are read straight from their bytes.

Why: an OLTP transaction is about ten binlog events (GTID, a TABLE_MAP and a rows event per
table touched, XID).  mysql-replication makes a packet wrapper and an event object for each,
with per-event bookkeeping (checksum set-up, a server-kind lookup, filters); on sysbench's
``oltp_write_only`` that was 43% of the decoder's time, more than decoding the rows themselves
(cProfile of ``decode_range``, 2026-11-27), and the decoder bounds catch-up.

:class:`FastStream` is mysql-replication's :class:`BinLogStreamReader` (connection, dump command,
checksums, heartbeats, reconnection all stay the library's) with one change: before the library
wraps a packet, the five event types of an OLTP stream are recognised from their header and, when
their layout is the plain one known here, handed out as small records:

- ``Gtid``: a MariaDB GTID event or a MySQL GTID_LOG_EVENT;
- ``Begin`` / ``Xid``: the BEGIN query and the commit;
- ``TableMap``: a TABLE_MAP seen before in this dump (the same bytes: the same table; the first
  one goes through the library, whose parse is remembered: ``Table``, columns, primary key);
- ``Rows``: a rows event of such a table whose columns all have a ``fast_rows`` reader, full row
  images: its rows already decoded by that plan.

Anything else, and any of these in another layout (a post-header length other than the one known
here, a partial row image, a column type without a reader, a packet that is not a whole event),
goes to the library exactly as before: the packet is handed back to the connection and the
library's ``fetchone`` reads it.  Tests run both paths over the same binlog and compare them.
"""
from __future__ import annotations

import struct
import uuid

import pymysql
from pymysql.connections import MAX_PACKET_LEN, Connection, MysqlPacket
from pymysql.constants import CR
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.binlogstream import MYSQL_EXPECTED_ERROR_CODES

from worker.binlog.fast_rows import RowDecoder, decode_rows

QUERY, XID, TABLE_MAP, GTID, MARIADB_GTID = 2, 16, 19, 33, 162
ROWS_V1 = {23: "insert", 24: "update", 25: "delete"}
ROWS_V2 = {30: "insert", 31: "update", 32: "delete"}
_PACKET_HEADER = struct.Struct("<HBB").unpack
_HEADER = struct.Struct("<xIBIII").unpack_from      # OK byte, timestamp, type, server id, size, next pos
_U64 = struct.Struct("<Q").unpack_from
_MARIA_GTID = struct.Struct("<QIB").unpack_from
_QUERY_POST = struct.Struct("<IIBHH").unpack_from   # thread id, exec time, schema length, error, status length
_MAX_TABLE_MAPS = 4096


class Gtid:
    __slots__ = ("gtid",)

    def __init__(self, gtid: str):
        self.gtid = gtid


class Begin:
    __slots__ = ()


class Xid:
    __slots__ = ()


class TableMap:
    __slots__ = ()


class Rows:
    """A decoded rows event: ``kind`` insert/update/delete, ``rows`` as ``fast_rows`` gives them."""
    __slots__ = ("kind", "schema", "table", "columns", "primary_key", "rows")

    def __init__(self, kind, schema, table, columns, primary_key, rows):
        self.kind, self.schema, self.table = kind, schema, table
        self.columns, self.primary_key, self.rows = columns, primary_key, rows


_BEGIN, _XID, _TABLE_MAP = Begin(), Xid(), TableMap()


class _Table:
    """What the library's parse of one TABLE_MAP gave, kept for the same bytes seen again."""
    __slots__ = ("schema", "table", "columns", "primary_key", "table_obj", "plan")

    def __init__(self, ev, plan):
        self.schema, self.table, self.columns = ev.schema, ev.table, ev.columns
        self.table_obj = ev.get_table()
        self.primary_key = self.table_obj.data.get("primary_key")
        self.plan = plan


class PeekConnection(Connection):
    """A pymysql connection that reads a packet's bytes without wrapping them (:meth:`read_payload`)
    and can be handed one packet back, which its next ``_read_packet`` returns (the library's read)."""
    _pending: MysqlPacket | None = None
    _next_seq_id: int                   # pymysql's own state, declared for the type checker
    _current_timeout: float | None
    _read_timeout: float | None

    def _read_packet(self, packet_type=MysqlPacket):
        p = self._pending
        if p is not None:
            self._pending = None
            return p
        return super()._read_packet(packet_type)

    def read_payload(self) -> bytes:
        """pymysql's ``_read_packet`` (sequence check, 16 MB continuation, error packets raised)
        without the packet object, which only the events the library reads need."""
        if self._current_timeout != self._read_timeout:
            self._sock.settimeout(self._read_timeout)
            self._current_timeout = self._read_timeout
        parts = []
        while True:
            low, high, seq = _PACKET_HEADER(self._read_bytes(4))
            size = low + (high << 16)
            if seq != self._next_seq_id:        # as pymysql does
                self._force_close()
                if seq == 0:
                    raise pymysql.err.OperationalError(CR.CR_SERVER_LOST, "Lost connection to MySQL server during query")
                raise pymysql.err.InternalError(f"Packet sequence number wrong - got {seq} expected {self._next_seq_id}")
            self._next_seq_id = (seq + 1) % 256
            parts.append(self._read_bytes(size))
            if size < MAX_PACKET_LEN:
                break
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if data[:1] == b"\xff":
            MysqlPacket(data, self.encoding).raise_for_error()
        return data


class FastStream(BinLogStreamReader):
    """mysql-replication's dump reader, with the common events read from their bytes (module doc).
    Takes the library's arguments except ``pymysql_wrapper`` and the table/schema filters."""

    def __init__(self, *args, **kwargs):
        for k in ("only_tables", "ignored_tables", "only_schemas", "ignored_schemas", "pymysql_wrapper"):
            if kwargs.get(k) is not None:
                raise ValueError(f"FastStream does not take {k}")
        super().__init__(*args, pymysql_wrapper=PeekConnection, **kwargs)
        self._rows = RowDecoder()
        self._maps: dict[bytes, _Table] = {}            # TABLE_MAP body -> what the library's parse gave
        self._by_id: dict[int, _Table] = {}             # table id -> the last remembered map of that id
        self._miss: bytes | None = None                 # the map body the library is parsing now
        self._posts, self._crc = None, 0      # the library's post-header lengths and checksum, after each library read

    def fetchone(self):
        # the library's own state (its name-mangled attributes), read directly
        if not self._BinLogStreamReader__connected_stream or self.end_log_pos or self.skip_to_timestamp:
            return self._library()
        conn = self._stream_connection
        try:
            data = conn.read_payload()
        except pymysql.OperationalError as e:
            if e.args and e.args[0] in MYSQL_EXPECTED_ERROR_CODES:
                return self._library_after(None)      # the library reconnects, as it would have
            raise
        ev = self._fast(data)
        if ev is None:
            return self._library_after(MysqlPacket(data, conn.encoding))
        return ev

    def _library_after(self, pkt):
        if pkt is not None:
            self._stream_connection._pending = pkt
        else:
            self._stream_connection.close()
            self._BinLogStreamReader__connected_stream = False
        return self._library()

    def _library(self):
        ev = super().fetchone()
        self._posts = self._BinLogStreamReader__post_header_lengths
        self._crc = 4 if self._BinLogStreamReader__use_checksum else 0
        miss, self._miss = self._miss, None
        if miss is not None and ev is not None and type(ev).__name__ == "TableMapEvent":
            self._remember(miss, ev)
        return ev

    def _remember(self, body: bytes, ev) -> None:
        names = getattr(getattr(ev, "optional_metadata", None), "column_name_list", None)
        if not (names and len(names) == ev.column_count and all(c.name for c in ev.columns)):
            return      # names asked from information_schema: depends on when, never kept
        if len(self._maps) >= _MAX_TABLE_MAPS:
            self._maps.clear()
        plan = self._rows.plan(ev.columns)
        t = self._maps[body] = _Table(ev, plan)
        self._by_id[ev.table_id] = t

    def _fast(self, data: bytes):
        """The record for this packet's bytes, or None: the library reads it (``_pending``)."""
        if len(data) < 20 or data[0] != 0:
            return None
        _, etype, server_id, size, next_pos = _HEADER(data, 0)
        if etype not in _FAST or len(data) != 1 + size:
            return None
        posts = self._posts
        if not posts or etype > len(posts):
            return None
        post = posts[etype - 1]
        end = len(data) - self._crc
        rec = _FAST[etype](self, data, 20, end, post, etype, server_id)
        if rec is not None and next_pos:
            self.log_pos = next_pos
        return rec

    # ---- one reader per event type: (data, body start, body end, declared post-header length)
    def _gtid_maria(self, data, i, end, post, etype, server_id):
        if end - i < 13:
            return None
        seq, domain, _flags = _MARIA_GTID(data, i)
        return Gtid(f"{domain}-{server_id}-{seq}")

    def _gtid_mysql(self, data, i, end, post, etype, server_id):
        if end - i < 25:
            return None
        return Gtid(f"{uuid.UUID(bytes=bytes(data[i + 1:i + 17]))}:{_U64(data, i + 17)[0]}")

    def _query(self, data, i, end, post, etype, server_id):
        if post != 13 or end - i < 13:
            return None
        _, _, schema_len, _, status_len = _QUERY_POST(data, i)
        q = i + 13 + status_len + schema_len + 1
        return _BEGIN if data[q:end] == b"BEGIN" else None

    def _xid(self, data, i, end, post, etype, server_id):
        return _XID

    def _table_map(self, data, i, end, post, etype, server_id):
        if post != 8:
            return None
        body = bytes(data[i:end])
        t = self._maps.get(body)
        if t is None:
            self._miss = body
            return None
        table_id = _U64(data[i:i + 6] + b"\0\0")[0]
        self.table_map[table_id] = t.table_obj
        self._by_id[table_id] = t
        return _TABLE_MAP

    def _rows_event(self, data, i, end, post, etype, server_id):
        known = 10 if etype in ROWS_V2 else 8
        if post != known:
            return None
        table_id = _U64(data[i:i + 6] + b"\0\0")[0]
        t = self._by_id.get(table_id)
        if t is None or t.plan is None or self.table_map.get(table_id) is not t.table_obj:
            return None
        i += 8
        if etype in ROWS_V2:
            extra = data[i] | (data[i + 1] << 8)
            if extra != 2:
                return None     # extra row data (NDB, partition ids): the library's layout
            i += 2
        n = data[i]
        if n >= 251 or n != len(t.columns):
            return None
        i += 1
        nb = (n + 7) // 8
        full = (1 << n) - 1
        update = etype in (24, 31)
        for _ in range(2 if update else 1):
            if int.from_bytes(data[i:i + nb], "little") & full != full:
                return None     # not a FULL row image
            i += nb
        try:
            rows = decode_rows(memoryview(data)[i:end], t.plan, n, update)
        except Exception:
            return None         # the library decodes (and reports) it
        kind = ROWS_V1.get(etype) or ROWS_V2[etype]
        return Rows(kind, t.schema, t.table, t.columns, t.primary_key, rows)


_FAST = {MARIADB_GTID: FastStream._gtid_maria, GTID: FastStream._gtid_mysql, QUERY: FastStream._query,
         XID: FastStream._xid, TABLE_MAP: FastStream._table_map,
         **{t: FastStream._rows_event for t in (*ROWS_V1, *ROWS_V2)}}
