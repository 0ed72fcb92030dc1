"""Immutable description of one MySQL/MariaDB table.

All classes are frozen dataclasses (hashable, safe to share between lock
states).  String-type columns store their *effective* charset/collation
(resolved from the table default at parse time) so that the lattice never
has to know where a charset came from; the renderer omits them again when
they equal the table default, exactly like ``SHOW CREATE TABLE``.

Equality (``==``/``hash``) is exact: column order, index order, comments and
display widths count; the table name does not.  Lattice equality (order and
cosmetic attributes ignored) is ``TableSchema.same_as``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import orjson

from . import render
from . import typesys as ts


@dataclass(frozen=True)
class ColumnType:
    base: str                       # canonical lower-case name: int, varchar, decimal, ...
    length: int | None = None       # int display width / char length / bit width / fsp / precision
    scale: int | None = None        # decimal/float/double digits after the point
    unsigned: bool = False
    zerofill: bool = False
    members: tuple[str, ...] = ()   # enum/set members, in order
    charset: str | None = None      # effective, string types only
    collation: str | None = None

    @property
    def has_charset(self) -> bool:
        return self.base in ts.STRING_TYPES

    def lattice_key(self) -> tuple:
        """The fields the lattice looks at (integer display width is cosmetic)."""
        length = None if self.base in ts.INT_BITS else self.length
        return (self.base, length, self.scale, self.unsigned, self.zerofill, self.members,
                self.charset, self.collation)

    def to_json(self) -> dict:
        d = {"base": self.base}
        for k in ("length", "scale", "charset", "collation"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.unsigned:
            d["unsigned"] = True
        if self.zerofill:
            d["zerofill"] = True
        if self.members:
            d["members"] = list(self.members)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "ColumnType":
        return cls(base=d["base"], length=d.get("length"), scale=d.get("scale"),
                   unsigned=d.get("unsigned", False), zerofill=d.get("zerofill", False),
                   members=tuple(d.get("members", ())), charset=d.get("charset"),
                   collation=d.get("collation"))

    def sql(self) -> str:
        return render.render_type(self)


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool = True
    default: str | None = None      # canonical SQL text (``NULL``, ``0``, ``'a'``); None = no DEFAULT
    auto_increment: bool = False
    on_update: str | None = None
    comment: str | None = None
    generated: str | None = None    # generation expression (SQL text) for generated columns
    stored: bool = False
    invisible: bool = False
    check: str | None = None        # column-level CHECK expression (MariaDB JSON columns)

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def has_default(self) -> bool:
        """True when an INSERT may omit the column (the DM "has default" notion)."""
        return self.default is not None or self.auto_increment or self.generated is not None

    def lattice_key(self) -> tuple:
        k = self.__dict__.get("_lattice_key")
        if k is None:   # memoised (the instance is frozen): a big lock asks for it per Info per schema
            k = (self.key, self.type.lattice_key(), self.nullable, self.default,
                 self.auto_increment, self.on_update, self.generated, self.stored,
                 self.invisible, self.check)
            object.__setattr__(self, "_lattice_key", k)
        return k

    def to_json(self) -> dict:
        d: dict = {"name": self.name, "type": self.type.to_json(), "nullable": self.nullable}
        for k in ("default", "on_update", "comment", "generated", "check"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        for k in ("auto_increment", "stored", "invisible"):
            if getattr(self, k):
                d[k] = True
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Column":
        return cls(name=d["name"], type=ColumnType.from_json(d["type"]),
                   nullable=d.get("nullable", True), default=d.get("default"),
                   auto_increment=d.get("auto_increment", False), on_update=d.get("on_update"),
                   comment=d.get("comment"), generated=d.get("generated"),
                   stored=d.get("stored", False), invisible=d.get("invisible", False),
                   check=d.get("check"))

    def sql(self, table_charset: str | None = None, table_collation: str | None = None,
            explicit_charset: bool = False) -> str:
        return render.render_column(self, table_charset, table_collation, explicit_charset)


INDEX_KINDS = ("primary", "unique", "key", "fulltext", "spatial")


@dataclass(frozen=True)
class Index:
    name: str                                   # ``PRIMARY`` for the primary key
    kind: str                                   # one of INDEX_KINDS
    columns: tuple[tuple[str, int | None], ...]  # (column name, prefix length)
    using: str | None = None                    # BTREE / HASH when given explicitly
    comment: str | None = None
    ignored: bool = False                       # MariaDB's IGNORED (the optimizer skips it): not part of the merge

    @property
    def key(self) -> str:
        return self.name.lower()

    def lattice_key(self) -> tuple:
        return (self.kind, tuple((c.lower(), p) for c, p in self.columns), self.using)

    def to_json(self) -> dict:
        d = {"name": self.name, "kind": self.kind,
             "columns": [[c, p] for c, p in self.columns]}
        if self.using is not None:
            d["using"] = self.using
        if self.comment is not None:
            d["comment"] = self.comment
        if self.ignored:
            d["ignored"] = True
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Index":
        return cls(name=d["name"], kind=d["kind"],
                   columns=tuple((c, p) for c, p in d["columns"]),
                   using=d.get("using"), comment=d.get("comment"), ignored=bool(d.get("ignored", False)))


@dataclass(frozen=True)
class TableSchema:
    columns: tuple[Column, ...]
    indexes: tuple[Index, ...] = ()
    charset: str | None = None
    collation: str | None = None
    # Other table options as printed (ENGINE, AUTO_INCREMENT, COMMENT, ...);
    # not part of the lattice.  Values are SQL text (``InnoDB``, ``'x'``).
    options: tuple[tuple[str, str], ...] = ()
    name: str | None = field(default=None, compare=False)

    # ------------------------------------------------------------ lookups
    def column(self, name: str) -> Column | None:
        low = name.lower()
        for c in self.columns:
            if c.key == low:
                return c
        return None

    def column_keys(self) -> frozenset[str]:
        """The lower-cased column names (memoised: the lock engine asks per Info per schema)."""
        k = self.__dict__.get("_column_keys")
        if k is None:
            k = frozenset(c.key for c in self.columns)
            object.__setattr__(self, "_column_keys", k)
        return k

    def index(self, name: str) -> Index | None:
        low = name.lower()
        for i in self.indexes:
            if i.key == low:
                return i
        return None

    @property
    def primary_key(self) -> Index | None:
        return self.index("PRIMARY")

    def option(self, name: str) -> str | None:
        for k, v in self.options:
            if k == name:
                return v
        return None

    def with_name(self, name: str | None) -> "TableSchema":
        return replace(self, name=name)

    # ------------------------------------------------------------ lattice view
    def lattice_key(self) -> tuple:
        k = self.__dict__.get("_lattice_key")
        if k is None:   # memoised (the instance is frozen): the lock engine compares schemas by it per Info
            k = (self.charset, self.collation,
                 frozenset(c.lattice_key() for c in self.columns),
                 frozenset((i.key, i.lattice_key()) for i in self.indexes))
            object.__setattr__(self, "_lattice_key", k)
        return k

    def same_as(self, other: "TableSchema") -> bool:
        """Lattice equality: same columns/indexes/charset regardless of order and cosmetics."""
        return self.lattice_key() == other.lattice_key()

    # ------------------------------------------------------------ (de)serialisation
    def to_json(self) -> dict:
        return {"version": 1, "name": self.name, "charset": self.charset,
                "collation": self.collation,
                "options": [[k, v] for k, v in self.options],
                "columns": [c.to_json() for c in self.columns],
                "indexes": [i.to_json() for i in self.indexes]}

    @classmethod
    def from_json(cls, d: dict) -> "TableSchema":
        """Equal JSON gives the same (immutable) object: a big lock's Infos carry the same few
        schemas thousands of times, and the lock engine's join and compare are memoised on
        identity (coordinator/lock/schema_bag.py), so decoding once is also what makes those hit."""
        if cls is not TableSchema:
            return cls._decode(d)
        e = _BY_ID.get(id(d))
        if e is not None and e[0] is d:   # the same dict again (Infos share their parsed schemas)
            return e[1]
        try:
            k = orjson.dumps(d, option=orjson.OPT_SORT_KEYS)
        except TypeError:                      # not JSON-shaped: the decode names the problem
            return cls._decode(d)
        hit = _DECODED.get(k)
        if hit is None:
            hit = cls._decode(d)
            if len(_DECODED) >= 4096:
                _DECODED.clear()
            _DECODED[k] = hit
        if len(_BY_ID) >= 4096:
            _BY_ID.clear()
        _BY_ID[id(d)] = (d, hit)   # holds ``d``: its id cannot be reused while the entry exists
        return hit

    @classmethod
    def _decode(cls, d: dict) -> "TableSchema":
        return cls(columns=tuple(Column.from_json(c) for c in d["columns"]),
                   indexes=tuple(Index.from_json(i) for i in d.get("indexes", ())),
                   charset=d.get("charset"), collation=d.get("collation"),
                   options=tuple((k, v) for k, v in d.get("options", ())),
                   name=d.get("name"))

    def to_create_sql(self, table_name: str | tuple[str, str] | None = None) -> str:
        """``table_name``: ``t`` or ``(db, t)`` (``render.table_ref``); default: the schema's name."""
        return render.render_create_table(self, table_name or self.name or "t")


_DECODED: dict[bytes, TableSchema] = {}   # TableSchema.from_json's interning (canonical JSON -> schema)
_BY_ID: dict[int, tuple[dict, TableSchema]] = {}   # and by the identity of the dict it was given
