"""The schema lattice: ``join`` (least common upper bound) and ``compare``.

"a <= b" means b accepts every row a accepts, with the same effect.  The
table lattice is a product of small per-field lattices (see
docs/schema-lattice.md); each of them is a genuine partial order in which a
least upper bound exists whenever any upper bound exists, so ``join`` is
commutative, associative and idempotent *including* failures (a join of
three schemas fails in every bracketing or in none).

``compare`` is defined through ``join`` (a <= b iff join(a, b) is b), so
the two can never disagree.  Laws hold up to lattice equality
(``TableSchema.same_as``): column/index order, comments, integer display
widths and table options other than charset/collation are not part of it.
"""
from __future__ import annotations

from dataclasses import replace

from . import typesys as ts
from .errors import Incomparable, SchemaConflict
from .model import Column, ColumnType, TableSchema
from .parse import sort_indexes
from .render import render_type
from .ddl import apply_ddl


class _Clash(Exception):
    """Internal: a per-field join failed; the message says why."""


def type_name(t: ColumnType, charset: bool = False) -> str:
    s = render_type(t)
    s = t.base.upper() + s[len(t.base):]
    if charset and t.has_charset and t.charset:
        s += f" CHARACTER SET {t.charset} COLLATE {t.collation}"
    return s


# ------------------------------------------------------------------ types

def _join_charset(a: ColumnType, b: ColumnType) -> tuple[str | None, str | None]:
    """Charset/collation never conflict (DM tolerates a shard whose column charset or collation
    differs from another's; the task keeps running).  An unknown side (``None``) takes the known
    one; otherwise the least common superset charset (else the greater name, so the join stays
    commutative and associative), and of two collations that sort differently the smaller name."""
    if (a.charset, a.collation) == (b.charset, b.collation):
        return a.charset, a.collation
    if a.charset is None or b.charset is None:
        known = b if a.charset is None else a
        other = a if known is b else b
        return known.charset, known.collation or other.collation
    try:
        cs = ts.charset_join(a.charset, b.charset)
    except ValueError:
        cs = max(a.charset, b.charset)
    cands = {_collation_in(cs, c) for c in (a.collation, b.collation)} - {None}
    return cs, (min(cands) if cands else ts.DEFAULT_COLLATION.get(cs))


# collation suffixes every Unicode charset has; another charset's suffix ('swedish_ci' of
# latin1, 'chinese_ci' of gbk) does not exist for the widened charset: its default is used
_UNICODE_SUFFIXES = {"general_ci", "bin", "unicode_ci", "unicode_520_ci", "general_nopad_ci", "nopad_bin",
                     "unicode_nopad_ci", "unicode_520_nopad_ci"}


def _collation_in(cs: str, coll: str | None) -> str | None:
    """``coll``'s sorting under charset ``cs`` when that collation exists, else ``cs``'s default."""
    if coll is None or cs is None:
        return ts.DEFAULT_COLLATION.get(cs) if cs else None
    if coll.startswith(cs + "_") or coll == cs:
        return coll
    suffix = ts.collation_suffix(coll)
    if cs in ("utf8mb4", "utf8mb3") and suffix in _UNICODE_SUFFIXES:
        return ts.collation_for(cs, suffix)
    return ts.DEFAULT_COLLATION.get(cs)


INT_TEXT_WIDTH = 20     # characters of the longest integer's text: -9223372036854775808


def int_and_text(a: ColumnType, b: ColumnType) -> bool:
    """One side an integer, the other VARCHAR: the pair only this lattice joins (to the text),
    which the lock and start-task's check still treat as DM's conflict where two tables *start*
    or *add* a column so."""
    return (a.base in ts.INT_BITS and b.base == "varchar") or (b.base in ts.INT_BITS and a.base == "varchar")


def _int_join(a: ColumnType, b: ColumnType) -> ColumnType:
    if a.zerofill != b.zerofill:
        raise _Clash("ZEROFILL differs")
    ba, bb = ts.INT_BITS[a.base], ts.INT_BITS[b.base]
    if a.unsigned == b.unsigned:
        bits, unsigned = max(ba, bb), a.unsigned
    else:
        sbits, ubits = (bb, ba) if a.unsigned else (ba, bb)
        above = [w for w in sorted(ts.INT_BY_BITS) if w > ubits]
        if not above:
            raise _Clash("no signed integer type holds both ranges")
        bits, unsigned = max(sbits, above[0]), False
        if a.zerofill:
            raise _Clash("ZEROFILL needs an unsigned type but the ranges need a signed one")
    base = ts.INT_BY_BITS[bits]
    same = [t.length for t in (a, b) if (t.base, t.unsigned) == (base, unsigned)]
    length = max(same, key=lambda x: x or 0) if same else ts.default_int_width(base, unsigned)
    return ColumnType(base, length, unsigned=unsigned, zerofill=a.zerofill)


def join_type(a: ColumnType, b: ColumnType) -> ColumnType:
    """Least type holding every value of both (raises _Clash)."""
    if a.lattice_key() == b.lattice_key():
        if a.base in ts.INT_BITS and a.length != b.length:
            return replace(a, length=max(a.length or 0, b.length or 0) or None)
        return a
    A, B = a.base, b.base
    if A in ts.INT_BITS and B in ts.INT_BITS:
        return _int_join(a, b)
    if A == B == "decimal":
        if a.zerofill != b.zerofill:
            raise _Clash("ZEROFILL differs")
        scale = max(a.scale, b.scale)
        digits = max(a.length - a.scale, b.length - b.scale) + scale
        if digits > 65 or scale > 38:
            raise _Clash(f"DECIMAL({digits},{scale}) exceeds MySQL's limits")
        return ColumnType("decimal", digits, scale, unsigned=a.unsigned and b.unsigned,
                          zerofill=a.zerofill)
    if {A, B} <= {"float", "double"}:
        if (a.length, a.scale) != (b.length, b.scale):
            raise _Clash("explicit (M,D) of FLOAT/DOUBLE differs")
        if a.zerofill != b.zerofill:
            raise _Clash("ZEROFILL differs")
        return replace(a, base="double" if "double" in (A, B) else "float",
                       unsigned=a.unsigned and b.unsigned)
    if int_and_text(a, b):
        # an integer's decimal text fits in 20 characters (BIGINT's minimum, BIGINT UNSIGNED's
        # maximum): a retype between the two holds no table, the merged column is text meanwhile.
        # One width for every integer type keeps the join associative (INT UNSIGNED and INT
        # join to BIGINT first or to text first, the same text either way)
        v, i = (a, b) if A == "varchar" else (b, a)
        if i.zerofill:
            raise _Clash("ZEROFILL differs")
        return replace(v, length=max(v.length or 0, INT_TEXT_WIDTH))
    for fam in (ts.TEXT_FAMILY, ts.BLOB_FAMILY):
        if A in fam and B in fam:
            cs, coll = _join_charset(a, b) if A in ts.TEXT_FAMILY else (None, None)
            return replace(a, base=fam[max(fam.index(A), fam.index(B))], charset=cs, collation=coll)
    if A != B:
        raise _Clash("types are incompatible")
    cs, coll = _join_charset(a, b) if a.has_charset else (None, None)
    if A in ("enum", "set"):
        short, long_ = sorted((a.members, b.members), key=len)
        if long_[:len(short)] != short:
            raise _Clash("members are not a prefix of one another (only appending widens)")
        return replace(a, members=long_, charset=cs, collation=coll)
    if A in ts.LENGTH_TYPES or A in ts.FSP_TYPES:
        return replace(a, length=max(a.length or 0, b.length or 0) or None, charset=cs, collation=coll)
    if (a.unsigned, a.zerofill, a.members, a.scale, a.length) != \
            (b.unsigned, b.zerofill, b.members, b.scale, b.length):
        raise _Clash("type parameters differ")
    return replace(a, charset=cs, collation=coll)


# ------------------------------------------------------------------ columns

def _join_default(a: Column, b: Column, da, db, t: ColumnType):
    """Defaults are DM's ``Maybe(Singleton)`` with a top: no explicit default (none, or a
    nullable column's implicit ``DEFAULT NULL``) < ``DEFAULT v`` < ``MIXED_DEFAULT``, the join of
    two different explicit defaults (``DEFAULT 0`` vs ``DEFAULT -1``).  DM has no top there (a
    conflict); ours lets a default change hold no table: row events carry every value, so
    tables that disagree on a default for a while lose nothing, and the merged table keeps its
    default until they agree.  Whether two tables may disagree (a change to a *third* value is
    still DM's conflict) is the lock's rule, not the lattice's (docs/schema-lattice.md).  One
    deviation keeps the join associative: the type's zero on a NOT NULL column sits between
    "none" and ``NULL``, because it is the default ``lift_missing`` gives a NOT NULL column that
    some shard lacks.  ``da``/``db`` are canonical for ``t`` (``'5'`` == ``5``)."""
    if da == db:
        return da

    def rank(c: Column, d) -> int:
        if d is None:
            return 0
        if d == ts.MIXED_DEFAULT:
            return 4
        # the zero of the column's own type: an INT's 0 read as text ('0') is no text's zero
        if not c.nullable and ts.is_zero_default(ts.canon_default(c.default, c.type), c.type):
            return 1
        return 2 if d == "NULL" else 3
    ra, rb = rank(a, da), rank(b, db)
    if max(ra, rb) == 1:
        return ts.zero_default(t)       # the joined type's own zero ('...00' vs '...00.000')
    if ra != rb:
        return da if ra > rb else db
    return ts.MIXED_DEFAULT


def _singleton(name: str, va, vb):
    if va != vb:
        def show(v) -> str:        # never an internal value (None/True/False) in a message
            if v is None or v is False:
                return f"no {name}"
            return name if v is True else f"{name} {v}"
        raise _Clash(f"has {show(va)} on {{a}} but {show(vb)} on {{b}}")
    return va


def join_column(a: Column, b: Column) -> Column:
    """Join of two same-named columns (raises _Clash with the reason)."""
    if a.lattice_key() == b.lattice_key():
        return a if a.type.length == b.type.length else replace(a, type=join_type(a.type, b.type))
    for f, label in (("auto_increment", "AUTO_INCREMENT"), ("on_update", "ON UPDATE"),
                     ("generated", "generation expression"), ("stored", "STORED"), ("check", "CHECK")):
        _singleton(label, getattr(a, f), getattr(b, f))
    try:
        t = join_type(a.type, b.type)
    except _Clash as e:
        cs = a.type.has_charset and b.type.has_charset and \
            (a.type.charset, a.type.collation) != (b.type.charset, b.type.collation)
        raise _Clash(f"is {type_name(a.type, cs)} on {{a}} but {type_name(b.type, cs)} on {{b}} "
                     f"({e})") from None
    da, db = ts.canon_default(a.default, t), ts.canon_default(b.default, t)
    default = _join_default(a, b, da, db, t)
    # visible wins: a column some shard still shows in SELECT * stays visible in the merged table;
    # it turns INVISIBLE once every shard made it so (rows name their columns: no value depends on it)
    return replace(a, type=t, nullable=a.nullable or b.nullable, default=default,
                   comment=a.comment if a.comment is not None else b.comment,
                   invisible=bool(a.invisible and b.invisible))


def lift_missing(c: Column) -> Column:
    """Join of a column with "column absent": an INSERT may omit it, so it
    needs a default; a NOT NULL column without one gets the type's zero."""
    if c.has_default:
        return c
    return replace(c, default=ts.zero_default(c.type))


# ------------------------------------------------------------------ tables

def _labels(a_label, b_label):
    return a_label or "left", b_label or "right"


def _table_charset(a: TableSchema, b: TableSchema) -> tuple[str | None, str | None]:
    ta = ColumnType("varchar", 1, charset=a.charset, collation=a.collation)
    tb = ColumnType("varchar", 1, charset=b.charset, collation=b.collation)
    return _join_charset(ta, tb)


def _conflict(cls, msg, **kw):
    return cls(msg, **kw)


def join(a: TableSchema, b: TableSchema, *, a_label: str | None = None,
         b_label: str | None = None) -> TableSchema:
    """Least schema both ``a`` and ``b`` fit into; raises SchemaConflict.

    >>> from coordinator.schema import parse_create_table as t
    >>> a = t("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    >>> print(join(a, t("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)")).to_create_sql())
    CREATE TABLE `t` (
      `id` int(11) NOT NULL,
      `v` varchar(20) DEFAULT NULL,
      `n` int(11) DEFAULT NULL,
      PRIMARY KEY (`id`)
    )
    >>> join(a, t("CREATE TABLE t (id INT PRIMARY KEY, v DATE)"))
    Traceback (most recent call last):
    ...
    coordinator.schema.errors.SchemaConflict: column `v` is VARCHAR(10) on left but DATE on right (types are incompatible)
    """
    la, lb = _labels(a_label, b_label)
    ctx = {"a_label": a_label, "b_label": b_label}
    if a is b or a == b:
        return a
    try:
        cs, coll = _table_charset(a, b)
    except _Clash as e:
        raise SchemaConflict(f"table charset: {e} ({la} vs {lb})", **ctx) from None
    bcols = {c.key: c for c in b.columns}
    acols = {c.key for c in a.columns}
    out: list[Column] = []
    for c in a.columns:
        other = bcols.get(c.key)
        if other is None:
            out.append(lift_missing(c))
            continue
        try:
            out.append(join_column(c, other))
        except _Clash as e:
            raise SchemaConflict(f"column `{c.name}` " + str(e).format(a=la, b=lb),
                                 column=c.name, **ctx) from None
    prev: str | None = None
    for c in b.columns:
        if c.key not in acols:
            k = 0 if prev is None else 1 + next(i for i, x in enumerate(out) if x.key == prev)
            out.insert(k, lift_missing(c))
        prev = c.key
    bidx = {i.key: i for i in b.indexes}
    idx = tuple(i for i in a.indexes
                if i.key in bidx and bidx[i.key].lattice_key() == i.lattice_key())
    for c in out:
        if c.auto_increment and not any(i.columns[0][0].lower() == c.key for i in idx):
            raise SchemaConflict(
                f"column `{c.name}` is AUTO_INCREMENT but no index on it is common to {la} and {lb}",
                column=c.name, **ctx)
    opts = list(a.options) + [o for o in b.options if a.option(o[0]) is None]
    idx = tuple(sort_indexes(out, idx))
    return TableSchema(columns=tuple(out), indexes=idx, charset=cs, collation=coll,
                       options=tuple(opts), name=a.name)


def _column_order(a: Column, b: Column, la: str, lb: str) -> int:
    ka, kb = a.lattice_key(), b.lattice_key()
    if ka == kb:
        return 0
    try:
        j = join_column(a, b).lattice_key()
    except _Clash as e:
        raise Incomparable(f"column `{a.name}` " + str(e).format(a=la, b=lb), column=a.name,
                           a_label=la, b_label=lb) from None
    if j == kb:
        return -1
    if j == ka:
        return 1
    raise Incomparable(f"column `{a.name}` is {_describe(a)} on {la} but {_describe(b)} on {lb}; "
                       "neither contains the other", column=a.name, a_label=la, b_label=lb)


def _describe(c: Column) -> str:
    s = type_name(c.type) + ("" if c.nullable else " NOT NULL")
    if c.default is not None:
        s += f" DEFAULT {c.default}"
    return s


def compare(a: TableSchema, b: TableSchema, *, a_label: str | None = None,
            b_label: str | None = None) -> int:
    """-1 if a < b, 0 if lattice-equal, 1 if a > b; raises Incomparable.

    Agrees with ``join``: compare(a, b) <= 0 iff join(a, b).same_as(b).

    >>> from coordinator.schema import parse_create_table as t
    >>> narrow = t("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    >>> wide = t("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)")
    >>> compare(narrow, wide), compare(wide, narrow), compare(wide, wide)
    (-1, 1, 0)
    """
    la, lb = _labels(a_label, b_label)
    ctx = {"a_label": a_label, "b_label": b_label}
    if a is b or a == b:
        return 0
    seen: dict[int, str] = {}

    def note(order: int, what: str):
        if order and order not in seen:
            seen[order] = what
        if len(seen) == 2:
            raise Incomparable(f"contradicting orders: {seen[1]} makes {la} larger but "
                               f"{seen[-1]} makes {lb} larger", **ctx)

    try:
        cs = _table_charset(a, b)
    except _Clash as e:
        raise Incomparable(f"table charset: {e} ({la} vs {lb})", **ctx) from None
    note(0 if cs == (a.charset, a.collation) == (b.charset, b.collation)
         else -1 if cs == (b.charset, b.collation)
         else 1 if cs == (a.charset, a.collation) else 2, "the table charset")
    if 2 in seen:
        raise Incomparable(f"table charsets {a.charset} ({la}) and {b.charset} ({lb}) are "
                           "not contained in each other", **ctx)
    bcols = {c.key: c for c in b.columns}
    for c in a.columns:
        other = bcols.get(c.key)
        if other is None:
            if not c.has_default:
                raise Incomparable(f"column `{c.name}` is NOT NULL without default on {la} "
                                   f"and cannot be missing on {lb}", column=c.name, **ctx)
            note(1, f"column `{c.name}` (missing on {lb})")
            continue
        try:
            note(_column_order(c, other, la, lb), f"column `{c.name}`")
        except Incomparable as e:
            e.a_label, e.b_label = a_label, b_label
            raise
    acols = {c.key for c in a.columns}
    for c in b.columns:
        if c.key not in acols:
            if not c.has_default:
                raise Incomparable(f"column `{c.name}` is NOT NULL without default on {lb} "
                                   f"and cannot be missing on {la}", column=c.name, **ctx)
            note(-1, f"column `{c.name}` (missing on {la})")
    bidx = {i.key: i for i in b.indexes}
    for i in a.indexes:
        other = bidx.pop(i.key, None)
        if other is None:
            note(-1, f"index `{i.name}` (only on {la})")
        elif other.lattice_key() != i.lattice_key():
            raise Incomparable(f"index `{i.name}` is defined differently on {la} and {lb}",
                               index=i.name, **ctx)
    for i in bidx.values():
        note(1, f"index `{i.name}` (only on {lb})")
    return next(iter(seen), 0)


def classify(before: TableSchema, after: TableSchema) -> str:
    """How a change from ``before`` to ``after`` (one shard) moves it in the
    lattice: 'widening', 'narrowing', 'neutral' or 'conflicting'."""
    try:
        order = compare(after, before)
    except Incomparable:
        return "conflicting"
    return {1: "widening", -1: "narrowing", 0: "neutral"}[order]


def classify_ddl(schema: TableSchema, sql: str) -> tuple[TableSchema | None, str]:
    """Apply one (single-change) DDL and classify it; DROP TABLE is 'narrowing'
    only in the sense of removing the table, reported as 'conflicting'."""
    after = apply_ddl(schema, sql)
    if after is None:
        return None, "conflicting"
    return after, classify(schema, after)
