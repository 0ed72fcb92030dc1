"""Shard origin columns (a route's ``extract-table`` / ``extract-schema`` / ``extract-source``).

DM writes the extracted names into string columns that are the last columns of the merged
table, and documents that the user creates that table with them, in its keys when shard keys
collide.  shardmerge adds them itself when it creates or widens a merged table for the full
load: ``VARCHAR(128) NOT NULL DEFAULT ''`` after the shards' columns, and appended to the
primary key and to every unique key, so rows whose keys are equal in two shards are two rows
downstream.  A merged table created beforehand keeps its keys (the full load never drops a
key); narrower origin columns are widened to ``VARCHAR(128)``; it must have the columns.
Rows get the values in the full load (``worker/load/chunk.py``), in replication (the binlog
decoder, ``worker/binlog/source.py``) and in ``shardctl check`` (``worker/check.py``).
"""
from __future__ import annotations

from dataclasses import replace

from coordinator.schema.model import Column, ColumnType, TableSchema

WIDTH = 128


def column(name: str, charset: str | None, collation: str | None) -> Column:
    return Column(name, ColumnType("varchar", WIDTH, charset=charset, collation=collation), nullable=False,
                  default="''")


def extend_schema(schema: TableSchema, names: list[str] | tuple[str, ...]) -> TableSchema:
    """``schema`` with the origin columns ``names`` last and in its primary and unique keys."""
    if not names:
        return schema
    have = {c.name.lower() for c in schema.columns}
    cols = tuple(schema.columns) + tuple(column(n, schema.charset, schema.collation) for n in names
                                         if n.lower() not in have)
    add = tuple((n, None) for n in names)
    idx = tuple(replace(i, columns=tuple(i.columns) + tuple(a for a in add if a[0].lower() not in
                                                            {c[0].lower() for c in i.columns}))
                if i.kind in ("primary", "unique") else i for i in schema.indexes)
    return replace(schema, columns=cols, indexes=idx)
