"""Each distinct TABLE_MAP event of a binlog dump is decoded once.

Why: the server writes a TABLE_MAP event before every rows event, and mysql-replication parses
each one from scratch (the columns, the optional metadata of ``binlog_row_metadata=FULL``, the
``Table``).  On sysbench's OLTP transactions (one row a rows event) that parse was 55% of the
decoder's time (cProfile of ``decode_range``, 2026-11-27, ``bench/vs_native.py``), and an OLTP
stream repeats the same few table maps thousands of times.

Exactness: the parse of a TABLE_MAP body is a function of its bytes (table id, schema and table
names, column types and metadata, null bits, optional metadata with the column names and
charsets), the server kind and the dump's filters -- so the cache key is the whole body plus the
filters, and the cache lives on the dump's control connection (one per ``BinLogStreamReader``:
one server, one dump).  A DDL changes the table id and the metadata, a table id reused after a
server restart comes with other names or types: different bytes, a fresh parse.  A map whose
column names are NOT in the event (``binlog_row_metadata`` other than FULL: mysql-replication then
asks the server's ``information_schema`` at parse time, an answer that depends on when it is
asked) is never cached.  A hit gives the event the same table id, schema, table, columns and
``Table`` as the first parse; the columns list is shared, so ``worker.binlog.fast_rows``'s
per-table plan (cached by that list) is built once too.
"""
from __future__ import annotations

from pymysqlreplication.event import BinLogEvent
from pymysqlreplication.row_event import TableMapEvent

# what BinLogEvent.__init__ sets from this packet: never taken from the cache
_HEADER = frozenset({"packet", "table_map", "event_type", "timestamp", "event_size", "_post_header_lengths",
                     "_ctl_connection", "mysql_version", "_ignore_decode_errors", "_verify_checksum",
                     "_is_event_valid", "_processed", "complete", "dbms"})
_FILTERS = ("only_tables", "ignored_tables", "only_schemas", "ignored_schemas", "freeze_schema",
            "optional_meta_data", "use_column_name_cache")
_CACHE_ATTR = "_shardmerge_table_maps"
MAX_ENTRIES = 4096          # distinct maps a dump keeps (a DDL-heavy range could make many)

_original_init = TableMapEvent.__init__


def _body(from_packet, event_size: int) -> bytes | None:
    """The event's body bytes, not consumed, or None when the packet is not the plain layout
    this knows (then the event is parsed as usual)."""
    if from_packet._BinLogPacketWrapper__data_buffer:
        return None
    pkt = from_packet.packet
    data, pos = getattr(pkt, "_data", None), getattr(pkt, "_position", None)
    if not isinstance(data, (bytes, bytearray)) or not isinstance(pos, int):
        return None
    return bytes(data[pos:pos + int(event_size)])


def _cached_init(self, from_packet, event_size, table_map, ctl_connection, **kwargs):
    body = _body(from_packet, event_size)
    if body is None:
        return _original_init(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
    cache = ctl_connection.__dict__.setdefault(_CACHE_ATTR, {})
    key = (body, repr(tuple(kwargs.get(k) for k in _FILTERS)))
    state = cache.get(key)
    if state is None:
        _original_init(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        names = getattr(getattr(self, "optional_metadata", None), "column_name_list", None)
        if self._processed and names and len(names) == self.column_count:
            if len(cache) >= MAX_ENTRIES:
                cache.clear()
            cache[key] = {k: v for k, v in self.__dict__.items() if k not in _HEADER}
        return None
    BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
    self.__dict__.update(state)
    table_map[self.table_id] = self.table_obj
    return None


def install() -> None:
    """Make mysql-replication's TableMapEvent use the cache (idempotent; the decoder process and
    the Spark reader's executors call it before their first dump)."""
    if TableMapEvent.__init__ is not _cached_init:
        TableMapEvent.__init__ = _cached_init   # type: ignore[method-assign]


def uninstall() -> None:
    """Back to mysql-replication's own parse (tests compare both)."""
    TableMapEvent.__init__ = _original_init   # type: ignore[method-assign]
