"""Row changes to the downstream: split by key in the driver, applied by Spark tasks.

:class:`Partitioner` (driver) spreads a chunk's changes over ``n`` partitions by a hash of
(target, key values) and keeps binlog order inside each, so every change of one row lands in
one partition in order and partitions touch disjoint rows: they may run in parallel.  The key
is the downstream's (primary key, else the first unique key of NOT NULL columns), else the
upstream primary key from the binlog, else every column.  An update that changes the key
becomes a delete of the old key then an insert of the new one, so each key's history stays in
one partition.  String key values are hashed trimmed, case-folded and without accents (a case-,
accent- and pad-insensitive collation treats them as one key; putting more keys together is
harmless).

:func:`apply_partition` (Spark task) applies one partition in ONE downstream transaction.
Statements always name the columns of the row image: a shard that lacks a column (dropped on
that shard only, or not yet added) writes rows without it and the downstream keeps its value or
default.  The downstream's generated columns are taken out of the image in the driver: MariaDB
refuses a value for them, so no statement or row match names them.  Changes of the same kind,
table, column list and mode become one multi-row statement (at most ``batch`` rows).  A change
may join an earlier statement of its kind, moving ahead of changes of *other* rows, when no
change of its own row came after that statement (:func:`_regroup`): a partition of OLTP
transactions (update, update, delete, insert of random rows) is a few statements, not four a
transaction.  Only a target matched by its own downstream key, with no other unique index, is
regrouped so; on any other target changes keep their order within the target (a row moved ahead
could take a unique value another row had not yet given up):

* insert  -> ``INSERT`` (``REPLACE`` in safe mode)
* update  -> ``UPDATE`` of the non-key columns, the rows joined with their images (one statement);
  a row missing downstream is counted and logged, not re-created.  In safe mode
  ``INSERT ... ON DUPLICATE KEY UPDATE`` (idempotent; the key did not change)
* in safe mode on a target with another unique index, an insert or update is a ``DELETE`` of its
  own key and an ``INSERT`` (:func:`_write_guarded`): ``REPLACE`` would delete, and the upsert
  change, whichever row holds one of its unique values, another shard's row included
* delete  -> ``DELETE ... WHERE key IN (...)``
Tables without a primary/unique key are matched on every column (``<=>``, one row at a time).

Safe mode (idempotent replay) is used for changes at or before *safe-until* (replay after a
crash or a failed batch) or when configured (``safe-mode: true``); the driver marks each change.
A duplicate key outside safe mode means one of three things:

* a Spark task retried after its first attempt committed (attempt number > 0): the partition is
  rolled back and re-applied in safe mode;
* a duplicate on the key the rows are matched by: a row of another shard (or data that was
  already in the target) has the same key.  DM's safe mode would silently overwrite it; here it
  is a :class:`KeyCollision` naming the key, value, table and position, and nothing of the
  partition is applied;
* a duplicate on another unique key: a target with another unique index keeps its changes in
  one partition, in binlog order, so the row holding the value is another shard's (of this
  source, or of another source whose worker has not yet applied the change that gives the value
  up) or data not written by this task.  The holder is looked up in the failed transaction; the
  transaction is rolled back and run again (``LOCK_RETRIES`` times, backing off: another source
  may be about to give the value up), then it is a :class:`KeyCollision` naming both rows, the
  index and the value.  Never a safe-mode ``REPLACE``: that deletes the holder, another row.

Partitions touch disjoint rows but not disjoint index gaps: a
delete of a missing key takes a gap lock that another partition's insert may wait on, so two
partitions can deadlock (1213) or time out on a lock wait (1205).  The transaction is then
rolled back whole and run again (``LOCK_RETRIES`` times, backing off).  A table without any key
is kept in one partition: its row-matching deletes scan and lock the whole table.

A partition returns ``{(up_schema, up_table): [file, pos, gtid, rows, missing]}`` for the last
change it committed per upstream table (``missing``: its updates of rows the downstream does not
have): the driver advances table checkpoints only from these acknowledgements.

Keyless tables are replayed exactly (checkpoint rule 10): safe mode cannot make their changes
idempotent (no key to ``REPLACE`` by, and matching on every column removes a legitimately
identical row), so the transaction that applies a keyless table's changes also moves that
table's checkpoint row (``checkpoint=`` the table, in the same downstream).  Committed, the
changes and the point are both there and a replay skips them; rolled back, neither is.
"""
from __future__ import annotations

import decimal
import random
import re
import time
import unicodedata
from typing import AbstractSet

import pymysql
from pymysql.constants import SERVER_STATUS

from coordinator.errors import ShardMergeError
from coordinator.failpoints import failpoint
from coordinator.obs import logger
from coordinator.sql import quote_ident
from worker.sync.ddl_exec import server_error
from worker.sync.fence import check_fence
from worker.binlog.contract import Unfinished
from worker.errors import KeyCollision
from worker.events import DELETE, INSERT, UPDATE, Position


log = logger("worker.sync.apply")

LOCK_CONFLICT = {1205, 1213}   # lock wait timeout, deadlock: the transaction is rerun
LOCK_RETRIES = 6


class ApplyError(ShardMergeError):
    """The downstream rejected a change; names source, target table and binlog position."""


class _GroupFailed(Exception):
    """A statement group hit a duplicate key; carries the error, the group's first change and
    the changes of the one shard table whose statement failed."""

    def __init__(self, error: pymysql.err.IntegrityError, change: tuple, part: list):
        super().__init__(error)
        self.error, self.change, self.part = error, change, part


class _ValueTaken(Exception):
    """A change takes a value of a unique index (not the key rows are matched by) that another
    row holds downstream; the transaction was rolled back and may be run again."""

    def __init__(self, message: str, where: dict):
        super().__init__(message)
        self.message, self.where = message, where


_q = quote_ident


def local_time_zone() -> str:
    """This process's UTC offset as MariaDB ``time_zone`` text (TIMESTAMP values are decoded in it)."""
    off = -time.timezone if not time.localtime().tm_isdst else -time.altzone
    sign = "+" if off >= 0 else "-"
    off = abs(off)
    return f"{sign}{off // 3600:02d}:{off % 3600 // 60:02d}"


_TLS_PROBED: dict = {}
_SSL_KEYS = ("ssl", "ssl_ca", "ssl_cert", "ssl_key", "ssl_disabled", "ssl_verify_cert", "ssl_verify_identity")


def resolve_tls(db_kwargs: dict) -> dict:
    """``db_kwargs`` for many short connections to one server.

    Without TLS settings PyMySQL (>= 1.2) tries TLS on every connection and builds a fresh
    default SSL context each time (~40 ms, ten times the rest of a local connect).  When the
    server does not offer TLS that attempt always falls back to plain text, so after one probe
    the same outcome is had with ``ssl_disabled``.  Explicit TLS settings are kept as they are."""
    if any(k in db_kwargs for k in _SSL_KEYS):
        return db_kwargs
    key = (db_kwargs.get("host"), int(db_kwargs.get("port") or 3306))
    plain = _TLS_PROBED.get(key)
    if plain is None:
        with pymysql.connect(**db_kwargs) as conn, conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            row = cur.fetchone()
        plain = _TLS_PROBED[key] = not (row and row[1])
    return {**db_kwargs, "ssl_disabled": True} if plain else db_kwargs


APPLY_SQL_MODE = "STRICT_TRANS_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION"


def connect_downstream(db_kwargs: dict, autocommit: bool = False, *,
                       time_zone: str | None = None) -> pymysql.connections.Connection:
    """A downstream session whose ``time_zone`` is the one the binlog values were decoded in
    (default: this process's), with one ``sql_mode`` on MySQL and MariaDB alike (their defaults
    differ): strict, and a 0 written to an AUTO_INCREMENT column stays 0 as it was upstream."""
    conn = pymysql.connect(**db_kwargs, autocommit=autocommit, charset="utf8mb4")
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = %s, SESSION foreign_key_checks = 0, SESSION sql_mode = %s",
                    (time_zone or local_time_zone(), APPLY_SQL_MODE))
    return conn


# ------------------------------------------------------------------ driver: split by key
# A change as shipped to a task: (kind, meta, before, after, pos, safe) with
# meta = (up_schema, up_table, quoted target, cols, key cols[, reorder[, serial]]) shared by the rows
# of a table; ``reorder``: its changes may move ahead of other rows' (``_regroup``; absent: no);
# ``serial``: the target has another unique index (safe mode then never writes over another row).
KIND, META, BEFORE, AFTER, POS, SAFE = range(6)
# ``safe``: False, or why the change is written idempotently: it lies in the window a restart
# replays (safe-until: the downstream may already have it and later changes), or always
# (``safe-mode: true``; the whole transaction run again after a failure)
SAFE_REPLAY, SAFE_ALWAYS = 1, 2


def _norm(v):
    """A string key as a case-, accent- and pad-insensitive collation compares it ('E ', 'é' and
    'e' are one key of ``utf8mb4_general_ci``; 'ß' and 'ss' of ``utf8mb4_unicode_ci``), so such
    keys share a partition; putting more keys together is harmless."""
    if type(v) is not str:
        return v
    if v.isascii():
        return v.rstrip(" ").lower()
    return "".join(c for c in unicodedata.normalize("NFKD", v) if not unicodedata.combining(c)).casefold().rstrip(" ")


class Partitioner:
    """Splits chunks into ``n`` ordered partitions by (target, key) for one key map.

    ``keys`` maps "schema.table" of a downstream table to its key columns (``fetch_keys``);
    build a new partitioner when it changes."""

    def __init__(self, keys: dict[str, list[str]], n: int, generated: dict[str, set[str]] | None = None,
                 serial: AbstractSet[str] = frozenset()):
        """``generated``: "schema.table" -> generated column names of downstream tables
        (``fetch_generated``): never written, so left out of every statement.  ``serial``:
        "schema.table" of targets with another unique index (``fetch_serial``): all their
        changes go to one partition, in binlog order."""
        self.keys = {k.lower(): [c.lower() for c in v] for k, v in keys.items()}
        self.generated = {k.lower(): {c.lower() for c in v} for k, v in (generated or {}).items()}
        self.serial = {t.lower() for t in serial}
        self.n = max(1, n)
        self._meta: dict = {}

    def _resolve(self, ref):
        m = self._meta.get(ref)
        if m is None:
            tname = f"{ref.tgt_schema}.{ref.tgt_table}"
            gen = self.generated.get(tname.lower())
            keep = None
            if gen and any(c.lower() in gen for c in ref.cols):
                keep = tuple(i for i, c in enumerate(ref.cols) if c.lower() not in gen)
            cols = tuple(ref.cols[i] for i in keep) if keep is not None else ref.cols
            lower = [c.lower() for c in cols]
            kcols = self.keys.get(tname.lower())
            pk = [c.lower() for c in ref.pk]
            by_target_key = bool(kcols) and all(k in lower for k in kcols)
            if by_target_key:
                kidx = [lower.index(k) for k in kcols]
            elif pk and all(k in lower for k in pk):
                kidx = [lower.index(k) for k in pk]
            else:
                kidx = list(range(len(cols)))
            th = hash(tname.lower())
            keyless = len(kidx) == len(cols)
            serial = tname.lower() in self.serial   # another unique index: one partition, binlog order
            meta = (ref.up_schema, ref.up_table, f"{_q(ref.tgt_schema)}.{_q(ref.tgt_table)}", cols,
                    tuple(cols[i] for i in kidx), by_target_key and not keyless and not serial, serial)
            m = self._meta[ref] = (meta, tuple(kidx), th, keyless, keep, serial)
        return m

    def split(self, txns, *, held: AbstractSet = frozenset(), points: dict | None = None,
              safe_until: Position | None = None, force_safe: bool = False) -> list[list]:
        """``txns`` as in :class:`worker.binlog.contract.Chunk`; changes of ``held`` tables and
        of transactions at or before their table's point (``points``) are left out.  Returns
        the non-empty partitions."""
        n = self.n
        parts: list[list] = [[] for _ in range(n)]
        points = points or {}
        for pos, events in txns:
            # a piece of a transaction still being decoded stands with the position before it:
            # a table point there does not cover it (``worker.binlog.contract.Unfinished``)
            unfinished = type(events) is Unfinished
            safe = SAFE_ALWAYS if force_safe else SAFE_REPLAY if safe_until is not None and pos <= safe_until else False
            for kind, ref, rows in events:
                tkey = (ref.up_schema, ref.up_table)
                if tkey in held:
                    continue
                p = points.get(tkey)
                if p is not None and (pos < p if unfinished else pos <= p):
                    continue   # already applied before the last checkpoint
                meta, kidx, th, keyless, keep, serial = self._resolve(ref)
                if keep is not None:     # generated columns downstream: never written
                    if kind == UPDATE:
                        rows = [(tuple(b[i] for i in keep), tuple(a[i] for i in keep)) for b, a in rows]
                    else:
                        rows = [tuple(r[i] for i in keep) for r in rows]
                if keyless:   # whole-table scans: every change of the table in one partition
                    part = parts[th % n]
                    if kind != UPDATE:
                        part.extend([(kind, meta, row if kind == DELETE else None,
                                      row if kind == INSERT else None, pos, safe) for row in rows])
                    else:
                        part.extend([(UPDATE, meta, b, a, pos, safe) for b, a in rows])
                    continue
                single = kidx[0] if len(kidx) == 1 else None
                if kind != UPDATE:
                    for row in rows:
                        kv = _norm(row[single]) if single is not None else tuple(_norm(row[i]) for i in kidx)
                        parts[th % n if serial else hash((th, kv)) % n].append(
                            (kind, meta, row if kind == DELETE else None, row if kind == INSERT else None, pos, safe))
                    continue
                for before, after in rows:
                    if single is not None:
                        kb, ka = _norm(before[single]), _norm(after[single])
                        same = before[single] == after[single]
                    else:
                        kb, ka = tuple(_norm(before[i]) for i in kidx), tuple(_norm(after[i]) for i in kidx)
                        same = all(before[i] == after[i] for i in kidx)
                    if same:
                        parts[th % n if serial else hash((th, ka)) % n].append((UPDATE, meta, before, after, pos, safe))
                    else:
                        parts[th % n if serial else hash((th, kb)) % n].append((DELETE, meta, before, None, pos, safe))
                        parts[th % n if serial else hash((th, ka)) % n].append((INSERT, meta, None, after, pos, safe))
        return [p for p in parts if p]


# ------------------------------------------------------------------ task: apply in order
_ESCAPE = {0: "\\0", ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r", ord("\032"): "\\Z",
           ord('"'): '\\"', ord("'"): "\\'"}


class Literals:
    """SQL literals exactly as ``conn.escape`` writes them, with a fast path for the common types
    (the statement text is built here once instead of formatted value by value)."""

    def __init__(self, conn):
        if conn.server_status & SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES:
            def text(v):
                return "'" + v.replace("'", "''") + "'"
        else:
            def text(v):
                return "'" + v.translate(_ESCAPE) + "'"
        slow = conn.escape

        def dec(v):
            return format(v, "f") if v.is_finite() else slow(v)
        self._fast = {int: int.__repr__, str: text, type(None): lambda v: "NULL",
                      bytes: lambda v: "X'" + v.hex() + "'", decimal.Decimal: dec}
        self._slow = slow
        # a row of a ``VALUES`` table: ``ROW(...)`` on MySQL, ``(...)`` on MariaDB
        info = conn.get_server_info() if hasattr(conn, "get_server_info") else ""
        self.table_row = "ROW" if info and "mariadb" not in info.lower() else ""

    def value(self, v) -> str:
        return self._fast.get(type(v), self._slow)(v)

    def row(self, values) -> str:
        get, slow = self._fast.get, self._slow
        return "(" + ",".join([get(type(v), slow)(v) for v in values]) + ")"


def _statements(group: list, safe: int, lit: Literals):
    """SQL statements for a group of consecutive changes of one kind/table/column list."""
    kind = group[0][KIND]
    meta = group[0][META]
    t, cols, keys = meta[2], meta[3], meta[4]
    keyless = len(keys) == len(cols)
    clist = ", ".join(_q(c) for c in cols)
    if _joins(group, safe):
        yield from (sql for sql, _ in _updates(group, lit))
        return
    if kind == INSERT or (kind == UPDATE and not keyless):
        values = ",".join([lit.row(ch[AFTER]) for ch in group])
        if kind == INSERT:
            verb = "REPLACE" if safe else "INSERT"
            yield f"{verb} INTO {t} ({clist}) VALUES {values}"
        else:
            rest = [c for c in cols if c not in keys]
            if rest:
                upd = ", ".join(f"{_q(c)} = VALUES({_q(c)})" for c in rest)
                yield f"INSERT INTO {t} ({clist}) VALUES {values} ON DUPLICATE KEY UPDATE {upd}"
            else:
                yield f"INSERT IGNORE INTO {t} ({clist}) VALUES {values}"
        return

    def match_all(image):
        return " AND ".join(f"{_q(c)} <=> {lit.value(v)}" for c, v in zip(cols, image))
    if kind == UPDATE:  # keyless: replace one matching row
        for ch in group:
            yield f"DELETE FROM {t} WHERE {match_all(ch[BEFORE])} LIMIT 1"
            yield f"INSERT INTO {t} ({clist}) VALUES {lit.row(ch[AFTER])}"
        return
    # delete
    if keyless:
        for ch in group:
            yield f"DELETE FROM {t} WHERE {match_all(ch[BEFORE])} LIMIT 1"
        return
    kidx = [cols.index(k) for k in keys]
    if len(keys) == 1:
        i = kidx[0]
        yield f"DELETE FROM {t} WHERE {_q(keys[0])} IN ({','.join([lit.value(ch[BEFORE][i]) for ch in group])})"
    elif len(group) == 1:
        # MariaDB 10.11 reads a one-tuple ``(a, b) IN ((x, y))`` as a row comparison that a DELETE
        # does not range-scan: it scanned (and X-locked) the whole table, one delete of a sysbench
        # row behind a composite key took seconds and blocked the other sources' applies
        # (bench/vs_native.py).  Column equalities use the key; two or more tuples already do.
        image = group[0][BEFORE]
        yield f"DELETE FROM {t} WHERE " + " AND ".join(f"{_q(k)} = {lit.value(image[i])}" for k, i in zip(keys, kidx))
    else:
        kl = "(" + ", ".join(_q(k) for k in keys) + ")"
        tuples = ",".join([lit.row([ch[BEFORE][i] for i in kidx]) for ch in group])
        yield f"DELETE FROM {t} WHERE {kl} IN ({tuples})"


def _joins(group: list, safe: int) -> bool:
    """``group`` (of one kind, table and column list) is applied as ``UPDATE`` statements."""
    meta = group[0][META]
    cols, keys = meta[3], meta[4]
    return (group[0][KIND] == UPDATE and not safe and len(keys) < len(cols)
            and any(c not in keys for c in cols))


_MATCHED = re.compile(rb"Rows matched: (\d+)")


def _rows_matched(cur) -> int | None:
    """Rows an ``UPDATE`` matched (changed or not), from the server's OK packet: without the
    FOUND_ROWS capability the affected count says only how many changed."""
    result = getattr(cur, "_result", None)
    m = _MATCHED.search(getattr(result, "message", b"") or b"")
    return int(m.group(1)) if m else None


def _update_row(ch: tuple, lit: Literals) -> str:
    """One row's ``UPDATE`` of its non-key columns, found by its key."""
    meta = ch[META]
    t, cols, keys = meta[2], meta[3], meta[4]
    image = ch[AFTER]
    sets = ", ".join(f"{_q(c)} = {lit.value(v)}" for c, v in zip(cols, image) if c not in keys)
    where = " AND ".join(f"{_q(c)} = {lit.value(v)}" for c, v in zip(cols, image) if c in keys)
    return f"UPDATE {t} SET {sets} WHERE {where}"


def _updates(group: list, lit: Literals) -> list[tuple[str, list[tuple]]]:
    """Outside safe mode an update is an ``UPDATE``: it changes only the row it names, so a row
    missing downstream is not re-created and a value of another unique index that another row
    holds is a duplicate-key error.  An upsert (``INSERT ... ON DUPLICATE KEY UPDATE``) instead
    re-creates the missing row, or updates *the other row* when the new value collides on
    another unique index.  Returns each statement with the changes whose rows it must match.

    A target matched by its own key with no other unique index (``Partitioner``'s reorder flag)
    gets one statement: the rows joined with their last images (a row updated twice in the group
    ends as its last image; a join would pick either).  Any other target gets one ``UPDATE`` a
    row, in binlog order: a value may move from one row to another, and a join promises no
    order."""
    meta = group[0][META]
    if not (len(meta) > 5 and meta[5]):
        return [(_update_row(ch, lit), [ch]) for ch in group]
    t, cols, keys = meta[2], meta[3], meta[4]
    lower = [c.lower() for c in cols]
    kidx = [lower.index(k.lower()) for k in keys]
    last: dict = {}
    for ch in group:
        last[tuple(_norm(ch[AFTER][i]) for i in kidx)] = ch
    changes = list(last.values())
    if len(changes) == 1:          # no table to join
        return [(_update_row(changes[0], lit), changes)]
    # the first row names the columns; the rest are a VALUES table (as cheap for the server as the
    # VALUES list of an INSERT; a SELECT a row cost MariaDB a third more)
    rows = ("SELECT " + ", ".join(f"{lit.value(v)} AS {_q(c)}" for c, v in zip(cols, changes[0][AFTER]))
            + " UNION ALL VALUES " + ",".join(lit.table_row + lit.row(ch[AFTER]) for ch in changes[1:]))
    on = " AND ".join(f"_t.{_q(k)} = _v.{_q(k)}" for k in keys)
    sets = ", ".join(f"_t.{_q(c)} = _v.{_q(c)}" for c in cols if c not in keys)
    return [(f"UPDATE {t} AS _t JOIN ({rows}) AS _v ON {on} SET {sets}", changes)]


def _missing_rows(cur, changes: list[tuple], lit: Literals) -> list[tuple]:
    """Which of ``changes`` (one statement's, one row each) name a row the downstream does not
    have: asked after an ``UPDATE`` matched fewer rows than it named."""
    if len(changes) == 1:
        return changes
    meta = changes[0][META]
    t, keys = meta[2], meta[4]
    lower = [c.lower() for c in meta[3]]
    kidx = [lower.index(k.lower()) for k in keys]
    kl = ", ".join(_q(k) for k in keys)
    cur.execute(f"SELECT {kl} FROM {t} WHERE ({kl}) IN ("
                + ",".join(lit.row([ch[AFTER][i] for i in kidx]) for ch in changes) + ")")
    there = {tuple(_norm(v) for v in row) for row in cur.fetchall()}
    return [ch for ch in changes if tuple(_norm(ch[AFTER][i]) for i in kidx) not in there]


def _group_key(ch) -> tuple:
    """Consecutive changes with equal keys become one statement.  A keyed target's change is
    one row of a multi-row statement whatever shard it came from, so the shards of one merged
    table share a group (sysbench's OLTP transactions hit a random shard each: grouped by shard
    table, they were one statement a row); a keyless target's statements match whole rows, one
    change at a time, and stay grouped by shard table."""
    meta = ch[META]
    if len(meta[4]) == len(meta[3]):
        return ch[KIND], meta, ch[SAFE]
    return ch[KIND], meta[2], meta[3], meta[4], ch[SAFE]


def _table_runs(group: list) -> list[list]:
    """``group`` cut where the shard table changes (the groups before shards shared one)."""
    runs: list[list] = []
    for ch in group:
        if runs and runs[-1][0][META][:2] == ch[META][:2]:
            runs[-1].append(ch)
        else:
            runs.append([ch])
    return runs


def _regroup(changes: list, batch: int) -> list[list]:
    """``changes`` (one partition, binlog order) as groups of one statement each, in the order
    they run.  A change joins the latest group of its ``_group_key`` unless a change it must
    follow is in a later group.  On a reorderable target (meta[5]) it follows the changes of
    its own row and any non-reorderable change of the target; elsewhere, every change of the
    target.  A row is the target and its key values with every string value counted as one (a
    collation may make two strings one key: 'e' and 'é', 'ss' and 'ß'), so rows told apart only
    by a string keep their order.  Only changes of different rows of a reorderable target, or
    of different targets, trade places."""
    groups: list[list] = []
    latest: dict = {}       # group key -> index of its latest group
    row_last: dict = {}     # (target, key values) -> group index of the row's latest change
    wide_last: dict = {}    # target -> group index of its latest non-reorderable change
    any_last: dict = {}     # target -> highest group index holding a change of the target
    kpos: dict = {}         # meta -> key positions in the row image
    for ch in changes:
        meta = ch[META]
        t = meta[2]
        if len(meta) > 5 and meta[5]:
            ki = kpos.get(meta)
            if ki is None:
                ki = kpos[meta] = tuple(meta[3].index(k) for k in meta[4])
            image = ch[BEFORE] if ch[KIND] == DELETE else ch[AFTER]
            rk = (t, tuple([None if type(image[i]) is str else image[i] for i in ki]))
            floor = max(row_last.get(rk, -1), wide_last.get(t, -1))
        else:
            rk = None
            floor = any_last.get(t, -1)
        k = _group_key(ch)
        i = latest.get(k)
        if i is None or i < floor or len(groups[i]) >= batch:
            i = latest[k] = len(groups)
            groups.append([ch])
        else:
            groups[i].append(ch)
        if rk is not None:
            row_last[rk] = i
        else:
            wide_last[t] = i
        if i > any_last.get(t, -1):
            any_last[t] = i
    return groups


def _apply(conn, changes: list, batch: int, force_safe: bool, source_id: str) -> dict[tuple[str, str], int]:
    """Apply ``changes`` in the open transaction; returns, per upstream table, how many of its
    updates named a row the downstream does not have (applied to nothing, reported)."""
    lit = Literals(conn)
    missing: dict[tuple[str, str], int] = {}

    def run(part: list, safe: int) -> None:
        with conn.cursor() as cur:
            if safe and _guarded(part):
                _write_guarded(conn, cur, part, lit, changes, source_id, replay=safe == SAFE_REPLAY)
                return
            if not _joins(part, safe):
                for sql in _statements(part, safe, lit):
                    cur.execute(sql)
                return
            gone: list[tuple] = []
            for sql, named in _updates(part, lit):
                cur.execute(sql)
                matched = _rows_matched(cur)
                if matched is not None and matched < len(named):
                    gone += _missing_rows(cur, named, lit)
            if gone:
                _report_missing(gone, missing, source_id)

    for group in _regroup(changes, batch):
        safe = SAFE_ALWAYS if force_safe else group[0][SAFE]
        blame, failed = group[0], group
        try:
            try:
                run(group, safe)
            except pymysql.err.IntegrityError:
                runs = _table_runs(group)
                if len(runs) == 1:
                    raise
                # a keyed group is ONE statement, rolled back whole: applied again shard table by
                # shard table, in order, the run that fails names the shard whose change collided
                for part in runs:
                    blame, failed = part[0], part
                    run(part, safe)
        except pymysql.err.IntegrityError as e:
            raise _GroupFailed(e, blame, failed) from e
        except pymysql.MySQLError as e:
            if e.args and e.args[0] in LOCK_CONFLICT:
                raise   # the caller reruns the whole transaction
            meta = group[0][META]
            raise ApplyError(f"downstream rejected {group[0][KIND]} of {len(group)} row(s) into "
                             f"{meta[2]}: {server_error(e)}",
                             source=source_id, table=f"{meta[0]}.{meta[1]}",
                             position=str(group[0][POS])) from e
    return missing


_GUARDED_TRIES = 16     # holders moved for one row before its insert is left to fail as it is


def _guarded(part: list) -> bool:
    """Inserts or updates of a keyed target with another unique index (``Partitioner``'s serial flag)."""
    meta = part[0][META]
    return len(meta) > 6 and meta[6] and part[0][KIND] != DELETE and 0 < len(meta[4]) < len(meta[3])


def _write_guarded(conn, cur, part: list, lit: Literals, changes: list, source_id: str, replay: bool) -> None:
    """Safe mode on a target with another unique index, row by row in binlog order: delete the
    row's own key, insert its image.  A duplicate on another unique index means another row
    holds the value.  If a later change of this transaction writes that row again, it is this
    source's row at a later state (the replay of a batch the downstream already has): it is
    moved out of the way, and its own change restores it.  Otherwise it is another shard's row,
    or data not written by this task: the transaction is rolled back and the collision named
    (``_ValueTaken``: run again a few times, then :class:`KeyCollision`), as outside safe mode.

    ``replay``: the change lies in the window a restart replays, which can span several
    transactions; the holder may then be rewritten by a later one, which this one cannot see,
    and stopping would stop for good.  There the holder is moved out of the way as ``REPLACE``
    does (DM's safe mode), but not silently: a warning names both rows."""
    meta = part[0][META]
    t, cols, keys = meta[2], meta[3], meta[4]
    lower = [c.lower() for c in cols]
    kidx = [lower.index(k.lower()) for k in keys]
    clist = ", ".join(_q(c) for c in cols)

    def where(values) -> str:
        return " AND ".join(f"{_q(k)} = {lit.value(v)}" for k, v in zip(keys, values))
    for ch in part:
        image = ch[AFTER]
        cur.execute(f"DELETE FROM {t} WHERE {where([image[i] for i in kidx])}")
        insert = f"INSERT INTO {t} ({clist}) VALUES {lit.row(image)}"
        # one holder per unique index at most: then the insert goes through, or fails as it is
        for _ in range(_GUARDED_TRIES):
            try:
                cur.execute(insert)
                break
            except pymysql.err.IntegrityError as e:
                if e.args[0] != 1062:
                    raise
                m = _DUP_KEY.search(str(e.args[-1]))
                index = m.group(1).rsplit(".", 1)[-1] if m else ""
                index_cols = _index_columns(conn, t, index) if index else ()
                taken = _holder(conn, [ch], index_cols) if index_cols else None
                if taken is None:
                    raise
                held = taken[1]
                later = _written_later(changes, ch, held)
                if not later and not replay:
                    conn.rollback()
                    raise _ValueTaken(
                        f"{server_error(e)} in {t} (in safe mode): {_taken_rows(ch, held, index, index_cols)} "
                        f"(another shard's row, or data not written by this task).  The transaction was rolled "
                        f"back and the batch is not checkpointed; safe mode does not overwrite another row.  Make "
                        f"the values unique across shards (or the index non-unique downstream), fix one of the two "
                        f"rows, then `shardctl resume-task`", dict(source=source_id, table=f"{meta[0]}.{meta[1]}",
                                                                   position=str(ch[POS]))) from e
                if not later:
                    log.warning("safe-mode replay moved a row that holds a unique value out of the way; if it is "
                                "not this source's row (rewritten by a later change of the replay), it is lost "
                                "downstream", rows=_taken_rows(ch, held, index, index_cols), source=source_id,
                                table=f"{meta[0]}.{meta[1]}", position=str(ch[POS]))
                cur.execute(f"DELETE FROM {t} WHERE {where(held)}")
        else:
            cur.execute(insert)     # still taken after that many moves: fails with the server's error



def _written_later(changes: list, ch: tuple, held: tuple) -> bool:
    """A change after ``ch`` in ``changes`` names the row of ``ch``'s target whose key is ``held``
    (key columns by name: another shard table's rows may list the columns in another order)."""
    target = ch[META][2]
    want = tuple(_norm(v) for v in held)
    later = False
    for c in changes:
        if c is ch:
            later = True
            continue
        meta = c[META]
        if not later or meta[2] != target:
            continue
        lower = [n.lower() for n in meta[3]]
        kidx = [lower.index(k.lower()) for k in meta[4]]
        for image in (c[BEFORE], c[AFTER]):
            if image is not None and tuple(_norm(image[i]) for i in kidx) == want:
                return True
    return False


def _report_missing(gone: list, missing: dict, source_id: str) -> None:
    """Updates that matched no row: the downstream lost the row (deleted or never written there):
    counted per upstream table and logged with their keys; not re-created (safe mode would)."""
    for ch in gone:
        k = (ch[META][0], ch[META][1])
        missing[k] = missing.get(k, 0) + 1
    if gone:
        meta = gone[0][META]
        lower = [c.lower() for c in meta[3]]
        keys = [", ".join(f"{k}={ch[AFTER][lower.index(k.lower())]!r}" for k in meta[4]) for ch in gone[:5]]
        log.warning("updates of rows the downstream does not have: not applied (the downstream row was "
                    "deleted or never written there)", target=meta[2], rows=len(gone),
                    keys="; ".join(keys), source=source_id, table=f"{meta[0]}.{meta[1]}", position=str(gone[0][POS]))


_DUP_KEY = re.compile(r"for key '([^']*)'")


def _index_columns(conn, table: str, index: str) -> tuple[str, ...]:
    with conn.cursor() as cur:
        cur.execute(f"SHOW INDEX FROM {table} WHERE Key_name = %s", (index,))
        rows = sorted(cur.fetchall(), key=lambda r: r[3])     # Seq_in_index
    return tuple(r[4].lower() for r in rows)                   # Column_name


def _holder(conn, part: list, index_cols: tuple[str, ...]) -> tuple[tuple, tuple] | None:
    """The change of ``part`` whose values of the unique index ``index_cols`` a row with another
    key holds downstream, and that row's key values.  Asked inside the failed transaction (only
    the failed statement was rolled back), so it sees what the statement met."""
    meta = part[0][META]
    cols = [c.lower() for c in meta[3]]
    keys = meta[4]
    if not keys or len(keys) == len(cols) or not all(c in cols for c in index_cols):
        return None
    idx = [cols.index(c) for c in index_cols]
    kidx = [cols.index(k.lower()) for k in keys]
    lit = Literals(conn)
    with conn.cursor() as cur:
        for ch in part:
            image = ch[AFTER]
            if image is None or any(image[i] is None for i in idx):    # NULLs never collide
                continue
            where = " AND ".join(f"{_q(c)} = {lit.value(image[i])}" for c, i in zip(index_cols, idx))
            cur.execute(f"SELECT {', '.join(_q(k) for k in keys)} FROM {meta[2]} WHERE {where} LIMIT 1")
            row = cur.fetchone()
            if row is not None and tuple(_norm(v) for v in row) != tuple(_norm(image[i]) for i in kidx):
                return ch, tuple(row)
    return None


def _taken_rows(ch: tuple, held: tuple, index: str, index_cols: tuple[str, ...]) -> str:
    """Both rows of a collision on a unique index, in words."""
    meta = ch[META]
    value = dict(zip((c.lower() for c in meta[3]), ch[AFTER]))

    def shown(names, values) -> str:
        return ", ".join(f"{n}={v!r}" for n, v in zip(names, values))
    mine = shown(meta[4], [value[k.lower()] for k in meta[4]])
    return (f"the {ch[KIND]} of the row ({mine}) from {meta[0]}.{meta[1]} sets unique index `{index}` "
            f"({shown(index_cols, [value[c] for c in index_cols])}), which the row ({shown(meta[4], held)}) "
            "already holds downstream")


def keyless_points(changes: list) -> dict[tuple[str, str], Position]:
    """The last position of each upstream table of ``changes`` whose target has no key."""
    out = {}
    for ch in changes:
        meta = ch[META]
        if len(meta[4]) == len(meta[3]):
            out[(meta[0], meta[1])] = ch[POS]
    return out


def _save_points(conn, checkpoint: str | None, source_id: str, points: dict) -> None:
    """Rule 10: keyless tables' points in the apply transaction, never moved back (the
    comparison is made once, before the row's columns change)."""
    if not checkpoint or not points:
        return
    with conn.cursor() as cur:
        for (schema, table), pos in points.items():
            cur.execute(
                f"INSERT INTO {checkpoint} (id, cp_schema, cp_table, binlog_name, binlog_pos, binlog_gtid, is_global) "
                f"VALUES (%s, %s, %s, %s, %s, %s, 0) ON DUPLICATE KEY UPDATE "
                f"binlog_gtid = IF(@sm_newer := ((CAST(SUBSTRING_INDEX(binlog_name, '.', -1) AS UNSIGNED), binlog_pos)"
                f" < (%s, %s)), VALUES(binlog_gtid), binlog_gtid), "
                f"binlog_pos = IF(@sm_newer, VALUES(binlog_pos), binlog_pos), "
                f"binlog_name = IF(@sm_newer, VALUES(binlog_name), binlog_name)",
                (source_id, schema, table, pos.file, pos.pos, pos.gtid, max(0, pos.file_number), pos.pos))


def _fence(conn, checkpoint: str | None, source_id: str, epoch: int) -> None:
    """The writer's fence, first in the transaction (``worker.sync.fence``)."""
    if checkpoint and epoch:
        with conn.cursor() as cur:
            check_fence(cur, checkpoint, source_id, epoch)


def _apply_once(conn, changes: list, batch: int, source_id: str, attempt: int, checkpoint: str | None = None,
                epoch: int = 0) -> dict[tuple[str, str], int]:
    points = keyless_points(changes) if checkpoint else {}
    try:
        missing = _apply(conn, changes, batch, False, source_id)
        _save_points(conn, checkpoint, source_id, points)
        failpoint("apply-before-commit")
        _fence(conn, checkpoint, source_id, epoch)    # last: the epoch row is share-locked only to commit
        conn.commit()
        return missing
    except _GroupFailed as f:
        e, ch = f.error, f.change
        meta = ch[META]
        index, taken = "", None
        cols: tuple[str, ...] = ()
        if e.args[0] == 1062 and not ch[SAFE] and attempt == 0:
            m = _DUP_KEY.search(str(e.args[-1]))
            index = m.group(1).rsplit(".", 1)[-1] if m else ""
            cols = _index_columns(conn, meta[2], index) if index else ()
            if cols and cols != tuple(k.lower() for k in meta[4]):
                taken = _holder(conn, f.part, cols)
        conn.rollback()
    where = dict(source=source_id, table=f"{meta[0]}.{meta[1]}", position=str(ch[POS]))
    if e.args[0] != 1062 or ch[SAFE]:
        raise ApplyError(f"downstream integrity error on {meta[2]}: {server_error(e)}", **where) from e
    if attempt == 0:
        if cols and cols != tuple(k.lower() for k in meta[4]):
            # another unique index: in binlog order within this source, so the holder is another
            # shard's row (maybe of a source about to give the value up: the caller runs the
            # transaction again a few times) or data not written by this task
            if taken is not None:
                tch, held = taken
                where["position"] = str(tch[POS])
                rows = _taken_rows(tch, held, index, cols)
            else:
                rows = f"a {ch[KIND]} from {meta[0]}.{meta[1]} takes a value of unique index `{index}` ({', '.join(cols)}) another row holds"
            raise _ValueTaken(
                f"{server_error(e)} in {meta[2]}: {rows} (another shard's row, or data not written by this "
                f"task).  The transaction was rolled back and the batch is not checkpointed.  Make the values "
                f"unique across shards (or the index non-unique downstream), fix one of the two rows, then "
                f"`shardctl resume-task` (a replay in safe mode meets the same collision: it does not "
                f"overwrite the row that holds the value either)", where) from e
        if cols and cols == tuple(k.lower() for k in meta[4]):
            raise KeyCollision(
                f"{server_error(e)} in {meta[2]}: the {ch[KIND]} from {meta[0]}.{meta[1]} has the key "
                f"({', '.join(meta[4])}) of a row already there (another shard's, or data not written by "
                f"this task); its transaction was rolled back and the batch is not checkpointed.  Make the "
                f"key unique across shards (e.g. add the shard as a key column) and fix the row, then "
                f"`shardctl resume-task`; resuming without a fix replays the batch in safe mode, where the "
                f"later row overwrites the earlier one (as `safe-mode: true` in the task's syncer config "
                f"does throughout)", **where) from e
    try:
        _apply(conn, changes, batch, True, source_id)   # replayed (or reordered) rows: make them idempotent
        _save_points(conn, checkpoint, source_id, points)
        _fence(conn, checkpoint, source_id, epoch)
    except _GroupFailed as again:
        ch = again.change
        raise ApplyError(f"downstream integrity error on {ch[META][2]} (in safe mode): {server_error(again.error)}",
                         source=source_id, table=f"{ch[META][0]}.{ch[META][1]}",
                         position=str(ch[POS])) from again.error
    conn.commit()
    return {}


def apply_changes(changes: list, *, db_kwargs: dict, batch: int, source_id: str,
                  time_zone: str | None = None, attempt: int = 0, checkpoint: str | None = None,
                  epoch: int = 0, conn=None) -> dict:
    """Apply one partition's changes (binlog order) in one transaction; its acknowledgement.
    ``attempt`` > 0 marks a retried Spark task (its first attempt may have committed).
    ``checkpoint``: the checkpoint table (quoted), where keyless tables' points are moved in
    the same transaction (rule 10); ``epoch``: the writer's fence, checked there too.
    ``conn``: a kept downstream connection (the apply stream's), left open; else one is
    opened for this call."""
    if not changes:
        return {}
    own = conn is None
    if own:
        conn = connect_downstream(db_kwargs, time_zone=time_zone)
    try:
        missing: dict[tuple[str, str], int] = {}
        for tries in range(LOCK_RETRIES + 1):
            try:
                missing = _apply_once(conn, changes, batch, source_id, attempt, checkpoint, epoch)
                break
            except _ValueTaken as t:
                if tries == LOCK_RETRIES:
                    raise KeyCollision(f"{t.message} (still held after {tries + 1} attempts)", **t.where) from t
                log.warning("a unique value is held by another row downstream; running the transaction again",
                            attempt=tries + 1, **t.where)
                time.sleep(min(2.0, 0.05 * 2 ** tries) * (0.5 + random.random()))
            except pymysql.err.OperationalError as e:
                conn.rollback()
                if not (e.args and e.args[0] in LOCK_CONFLICT):
                    raise
                if tries == LOCK_RETRIES:
                    meta = changes[0][META]
                    raise ApplyError(f"downstream lock conflict persisted after {tries + 1} attempts "
                                     f"on {meta[2]}: {server_error(e)}", source=source_id,
                                     table=f"{meta[0]}.{meta[1]}", position=str(changes[0][POS])) from e
                time.sleep(min(2.0, 0.05 * 2 ** tries) * (0.5 + random.random()))
    except BaseException:
        try:
            conn.rollback()
        except Exception:
            pass
        raise
    finally:
        if own:
            conn.close()
    ack: dict = {}
    for ch in changes:   # binlog order: the last change of a table has its highest position
        meta, pos = ch[META], ch[POS]
        k = (meta[0], meta[1])
        cur = ack.get(k)
        if cur is None:
            ack[k] = [pos.file, pos.pos, pos.gtid, 1, missing.get(k, 0)]
        else:
            cur[0], cur[1], cur[2], cur[3] = pos.file, pos.pos, pos.gtid, cur[3] + 1
    return ack


def apply_partition(parts, **kw):
    """Spark ``mapPartitions`` function: each element is one partition's list of changes."""
    from pyspark import TaskContext   # on the executor: the driver imports this module without pyspark
    tc = TaskContext.get()
    attempt = tc.attemptNumber() if tc is not None else 0
    for changes in parts:
        yield apply_changes(changes, attempt=attempt, **kw)
