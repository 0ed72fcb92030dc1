"""``shardctl check``: is each downstream table the merge of its upstream shards?

For every target of the task (routes + block-allow-list applied to the tables the sources have
now) the downstream table and all its shards are cut into the same chunks of the key and, per
chunk, compared by row count and an order-independent checksum (``SUM(CRC32(row))``, so rows
may sit in any shard and in any order, and duplicates still count).  Chunks are buckets of
``CRC32(key) % n``: the same key falls in the same chunk on every server whatever its type,
without an ordered scan.  For differing chunks the rows' keys and hashes are fetched and the
first differing keys listed (missing downstream / extra downstream / different values).

Compared columns: those the downstream table and every shard have (a column some shard
dropped while the downstream keeps it is not comparable for that shard's rows).  The key is
the downstream primary key (else its first NOT NULL unique key, else every compared column).
Shard origin columns (a route's ``extract-*``) are compared too: on the upstream side each shard
contributes its extracted values as constants (``coordinator/origin.py``).

Needs no master: it reads the task and source files directly.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import pymysql
from pymysql.converters import escape_string

from coordinator.config import SourceConfig, TaskConfig
from coordinator.errors import ShardMergeError
from coordinator.routing import SYSTEM_SCHEMAS, TableMapper
from coordinator.sql import quote_ident
from worker.downstream import fetch_keys


class CheckError(ShardMergeError):
    """The check could not run (unreachable server, missing source file, ...)."""


@dataclass
class TableReport:
    target: str
    shards: list[str]
    columns: list[str]
    key: list[str]
    downstream_rows: int = 0
    upstream_rows: int = 0
    chunks: int = 0
    differing_chunks: int = 0
    missing_downstream: list = field(default_factory=list)   # keys upstream has, downstream lacks
    extra_downstream: list = field(default_factory=list)     # keys only downstream has
    different: list = field(default_factory=list)            # keys whose values differ
    problem: str = ""

    @property
    def equal(self) -> bool:
        return not self.problem and self.differing_chunks == 0 and self.downstream_rows == self.upstream_rows

    def to_json(self) -> dict:
        return {"target": self.target, "equal": self.equal, "shards": self.shards, "key": self.key,
                "columns": self.columns, "downstream_rows": self.downstream_rows,
                "upstream_rows": self.upstream_rows, "chunks": self.chunks,
                "differing_chunks": self.differing_chunks, "missing_downstream": self.missing_downstream,
                "extra_downstream": self.extra_downstream, "different": self.different,
                "problem": self.problem}


@dataclass
class CheckReport:
    task: str
    tables: list[TableReport]

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tables)

    def to_json(self) -> dict:
        return {"task": self.task, "equal": self.equal, "tables": [t.to_json() for t in self.tables]}

    def table(self, target: str) -> TableReport:
        return next(t for t in self.tables if t.target == target)


_q = quote_ident


def _connect(db, what: str):
    """``db``: a ``coordinator.config.DBConfig`` (its file and key name a TLS misconfiguration)."""
    kw = db.pymysql_kwargs()
    try:
        return pymysql.connect(**kw, autocommit=True, charset="utf8mb4")
    except pymysql.MySQLError as e:
        raise CheckError(f"cannot connect to {what} at {kw.get('host')}:{kw.get('port')}: {e}{db.tls_hint(e)}") from e


def _columns(conn, schema: str, table: str) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND "
                    "TABLE_NAME=%s ORDER BY ORDINAL_POSITION", (schema, table))
        return [r[0] for r in cur.fetchall()]


def _col(c: str, lit: dict) -> str:
    """A column, or the shard's constant value of an origin column (``lit``: lower name -> value)."""
    v = lit.get(c.lower())
    return _q(c) if v is None else f"_utf8mb4'{escape_string(v)}'"


def _row_expr(cols: list[str], lit: dict | None = None) -> str:
    lit = lit or {}
    parts = [f"IF({_col(c, lit)} IS NULL, 'N', CONCAT('v', CAST({_col(c, lit)} AS BINARY)))" for c in cols]
    return "CONCAT_WS('|', " + ", ".join(parts) + ")"


def _bucket_expr(key: list[str], n: int, lit: dict | None = None) -> str:
    return f"(CRC32({_row_expr(key, lit)}) % {n})"


def _chunk_sums(conn, fq: str, cols, key, n, lit: dict | None = None) -> dict[int, tuple[int, int]]:
    with conn.cursor() as cur:
        # GROUP BY position: an alias would lose to a table column of the same name
        cur.execute(f"SELECT {_bucket_expr(key, n, lit)}, COUNT(*), SUM(CRC32({_row_expr(cols, lit)})) "
                    f"FROM {fq} GROUP BY 1")
        return {int(b): (int(c), int(s or 0)) for b, c, s in cur.fetchall()}


def _chunk_rows(conn, fq: str, cols, key, n, buckets, lit: dict | None = None) -> list[tuple[tuple, int]]:
    ph = ", ".join(str(int(b)) for b in buckets)
    lit = lit or {}
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(_col(k, lit) for k in key)}, CRC32({_row_expr(cols, lit)}) FROM {fq} "
                    f"WHERE {_bucket_expr(key, n, lit)} IN ({ph})")
        return [(tuple(r[:-1]), int(r[-1])) for r in cur.fetchall()]


def _jsonable(k: tuple) -> list:
    return [v if isinstance(v, (int, float, str, type(None))) else str(v) for v in k]


def check_task(task_cfg: TaskConfig, sources: dict[str, SourceConfig], *, chunk_rows: int = 10_000,
               max_keys: int = 10) -> CheckReport:
    """Compare every downstream target of the task with the merge of its upstream shards."""
    missing = [s for s in task_cfg.sources if s not in sources]
    if missing:
        raise CheckError(f"no source config given for source(s) {', '.join(missing)} of task "
                         f"{task_cfg.name!r}; pass --source-file for each", task=task_cfg.name)
    shards: dict[tuple[str, str], list[tuple[str, str, str]]] = {}   # target -> [(source, schema, table)]
    origins: dict[tuple[str, str, str], dict] = {}    # shard -> {origin column (lower): its value}
    skips: dict[tuple[str, str, str], list[str]] = {}  # shard -> insert-value-exprs (expression filters)
    up_conns = {}
    try:
        for inst in task_cfg.instances:
            mapper = TableMapper(inst, task_cfg.meta_schema)
            exprs = mapper.exprs
            conn = up_conns[inst.source_id] = _connect(sources[inst.source_id].db,
                                                       f"source {inst.source_id}")
            with conn.cursor() as cur:
                cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                            "WHERE TABLE_TYPE = 'BASE TABLE'")
                for schema, table in cur.fetchall():
                    if schema.lower() in SYSTEM_SCHEMAS:
                        continue
                    tgt = mapper.target(schema, table)
                    if tgt is not None:
                        shards.setdefault((tgt.schema, tgt.table), []).append((inst.source_id, schema, table))
                        origins[(inst.source_id, schema, table)] = {c.lower(): v for c, v in
                                                                    mapper.extract(schema, table)}
                        if exprs is not None and exprs.insert_sql(schema, table):
                            skips[(inst.source_id, schema, table)] = exprs.insert_sql(schema, table)
        down = _connect(task_cfg.target, "the downstream")
        try:
            keys = fetch_keys(down)
            reports = [_check_target(down, up_conns, tgt, members, keys, chunk_rows, max_keys, origins, skips)
                       for tgt, members in sorted(shards.items())]
        finally:
            down.close()
    finally:
        for c in up_conns.values():
            c.close()
    return CheckReport(task_cfg.name, reports)


def _check_target(down, up_conns, tgt, members, keys, chunk_rows, max_keys, origins=None, skips=None) -> TableReport:
    origins, skips = origins or {}, skips or {}

    def up_table(s, d, t) -> str:
        """The shard as the downstream should hold it: without the rows an expression filter drops."""
        if not skips.get((s, d, t)):
            return f"{_q(d)}.{_q(t)}"
        cond = " AND ".join(f"({e}) IS NOT TRUE" for e in skips[(s, d, t)])
        return f"(SELECT * FROM {_q(d)}.{_q(t)} WHERE {cond}) AS _kept"
    ts, tt = tgt
    name = f"{ts}.{tt}"
    rep = TableReport(name, [f"{s}:{d}.{t}" for s, d, t in sorted(members)], [], [])
    dcols = _columns(down, ts, tt)
    if not dcols:
        rep.problem = "downstream table does not exist"
        for s, d, t in members:
            with up_conns[s].cursor() as cur:
                cur.execute(f"SELECT COUNT(*) FROM {_q(d)}.{_q(t)}")
                rep.upstream_rows += cur.fetchone()[0]
        return rep
    common = {c.lower(): c for c in dcols}
    for s, d, t in members:
        have = {c.lower() for c in _columns(up_conns[s], d, t)} | set(origins.get((s, d, t), {}))
        common = {k: v for k, v in common.items() if k in have}
    cols = [c for c in dcols if c.lower() in common]
    key = [k for k in keys.get(name, []) if k.lower() in common] or cols
    if keys.get(name) and len(key) != len(keys[name]):
        key = cols
    rep.columns, rep.key = cols, key
    fq_down = f"{_q(ts)}.{_q(tt)}"
    with down.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {fq_down}")
        rep.downstream_rows = cur.fetchone()[0]
    ups = []
    for s, d, t in members:
        with up_conns[s].cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {up_table(s, d, t)}")
            rep.upstream_rows += cur.fetchone()[0]
        ups.append((up_conns[s], up_table(s, d, t), origins.get((s, d, t), {})))
    n = max(1, max(rep.downstream_rows, rep.upstream_rows) // chunk_rows)
    rep.chunks = n
    dsums = _chunk_sums(down, fq_down, cols, key, n)
    usums: dict[int, list[int]] = {}
    for conn, fq, lit in ups:
        for b, (c, s) in _chunk_sums(conn, fq, cols, key, n, lit).items():
            acc = usums.setdefault(b, [0, 0])
            acc[0] += c
            acc[1] += s
    bad = sorted(b for b in set(dsums) | set(usums)
                 if tuple(dsums.get(b, (0, 0))) != tuple(usums.get(b, (0, 0))))
    rep.differing_chunks = len(bad)
    if bad:
        probe = bad[:50]
        drows: dict[tuple, list[int]] = {}
        for k, h in _chunk_rows(down, fq_down, cols, key, n, probe):
            drows.setdefault(k, []).append(h)
        urows: dict[tuple, list[int]] = {}
        for conn, fq, lit in ups:
            for k, h in _chunk_rows(conn, fq, cols, key, n, probe, lit):
                urows.setdefault(k, []).append(h)
        for k in sorted(set(drows) | set(urows), key=lambda k: json.dumps(_jsonable(k))):
            dv, uv = sorted(drows.get(k, [])), sorted(urows.get(k, []))
            if dv == uv:
                continue
            if len(uv) > len(dv) and not dv:
                lst = rep.missing_downstream
            elif len(dv) > len(uv) and not uv:
                lst = rep.extra_downstream
            else:
                lst = rep.different
            if len(lst) < max_keys:
                lst.append(_jsonable(k))
    return rep
