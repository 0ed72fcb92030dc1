"""Reading one upstream's binlog between two positions, outside Spark, ahead of the apply.

Why not in a Spark task: a binlog range is one sequential stream, so a read task would run
alone anyway; decoding it here, in a child process of the driver (:class:`DecoderProcess`),
lets the next rows be decoded while Spark tasks apply the previous ones, and saves a Spark job,
a cache and a trip of every row through the JVM per batch.  Offsets are binlog positions; the
syncer's checkpoints in the downstream are the one source of truth for where to resume.

:class:`BinlogPrefetch` has the decoder run :func:`decode_range` and hands out the items of
``worker.binlog.contract`` (``Chunk`` / ``Statement`` / ``End``) in binlog order: chunks of at most
about ``max_rows`` rows, fewer when the apply is waiting; a transaction of keyed tables larger than
half of that comes in pieces (``Unfinished``).

Rows are tuples of values pymysql binds directly (no JSON in between); ``rows`` of an update is
a list of ``(before, after)`` pairs.  The dump is mysql-replication's, with the common events
(GTID, BEGIN, XID, a table map seen before, rows of common column types) read from their bytes
by ``worker.binlog.fast_stream`` / ``fast_rows``; everything else is mysql-replication's parse.
Tables the task's block-allow-list filters produce nothing; unrouted tables map one to one.  Memory stays bounded: at most about
``max_rows`` decoded rows wait in the queue (a larger transaction is kept whole only when one
of its tables has no primary key).
"""
from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import pickle
import random
import select
import subprocess
import sys
import threading
import time
import weakref

from worker.binlog.contract import (ROWS_EVENT_AT, BinlogReadError, Chunk, End, RouteArgs, RowDecodeError, RowsTable,
                                    Statement, Unfinished)
from worker.binlog.read_ahead import ReadAhead, _Failed
from worker.binlog.fast_rows import RowDecoder
from coordinator import gc_tuning
from worker import gtid
from worker.events import DELETE, INSERT, Position, UPDATE, advance_gtid_set, parse_gtid_set

STALL_SECONDS = 60
FAST_EVENTS = True      # common events read from their bytes (worker.binlog.fast_stream); tests turn it off
IDLE_EXIT_SECONDS = 300     # an idle decoder process exits (a syncer left unclosed costs nothing)


# Types pymysql binds as the downstream expects (TIME as a signed duration, DECIMAL exactly).
_PLAIN = frozenset({type(None), bool, int, float, str, bytes, decimal.Decimal,
                    dt.datetime, dt.date, dt.time, dt.timedelta})


def bindable(v):
    """A decoded binlog value as a pymysql parameter (SET -> "a,b", JSON -> its text)."""
    if type(v) in _PLAIN:
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, (set, frozenset)):
        return ",".join(sorted(v))
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False, default=str)
    if isinstance(v, (bool, int, float, str, decimal.Decimal, dt.date, dt.time, dt.timedelta)):
        return v
    return str(v)


def _json_plain(v):
    """MySQL's binary JSON as mysql-replication decodes it (object keys and strings as bytes)
    -> the same value with str keys and strings."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "surrogateescape")
    if isinstance(v, dict):
        return {_json_plain(k): _json_plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_plain(x) for x in v]
    return v


def json_text(v):
    """A MySQL JSON column's decoded value -> its JSON text (what the downstream column takes);
    NULL stays NULL.  MariaDB's JSON is a text column already and never comes here."""
    if v is None:
        return None
    return json.dumps(_json_plain(v), ensure_ascii=False, default=str)


def _json_values(values: dict, names: tuple) -> dict:
    """A row image's values with its MySQL JSON columns as JSON text (before ``_image``: the
    fast decoder never takes a table with JSON columns, so every such row comes this way)."""
    for n in names:
        if n in values:
            values[n] = json_text(values[n])
    return values


def _image(values: dict, cols: tuple) -> tuple:
    row = tuple(map(values.get, cols))
    for v in row:
        if type(v) not in _PLAIN:
            return tuple(map(bindable, row))
    return row


def _library_rows(ev, cols: tuple, json_names: tuple | None, fast: RowDecoder, update: bool) -> list:
    """The rows of a rows event mysql-replication parsed (``fast_rows`` where it can, else the
    library's values; MySQL JSON columns as JSON text): tuples in ``cols`` order, pairs for updates."""
    rows = fast.event_rows(ev, cols)
    if rows is not None:
        return rows
    if update:
        return [(_image(_json_values(r["before_values"], json_names) if json_names else r["before_values"], cols),
                 _image(_json_values(r["after_values"], json_names) if json_names else r["after_values"], cols))
                for r in ev.rows]
    return [_image(_json_values(r["values"], json_names) if json_names else r["values"], cols) for r in ev.rows]


# ------------------------------------------------------------------ decoding
_TRANSACTION_PAYLOAD, _PARTIAL_UPDATE_ROWS = 40, 39
_MYSQL_JSON = 245                  # MySQL's binary JSON column type (MariaDB's JSON is a text type)
# MySQL events whose rows cannot be read here; replication stops with the fix instead of
# losing them (the precheck refuses both settings before a task starts).
_UNREADABLE = {
    _TRANSACTION_PAYLOAD: "a compressed transaction (TRANSACTION_PAYLOAD_EVENT): the upstream has "
                          "binlog_transaction_compression=ON; set it OFF (SET PERSIST "
                          "binlog_transaction_compression=OFF). Transactions already written compressed stay "
                          "unreadable: restart the task from a position after them (docs/mysql.md)",
    _PARTIAL_UPDATE_ROWS: "a partial JSON update (PARTIAL_UPDATE_ROWS_EVENT): the upstream has "
                          "binlog_row_value_options=PARTIAL_JSON; set it to '' (SET PERSIST "
                          "binlog_row_value_options=''). Updates already written that way stay unreadable: "
                          "restart the task from a position after them (docs/mysql.md)",
}


class _Reposition(Exception):
    """The dump positioned by file/pos is not where the start GTID state says: start over by GTID."""


def dump_position(start: Position) -> dict:
    """How to position a binlog dump at ``start``: by file/pos when it has them and one GTID
    stream (a MariaDB domain, a MySQL UUID; the first transaction read is then checked against
    the GTID state, :func:`gtid_follows`), else by the GTID state.  A server finds a GTID by
    scanning binlog files: on MariaDB ~60 ms at 180 MB, ~0.35 s in a full 1 GB file, on every
    batch; MySQL skips files by their Previous_gtids but scans the last one alike."""
    if start.file and start.pos >= 4 and len(parse_gtid_set(start.gtid or "")) == 1:
        return {"log_file": start.file, "log_pos": start.pos, "resume_stream": True, "is_mariadb": False}
    return by_gtid(start)


def by_gtid(start: Position) -> dict:
    """Dump arguments positioning by the GTID state ``start.gtid`` (MySQL's form needs
    COM_BINLOG_DUMP_GTID, MariaDB's the slave_connect_state variable)."""
    return {"auto_position": start.gtid or "", "is_mariadb": gtid.flavor_of(start.gtid) != gtid.MYSQL}


def gtid_follows(state: str, gtid_: str) -> bool:
    """``gtid_`` is the next transaction of its stream after the GTID state ``state``."""
    return gtid.follows(state, gtid_)


def decode_range(db_kwargs: dict, mapper, start: Position, end: Position | None, *, max_events: int = 0,
                 source_id: str = "", server_id: int = 0, split_rows: int = 0, keep: dict | None = None):
    """Generator of ``(Position, [(kind, RowsTable, rows)])`` per committed transaction with
    routed rows, :class:`Statement` per statement event and a final :class:`End`.

    Reading stops at ``end`` (which exists: it came from SHOW MASTER STATUS) or, at a
    transaction boundary, once ``max_events`` rows were produced.  The dump is positioned by
    file/pos where :func:`dump_position` allows it; if the first transaction there is not the
    one after the start GTID state (another server behind the same address, a gap), or the
    file is gone, it starts over positioned by GTID, before anything was handed out.
    ``split_rows`` > 0: a transaction of keyed tables is handed out every ``split_rows`` rows as
    ``(position before it, Unfinished(changes))``, its last piece as usual.

    ``keep`` (the decoder process's): a dump positioned by file/pos that read its range to the end
    is left open there, and the next range starting exactly at that point reads on from it
    instead of opening a new dump (:func:`_kept`)."""
    how = dump_position(start)
    if "log_file" in how:
        kept = _kept(keep, db_kwargs, start, end)
        if kept is not None:
            how = {**how, "kept": kept}
        try:
            yield from _decode_range(db_kwargs, mapper, start, end, how, max_events, source_id, server_id,
                                     split_rows, keep)
            return
        except _Reposition:
            pass
    yield from _decode_range(db_kwargs, mapper, start, end, by_gtid(start), max_events, source_id, server_id,
                             split_rows)


KEEP_SECONDS = 30.0     # a kept dump unused this long is closed instead of read on


def _kept(keep: dict | None, db_kwargs: dict, start: Position, end: Position | None):
    """The dump ``keep`` holds, if it stands exactly at ``start`` of the same upstream (file, pos
    and GTID state) and was used less than ``KEEP_SECONDS`` ago; any other is closed.  Why only
    dumps positioned by file/pos: mysql-replication reconnects a dropped dump from its current
    file/pos, but one positioned by GTID from the GTID state it was opened with, which a kept
    dump has long passed.  The first transaction read is still checked against the start GTID
    state, as in a new dump."""
    if keep is None or "dump" not in keep:
        return None
    stream, at, key, used = keep.pop("dump")
    if (end is not None and end.file and key == _upstream_key(db_kwargs) and at == start
            and at.gtid == start.gtid and time.monotonic() - used < KEEP_SECONDS):
        return stream
    stream.close()
    return None


def _upstream_key(db_kwargs: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in db_kwargs.items()))


def _decode_range(db_kwargs: dict, mapper, start: Position, end: Position | None, how: dict, max_events: int,
                  source_id: str, server_id: int, split_rows: int = 0, keep: dict | None = None):
    # the protocol library is loaded where the binlog is decoded (decoder process, Spark executor)
    import pymysql
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, NotImplementedEvent, QueryEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, PartialUpdateRowsEvent, UpdateRowsEvent, WriteRowsEvent
    from worker.binlog import fast_stream as fs

    end = end or Position()
    server_id = server_id or random.randint(1_000_000, 2_000_000_000)
    settings = {**db_kwargs, "port": int(db_kwargs["port"])}
    # Blocking dump, stopped by us at ``end``: MariaDB's non-blocking dump drops the connection
    # mid-stream on larger ranges.  Every event is taken (no only_events) so the end check runs
    # after each one; heartbeats let a stalled read notice it.  By GTID, MariaDB positions the
    # dump by the start GTID state (it ignores file/pos); file/pos bound the end and order events.
    # Events the library does not decode are handed out too (not dropped): a compressed
    # transaction (MySQL's binlog_transaction_compression) must stop the read, not vanish.
    how = dict(how)
    stream = how.pop("kept", None)
    if stream is None:
        reader = fs.FastStream if FAST_EVENTS else BinLogStreamReader
        stream = reader(connection_settings=settings, server_id=server_id, blocking=bool(end.file),
                        slave_heartbeat=1, filter_non_implemented_events=False, **how)
    unchecked = "log_file" in how     # by file/pos: the first GTID read must follow the start state
    gtid_set = start.gtid or ""
    boundary = Position(start.file, start.pos, gtid_set)
    emitted = 0
    txn: list = []
    txn_gtid = ""
    txn_rows, keyed = 0, True      # rows in ``txn``; every table of the transaction has a key
    split = False                  # pieces of this transaction were handed out
    routes: dict = {}
    refs: dict = {}
    json_cols: dict = {}           # rows table -> names of its MySQL JSON columns
    event_filter = getattr(mapper, "events", None)      # binlog event filter (filter-rules), or None
    expr_filter = getattr(mapper, "exprs", None)        # expression filters (expression-filters), or None
    skip_rows = getattr(mapper, "skip_rows", None)      # rows events the operator skips (binlog skip)
    fast = RowDecoder()

    def table_ref(ev):
        k = (ev.schema, ev.table)
        if k not in routes:
            routes[k] = mapper.target(ev.schema, ev.table)
        tgt = routes[k]
        if tgt is None:
            return None
        cols = tuple(c.name for c in ev.columns)
        pk = getattr(ev, "primary_key", None) or ()
        pk = (pk,) if isinstance(pk, str) else tuple(pk)
        rk = (ev.schema, ev.table, cols, pk)
        ref = refs.get(rk)
        if ref is None:
            origin = mapper.extract(ev.schema, ev.table) if getattr(mapper, "has_extract", False) else ()
            names, values = tuple(c for c, _ in origin), tuple(v for _, v in origin)
            ref = refs[rk] = RowsTable(ev.schema, ev.table, tgt.schema, tgt.table, cols + names,
                                       pk + names if pk else pk, values)
            json_cols[id(ref)] = tuple(c.name for c in ev.columns if c.type == _MYSQL_JSON)
        return ref

    def here() -> Position:
        return Position(stream.log_file or "", int(stream.log_pos or 0), gtid_set)

    def done() -> bool:
        return bool(end.file) and here() >= end

    clean = False                  # read to its end: the dump may be kept (``keep``)
    try:
        if done():
            clean = True
            yield End(boundary)
            return
        last_progress = (here().key, time.monotonic())
        events = iter(stream)
        while True:
            try:
                ev = next(events)
            except StopIteration:
                break
            except pymysql.MySQLError as e:
                if unchecked:              # e.g. the file was purged: nothing handed out yet
                    raise _Reposition() from None
                # typed, with where: a refused start (a GTID the server never wrote) or a lost dump
                raise BinlogReadError(f"the server ended the binlog dump at {here()}: "
                                      f"{e.args[-1] if e.args else e}", source=source_id,
                                      position=str(here())) from e
            t = type(ev)
            if t is fs.TableMap or t is fs.Begin:
                continue
            if t is fs.Xid:
                ev = None               # a commit (below)
            if t is fs.Gtid or isinstance(ev, (MariadbGtidEvent, GtidEvent)):
                if unchecked:
                    unchecked = False
                    if not gtid_follows(gtid_set, ev.gtid):
                        raise _Reposition()
                txn, txn_gtid, txn_rows, keyed, split = [], ev.gtid, 0, True, False
                continue
            if isinstance(ev, NotImplementedEvent) and ev.event_type in _UNREADABLE:
                raise BinlogReadError(f"{_UNREADABLE[ev.event_type]} at {here()}", source=source_id,
                                      position=str(here()))
            if isinstance(ev, PartialUpdateRowsEvent):
                if table_ref(ev) is None:      # a table the task does not read: nothing lost
                    continue
                raise BinlogReadError(f"{_UNREADABLE[_PARTIAL_UPDATE_ROWS]} at {here()} "
                                      f"(table {ev.schema}.{ev.table})", source=source_id, position=str(here()))
            if t is fs.Rows or isinstance(ev, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                ref = table_ref(ev)
                if ref is None:
                    continue
                what = ev.kind if t is fs.Rows else "insert" if isinstance(
                    ev, WriteRowsEvent) else "update" if isinstance(ev, UpdateRowsEvent) else "delete"
                if event_filter is not None and event_filter.ignores_rows(ev.schema, ev.table, what):
                    continue
                if skip_rows and (stream.log_file, int(stream.log_pos or 0)) in skip_rows:
                    continue            # the operator's binlog skip of an event that cannot be decoded
                extra = ref.origin
                cols = ref.cols[:len(ref.cols) - len(extra)] if extra else ref.cols
                try:
                    rows = ev.rows if t is fs.Rows else _library_rows(ev, cols, json_cols.get(id(ref)), fast,
                                                                      what == "update")
                except Exception as e:  # noqa: BLE001 -- any decoder failure: the same bytes fail again
                    at = here()
                    raise RowDecodeError(
                        f"cannot decode the {what} rows of `{ev.schema}`.`{ev.table}` {ROWS_EVENT_AT} "
                        f"{at.file}:{at.pos}: {type(e).__name__}: {e}.  The same bytes fail on every retry: "
                        f"`shardctl binlog skip` passes over this one event (its rows are not applied), or "
                        "leave the table out of the task (block-allow-list)", source=source_id,
                        position=f"{at.file}:{at.pos}", event="rows", table=f"{ev.schema}.{ev.table}") from e
                tx = expr_filter.for_table(ev.schema, ev.table, cols) if expr_filter is not None else None
                if what == "update":
                    if tx is not None:      # expression filter (expression-filters): drop what it matches
                        rows = [(b, a) for b, a in rows if not tx.skip_update(b, a)]
                    if extra:
                        rows = [(b + extra, a + extra) for b, a in rows]
                    kind = UPDATE
                else:
                    kind = INSERT if what == "insert" else DELETE
                    if tx is not None:
                        skip = tx.skip_insert if kind == INSERT else tx.skip_delete
                        rows = [r for r in rows if not skip(r)]
                    if extra:
                        rows = [r + extra for r in rows]
                if not rows:
                    continue
                txn.append((kind, ref, rows))
                if split_rows:
                    txn_rows += len(rows)
                    keyed = keyed and bool(ref.pk) and all(k in ref.cols for k in ref.pk)
                    if keyed and txn_rows >= split_rows:
                        yield (boundary, Unfinished(txn))
                        emitted += txn_rows
                        txn, txn_rows, split = [], 0, True
                continue
            if ev is not None and not isinstance(ev, (QueryEvent, XidEvent)):
                if not txn_gtid and done():
                    break
                now = here().key
                if now != last_progress[0]:
                    last_progress = (now, time.monotonic())
                elif time.monotonic() - last_progress[1] > STALL_SECONDS:
                    raise BinlogReadError(f"binlog read stalled at {here()} before reaching {end}",
                                          source=source_id, position=str(here()))
                continue
            is_commit = ev is None or isinstance(ev, XidEvent)
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
                    yield Statement(q, schema, int(ev.timestamp or 0), boundary, p)
                    boundary = p
                    if done():
                        break
                    continue
            if is_commit:
                if txn_gtid:
                    gtid_set = advance_gtid_set(gtid_set, txn_gtid)
                    txn_gtid = ""
                p = here()
                if txn or split:      # a split transaction always ends with its commit position
                    yield (p, txn)
                    emitted += sum(len(rows) for _, _, rows in txn)
                txn, split = [], False
                boundary = p
                if done() or (max_events and emitted >= max_events):
                    break
        clean = True
    finally:
        if (clean and keep is not None and "log_file" in how and end.file
                and (stream.log_file, int(stream.log_pos or 0)) == (boundary.file, boundary.pos)):
            keep["dump"] = (stream, boundary, _upstream_key(db_kwargs), time.monotonic())
        else:
            stream.close()
    yield End(boundary)


# ------------------------------------------------------------------ decoder process
_KEEP: dict = {}        # the decoder process's kept dump (decode_range ``keep``)


def _drop_kept() -> None:
    if "dump" in _KEEP:
        _KEEP.pop("dump")[0].close()


def _pieces(req: dict):
    """Decode one request, grouping transactions into pieces of about ``piece_rows`` rows."""
    mapper = RouteArgs(*req["mapper"]).mapper()
    t0 = time.monotonic()
    txns, rows, last = [], 0, None
    for item in decode_range(req["db_kwargs"], mapper, req["start"], req["end"],
                             max_events=req["max_events"], source_id=req["source_id"],
                             split_rows=req.get("split_rows", 0), keep=_KEEP):
        if isinstance(item, tuple):
            txns.append(item)
            rows += sum(len(r) for _, _, r in item[1])
            last = item[0]
            if rows >= req["piece_rows"]:
                yield Chunk(txns, rows, last)
                txns, rows = [], 0
            continue
        if txns:
            yield Chunk(txns, rows, last)
            txns, rows = [], 0
        if isinstance(item, End):
            item.decode_seconds = time.monotonic() - t0
        yield item


def _child_main() -> None:
    """Entry point of the decoder process: pickled requests on stdin, pickled items on stdout.
    Exits when stdin closes or after ``IDLE_EXIT_SECONDS`` without a request."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr      # stray prints must not corrupt the item stream
    inp = sys.stdin.buffer
    try:                         # the protocol library now, not in the first batch's time
        import pymysqlreplication.row_event  # noqa: F401
    except ImportError:
        pass                     # the request reports it
    gc_tuning.tune()             # every decoded row is a few tuples: collect young objects rarely
    while True:
        if not select.select([inp], [], [], KEEP_SECONDS if _KEEP else IDLE_EXIT_SECONDS)[0]:
            if _KEEP:            # no batch came for the kept dump: close it, wait on
                _drop_kept()
                continue
            return
        try:
            req = pickle.load(inp)
        except EOFError:
            return
        try:
            for item in _pieces(req):
                pickle.dump(item, out, protocol=pickle.HIGHEST_PROTOCOL)
                out.flush()
        except Exception as e:   # reported to the syncer, which raises it with its context
            pickle.dump(_Failed(f"{type(e).__name__}: {e}"), out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()


class DecoderProcess:
    """A child Python process that decodes binlog ranges for one syncer, one range at a time.

    Why a process and not a thread: decoding is pure Python and CPU-bound; on a thread it
    would hold the GIL against the driver thread that runs the Spark jobs (every py4j reply
    then waits for the GIL: measured 2-3x slower jobs).  The child is started once and reused
    for every batch; it exits when the syncer goes away (its stdin closes), after
    ``IDLE_EXIT_SECONDS`` without work (restarted on demand), or is killed when a batch is
    abandoned halfway."""

    def __init__(self, source_id: str = ""):
        self.source_id = source_id
        self.proc: subprocess.Popen | None = None
        self._finalizer = None
        self._used = 0.0

    def ensure(self) -> subprocess.Popen:
        if self.proc is not None and time.monotonic() - self._used > IDLE_EXIT_SECONDS - 30:
            self.kill()          # about to exit on its own: do not race it with a request
        self._used = time.monotonic()
        if self.proc is None or self.proc.poll() is not None:
            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            env = dict(os.environ)
            env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            try:
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", "from worker.binlog.source import _child_main; _child_main()"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
            except OSError as e:
                raise BinlogReadError(f"cannot start the binlog decoder process ({sys.executable}): {e}",
                                      source=self.source_id) from e
            if self._finalizer is not None:
                self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _kill, self.proc)
        return self.proc

    def kill(self) -> None:
        if self.proc is not None:
            _kill(self.proc)
            self.proc = None


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for f in (proc.stdin, proc.stdout):
        try:
            f.close()
        except (OSError, ValueError):
            pass


# ------------------------------------------------------------------ read-ahead
class BinlogPrefetch(ReadAhead):
    """Decodes ``[start, end)`` in a :class:`DecoderProcess` ahead of the consumer;
    :meth:`items` yields Chunk/Statement/End in binlog order (``worker.binlog.contract``).

    The decoder groups transactions into pieces of about ``piece_rows`` rows; a receiving
    thread queues at most about ``max_rows`` rows of them (then the pipe fills and the
    decoder waits: memory stays bounded); :class:`ReadAhead` merges them into chunks."""

    def __init__(self, decoder: DecoderProcess, db_kwargs: dict, route: RouteArgs, start: Position,
                 end: Position | None, *, max_events: int = 0, source_id: str = "", max_rows: int = 20_000,
                 piece_rows: int = 2_000):
        super().__init__(source_id, start, max_rows=max_rows, piece_rows=piece_rows)
        self.decoder = decoder
        # a transaction of keyed tables larger than half a chunk is handed out in pieces: its
        # apply starts before the rest is decoded, and memory stays bounded by ``max_rows``
        # (the route goes as the plain tuple it always was: the request's pickle is unchanged)
        self._req = {"db_kwargs": db_kwargs, "mapper": route.wire(), "start": start, "end": end,
                     "max_events": max_events, "source_id": source_id, "piece_rows": piece_rows,
                     "split_rows": max(piece_rows, max_rows // 2)}
        self._thread = threading.Thread(target=self._run, name=f"binlog-read-{source_id}", daemon=True)

    def __enter__(self) -> BinlogPrefetch:
        proc = self.decoder.ensure()
        try:
            pickle.dump(self._req, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.flush()
        except (OSError, ValueError) as e:
            self.decoder.kill()
            raise BinlogReadError(f"binlog decoder process is gone: {e}", source=self.source_id,
                                  position=str(self.start)) from e
        self._proc = proc
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                item = pickle.load(self._proc.stdout)
                if isinstance(item, End):
                    self._finished = True
                    self.decode_seconds = item.decode_seconds
                elif isinstance(item, _Failed):
                    self._finished = True
                if not self._put(item) or self._finished:
                    return
        except (EOFError, OSError, ValueError, pickle.UnpicklingError) as e:
            if not self._stop.is_set():
                self._put(_Failed(f"binlog decoder process ended unexpectedly ({type(e).__name__})"))

    def close(self) -> None:
        self._stop.set()
        if not self._finished:
            self.decoder.kill()    # abandoned halfway: the next batch starts a fresh decoder
        self._drain()
