"""Schema predicates of the lock algorithm: what a statement changes and whether a table's schema
already fits the joined one.  Pure functions of schemas; the decisions live in ``lock.Lock``."""
from __future__ import annotations

import functools
from dataclasses import replace

from coordinator.schema import TableSchema
from coordinator.schema.lattice import int_and_text, join_type, type_name
from coordinator.schema.model import Column
from coordinator.schema.typesys import MIXED_DEFAULT, canon_default, is_zero_default
from coordinator.schema.statement import changed_columns, defined_columns, index_names


def tolerated(s: TableSchema, j: TableSchema) -> bool:
    """``s`` differs from the joined ``j`` only in column charsets/collations (which the join
    tolerates, DM_040): the downstream needs no DDL for it."""
    if s.column_keys() != j.column_keys() or {i.key: i.lattice_key() for i in s.indexes} != \
            {i.key: i.lattice_key() for i in j.indexes}:
        return False
    for c in s.columns:
        d = _col(j, c.key)      # same column keys: checked above
        if d.lattice_key() != c.lattice_key() and (
                _no_charset(c.type) != _no_charset(d.type) or replace(c, type=d.type).lattice_key() != d.lattice_key()):
            return False
    return True


def fits(s: TableSchema, j: TableSchema) -> bool:
    """Every row of ``s`` fits the joined ``j`` as it is (same columns and indexes; each type
    equal or wider there, NULL allowed where ``s`` allows it; defaults may differ)."""
    if s.column_keys() != j.column_keys() or {i.key for i in s.indexes} != {i.key for i in j.indexes}:
        return False
    for c in s.columns:
        d = _col(j, c.key)      # same column keys: checked above
        if c.nullable and not d.nullable:
            return False
        if _no_charset(c.type) != _no_charset(d.type):
            try:
                w = join_type(d.type, c.type)
            except Exception:  # noqa: BLE001 — incompatible types
                return False
            if _no_charset(w) != _no_charset(d.type):
                return False
    return True


def change_sig(prev: TableSchema, post: TableSchema) -> tuple:
    """What a change does to columns and indexes, independent of everything else in the table:
    (columns it removes or redefines, as they were; columns it adds or redefines, as they are;
    index keys it removes; index keys it adds)."""
    pk, qk = prev.column_keys(), post.column_keys()
    gone = frozenset((k, _col(prev, k).lattice_key()) for k in pk
                     if k not in qk or _col(prev, k).lattice_key() != _col(post, k).lattice_key())
    came = frozenset((k, _col(post, k).lattice_key()) for k in qk
                     if k not in pk or _col(prev, k).lattice_key() != _col(post, k).lattice_key())
    pi, qi = {i.key for i in prev.indexes}, {i.key for i in post.indexes}
    return gone, came, frozenset(pi - qi), frozenset(qi - pi)


def lossy(prev: TableSchema, post: TableSchema) -> bool:
    """The change removes or redefines a column that holds values (a rename, a type change):
    reaching its shape any other way loses or mixes those values downstream.  A new default
    only changes what an INSERT that omits the column gets: row events carry every value, so
    the values already there are carried whichever table's statement sets it."""
    qk = post.column_keys()
    return any(k not in qk or _values_key(_col(prev, k)) != _values_key(_col(post, k))
               for k, _ in change_sig(prev, post)[0])


def default_only(prev: TableSchema, post: TableSchema) -> bool:
    """The change only sets or drops columns' defaults (same columns, types, NULL-ness and
    indexes): it touches no value, since a row event carries every one."""
    gone, came, ix_gone, ix_came = change_sig(prev, post)
    if ix_gone or ix_came or not gone or {k for k, _ in gone} != {k for k, _ in came}:
        return False
    return all(_values_key(_col(prev, k)) == _values_key(_col(post, k)) for k, _ in gone)


def retype_only(prev: TableSchema, post: TableSchema) -> frozenset[str]:
    """The columns whose type the change ``prev -> post`` changes, when it changes nothing
    else (the same columns, NULL-ness, indexes; a default only as the new type writes it);
    empty otherwise."""
    gone, came, ix_gone, ix_came = change_sig(prev, post)
    keys = {k for k, _ in gone}
    if ix_gone or ix_came or not gone or keys != {k for k, _ in came}:
        return frozenset()
    for k in keys:
        p, q = _col(prev, k), _col(post, k)
        if p.type.lattice_key() == q.type.lattice_key() or \
                replace(p, type=q.type, default=q.default, comment=q.comment) != q:
            return frozenset()
    return frozenset(keys)


def added_across_families(prev: TableSchema, post: TableSchema, others: list[TableSchema]) -> str | None:
    """DM's conflict for an ADD of a column another table has as an integer where this one adds
    text, or the other way round: the lattice joins them (an integer's text) so that a *retype*
    between the two holds nobody, but two tables *adding* the column so differently disagree on
    what it is (DM: a conflict; strict mode stops).  None when no such column."""
    for c in post.columns:
        if prev.column(c.key) is not None:
            continue
        for o in others:
            oc = o.column(c.key)
            if oc is not None and int_and_text(oc.type, c.type):
                return (f"column `{c.name}` is {type_name(oc.type)} on another table but {type_name(c.type)} "
                        "here (types are incompatible)")
    return None


def default_clash(prev: TableSchema, post: TableSchema, others: list[TableSchema]) -> str | None:
    """DM's conflict over defaults: the statement gives a column an explicit default (an ADD,
    a MODIFY, SET DEFAULT) while another table gave it a *different* explicit one, which is
    not the column's default here before the statement either: two tables disagree on what the
    new default is, and the operator picks.  Moving away from a default the others still
    have, or to the one they moved to, holds nobody (the join's ``MIXED_DEFAULT``).  None when
    no such column."""
    for c in post.columns:
        p = prev.column(c.key)
        if p is not None and p.default == c.default:
            continue                # the statement leaves this default alone (most columns)
        d = canon_default(c.default, c.type)
        if not _explicit(c, d):
            continue
        pd = canon_default(p.default, c.type) if p is not None else None
        if p is not None and pd == d:
            continue
        for o in others:
            oc = o.column(c.key)
            if oc is None:
                continue
            od = canon_default(oc.default, c.type)
            if _explicit(oc, od) and od not in (d, pd):
                return (f"column `{c.name}` has DEFAULT {od} on another table but DEFAULT {d} here "
                        "(different defaults: the tables disagree on the new default)")
    return None


def _explicit(c: Column, d: str | None) -> bool:
    """``d`` (canonical) is an explicit default of ``c`` in the lattice's sense: not none, not
    NULL, not the zero a NOT NULL column gets where a shard lacks it, not the join's top."""
    return d is not None and d not in ("NULL", MIXED_DEFAULT) and \
        not (not c.nullable and is_zero_default(d, c.type))


def renamed_indexes(prev: TableSchema, post: TableSchema) -> frozenset[str]:
    """The new names when ``prev -> post`` only renames indexes (same columns, the same index
    definitions under other names); empty otherwise.  A name does not touch a row: no table
    needs to wait for it."""
    if {i.key for i in prev.indexes} == {i.key for i in post.indexes}:
        return frozenset()       # no index name changed (asked for every statement: keep it cheap)
    gone, came, ix_gone, ix_came = change_sig(prev, post)
    if gone or came or not ix_came:
        return frozenset()
    old = sorted(prev.index(k).lattice_key() for k in ix_gone)      # type: ignore[union-attr]
    new = sorted(post.index(k).lattice_key() for k in ix_came)      # type: ignore[union-attr]
    return ix_came if old == new else frozenset()


def _values_key(c: Column) -> tuple:
    """``lattice_key`` as if the column had no default."""
    return replace(c, default=None).lattice_key() if c.default is not None else c.lattice_key()


def _shape_change(prev: TableSchema, post: TableSchema) -> str:
    gone, came, _, _ = change_sig(prev, post)
    names = [_col(prev, k).name for k, _ in sorted(gone)]
    new = [_col(post, k).name for k, _ in sorted(came)]
    return f"column(s) {', '.join(f'`{n}`' for n in names)} -> {', '.join(f'`{n}`' for n in new) or 'none'}"


def _describe(c: Column) -> str:
    """A column as the waiting text shows it: type, charset/collation, NULL-ness and default (two
    columns that differ only in charset or default must not print the same)."""
    t = c.type
    out = t.sql()
    if t.charset:
        out += f" CHARACTER SET {t.charset}"
    if t.collation:
        out += f" COLLATE {t.collation}"
    out += "" if c.nullable else " NOT NULL"
    if c.default == MIXED_DEFAULT:
        out += " DEFAULT (differs per table)"
    elif c.default is not None and c.default.upper() != "NULL":
        out += f" DEFAULT {c.default}"
    return out


def _narrowed_to(prev: TableSchema, post: TableSchema, joined: TableSchema) -> bool:
    """Every column and index the statement ``prev -> post`` drops is gone from ``joined``, and
    every column it narrows has exactly its new definition there: running it downstream then
    keeps the downstream at least as wide as every member (invariant 4, docs/lock-algorithm.md)."""
    pk, qk = prev.column_keys(), post.column_keys()
    for x in pk - qk:
        if joined.column(x) is not None:
            return False
    for x in pk & qk:
        pc, qc = _col(prev, x), _col(post, x)
        if pc.lattice_key() != qc.lattice_key():
            jc = joined.column(x)
            if jc is None or jc.lattice_key() != qc.lattice_key():
                return False
    gone = {i.key for i in prev.indexes} - {i.key for i in post.indexes}
    return not (gone & {i.key for i in joined.indexes})


@functools.lru_cache(maxsize=4096)
def _no_charset(t) -> tuple:
    """A column type's identity without its charset and collation (memoised: types are frozen,
    and a big lock compares the same few per Info)."""
    return replace(t, charset=None, collation=None).lattice_key()

def _col(s: TableSchema, key: str) -> Column:
    """The column ``key`` of ``s``, which the caller knows is there (taken from its own keys)."""
    c = s.column(key)
    assert c is not None, key
    return c


_TOUCHED: dict[tuple, tuple[object, object, frozenset[str]]] = {}


def touched(before: TableSchema | None, after: TableSchema | None, ddls: list[str]) -> frozenset[str]:
    """``_touched`` memoised on the (interned, immutable) schemas' identity and the statements: a
    big lock's thousands of answers share a few schemas and one statement text.  An entry holds
    its schemas, so their ids are not reused while it exists."""
    k = (id(before), id(after), tuple(ddls))
    e = _TOUCHED.get(k)
    if e is not None and e[0] is before and e[1] is after:
        return e[2]
    if len(_TOUCHED) > 50_000:
        _TOUCHED.clear()
    keys = _touched(before, after, ddls)
    _TOUCHED[k] = (before, after, keys)
    return keys


def _touched(before: TableSchema | None, after: TableSchema | None, ddls: list[str]) -> frozenset[str]:
    """What a running answer's statements may change downstream: ``c:<column>`` and
    ``i:<index>`` keys, from its Info's schema change (a superset of what the returned
    statements do) plus the columns and indexes the statements themselves name (an unlock's
    completing DROP, a MODIFY that only moves a column, an index dropped and added again).  Two running answers that share a key must not run in either order: a
    narrowing and a widening MODIFY of one column, an ADD UNIQUE and a DROP of one index, an ADD
    and a DROP of one column each end differently when the two workers swap."""
    keys = set()
    if before is not None and after is not None:
        gone, came, ix_gone, ix_came = change_sig(before, after)
        keys |= {f"c:{k}" for k, _ in gone | came}
        keys |= {f"i:{k}" for k in ix_gone | ix_came}
    for d in ddls:
        added, dropped = changed_columns(d)
        keys |= {f"c:{k}" for k in added | dropped | defined_columns(d)}
        keys |= {f"i:{k}" for k in index_names(d)}
    return frozenset(keys)


def narrows_below(prev: TableSchema, post: TableSchema, others: list[TableSchema]) -> bool:
    """Running ``prev -> post`` downstream would leave it narrower than one of ``others``: it
    drops a column another still has, or redefines one another has differently (a narrowing
    MODIFY another table has not made).  Decided column by column, so it holds when the tables
    cannot be joined as a whole (a pending rename elsewhere)."""
    pk, qk = prev.column_keys(), post.column_keys()
    for o in others:
        if any(o.column(x) is not None for x in pk - qk):
            return True
        for x in pk & qk:
            pc, qc, oc = _col(prev, x), _col(post, x), o.column(x)
            if oc is not None and pc.lattice_key() != qc.lattice_key() and oc.lattice_key() != qc.lattice_key():
                return True
    return False
