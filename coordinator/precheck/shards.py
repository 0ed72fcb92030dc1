"""Table checks over the live shard schemas: every routed table has a primary/unique key, the
shards of each merged target join on the schema lattice (the same join the lock engine runs on
shard DDLs), and their AUTO_INCREMENT keys do not collide when merged.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from coordinator.routing import SYSTEM_SCHEMAS, TableMapper
from coordinator.schema import SchemaError, TableSchema, join, parse_create_table
from coordinator.schema.lattice import int_and_text, type_name
from coordinator.schema.typesys import MIXED_DEFAULT
from coordinator.sql import quote_ident, quote_table, show_create_table

from .result import FAIL, WARN, CheckItem


@dataclass
class ShardTable:
    source: str
    schema: str
    table: str
    create_sql: str = ""
    parsed: TableSchema | None = None
    parse_error: str = ""

    @property
    def label(self) -> str:
        return f"{self.source}:`{self.schema}`.`{self.table}`"


@dataclass
class Target:
    schema: str
    table: str
    shards: list[ShardTable] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"`{self.schema}`.`{self.table}`"


def discover(conn, source: str, mapper: TableMapper) -> list[tuple[ShardTable, tuple[str, str]]]:
    """The source's base tables the task routes somewhere, with their targets and definitions."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
                    "ORDER BY TABLE_SCHEMA, TABLE_NAME")
        rows = cur.fetchall()
    out = []
    for schema, table in rows:
        if schema.lower() in SYSTEM_SCHEMAS:
            continue
        tgt = mapper.target(schema, table)
        if tgt is None:
            continue
        st = ShardTable(source, schema, table)
        st.create_sql = show_create_table(conn, schema, table) or ""
        if st.create_sql:
            try:
                st.parsed = parse_create_table(st.create_sql)
            except SchemaError as e:
                st.parse_error = str(e)
            out.append((st, (tgt.schema, tgt.table)))
    return out


def _unique_keys(s: TableSchema) -> list[tuple[str, ...]]:
    return [tuple(c.lower() for c, _ in i.columns) for i in s.indexes if i.kind in ("primary", "unique")]


def key_check(targets: list[Target]) -> CheckItem:
    """DM's table structure compatibility check: a table without a primary or unique key is a
    warning (its rows are matched by every column; see docs/worker.md on keyless tables)."""
    it = CheckItem("table structure compatibility check", "check compatibility of table structure")
    for t in targets:
        for s in t.shards:
            if s.parsed is None:
                it.problem(WARN, f"table {s.label} could not be parsed ({s.parse_error}); it is not checked",
                           "check the table's definition; shardmerge may not support one of its clauses")
            elif not _unique_keys(s.parsed):
                it.problem(WARN, f"table {s.label} has no primary/unique key",
                           "add a primary or unique key to every shard table: without one, rows are matched "
                           "by all their columns and identical rows cannot be told apart")
    return it


def _join_all(a: TableSchema, b: TableSchema, la: str, lb: str) -> tuple[TableSchema | None, list[str]]:
    """Join ``a`` and ``b``; on conflicts, every conflicting column is named (one join error
    each: the column is set aside and the join retried)."""
    problems: list[str] = []
    for _ in range(64):
        try:
            joined = join(a, b, a_label=la, b_label=lb)
            problems += _beyond_dm(a, b, joined, la, lb)
            return (None if problems else joined), problems
        except SchemaError as e:
            problems.append(str(e))
            col = getattr(e, "column", None)
            if not col:
                return None, problems
            a = replace(a, columns=tuple(c for c in a.columns if c.key != col.lower()),
                        indexes=tuple(i for i in a.indexes if all(n.lower() != col.lower() for n, _ in i.columns)))
            b = replace(b, columns=tuple(c for c in b.columns if c.key != col.lower()),
                        indexes=tuple(i for i in b.indexes if all(n.lower() != col.lower() for n, _ in i.columns)))
    return None, problems


def _beyond_dm(a: TableSchema, b: TableSchema, joined: TableSchema, la: str, lb: str) -> list[str]:
    """Columns the join takes where DM's lattice has none: explicit defaults that differ, an
    integer on one side and text on the other.  The lock takes them so that a shard changing one
    holds no table; shards that *start out* that way are DM's failed check (the merged table
    would have neither shard's definition)."""
    out = []
    for c in joined.columns:
        ca, cb = a.column(c.key), b.column(c.key)
        if ca is None or cb is None:
            continue
        if c.default == MIXED_DEFAULT and MIXED_DEFAULT not in (ca.default, cb.default):
            out.append(f"column `{c.name}` has DEFAULT {ca.default} on {la} but DEFAULT {cb.default} on {lb} "
                       "(different defaults)")
        elif int_and_text(ca.type, cb.type):
            out.append(f"column `{c.name}` is {type_name(ca.type)} on {la} but {type_name(cb.type)} on {lb} "
                       "(types are incompatible)")
    return out


def join_check(t: Target) -> CheckItem:
    """DM's optimistic sharding consistency check: the shards' schemas must have a join."""
    it = CheckItem(f"optimistic sharding table {t.name} consistency checking",
                   "check consistency of sharding table structures for Optimistic Sharding Merge",
                   extra=f"sharding {t.name}: " + ", ".join(s.label for s in t.shards))
    joined: TableSchema | None = None
    members: list[str] = []
    for s in t.shards:
        if s.parsed is None:
            continue
        if joined is None:
            joined, members = s.parsed, [s.label]
            continue
        label = members[0] if len(members) == 1 else f"the join of {members[0]} and {len(members) - 1} more"
        nxt, problems = _join_all(joined, s.parsed, label, s.label)
        for p in problems:
            it.problem(FAIL, p, "make the shards' definitions of these columns joinable (same type family, "
                                "same explicit default...; see docs/schema-lattice.md) with ALTER TABLE on the "
                                "shards before starting the task")
        if nxt is not None:
            joined = nxt
            members.append(s.label)
    return it


@dataclass
class _Auto:
    shard: ShardTable
    column: str
    lo: int | None
    hi: int | None
    next_value: int | None
    increment: int
    offset: int


def _auto_column(s: TableSchema) -> str | None:
    """The AUTO_INCREMENT column when it alone is a primary/unique key (then two shards' values
    collide downstream); None otherwise."""
    for c in s.columns:
        if c.auto_increment and (c.key,) in _unique_keys(s):
            return c.name
    return None


def _auto_info(conn, s: ShardTable, col: str, increment: int, offset: int) -> _Auto:
    with conn.cursor() as cur:
        cur.execute(f"SELECT MIN({quote_ident(col)}), MAX({quote_ident(col)}) FROM {quote_table(s.schema, s.table)}")
        lo, hi = cur.fetchone()
        cur.execute("SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (s.schema, s.table))
        row = cur.fetchone()
    return _Auto(s, col, lo, hi, row[0] if row else None, increment, offset)


PROBE_KEYS = 1000       # keys of one shard looked up in another per pair
MAX_PAIRS = 200         # shard pairs probed per target


def _collisions(conns, a: _Auto, b: _Auto) -> list:
    """Key values both shards hold (from the first PROBE_KEYS of ``a`` in the common range)."""
    assert a.lo is not None and b.lo is not None and a.hi is not None and b.hi is not None  # callers skip empty shards
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
    with conns[a.shard.source].cursor() as cur:
        cur.execute(f"SELECT {quote_ident(a.column)} FROM {quote_table(a.shard.schema, a.shard.table)} "
                    f"WHERE {quote_ident(a.column)} BETWEEN %s AND %s ORDER BY 1 LIMIT {PROBE_KEYS}", (lo, hi))
        keys = [r[0] for r in cur.fetchall()]
    if not keys:
        return []
    with conns[b.shard.source].cursor() as cur:
        cur.execute(f"SELECT {quote_ident(b.column)} FROM {quote_table(b.shard.schema, b.shard.table)} "
                    f"WHERE {quote_ident(b.column)} IN ({', '.join(['%s'] * len(keys))}) ORDER BY 1 LIMIT 5", keys)
        return [r[0] for r in cur.fetchall()]


def _interleaved(a: _Auto, b: _Auto) -> bool:
    """Sequences that never meet: same step > 1, different offsets (auto_increment_increment /
    auto_increment_offset set per server)."""
    return a.increment == b.increment > 1 and a.offset % a.increment != b.offset % b.increment \
        and a.shard.source != b.shard.source


def auto_increment_check(t: Target, conns: dict, seq: dict[str, tuple[int, int]]) -> CheckItem:
    """AUTO_INCREMENT keys of merged shards: rows that already share a key value fail (the full
    load stops on the duplicate, or one shard's row overwrites the other's); shards generating
    from the same sequence warn (new rows will collide), as DM does."""
    it = CheckItem("auto-increment key checking", f"check whether AUTO_INCREMENT keys of the shards of {t.name} "
                   f"collide when merged", extra=f"sharding {t.name}")
    autos = []
    for s in t.shards:
        col = _auto_column(s.parsed) if s.parsed is not None else None
        if col is not None and s.source in conns:
            autos.append(_auto_info(conns[s.source], s, col, *seq[s.source]))
    if len(autos) < 2:
        return it
    fix = ("give each shard its own key range (auto_increment_increment / auto_increment_offset per server, or "
           "ALTER TABLE ... AUTO_INCREMENT=<start> per shard), or make the downstream key include a shard "
           "column; rows already colliding must be renumbered on the shards first")
    pairs = 0
    same_seq = []
    for i, a in enumerate(autos):
        for b in autos[i + 1:]:
            if _interleaved(a, b):
                continue
            same_seq.append((a, b))
            if a.lo is None or b.lo is None or a.hi is None or b.hi is None or a.hi < b.lo or b.hi < a.lo:
                continue
            pairs += 1
            if pairs > MAX_PAIRS:
                continue
            hit = _collisions(conns, a, b)
            if hit:
                it.problem(FAIL, f"{a.shard.label} and {b.shard.label} both hold rows with AUTO_INCREMENT key "
                           f"`{a.column}` = {', '.join(str(k) for k in hit)}{' ...' if len(hit) == 5 else ''}: "
                           f"merged into {t.name} one row would replace the other", fix)
    if pairs > MAX_PAIRS:
        it.problem(WARN, f"{pairs - MAX_PAIRS} more shard pairs of {t.name} have overlapping key ranges and were "
                         f"not probed for colliding rows", fix)
    if same_seq and it.state != FAIL:
        a, b = same_seq[0]
        more = f" (and {len(same_seq) - 1} more pairs)" if len(same_seq) > 1 else ""
        it.problem(WARN, f"{a.shard.label} and {b.shard.label}{more} generate AUTO_INCREMENT key `{a.column}` from "
                         f"the same sequence: new rows will collide in {t.name}", fix)
    return it
