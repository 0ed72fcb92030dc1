"""Thin helpers over the schema lattice (coordinator.schema) used by the lock engine.

``cmp`` turns "incomparable" into ``None`` so predicates read like docs/lock-algorithm.md; ``join_all``
folds a bag of schemas.  A lock with thousands of shard tables usually holds only a handful of
distinct schemas, so ``SchemaBag`` joins over *distinct* schemas (counted) instead of members:
that keeps every Info O(distinct schemas) instead of O(tables).
"""
from __future__ import annotations

import copy
from typing import Iterable

from coordinator.schema import Incomparable, SchemaConflict, TableSchema, compare, join


def key(s: TableSchema):
    return s.lattice_key()


# Memos of join and compare on the identity of their (immutable) operands.  A lock of thousands
# of tables sees the same few schema objects over and over (TableSchema.from_json interns them,
# bags keep their joins), so each pair is computed once.  An entry holds its operands, so their
# ids cannot be reused while it exists; the memo is cleared when it grows past _MEMO_MAX.
_MEMO_MAX = 8192
_JOINS: dict[tuple[int, int], tuple[TableSchema, TableSchema, object]] = {}
_CMPS: dict[tuple[int, int], tuple[TableSchema, TableSchema, int | None]] = {}


def _memo_join(a: TableSchema, b: TableSchema) -> TableSchema:
    e = _JOINS.get((id(a), id(b)))
    if e is None or e[0] is not a or e[1] is not b:
        try:
            r: object = join(a, b)
        except SchemaConflict as ex:
            r = ex
        if len(_JOINS) >= _MEMO_MAX:
            _JOINS.clear()
        e = _JOINS[(id(a), id(b))] = (a, b, r)
    r = e[2]
    if isinstance(r, SchemaConflict):
        raise copy.copy(r).with_traceback(None)
    return r  # type: ignore[return-value]


def cmp(a: TableSchema, b: TableSchema) -> int | None:
    """-1/0/1, or None when incomparable."""
    e = _CMPS.get((id(a), id(b)))
    if e is None or e[0] is not a or e[1] is not b:
        try:
            r: int | None = compare(a, b)
        except Incomparable:
            r = None
        if len(_CMPS) >= _MEMO_MAX:
            _CMPS.clear()
        e = _CMPS[(id(a), id(b))] = (a, b, r)
    return e[2]


def eq(a: TableSchema | None, b: TableSchema | None) -> bool:
    if a is None or b is None:
        return a is b
    return key(a) == key(b) or cmp(a, b) == 0


def join2(a: TableSchema, b: TableSchema) -> TableSchema | None:
    try:
        return _memo_join(a, b)
    except SchemaConflict:
        return None


def join_all(schemas: Iterable[TableSchema]) -> TableSchema:
    """Lattice join of all schemas; raises SchemaConflict (naming the column) if none exists."""
    out = None
    for s in schemas:
        out = s if out is None else _memo_join(out, s)
    if out is None:
        raise ValueError("join of no schemas")
    return out


def try_join_all(schemas: Iterable[TableSchema]) -> TableSchema | None:
    try:
        return join_all(schemas)
    except SchemaConflict:
        return None


class SchemaBag:
    """A multiset of schemas: distinct schema -> count, with a cached join."""

    def __init__(self) -> None:
        self._items: dict = {}   # key -> [schema, count]
        self._joined: TableSchema | SchemaConflict | None = None   # cache: the join or why it fails

    def add(self, s: TableSchema) -> None:
        e = self._items.get(key(s))
        if e:
            e[1] += 1
        else:
            self._items[key(s)] = [s, 1]
            self._joined = None

    def remove(self, s: TableSchema) -> None:
        k = key(s)
        e = self._items[k]
        e[1] -= 1
        if e[1] == 0:
            del self._items[k]
            self._joined = None

    def distinct(self) -> list[TableSchema]:
        return [e[0] for e in self._items.values()]

    def counts(self) -> list[tuple[TableSchema, int]]:
        """Each distinct schema with how many members have it."""
        return [(e[0], e[1]) for e in self._items.values()]

    def distinct_except(self, s: TableSchema) -> list[TableSchema]:
        """Distinct schemas of the bag with one occurrence of ``s`` taken out."""
        k = key(s)
        return [e[0] for kk, e in self._items.items() if kk != k or e[1] > 1]

    def __len__(self) -> int:
        return sum(e[1] for e in self._items.values())

    def joined(self) -> TableSchema:
        """Join of the bag (cached); raises SchemaConflict."""
        if self._joined is None:
            try:
                self._joined = join_all(self.distinct())
            except SchemaConflict as e:
                self._joined = e
        if isinstance(self._joined, SchemaConflict):
            raise self._joined
        return self._joined

    def try_joined(self) -> TableSchema | None:
        try:
            return self.joined()
        except SchemaConflict:
            return None
