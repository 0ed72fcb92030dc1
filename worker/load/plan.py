"""Planning the full load of one source: which shard tables, their snapshot-time shape, the
key each is chunked by, and the chunk bounds.

Chunks are ranges of the table's primary key (else its first unique key whose columns are all
NOT NULL): ``lo <= key < hi``, open at both ends of the table so rows inserted after planning
still fall into a chunk.  Bounds come from

* a single integer key on a big table: ``MIN``/``MAX`` split into equal-width ranges (two
  index dives, no scan);
* anything else: a walk of the key index taking every ``chunk_rows``-th key (one covering
  index scan, exact chunk sizes, any key type or composite key).

A table without such a key, or whose merged target has none (the switch to binlog replays
changes idempotently by key, see docs/full-load.md), is one chunk and a warning is logged.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.obs import logger
from coordinator.routing import SYSTEM_SCHEMAS, TableMapper
from coordinator.sql import STORED_COLUMN, quote_ident
from worker.load.values import dec, enc
from worker.downstream import table_key_columns
from worker.load.snapshot import show_create

log = logger("worker.load.plan")

_INT_TYPES = {"tinyint", "smallint", "mediumint", "int", "bigint"}


_q = quote_ident


@dataclass
class ShardTable:
    schema: str
    table: str
    target: tuple[str, str]
    create_sql: str
    columns: list[str]                 # insertable (non-generated) columns, in table order
    column_types: list[str] = field(default_factory=list)   # information_schema DATA_TYPE per column
    key: list[str] = field(default_factory=list)
    key_types: list[str] = field(default_factory=list)
    est_rows: int = 0

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    def to_json(self) -> dict:
        return {"target": list(self.target), "create_sql": self.create_sql, "columns": self.columns,
                "column_types": self.column_types, "key": self.key, "key_types": self.key_types, "est_rows": self.est_rows}

    @classmethod
    def from_json(cls, schema: str, table: str, d: dict) -> "ShardTable":
        return cls(schema, table, tuple(d["target"]), d["create_sql"], d["columns"], d.get("column_types", []),
                   d.get("key", []), d.get("key_types", []), int(d.get("est_rows", 0)))


def discover(conn, mapper: TableMapper) -> list[ShardTable]:
    """Every base table of the upstream that the task routes somewhere (filters applied)."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COALESCE(TABLE_ROWS, 0) FROM information_schema.TABLES "
                    "WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_SCHEMA, TABLE_NAME")
        tables = list(cur.fetchall())
    out = []
    for schema, table, est in tables:
        if schema.lower() in SYSTEM_SCHEMAS:
            continue
        tgt = mapper.target(schema, table)
        if tgt is None:
            continue
        with conn.cursor() as cur:
            cur.execute("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                        f"AND TABLE_NAME = %s AND {STORED_COLUMN} ORDER BY ORDINAL_POSITION", (schema, table))
            cols = cur.fetchall()
        key, types = table_key(conn, schema, table)
        out.append(ShardTable(schema, table, (tgt.schema, tgt.table), show_create(conn, schema, table),
                              [c for c, _ in cols], [t.lower() for _, t in cols], key, types, int(est)))
    return out


def table_key(conn, schema: str, table: str) -> tuple[list[str], list[str]]:
    """(columns, data types) of the primary key, else the first all-NOT-NULL unique key (keys
    on column prefixes do not count: they do not bound a chunk)."""
    key = table_key_columns(conn, schema, table, whole_columns=True)
    if not key:
        return [], []
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (schema, table))
        types = {c.lower(): t for c, t in cur.fetchall()}
    return key, [types[c.lower()].lower() for c in key]


# ------------------------------------------------------------------ chunk bounds
def key_where(key: list[str], lo: list | None, hi: list | None) -> tuple[str, list]:
    """SQL condition ``lo <= key < hi`` (row comparison for composite keys) and its args."""
    kl = _q(key[0]) if len(key) == 1 else "(" + ", ".join(_q(k) for k in key) + ")"
    ph = "%s" if len(key) == 1 else "(" + ", ".join(["%s"] * len(key)) + ")"
    parts, args = [], []
    if lo is not None:
        parts.append(f"{kl} >= {ph}")
        args += [dec(v) for v in lo]
    if hi is not None:
        parts.append(f"{kl} < {ph}")
        args += [dec(v) for v in hi]
    return (" AND ".join(parts) or "1"), args


def bounds(conn, t: ShardTable, chunk_rows: int, *, int_split_min_chunks: int = 4) -> list[tuple]:
    """[(lo, hi), ...] covering the whole key space of ``t``; encoded values (JSON-safe)."""
    if not t.key:
        return [(None, None)]
    if len(t.key) == 1 and t.key_types[0] in _INT_TYPES and t.est_rows >= int_split_min_chunks * chunk_rows:
        return _int_split(conn, t, chunk_rows)
    return _walk(conn, t, chunk_rows)


def _int_split(conn, t: ShardTable, chunk_rows: int) -> list[tuple]:
    k = _q(t.key[0])
    with conn.cursor() as cur:
        cur.execute(f"SELECT MIN({k}), MAX({k}) FROM {_q(t.schema)}.{_q(t.table)}")
        lo, hi = cur.fetchone()
    if lo is None:
        return [(None, None)]
    lo, hi = int(lo), int(hi)
    n = max(1, -(-t.est_rows // chunk_rows))
    step = max(1, -(-(hi - lo + 1) // n))
    cuts = list(range(lo + step, hi + 1, step))
    edges = [None] + [[c] for c in cuts] + [None]
    return list(zip(edges[:-1], edges[1:]))


def _walk(conn, t: ShardTable, chunk_rows: int) -> list[tuple]:
    klist = ", ".join(_q(k) for k in t.key)
    fq = f"{_q(t.schema)}.{_q(t.table)}"
    cuts: list[list] = []
    with conn.cursor() as cur:
        while True:
            where, args = key_where(t.key, cuts[-1] if cuts else None, None)
            cur.execute(f"SELECT {klist} FROM {fq} WHERE {where} ORDER BY {klist} LIMIT 1 OFFSET {chunk_rows}",
                        args)
            row = cur.fetchone()
            if row is None:
                break
            cuts.append([enc(v) for v in row])
    edges = [None] + cuts + [None]
    return list(zip(edges[:-1], edges[1:]))
