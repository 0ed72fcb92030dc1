"""Python codecs for the character sets the servers define differently from Python.

Values of string columns are decoded with Python's codec of the column's character set; where
the servers' table differs from Python's, the value came out wrong (or stopped the source's
decoding for good):

* ``latin1`` is Windows cp1252, except that the five bytes cp1252 leaves undefined (0x81, 0x8D,
  0x8F, 0x90, 0x9D) are the C1 controls U+0081..: Python's ``cp1252`` refuses them;
* ``cp866`` has ⁿ and ² at 0xFC and 0xFD where Python's has № and ¤; ``greek``, ``hebrew`` and
  ``koi8u`` differ from Python's at one or two bytes each (the table below);
* ``utf16``, ``utf32`` and ``ucs2`` are big-endian without a byte-order mark, ``utf16le`` is
  little-endian: Python's ``utf16``/``utf32`` read a BOM or else assume little-endian.

Importing this module registers a ``mysql_<set>`` codec for each and makes mysql-replication
(and ``fast_rows``) use the servers' tables.  A character set with no Python codec at all keeps
its bytes, which the downstream stores as they are.

>>> b"A\\x81\\x80\\xe9".decode("mysql_latin1")
'A\\x81€é'
>>> "A\\x81€é".encode("mysql_latin1")
b'A\\x81\\x80\\xe9'
>>> encoding("utf16"), encoding("ucs2"), encoding("cp866"), encoding("latin1"), encoding("cp1252")
('utf-16-be', 'utf-16-be', 'mysql_cp866', 'mysql_latin1', 'mysql_latin1')
"""
from __future__ import annotations

import codecs

from pymysqlreplication.row_event import RowsEvent

# server character set -> (Python codec it starts from, the bytes the server maps otherwise)
_SINGLE_BYTE = {
    "latin1": ("cp1252", {b: chr(b) for b in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}),
    "cp866": ("cp866", {0xFC: "\u207f", 0xFD: "\u00b2"}),
    "greek": ("iso8859_7", {0xA1: "\u02bd", 0xA2: "\u02bc"}),
    "hebrew": ("iso8859_8", {0xAF: "\u203e"}),
    "koi8u": ("koi8_u", {0x95: "\u2022"}),
}
_library_encoding = RowsEvent.charset_to_encoding
# mysql-replication's codec name of a character set (what its columns carry as their character
# set) -> the codec that reads it as the servers do
_SERVERS = {**{_library_encoding(cs): f"mysql_{cs}" for cs in _SINGLE_BYTE},
            "utf16": "utf-16-be", "utf32": "utf-32-be", "ucs2": "utf-16-be", "utf16le": "utf-16-le"}


def _charmap(name: str, base: str, changes: dict[int, str]) -> codecs.CodecInfo:
    table = "".join(changes.get(b, c) for b, c in enumerate(codecs.decode(bytes(range(256)), base, "replace")))
    enc_table = codecs.charmap_build(table)

    def encode(text: str, errors: str = "strict"):
        return codecs.charmap_encode(text, errors, enc_table)

    def decode(data, errors: str = "strict"):
        return codecs.charmap_decode(data, errors, table)
    return codecs.CodecInfo(encode, decode, name=name)


_CODECS = {f"mysql_{cs}": _charmap(f"mysql_{cs}", base, changes) for cs, (base, changes) in _SINGLE_BYTE.items()}


def _search(name: str) -> codecs.CodecInfo | None:
    return _CODECS.get(name.replace("-", "_"))


codecs.register(_search)


def encoding(charset: str) -> str:
    """The Python codec of a character set: a server's name for it (``latin1``) or the codec
    name mysql-replication gives its columns (``cp1252``)."""
    enc = _library_encoding(charset)
    return _SERVERS.get(enc, enc)


RowsEvent.charset_to_encoding = staticmethod(encoding)      # type: ignore[method-assign]
