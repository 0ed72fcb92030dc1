"""Rendering of the model back to SQL, byte-compatible with MariaDB 10.11's
``SHOW CREATE TABLE`` (so parse -> render round trips are exact)."""
from __future__ import annotations

from coordinator.sql import quote_ident  # noqa: F401 — the renderer's quoting is the shared one

from typing import TYPE_CHECKING

from . import typesys as ts

if TYPE_CHECKING:      # model renders itself through this module, which only reads the model
    from .model import Column, ColumnType, Index, TableSchema

TableName = "str | tuple[str, str]"


def table_ref(table) -> str:
    """``t`` / ``('db', 't')`` / ``'db.t'``-already-quoted -> quoted reference."""
    if isinstance(table, tuple):
        return ".".join(quote_ident(p) for p in table if p)
    if table.startswith("`"):
        return table
    return quote_ident(table)


def render_type(t: ColumnType) -> str:
    b = t.base
    if b in ("enum", "set"):
        s = f"{b}(" + ",".join(ts.quote_string(m) for m in t.members) + ")"
    elif b in ("decimal", "float", "double"):
        s = f"{b}({t.length},{t.scale})" if t.length is not None else b
    elif t.length is not None and b not in ts.TEXT_FAMILY and b not in ts.BLOB_FAMILY:
        s = f"{b}({t.length})"
    else:
        s = b
    if t.unsigned:
        s += " unsigned"
    if t.zerofill:
        s += " zerofill"
    return s


def render_charset(t: ColumnType, table_cs: str | None, table_coll: str | None,
                   explicit: bool) -> str:
    if not t.has_charset or t.charset is None:
        return ""
    # MariaDB 10.11 prints both as soon as either differs from the table's
    if explicit or (t.charset, t.collation) != (table_cs, table_coll):
        out = f" CHARACTER SET {t.charset}"
        return out + (f" COLLATE {t.collation}" if t.collation else "")
    return ""


def render_column(c: Column, table_cs: str | None = None, table_coll: str | None = None,
                  explicit_charset: bool = False) -> str:
    parts = [quote_ident(c.name), " ", render_type(c.type),
             render_charset(c.type, table_cs, table_coll, explicit_charset)]
    if c.generated is not None:
        parts.append(f" GENERATED ALWAYS AS ({c.generated}) {'STORED' if c.stored else 'VIRTUAL'}")
    if not c.nullable:
        parts.append(" NOT NULL")
    elif c.type.base == "timestamp":
        parts.append(" NULL")
    if c.invisible:
        parts.append(" INVISIBLE")
    if c.default is not None and c.generated is None and c.default != ts.MIXED_DEFAULT:
        parts.append(f" DEFAULT {c.default}")
    if c.on_update is not None:
        parts.append(f" ON UPDATE {c.on_update}")
    if c.auto_increment:
        parts.append(" AUTO_INCREMENT")
    if c.comment:
        parts.append(f" COMMENT {ts.quote_string(c.comment)}")
    if c.check is not None:
        parts.append(f" CHECK ({c.check})")
    return "".join(parts)


def render_index_parts(ix: Index) -> str:
    return "(" + ",".join(quote_ident(c) + (f"({p})" if p is not None else "")
                          for c, p in ix.columns) + ")"


def render_index(ix: Index) -> str:
    if ix.kind == "primary":
        s = "PRIMARY KEY "
    else:
        prefix = {"unique": "UNIQUE KEY", "key": "KEY", "fulltext": "FULLTEXT KEY",
                  "spatial": "SPATIAL KEY"}[ix.kind]
        s = f"{prefix} {quote_ident(ix.name)} "
    s += render_index_parts(ix)
    if ix.using:
        s += f" USING {ix.using}"
    if ix.comment:
        s += f" COMMENT {ts.quote_string(ix.comment)}"
    if ix.ignored:
        s += " IGNORED"
    return s


_OPTION_RANK = {"ENGINE": 0, "AUTO_INCREMENT": 1, "COMMENT": 8, "PARTITION": 9}


def render_table_options(schema: TableSchema) -> str:
    items = [(k, v) for k, v in schema.options]
    ranked = [(_OPTION_RANK.get(k, 4), i, f"{k}={v}") for i, (k, v) in enumerate(items)
              if k != "PARTITION"]
    if schema.charset is not None:
        ranked.append((2, 0, f"DEFAULT CHARSET={schema.charset}"))
    if schema.collation is not None:
        ranked.append((3, 0, f"COLLATE={schema.collation}"))
    out = " ".join(s for _, _, s in sorted(ranked))
    part = schema.option("PARTITION")
    if part:
        out += "\n " + part
    return out


def render_create_table(schema: TableSchema, table) -> str:
    lines = [render_column(c, schema.charset, schema.collation) for c in schema.columns]
    lines += [render_index(ix) for ix in schema.indexes]
    body = ",\n  ".join(lines)
    opts = render_table_options(schema)
    return f"CREATE TABLE {table_ref(table)} (\n  {body}\n)" + (f" {opts}" if opts else "")
