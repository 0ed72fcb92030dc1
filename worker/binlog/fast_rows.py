"""Fast decoding of binlog row images, for tables whose columns all have common types.

mysql-replication decodes a row value by value through a long chain of type tests and
bitmap helpers (about 25 us for a row of 6 columns); that decode bounds the whole data path.
Here a plan (one small reader per column) is built once per table map and rows are read with
``struct`` from one buffer, giving exactly the values mysql-replication gives (tests compare
both decoders value by value).  An event with any other column type, a partial row image or
anything unexpected is left to mysql-replication (:func:`event_rows` returns ``None``).
"""
from __future__ import annotations

import codecs
import datetime
import decimal
import struct

from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.row_event import RowsEvent, UpdateRowsEvent

from . import charsets  # noqa: F401 -- latin1 as the servers define it, in both decoders
from . import compressed


_S = {fmt: struct.Struct(fmt).unpack_from for fmt in ("<b", "<B", "<h", "<H", "<i", "<I", "<q", "<Q", "<f", "<d",
                                                    ">b", ">h", ">i", ">IB")}
_COMPRESSED = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]


def _fixed(fmt: str, size: int):
    unpack = _S[fmt]

    def read(buf, i):
        return unpack(buf, i)[0], i + size
    return read


def _int24(signed: bool):
    def read(buf, i):
        v = buf[i] | (buf[i + 1] << 8) | (buf[i + 2] << 16)
        if signed and v >= 0x800000:
            v -= 0x1000000
        return v, i + 3
    return read


def _be_signed(buf, i, size):
    """mysql-replication's ``read_int_be_by_size`` (signed big-endian, 1-4 bytes)."""
    return int.from_bytes(buf[i:i + size], "big", signed=True)


def _encoding(charset: str | None) -> str | None:
    """The codec of a column's character set; None: the bytes are the value ("binary")."""
    if charset is None:
        return "utf-8"
    encoding = RowsEvent.charset_to_encoding(charset)
    try:
        codecs.lookup(encoding)
    except LookupError:
        return None
    return encoding


def _compressed(prefix: int, charset: str | None):
    encoding = _encoding(charset)

    def read(buf, i):
        n = int.from_bytes(buf[i:i + prefix], "little")
        i += prefix
        return compressed.decoded(bytes(buf[i:i + n]), encoding), i + n
    return read


def _string(prefix: int, charset: str | None):
    encoding = _encoding(charset)

    def read(buf, i):
        n = int.from_bytes(buf[i:i + prefix], "little")
        i += prefix
        raw = bytes(buf[i:i + n])
        if encoding is None:    # like mysql-replication: b"".decode() never looks the codec up
            return (raw if n else ""), i + n
        return raw.decode(encoding), i + n
    return read


def _new_decimal(precision: int, scale: int):
    integral = precision - scale
    uncomp_int, comp_int = divmod(integral, 9)
    uncomp_frac, comp_frac = divmod(scale, 9)
    size_int, size_frac = _COMPRESSED[comp_int], _COMPRESSED[comp_frac]
    total = size_int + 4 * (uncomp_int + uncomp_frac) + size_frac

    def read(buf, i):
        b = bytearray(buf[i:i + total])
        if b[0] & 0x80:
            res, mask = "", 0
        else:
            res, mask = "-", -1
        b[0] ^= 0x80
        j = 0
        if size_int:
            res += str(_be_signed(b, j, size_int) ^ mask)
            j += size_int
        for _ in range(uncomp_int):
            res += f"{_be_signed(b, j, 4) ^ mask:09d}"
            j += 4
        res += "."
        for _ in range(uncomp_frac):
            res += f"{_be_signed(b, j, 4) ^ mask:09d}"
            j += 4
        if size_frac:
            res += f"{_be_signed(b, j, size_frac) ^ mask:0{comp_frac}d}"
        return decimal.Decimal(res), i + total
    return read


def _fsp_reader(fsp: int):
    size = {1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3}.get(fsp, 0)

    def micro(buf, i):
        if not size:
            return 0, i
        v = _be_signed(buf, i, size)
        if fsp % 2:
            v = int(v / 10)
        return v * (10 ** (6 - fsp)), i + size
    return micro


def _datetime2(fsp: int):
    micro = _fsp_reader(fsp)

    def read(buf, i):
        data = int.from_bytes(buf[i:i + 5], "big")
        i += 5
        ym = (data >> 22) & 0x1FFFF
        try:
            t = datetime.datetime(int(ym / 13), ym % 13, (data >> 17) & 0x1F, (data >> 12) & 0x1F,
                                  (data >> 6) & 0x3F, data & 0x3F)
        except ValueError:
            _, i = micro(buf, i)
            return None, i
        us, i = micro(buf, i)
        return (t.replace(microsecond=us) if us > 0 else t), i
    return read


def _timestamp2(fsp: int):
    micro = _fsp_reader(fsp)

    def read(buf, i):
        t = datetime.datetime.utcfromtimestamp(_be_signed(buf, i, 4))
        us, i = micro(buf, i + 4)
        return (t.replace(microsecond=us) if us > 0 else t), i
    return read


def _date(buf, i):
    v = buf[i] | (buf[i + 1] << 8) | (buf[i + 2] << 16)
    i += 3
    if v == 0:
        return None, i
    year, month, day = (v >> 9) & 0x7FFF, (v >> 5) & 0xF, v & 0x1F
    if year == 0 or month == 0 or day == 0:
        return None, i
    return datetime.date(year, month, day), i


def _reader(col):
    t, unsigned = col.type, bool(col.unsigned)
    if t == FIELD_TYPE.TINY:
        return _fixed("<B" if unsigned else "<b", 1)
    if t == FIELD_TYPE.SHORT:
        return _fixed("<H" if unsigned else "<h", 2)
    if t == FIELD_TYPE.INT24:
        return _int24(not unsigned)
    if t == FIELD_TYPE.LONG:
        return _fixed("<I" if unsigned else "<i", 4)
    if t == FIELD_TYPE.LONGLONG:
        return _fixed("<Q" if unsigned else "<q", 8)
    if t == FIELD_TYPE.FLOAT:
        return _fixed("<f", 4)
    if t == FIELD_TYPE.DOUBLE:
        return _fixed("<d", 8)
    if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
        return _string(2 if col.max_length > 255 else 1, col.character_set_name)
    if t == FIELD_TYPE.BLOB:
        return _string(col.length_size, col.character_set_name)
    if t == compressed.BLOB_COMPRESSED:
        return _compressed(col.length_size, col.character_set_name)
    if t == compressed.VARCHAR_COMPRESSED:
        return _compressed(2 if col.max_length > 255 else 1, col.character_set_name)
    if t == FIELD_TYPE.NEWDECIMAL:
        return _new_decimal(col.precision, col.decimals)
    if t == FIELD_TYPE.DATETIME2:
        return _datetime2(col.fsp)
    if t == FIELD_TYPE.TIMESTAMP2:
        return _timestamp2(col.fsp)
    if t == FIELD_TYPE.DATE:
        return _date
    return None


class RowDecoder:
    """Plans per table map (cached) and decodes the rows of plain rows events with them."""

    def __init__(self):
        self._plans: dict[int, tuple] = {}

    def plan(self, columns):
        """One reader per column (cached by the columns list), or None when a column has no reader."""
        hit = self._plans.get(id(columns))
        if hit is not None and hit[0] is columns:
            return hit[1]
        readers = [_reader(c) for c in columns]
        plan = None if any(r is None for r in readers) else readers
        if len(self._plans) > 10_000:
            self._plans.clear()
        self._plans[id(columns)] = (columns, plan)
        return plan

    def event_rows(self, ev, cols: tuple):
        """The event's rows as ``_image``-like tuples in ``cols`` order (update: pairs), or
        ``None`` when mysql-replication must decode this event."""
        if type(ev).__name__ not in ("WriteRowsEvent", "DeleteRowsEvent", "UpdateRowsEvent"):
            return None
        columns = ev.columns
        if not getattr(ev, "complete", True) or len(columns) != len(cols) or not all(cols):
            return None
        plan = self.plan(columns)
        n = len(columns)
        full = (1 << n) - 1
        if plan is None or ev.columns_present_bitmap is None:
            return None
        update = isinstance(ev, UpdateRowsEvent)
        for bm in ((ev.columns_present_bitmap, ev.columns_present_bitmap2) if update else (ev.columns_present_bitmap,)):
            if int.from_bytes(bm, "little") & full != full:
                return None       # not a FULL row image
        packet = ev.packet
        size = ev.event_size - packet.read_bytes
        buf = packet.read(size)
        try:
            return decode_rows(memoryview(buf), plan, n, update)
        except Exception:
            packet.unread(buf)     # let mysql-replication decode (and report) it
            return None


def decode_rows(buf, plan, n: int, update: bool) -> list:
    """The row images of one rows event body (after its column bitmaps) with ``plan``."""
    nb = (n + 7) // 8
    end = len(buf)
    i = 0
    rows = []

    def image(i):
        nulls = int.from_bytes(buf[i:i + nb], "little")
        i += nb
        vals = []
        for k in range(n):
            if nulls >> k & 1:
                vals.append(None)
            else:
                v, i = plan[k](buf, i)
                vals.append(v)
        return tuple(vals), i

    while i < end:
        before, i = image(i)
        if update:
            after, i = image(i)
            rows.append((before, after))
        else:
            rows.append(before)
    if i != end:
        raise ValueError("row image overran the event")
    return rows
