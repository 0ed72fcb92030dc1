"""Apply row changes to the downstream, one Spark task = one partition = one transaction.

Each partition holds every change of its keys in binlog order (the syncer hashed by target and
key and sorted by ``seq``), so applying a partition in order keeps each row's history; different
partitions touch different keys and may run in parallel.

Statements always name the columns of the row image: a shard that lacks a column (dropped on
that shard only, or not yet added) writes rows without it and the downstream keeps its value
or default.  Consecutive changes of the same kind, table and column list become one
multi-row statement (at most ``batch`` rows):

* insert  -> ``INSERT`` (``REPLACE`` in safe mode)
* update  -> ``INSERT ... ON DUPLICATE KEY UPDATE`` of the non-key columns (idempotent; the key
  did not change, the source emits key changes as delete + insert)
* delete  -> ``DELETE ... WHERE key IN (...)``
Tables without a primary/unique key are matched on every column (``<=>``, one row at a time).

Safe mode (idempotent replay) is used for changes at or before ``safe_until`` (replay after a
crash) or when configured.  A partition that hits a duplicate key outside safe mode is rolled
back and re-applied in safe mode once, so a Spark task retried after its commit cannot fail.

A partition returns ``{(up_schema, up_table): [file, pos, gtid, rows]}`` for the last change it
committed per upstream table: the driver advances table checkpoints only from these
acknowledgements.
"""
from __future__ import annotations

import json
import time

import pymysql

from coordinator.errors import ShardMergeError
from worker.binlog_source import dec
from worker.events import DELETE, INSERT, UPDATE, Position


class ApplyError(ShardMergeError):
    """The downstream rejected a change; names source, target table and binlog position."""


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _tz_offset() -> str:
    off = -time.timezone if not time.localtime().tm_isdst else -time.altzone
    sign = "+" if off >= 0 else "-"
    off = abs(off)
    return f"{sign}{off // 3600:02d}:{off % 3600 // 60:02d}"


def connect_downstream(db_kwargs: dict, autocommit: bool = False) -> pymysql.connections.Connection:
    conn = pymysql.connect(**db_kwargs, autocommit=autocommit, charset="utf8mb4")
    with conn.cursor() as cur:
        # Row images carry wall-clock values decoded in this process's zone.
        cur.execute("SET SESSION time_zone = %s, SESSION foreign_key_checks = 0", (_tz_offset(),))
    return conn


class _Change:
    __slots__ = ("kind", "us", "ut", "target", "cols", "keys", "before", "after", "pos")

    def __init__(self, r):
        self.kind = r["kind"]
        self.us, self.ut = r["up_schema"], r["up_table"]
        self.target = f"{_q(r['tgt_schema'])}.{_q(r['tgt_table'])}"
        self.cols = json.loads(r["cols"])
        self.keys = json.loads(r["keys"])
        self.before = [dec(v) for v in json.loads(r["before"])] if r["before"] else None
        self.after = [dec(v) for v in json.loads(r["after"])] if r["after"] else None
        self.pos = Position(r["file"], r["pos"], r["gtid"] or "")


def _statements(group: list[_Change], safe: bool):
    """(sql, args) pairs for a group of consecutive changes of one kind/table/column list."""
    c0 = group[0]
    cols, keys, t = c0.cols, c0.keys, c0.target
    keyless = len(keys) == len(cols)
    clist = ", ".join(_q(c) for c in cols)
    row_ph = "(" + ", ".join(["%s"] * len(cols)) + ")"
    if c0.kind == INSERT or (c0.kind == UPDATE and not keyless):
        args = [v for ch in group for v in ch.after]
        values = ", ".join([row_ph] * len(group))
        if c0.kind == INSERT:
            verb = "REPLACE" if safe else "INSERT"
            yield f"{verb} INTO {t} ({clist}) VALUES {values}", args
        else:
            rest = [c for c in cols if c not in keys]
            if rest:
                upd = ", ".join(f"{_q(c)} = VALUES({_q(c)})" for c in rest)
                yield f"INSERT INTO {t} ({clist}) VALUES {values} ON DUPLICATE KEY UPDATE {upd}", args
            else:
                yield f"INSERT IGNORE INTO {t} ({clist}) VALUES {values}", args
        return
    if c0.kind == UPDATE:  # keyless: replace one matching row
        for ch in group:
            where = " AND ".join(f"{_q(c)} <=> %s" for c in cols)
            yield f"DELETE FROM {t} WHERE {where} LIMIT 1", list(ch.before)
            yield f"INSERT INTO {t} ({clist}) VALUES {row_ph}", list(ch.after)
        return
    # delete
    if keyless:
        where = " AND ".join(f"{_q(c)} <=> %s" for c in cols)
        for ch in group:
            yield f"DELETE FROM {t} WHERE {where} LIMIT 1", list(ch.before)
        return
    kidx = [cols.index(k) for k in keys]
    if len(keys) == 1:
        ph = ", ".join(["%s"] * len(group))
        yield f"DELETE FROM {t} WHERE {_q(keys[0])} IN ({ph})", [ch.before[kidx[0]] for ch in group]
    else:
        tup = "(" + ", ".join(["%s"] * len(keys)) + ")"
        ph = ", ".join([tup] * len(group))
        kl = "(" + ", ".join(_q(k) for k in keys) + ")"
        yield f"DELETE FROM {t} WHERE {kl} IN ({ph})", [ch.before[i] for ch in group for i in kidx]


def _apply(conn, changes: list[_Change], batch: int, safe_until: Position | None, force_safe: bool,
           source_id: str) -> None:
    group: list[_Change] = []
    gkey = None

    def flush():
        if not group:
            return
        safe = force_safe or (safe_until is not None and group[-1].pos <= safe_until)
        try:
            with conn.cursor() as cur:
                for sql, args in _statements(group, safe):
                    cur.execute(sql, args)
        except pymysql.err.IntegrityError:
            raise
        except pymysql.MySQLError as e:
            raise ApplyError(f"downstream rejected {group[0].kind} of {len(group)} row(s) into "
                             f"{group[0].target}: {e.args[-1] if e.args else e}",
                             source=source_id, table=f"{group[0].us}.{group[0].ut}",
                             position=str(group[0].pos)) from e
        group.clear()

    for ch in changes:
        safe = force_safe or (safe_until is not None and ch.pos <= safe_until)
        k = (ch.kind, ch.target, tuple(ch.cols), safe)
        if k != gkey or len(group) >= batch:
            flush()
            gkey = k
        group.append(ch)
    flush()


def apply_partition(rows, *, db_kwargs: dict, batch: int, safe_until: dict | None, force_safe: bool,
                    points: dict, held: set, source_id: str):
    """Spark ``mapPartitions`` function: apply this partition's changes in one transaction and
    yield one acknowledgement dict (see module docstring)."""
    until = Position.from_json(safe_until) if safe_until else None
    changes = []
    for r in rows:
        ch = _Change(r.asDict() if hasattr(r, "asDict") else r)
        if (ch.us, ch.ut) in held:
            continue
        p = points.get((ch.us, ch.ut))
        if p is not None and ch.pos <= Position.from_json(p):
            continue  # already applied before the last checkpoint
        changes.append(ch)
    ack: dict = {}
    if not changes:
        yield ack
        return
    conn = connect_downstream(db_kwargs)
    try:
        try:
            _apply(conn, changes, batch, until, force_safe, source_id)
            conn.commit()
        except pymysql.err.IntegrityError as e:
            conn.rollback()
            if force_safe or e.args[0] != 1062:
                raise ApplyError(f"downstream integrity error: {e.args[-1]}", source=source_id,
                                 table=f"{changes[0].us}.{changes[0].ut}", position=str(changes[0].pos)) from e
            _apply(conn, changes, batch, until, True, source_id)   # replayed rows: make them idempotent
            conn.commit()
    except BaseException:
        try:
            conn.rollback()
        except Exception:
            pass
        raise
    finally:
        conn.close()
    for ch in changes:
        k = (ch.us, ch.ut)
        cur = ack.get(k)
        if cur is None or Position(cur[0], cur[1]) <= ch.pos:
            ack[k] = [ch.pos.file, ch.pos.pos, ch.pos.gtid, (cur[3] if cur else 0) + 1]
        else:
            cur[3] += 1
    yield ack
