"""Hypothesis strategies: random but *related* table schemas, so that joins
succeed often enough for the lattice laws to be exercised (each column name
draws from one type family, with a small chance of a clashing type)."""
from __future__ import annotations

from hypothesis import strategies as st

from coordinator.schema import Column, ColumnType, Index, TableSchema
from coordinator.schema import typesys as ts
from coordinator.schema.parse import sort_indexes

CHARSETS = [("utf8mb4", "utf8mb4_general_ci"), ("utf8mb3", "utf8mb3_general_ci"),
            ("latin1", "latin1_general_ci"), ("utf8mb4", "utf8mb4_general_ci"),
            ("utf8mb4", "utf8mb4_bin")]


@st.composite
def int_type(draw):
    base = draw(st.sampled_from(list(ts.INT_BITS)))
    unsigned = draw(st.booleans())
    return ColumnType(base, ts.default_int_width(base, unsigned), unsigned=unsigned)


@st.composite
def decimal_type(draw):
    scale = draw(st.integers(0, 4))
    digits = draw(st.integers(1, 8))
    return ColumnType("decimal", digits + scale, scale, unsigned=draw(st.booleans()))


@st.composite
def string_type(draw):
    cs, coll = draw(st.sampled_from(CHARSETS))
    base = draw(st.sampled_from(["varchar"] * 5 + ["char"]))
    return ColumnType(base, draw(st.sampled_from([5, 10, 20, 255])), charset=cs, collation=coll)


@st.composite
def text_type(draw):
    cs, coll = draw(st.sampled_from(CHARSETS))
    if draw(st.booleans()):
        return ColumnType(draw(st.sampled_from(ts.TEXT_FAMILY)), charset=cs, collation=coll)
    return ColumnType(draw(st.sampled_from(ts.BLOB_FAMILY)))


@st.composite
def enum_type(draw):
    members = ("a", "b", "c", "d")
    n = draw(st.integers(1, 4))
    chosen = members[:n] if draw(st.integers(0, 7)) else tuple(reversed(members[:n]))
    return ColumnType(draw(st.sampled_from(["enum", "enum", "set"])), members=chosen,
                      charset="utf8mb4", collation="utf8mb4_general_ci")


@st.composite
def time_type(draw):
    return ColumnType(draw(st.sampled_from(["datetime", "datetime", "timestamp"])),
                      draw(st.sampled_from([None, 3, 6])))


@st.composite
def float_type(draw):
    return ColumnType(draw(st.sampled_from(["float", "double"])), unsigned=draw(st.booleans()))


FAMILIES = [int_type(), decimal_type(), string_type(), text_type(), enum_type(), time_type(),
            float_type()]
NAMES = ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]

_VALUES = {"int": ["1", "2"], "decimal": ["1", "2.5"], "string": ["'x'", "'y'"],
           "enum": ["'a'", "'b'"], "time": ["'2020-01-01 00:00:00'"], "float": ["1.5"]}


def _value_pool(t: ColumnType) -> list[str]:
    if t.base in ts.INT_BITS:
        return _VALUES["int"]
    if t.base == "decimal":
        return _VALUES["decimal"]
    if t.base in ("enum", "set"):
        return [ts.quote_string(m) for m in t.members[:2]]
    if t.base in ts.FSP_TYPES:
        return _VALUES["time"]
    if t.base in ("float", "double"):
        return _VALUES["float"]
    if t.base in ts.BLOB_FAMILY:
        return []
    return _VALUES["string"]


@st.composite
def column(draw, name: str):
    k = NAMES.index(name)
    family = FAMILIES[k % len(FAMILIES)] if draw(st.integers(0, 39)) else st.one_of(FAMILIES)
    t = draw(family)
    nullable = draw(st.booleans())
    choices = [None, None, ts.zero_default(t)] + _value_pool(t)
    default = draw(st.sampled_from(choices))
    if nullable and default is None:
        default = "NULL"
    elif nullable and draw(st.integers(0, 3)) == 0:
        default = "NULL"
    if t.base in ts.BLOB_FAMILY and default not in (None, "NULL"):
        default = None if not nullable else "NULL"
    default = ts.canon_default(default, t)
    comment = draw(st.sampled_from([None, None, "note"]))
    return Column(name, t, nullable=nullable, default=default, comment=comment)


@st.composite
def table(draw):
    names = [n for n in NAMES if draw(st.integers(0, 9)) < 7] or ["c0"]
    cols = [draw(column(n)) for n in names]
    if draw(st.booleans()):
        cols = draw(st.permutations(cols))
    present = {c.name for c in cols}
    indexable = {c.name for c in cols if c.type.base not in ts.TEXT_FAMILY + ts.BLOB_FAMILY}
    idx = []
    if "c0" in indexable and draw(st.booleans()):
        idx.append(Index("PRIMARY", "primary", (("c0", None),)))
        cols = [Column(**{**c.__dict__, "nullable": False,
                          "default": None if c.default == "NULL" else c.default})
                if c.name == "c0" else c for c in cols]
    pool = [Index("k1", "key", (("c1", None), ("c2", None))), Index("k1", "key", (("c2", None),)),
            Index("u5", "unique", (("c5", None),)), Index("k2", "key", (("c6", None),))]
    for ix in pool:
        if all(c in indexable for c, _ in ix.columns) and ix.key not in {i.key for i in idx} \
                and draw(st.integers(0, 2)) == 0:
            idx.append(ix)
    assert present
    cs, coll = draw(st.sampled_from(CHARSETS))
    idx = sort_indexes(cols, idx)
    return TableSchema(columns=tuple(cols), indexes=tuple(idx), charset=cs, collation=coll,
                       options=(("ENGINE", "InnoDB"),), name="t")
