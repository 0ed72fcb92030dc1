"""Load one chunk: runs inside a Spark task (executor side).

1. Upstream: open a consistent snapshot (its binlog position is the chunk's position), take the
   table's metadata lock (a DDL committed after the snapshot fails the read: the chunk is
   retried), compare the definition with the planned one, stream the chunk's rows.  A shard
   altered since the plan (a DDL during the load) is read with the planned columns it still has
   and its chunk is marked ``schema_changed``: the hand-over then replays that table's binlog
   from the plan position, the DDL included (docs/full-load.md).
2. Downstream, ONE transaction: lock the chunk's checkpoint row (``FOR UPDATE``; a chunk marked
   done is skipped, so a retried or duplicated Spark task never loads twice), write the rows as
   multi-row INSERTs of ``batch_rows`` rows (the upstream renders each row as an SQL literal,
   :func:`row_literal`), mark the chunk done with its row count, position and the shard schema
   seen, commit.

A duplicate key between shards fails the chunk (rolled back) with the colliding keys, unless
``on_duplicate`` is ``replace``/``ignore``.  Deadlocks / lock wait timeouts retry the chunk.
"""
from __future__ import annotations

import json
import time

import pymysql
from pymysql.converters import escape_string

from coordinator.errors import ShardMergeError
from coordinator.sql import STORED_COLUMN
from worker.errors import KeyCollision
from worker.load.plan import key_where
from worker.load.snapshot import connect_reader, fingerprint, open_snapshot, show_create
from worker.load.store import _q

RETRYABLE = {1205, 1213, 1412}    # lock wait timeout, deadlock, table altered after the snapshot
MAX_ATTEMPTS = 4
MAX_STATEMENT_BYTES = 4 << 20   # an INSERT stays well below max_allowed_packet (16 MiB default)

# Types whose values are bytes, not text: written as hex literals.
BINARY_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit", "geometry", "point",
                "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection"}


def row_literal(cols: list[str], types: list[str]) -> str:
    """SQL that makes the upstream render each row as the literal ``(v1,v2,...)`` of an INSERT.

    The server does the escaping (``QUOTE``: ``NULL`` for NULL, a quoted string otherwise;
    ``0x..`` hex for binary types), so values are never parsed or escaped in Python — the
    loader only joins rows.  Every value is the server's own text form, which the downstream
    converts back exactly (DECIMAL, DOUBLE, zero dates, negative TIME, ...)."""
    parts = []
    for i, c in enumerate(cols):
        q = _q(c)
        if i < len(types) and types[i] in BINARY_TYPES:
            parts.append(f"IF({q} IS NULL, 'NULL', CONCAT('0x', HEX({q})))")
        else:
            parts.append(f"QUOTE({q})")
    return "CONCAT('(', CONCAT_WS(',', " + ", ".join(parts) + "), ')')"


class ChunkError(ShardMergeError):
    """A chunk could not be loaded; names source, shard table, chunk and snapshot position."""


class SchemaChangedDuringLoad(ChunkError):
    """A shard table changed during the full load in a way the load cannot replay: it was
    dropped or renamed, lost its chunk key, or has no key (its replay would not be idempotent)."""


def connect_writer(db_kwargs: dict):
    conn = pymysql.connect(**db_kwargs, autocommit=False, charset="utf8mb4")
    with conn.cursor() as cur:
        # UTC like the reader (TIMESTAMPs pass through unchanged); zero dates allowed; a 0 in an
        # AUTO_INCREMENT column stays 0; no FK checks (shards load in any order).
        cur.execute("SET SESSION time_zone = '+00:00', SESSION foreign_key_checks = 0, "
                    "SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'")
    return conn


def load_partition(specs, *, ctx: dict):
    """Spark ``mapPartitions`` function: load each chunk spec of the partition in turn."""
    for spec in specs:
        yield load_chunk(spec, ctx)


def load_chunk(spec: dict, ctx: dict) -> dict:
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            out = _load_once(spec, ctx)
            break
        except pymysql.MySQLError as e:
            code = e.args[0] if e.args else 0
            if code in RETRYABLE and attempt < MAX_ATTEMPTS:
                time.sleep(0.2 * attempt)
                continue
            raise ChunkError(f"chunk {spec['chunk']} of {spec['schema']}.{spec['table']} failed: "
                             f"{e.args[-1] if e.args else e} (MySQL error {code})", source=ctx["source_id"],
                             table=f"{spec['schema']}.{spec['table']}") from e
    hook = ctx.get("after_chunk")
    if hook is not None:
        hook(out)
    return out


def _load_once(spec: dict, ctx: dict) -> dict:
    s, t, n = spec["schema"], spec["table"], spec["chunk"]
    where_ckpt = ("WHERE source = %s AND up_schema = %s AND up_table = %s AND chunk = %s",
                  (ctx["source_id"], s, t, n))
    t0 = time.monotonic()
    up = connect_reader(ctx["up"])
    down = connect_writer(ctx["down"])
    try:
        pos = open_snapshot(up, ctx["source_id"])
        ctxinfo = dict(source=ctx["source_id"], table=f"{s}.{t}", position=str(pos), chunk=n)
        try:
            with up.cursor() as uc:      # metadata lock until the chunk ends: the definition holds
                uc.execute(f"SELECT 1 FROM {_q(s)}.{_q(t)} LIMIT 1")
                uc.fetchall()
            create = show_create(up, s, t)
        except pymysql.err.ProgrammingError as e:
            raise SchemaChangedDuringLoad(f"shard table {s}.{t} disappeared during the full load: {e.args[-1]}; "
                                          f"the rows it had are not in the target. Reload the source (stop-task "
                                          f"--remove-meta, clear its target rows, start-task)", **ctxinfo) from e
        cols, types = spec["columns"], list(spec.get("column_types") or [])
        changed = fingerprint(create) != spec["fingerprint"]
        if changed:
            cols, types = _columns_still_there(up, spec, ctxinfo)
            with down.cursor() as dc:
                # values of a since-retyped column may not fit the planned type: such a row was
                # written after the plan position, so the syncer's replay rewrites it anyway
                dc.execute("SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'")
        with down.cursor() as dc:
            dc.execute(f"SELECT status, rows_loaded FROM {ctx['ckpt']} {where_ckpt[0]} FOR UPDATE", where_ckpt[1])
            row = dc.fetchone()
            if row is None:
                raise ChunkError(f"chunk {n} of {s}.{t} is not in the load plan {ctx['ckpt']}", **ctxinfo)
            if row[0] == "done":
                down.rollback()
                return {"schema": s, "table": t, "chunk": n, "skipped": True, "rows": int(row[1])}
        target = f"{_q(spec['target'][0])}.{_q(spec['target'][1])}"
        verb = {"error": "INSERT", "replace": "REPLACE", "ignore": "INSERT IGNORE"}[ctx["on_duplicate"]]
        origin = spec.get("extract") or ()         # shard origin columns: constant per shard, last
        prefix = f"{verb} INTO {target} ({', '.join(_q(c) for c in [*cols, *(c for c, _ in origin)])}) VALUES "
        tail = "".join(f",'{escape_string(v)}'" for _, v in origin) + ")"
        where, args = key_where(spec["key"], spec["lo"], spec["hi"]) if spec["key"] else ("1", [])
        if ctx.get("where"):                          # the dump's `where` (mydumper --where), as DM applies it
            where += f" AND ({ctx['where'].replace('%', '%%')})"
        for e in spec.get("skip_if") or ():           # expression filters' insert-value-expr
            where += f" AND ({e.replace('%', '%%')}) IS NOT TRUE"      # executed with parameters
        select = f"SELECT {row_literal(cols, types)} FROM {_q(s)}.{_q(t)} WHERE {where}"
        rows = affected = 0
        batch, max_bytes = ctx["batch_rows"], ctx.get("max_statement_bytes", MAX_STATEMENT_BYTES)
        with up.cursor() as uc, down.cursor() as dc:
            uc.execute(select, args)
            buf: list[str] = []
            size = 0

            def flush():
                nonlocal affected, rows
                try:
                    dc.execute(prefix + ",".join(buf))
                except pymysql.err.IntegrityError as e:
                    if e.args[0] != 1062:
                        raise
                    down.rollback()
                    uc.close()
                    keys = _colliding_keys(up, down, spec, where, args)
                    raise KeyCollision(
                        f"primary/unique key collision while loading {s}.{t} into {spec['target'][0]}."
                        f"{spec['target'][1]}: {e.args[-1]}; keys of this shard already in the target "
                        f"(loaded from another shard, or there before the load): {keys or 'see message'}. "
                        f"Make the shard keys disjoint, or set `on-duplicate-logical: replace|ignore` in "
                        f"the task's loader config", **ctxinfo) from None
                affected += dc.rowcount
                rows += len(buf)
                buf.clear()

            while True:
                part = uc.fetchmany(batch)
                if not part:
                    break
                for (lit,) in part:
                    if origin:
                        lit = lit[:-1] + tail
                    buf.append(lit)
                    size += len(lit)
                    if len(buf) >= batch or size >= max_bytes:
                        flush()
                        size = 0
            if buf:
                flush()
            conflicts = 0
            if ctx["on_duplicate"] == "ignore":
                conflicts = rows - affected
            elif ctx["on_duplicate"] == "replace":
                conflicts = max(0, affected - rows) // 2
            dc.execute(f"UPDATE {ctx['ckpt']} SET status = 'done', rows_loaded = %s, binlog_name = %s, "
                       f"binlog_pos = %s, binlog_gtid = %s, info = %s {where_ckpt[0]}",
                       (rows, pos.file, pos.pos, pos.gtid,
                        json.dumps({"schema_changed": True, "create_sql": create}) if changed else spec["table_info"],
                        *where_ckpt[1]))
        down.commit()
        return {"schema": s, "table": t, "chunk": n, "skipped": False, "rows": rows, "conflicts": conflicts,
                "schema_changed": changed,
                "pos": pos.to_json(), "seconds": time.monotonic() - t0}
    except BaseException:
        try:
            down.rollback()
        except Exception:
            pass
        raise
    finally:
        for c in (up, down):
            try:
                c.close()
            except Exception:
                pass


def schema_changed(info: str | None) -> bool:
    """Whether a done chunk's checkpoint ``info`` says its snapshot saw an altered shard."""
    if not info:
        return False
    try:
        d = json.loads(info)
    except ValueError:
        return False
    return isinstance(d, dict) and bool(d.get("schema_changed"))


def _columns_still_there(up, spec: dict, ctxinfo: dict) -> tuple[list[str], list[str]]:
    """The planned columns (and types) the altered shard still has.  The target keeps the planned
    shape until the syncer replays the DDL; a dropped column gets its default meanwhile."""
    s, t = spec["schema"], spec["table"]
    if not spec["key"] or not spec.get("down_key"):
        raise SchemaChangedDuringLoad(
            f"shard table {s}.{t} was altered during the full load and has no primary or NOT NULL unique key "
            f"(or its target has none): its binlog cannot be replayed idempotently over the dumped rows. Run "
            f"the DDL after the task reached Sync, or reload the source (stop-task --remove-meta, clear its "
            f"target rows, start-task)", **ctxinfo)
    with up.cursor() as uc:
        uc.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                   f"AND {STORED_COLUMN}", (s, t))
        now = {r[0].lower() for r in uc.fetchall()}
    lost = [k for k in spec["key"] if k.lower() not in now]
    if lost:
        raise SchemaChangedDuringLoad(
            f"shard table {s}.{t} lost its chunk key column(s) {', '.join(lost)} during the full load; reload "
            f"the source (stop-task --remove-meta, clear its target rows, start-task)", **ctxinfo)
    types = list(spec.get("column_types") or [])
    keep = [i for i, c in enumerate(spec["columns"]) if c.lower() in now]
    return [spec["columns"][i] for i in keep], [types[i] if i < len(types) else "" for i in keep]


def _colliding_keys(up, down, spec: dict, where: str, args: list, limit: int = 20) -> list:
    """Keys (of the target's key) of this chunk that the target already holds."""
    dkey = spec.get("down_key") or []
    if not dkey or not all(k in spec["columns"] for k in dkey):
        return []
    found: list = []
    kl = ", ".join(_q(k) for k in dkey)
    target = f"{_q(spec['target'][0])}.{_q(spec['target'][1])}"
    tup = "%s" if len(dkey) == 1 else "(" + ", ".join(["%s"] * len(dkey)) + ")"
    lhs = _q(dkey[0]) if len(dkey) == 1 else f"({kl})"
    with up.cursor() as uc:
        uc.execute(f"SELECT {kl} FROM {_q(spec['schema'])}.{_q(spec['table'])} WHERE {where}", args)
        while len(found) < limit:
            part = uc.fetchmany(500)
            if not part:
                break
            vals = [v for r in part for v in r] if len(dkey) > 1 else [r[0] for r in part]
            with down.cursor() as dc:
                dc.execute(f"SELECT {kl} FROM {target} WHERE {lhs} IN ({', '.join([tup] * len(part))})", vals)
                found += [r[0] if len(dkey) == 1 else list(r) for r in dc.fetchall()]
        while uc.fetchone() is not None:
            pass
    down.rollback()
    return [json.loads(json.dumps(k, default=str)) for k in found[:limit]]
