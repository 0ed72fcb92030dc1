"""Python codecs for the character sets the servers define differently from Python.

MySQL's and MariaDB's ``latin1`` is Windows cp1252, except that the five bytes cp1252 leaves
undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D) are the C1 controls U+0081..: a valid value of a latin1
column.  mysql-replication decodes latin1 with Python's ``cp1252``, which refuses those bytes, so
one such value stopped the source's decoding for good.  ``mysql_latin1`` is the servers' table;
importing this module registers it and makes mysql-replication (and ``fast_rows``) use it.

>>> b"A\\x81\\x80\\xe9".decode("mysql_latin1")
'A\\x81€é'
>>> "A\\x81€é".encode("mysql_latin1")
b'A\\x81\\x80\\xe9'
"""
from __future__ import annotations

import codecs
import encodings.cp1252

from pymysqlreplication.row_event import RowsEvent

_UNDEFINED = (0x81, 0x8D, 0x8F, 0x90, 0x9D)
_DECODING = "".join(chr(b) if b in _UNDEFINED else c for b, c in enumerate(encodings.cp1252.decoding_table))
_ENCODING = codecs.charmap_build(_DECODING)


def _encode(text: str, errors: str = "strict"):
    return codecs.charmap_encode(text, errors, _ENCODING)


def _decode(data, errors: str = "strict"):
    return codecs.charmap_decode(data, errors, _DECODING)


_INFO = codecs.CodecInfo(_encode, _decode, name="mysql_latin1")


def _search(name: str) -> codecs.CodecInfo | None:
    return _INFO if name in ("mysql_latin1", "mysql-latin1") else None


codecs.register(_search)

_library_encoding = RowsEvent.charset_to_encoding


def encoding(charset: str) -> str:
    """The Python codec of a server character set name (mysql-replication's, except latin1)."""
    enc = _library_encoding(charset)
    return "mysql_latin1" if enc == "cp1252" else enc


RowsEvent.charset_to_encoding = staticmethod(encoding)      # type: ignore[method-assign]
