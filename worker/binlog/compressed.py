"""MariaDB's compressed columns (``TEXT COMPRESSED``, ``VARCHAR(n) COMPRESSED``) in row events.

The table map gives them their own types (``BLOB_COMPRESSED`` 140, ``VARCHAR_COMPRESSED`` 141,
with a BLOB's or a VARCHAR's metadata) and a row holds the value as the table stores it: the
length prefix, then one header byte and the data.  Header 0: the data follows as is (a short
value is not compressed); bit 7 set: the low three bits are how many bytes of original length
follow (big-endian), then a raw deflate stream.  mysql-replication knows neither type: its table
map parse read the wrong metadata and failed on the next event's fields, which stopped the
source's decoding for good.  Importing this module teaches it both (``fast_rows`` decodes them
itself).  Its value reading also names the column of a value that cannot be read
(:class:`ColumnValueError`), which ``RowDecodeError`` then shows.

>>> import zlib
>>> c = zlib.compressobj(wbits=-15); raw = c.compress(b"hello " * 100) + c.flush()
>>> inflate(bytes([0x8a]) + (600).to_bytes(2, "big") + raw) == b"hello " * 100
True
>>> inflate(b"\\x00short"), inflate(b"")
(b'short', b'')
"""
from __future__ import annotations

import copy
import zlib

from pymysqlreplication.column import Column
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.row_event import RowsEvent, TableMapEvent

BLOB_COMPRESSED, VARCHAR_COMPRESSED = 140, 141
# the plain type whose metadata and length prefix each has
PLAIN = {BLOB_COMPRESSED: FIELD_TYPE.BLOB, VARCHAR_COMPRESSED: FIELD_TYPE.VARCHAR}


class CompressedValueError(ValueError):
    """A compressed column's stored value that cannot be inflated (corrupt or unknown method)."""


def inflate(stored: bytes) -> bytes:
    """The original bytes of a compressed column's stored value (after its length prefix)."""
    if not stored:
        return b""
    header = stored[0]
    if not header & 0x80:
        return bytes(stored[1:])
    n = header & 0x07
    want = int.from_bytes(stored[1:1 + n], "big")
    try:
        out = zlib.decompress(bytes(stored[1 + n:]), -15)
    except zlib.error as e:
        raise CompressedValueError(f"compressed column value does not inflate ({e}; header 0x{header:02x})") from None
    if len(out) != want:
        raise CompressedValueError(f"compressed column value inflates to {len(out)} bytes, its header says {want}")
    return out


def decoded(stored: bytes, encoding: str | None):
    """The column's value: text in ``encoding`` (None: a binary column, the bytes)."""
    raw = inflate(stored)
    if encoding is None:
        return raw if raw else ""       # as mysql-replication gives an empty binary string
    return raw.decode(encoding)


# ---------------------------------------------------------------- mysql-replication
_parse = Column._Column__parse_column_definition        # type: ignore[attr-defined]


def _parse_column_definition(self, column_type, packet):
    plain = PLAIN.get(column_type)
    _parse(self, plain if plain is not None else column_type, packet)
    if plain is not None:
        self.type = column_type


Column._Column__parse_column_definition = _parse_column_definition      # type: ignore[attr-defined]

_is_character = TableMapEvent._is_character_column


def _is_character_column(column_type, dbms="mysql"):
    return column_type in PLAIN or _is_character(column_type, dbms=dbms)


TableMapEvent._is_character_column = staticmethod(_is_character_column)     # type: ignore[method-assign]

_read_value = RowsEvent._RowsEvent__read_values_name    # type: ignore[attr-defined]


class ColumnValueError(ValueError):
    """A value of a rows event that cannot be read, with its column's name (the decoders' own
    errors say only what failed, e.g. which byte of which codec)."""


def _read_values_name(self, column, null_bitmap, null_bitmap_index, is_partial, cols_bitmap, unsigned, i):
    try:
        return _read_column(self, column, null_bitmap, null_bitmap_index, is_partial, cols_bitmap, unsigned, i)
    except (ValueError, LookupError, NotImplementedError) as e:   # UnicodeDecodeError is a ValueError
        if isinstance(e, ColumnValueError):
            raise
        raise ColumnValueError(f"column `{column.name}`: {type(e).__name__}: {e}") from e


def _read_column(self, column, null_bitmap, null_bitmap_index, is_partial, cols_bitmap, unsigned, i):
    plain = PLAIN.get(column.type)
    if plain is None:
        return _read_value(self, column, null_bitmap, null_bitmap_index, is_partial, cols_bitmap, unsigned, i)
    # read as the plain type's bytes ("binary": no decoding), then inflate and decode
    raw_col = copy.copy(column)
    raw_col.type, raw_col.character_set_name = plain, "binary"
    stored = _read_value(self, raw_col, null_bitmap, null_bitmap_index, is_partial, cols_bitmap, unsigned, i)
    if stored is None:
        return None
    charset = column.character_set_name
    encoding = None if charset in (None, "binary") else RowsEvent.charset_to_encoding(charset)
    return decoded(bytes(stored), encoding)


RowsEvent._RowsEvent__read_values_name = _read_values_name      # type: ignore[attr-defined]
