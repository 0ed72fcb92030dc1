"""MySQL/MariaDB type catalogue: families, widths, charsets and defaults.

Kept separate from the model so the lattice, the parser and the renderer
share one set of facts about types (e.g. MariaDB's default display widths,
default collations, what the "zero" default of a type is).
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation, localcontext

INT_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}
INT_BY_BITS = {v: k for k, v in INT_BITS.items()}
# MariaDB prints these display widths when none was given (signed, unsigned).
INT_DEFAULT_WIDTH = {"tinyint": (4, 3), "smallint": (6, 5), "mediumint": (9, 8),
                     "int": (11, 10), "bigint": (20, 20)}
TEXT_FAMILY = ("tinytext", "text", "mediumtext", "longtext")
BLOB_FAMILY = ("tinyblob", "blob", "mediumblob", "longblob")
FSP_TYPES = ("datetime", "timestamp", "time")
STRING_TYPES = frozenset(("char", "varchar", "enum", "set") + TEXT_FAMILY)
NUMERIC_TYPES = frozenset(tuple(INT_BITS) + ("decimal", "float", "double"))
LENGTH_TYPES = frozenset(("char", "varchar", "binary", "varbinary", "bit"))

DEFAULT_COLLATION = {
    "utf8mb4": "utf8mb4_general_ci", "utf8mb3": "utf8mb3_general_ci",
    "latin1": "latin1_swedish_ci", "ascii": "ascii_general_ci", "binary": "binary",
    "ucs2": "ucs2_general_ci", "utf16": "utf16_general_ci", "utf32": "utf32_general_ci",
    "latin2": "latin2_general_ci", "cp1251": "cp1251_general_ci", "gbk": "gbk_chinese_ci",
    "big5": "big5_chinese_ci", "gb2312": "gb2312_chinese_ci", "sjis": "sjis_japanese_ci",
    "euckr": "euckr_korean_ci", "cp1250": "cp1250_general_ci", "greek": "greek_general_ci",
}

# Charset widening order: a charset may be replaced by any charset above it
# without losing characters.  This is a tree below utf8mb4, so two charsets
# always have a least common upper bound or none at all.
_CHARSET_PARENT = {"ascii": None, "latin1": "utf8mb4", "utf8mb3": "utf8mb4", "utf8mb4": None}
_CHARSET_UP = {"ascii": ("ascii", "latin1", "utf8mb3", "utf8mb4"),
               "latin1": ("latin1", "utf8mb4"), "utf8mb3": ("utf8mb3", "utf8mb4"),
               "utf8mb4": ("utf8mb4",)}


def norm_charset(cs: str | None) -> str | None:
    if cs is None:
        return None
    cs = cs.lower()
    return "utf8mb3" if cs == "utf8" else cs


def norm_collation(coll: str | None) -> str | None:
    if coll is None:
        return None
    coll = coll.lower()
    if coll.startswith("utf8_"):
        coll = "utf8mb3_" + coll[5:]
    return coll


def charset_of_collation(coll: str) -> str:
    coll = norm_collation(coll)
    return "binary" if coll == "binary" else coll.split("_", 1)[0]


def collation_suffix(coll: str | None) -> str | None:
    """`utf8mb4_bin` -> `bin`; the part that must agree when charsets widen."""
    if coll is None:
        return None
    return "" if coll == "binary" else coll.split("_", 1)[1]


def charset_join(a: str | None, b: str | None) -> str | None:
    """Least charset holding both, or raise ValueError."""
    if a == b:
        return a
    if a in _CHARSET_UP and b in _CHARSET_UP:
        for cand in _CHARSET_UP[a]:
            if cand in _CHARSET_UP[b]:
                return cand
    raise ValueError(f"charset {a} and {b} have no common superset")


def collation_for(charset: str | None, suffix: str | None) -> str | None:
    if charset is None:
        return None
    if suffix is None:
        return DEFAULT_COLLATION.get(charset)
    if charset == "binary":
        return "binary"
    return f"{charset}_{suffix}"


def default_int_width(base: str, unsigned: bool) -> int:
    return INT_DEFAULT_WIDTH[base][1 if unsigned else 0]


# ---------------------------------------------------------------- defaults

_NUM_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def quote_string(value: str) -> str:
    """Quote a string literal the way MariaDB's SHOW CREATE TABLE does."""
    out = value.replace("\\", "\\\\").replace("'", "''")
    out = out.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t").replace("\0", "\\0")
    return f"'{out}'"


def unquote_string(text: str) -> str | None:
    """Inverse of quote_string for a single quoted literal; None if not one."""
    if len(text) < 2 or text[0] != "'" or text[-1] != "'":
        return None
    body, out, i = text[1:-1], [], 0
    esc = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "\\": "\\", "'": "'", '"': '"'}
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(esc.get(body[i + 1], body[i + 1]))
            i += 2
        elif ch == "'" and i + 1 < len(body) and body[i + 1] == "'":
            out.append("'")
            i += 2
        elif ch == "'":
            return None
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# The join of two different explicit defaults: the tables disagree on what an INSERT that omits
# the column gets.  Row events carry every value, so no replicated row depends on it; the merged
# table keeps the default it has until the tables agree again.  Never rendered into SQL (a SQL
# comment, so a slip would be a syntax error, not a wrong default).
MIXED_DEFAULT = "/* defaults differ per table */"


def canon_default(text: str | None, ctype) -> str | None:
    """Normalise a DEFAULT expression for a column type to MariaDB's printed form.

    The same value written as ``'5'``, ``5`` or ``5.0`` must compare equal in
    the lattice, and rendering must match ``SHOW CREATE TABLE`` byte for byte.
    """
    if text is None or text == MIXED_DEFAULT:
        return text
    t = text.strip()
    low = t.lower()
    if low == "null":
        return "NULL"
    m = re.fullmatch(r"(current_timestamp|now|localtime|localtimestamp)\s*(\(\s*(\d*)\s*\))?", low)
    if m:
        return f"current_timestamp({m.group(3) or ''})"
    base = ctype.base
    s = unquote_string(t)
    if base in NUMERIC_TYPES or base == "year":
        raw = s if s is not None else t
        if _NUM_RE.match(raw.strip()):
            num = Decimal(raw.strip())
            if base in INT_BITS or base == "year":
                return str(int(num)) if base != "year" else str(int(num)).zfill(4)
            if base == "decimal":
                with localcontext() as ctx:
                    ctx.prec = 100
                    return str(num.quantize(Decimal(1).scaleb(-(ctype.scale or 0))))
            return raw.strip()
        return t
    if base in STRING_TYPES or base in ("binary", "varbinary") or base in BLOB_FAMILY:
        if s is not None:
            return quote_string(s)
        if _NUM_RE.match(t):
            return quote_string(t)
        return t
    if base in FSP_TYPES or base == "date":
        if s is not None:
            return quote_string(s)
        if _NUM_RE.match(t):
            return quote_string(t)
        return t
    if base == "bit":
        m = re.fullmatch(r"b'([01]*)'", low)
        if m:
            return f"b'{m.group(1)}'"
        if _NUM_RE.match(t):
            return "b'" + format(int(Decimal(t)), "b") + "'"
        return t
    return t


def zero_default(ctype) -> str:
    """The type's implicit zero value (what DM synthesises for a NOT NULL
    column that is missing on some shard), in canonical printed form."""
    base = ctype.base
    if base in INT_BITS or base in ("float", "double"):
        return "0"
    if base == "decimal":
        return canon_default("0", ctype)
    if base == "bit":
        return "b'0'"
    if base == "year":
        return "0000"
    if base == "enum":
        return quote_string(ctype.members[0]) if ctype.members else "''"
    if base == "date":
        return "'0000-00-00'"
    if base in ("datetime", "timestamp"):
        frac = "." + "0" * ctype.length if ctype.length else ""
        return f"'0000-00-00 00:00:00{frac}'"
    if base == "time":
        frac = "." + "0" * ctype.length if ctype.length else ""
        return f"'00:00:00{frac}'"
    return "''"


def is_zero_default(text: str | None, ctype) -> bool:
    if text is None or text == "NULL" or text == MIXED_DEFAULT:
        return False
    base = ctype.base
    if base in NUMERIC_TYPES or base == "year":
        try:
            return Decimal(text) == 0
        except InvalidOperation:
            return False
    if base == "bit":
        m = re.fullmatch(r"b'([01]*)'", text)
        return bool(m) and int(m.group(1) or "0", 2) == 0
    if base in FSP_TYPES or base == "date":
        body = unquote_string(text)
        return body is not None and body != "" and set(body) <= set("0-: .")
    return text == zero_default(ctype)
