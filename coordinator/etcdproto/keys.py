"""Key layout under one prefix (default ``/shardmerge/``).

Each name component is percent-encoded (RFC 3986 unreserved characters stay readable, ``/``
and ``%`` and everything else become ``%XX``), so keys stay legible in ``etcdctl get --prefix``
while a ``/`` inside a table name can never change a key's arity.  Empty components are
rejected (DM's path-join silently dropped them and broke arity).

Info, Operation, done-mark and dropped-column keys start with the *lock* components
``task / down_schema / down_table``: all records of one lock are one prefix range per kind, so
lock removal is a single transaction with one range compare and four range deletes, whatever the
number of shard tables (etcd's default limit is 128 operations per transaction).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
import functools
from urllib.parse import quote, unquote

from coordinator.sql import quote_table

from .errors import BadKey

DEFAULT_PREFIX = "/shardmerge/"

# kind -> component names (full arity).  A key with fewer components + "/" is a range prefix.
KINDS: dict[str, tuple[str, ...]] = {
    "leader": (),
    "source": ("source",),
    "worker": ("worker",),
    "master": ("member",),
    "binding": ("source",),
    "task": ("task",),
    "source-tables": ("task", "source"),
    "info": ("task", "down_schema", "down_table", "source", "up_schema", "up_table"),
    "operation": ("task", "down_schema", "down_table", "source", "up_schema", "up_table"),
    # a worker's done mark of the table's Operation (operation.py: DoneMark)
    "done": ("task", "down_schema", "down_table", "source", "up_schema", "up_table"),
    "dropped-column": ("task", "down_schema", "down_table", "column", "source", "up_schema", "up_table"),
    # the schema a table left a lock with, kept once the lock is removed (remnant.py)
    "remnant": ("task", "down_schema", "down_table", "source", "up_schema", "up_table"),
    "status": ("task", "source"),
    # operator's `binlog skip` for one statement; ``position`` = "FILE:POS" of the statement's start
    "binlog-skip": ("task", "source", "position"),
    # operator's `binlog-schema list|update|delete` of one upstream table, answered by the worker
    "schema-op": ("task", "source", "up_schema", "up_table"),
}


def encode_component(name: str, what: str = "name") -> str:
    if not isinstance(name, str) or name == "":
        raise BadKey(f"empty or non-string {what} {name!r} cannot be part of an etcd key")
    return _quoted(name)


@functools.lru_cache(maxsize=65536)
def _quoted(name: str) -> str:
    """A big lock writes every table's keys several times; quoting was a tenth of its cost."""
    return quote(name, safe="")


def normalize_prefix(prefix: str) -> str:
    if not prefix or not prefix.startswith("/"):
        raise BadKey(f"etcd key prefix {prefix!r} must start with '/' (example: /shardmerge/)")
    return prefix if prefix.endswith("/") else prefix + "/"


@dataclass(frozen=True)
class LockKey:
    """Identity of a lock: one downstream table of one task."""
    task: str
    down_schema: str
    down_table: str

    @property
    def id(self) -> str:
        return lock_id(self.task, self.down_schema, self.down_table)


@dataclass(frozen=True)
class TableRef:
    """One upstream shard table: (source, up_schema, up_table)."""
    source: str
    schema: str
    table: str

    def __str__(self) -> str:  # the form show-ddl-locks prints
        return f"{self.source}-{quote_name(self.schema, self.table)}"


def quote_name(schema: str, table: str) -> str:
    return quote_table(schema, table)


def lock_id(task: str, down_schema: str, down_table: str) -> str:
    """``<task>-`schema`.`table```, the ID users pass to ``shardctl shard-ddl-lock unlock``."""
    return f"{task}-{quote_name(down_schema, down_table)}"


_LOCK_ID = re.compile(r"^(.+)-`((?:[^`]|``)*)`\.`((?:[^`]|``)*)`$")


def parse_lock_id(text: str) -> LockKey:
    """Inverse of :func:`lock_id`; raises ``BadKey`` naming the input when it is not a lock ID."""
    m = _LOCK_ID.match(text or "")
    if not m:
        raise BadKey(f"{text!r} is not a lock ID; expected <task>-`<schema>`.`<table>` "
                     "(copy it from shard-ddl-lock output)")
    return LockKey(m.group(1), m.group(2).replace("``", "`"), m.group(3).replace("``", "`"))


def parse_table_ref(text: str) -> TableRef:
    """Inverse of ``str(TableRef)`` (``source-`schema`.`table```, as an Operation's ``runner``);
    raises ``BadKey`` naming the input."""
    m = _LOCK_ID.match(text or "")
    if not m:
        raise BadKey(f"{text!r} is not a shard table; expected <source>-`<schema>`.`<table>`")
    return TableRef(m.group(1), m.group(2).replace("``", "`"), m.group(3).replace("``", "`"))


class Keys:
    """Builds and parses every key of the layout under ``prefix``."""

    _CACHED = 32_768    # full keys remembered (a big lock builds each table's keys several times)

    def __init__(self, prefix: str = DEFAULT_PREFIX):
        self.prefix = normalize_prefix(prefix)
        self._full: dict[tuple, str] = {}

    def key(self, kind: str, *parts: str) -> str:
        """Full key (all components) or, with fewer components, a range prefix ending in ``/``."""
        try:
            hit = self._full.get((kind, parts))
        except TypeError:     # an unhashable component: encode_component names it below
            hit = None
        if hit is not None:
            return hit
        names = KINDS[kind]
        if len(parts) > len(names):
            raise BadKey(f"{kind} keys have {len(names)} components {names}, got {len(parts)}: {parts}")
        base = self.prefix + kind
        if not names:
            return base
        enc = [encode_component(p, names[i]) for i, p in enumerate(parts)]
        if len(parts) < len(names):
            return base + "/" + "/".join(enc) + "/" if enc else base + "/"
        if len(self._full) >= self._CACHED:
            self._full.clear()
        full = self._full[(kind, parts)] = base + "/" + "/".join(enc)
        return full

    def parse(self, key: str | bytes) -> tuple[str, dict]:
        """``(kind, {component: value})`` for a full key of this layout; ``BadKey`` otherwise."""
        if isinstance(key, bytes):
            key = key.decode("utf-8", "replace")
        if not key.startswith(self.prefix):
            raise BadKey(f"key {key!r} is not under prefix {self.prefix!r}")
        rest = key[len(self.prefix):].split("/")
        kind, comps = rest[0], rest[1:]
        if kind not in KINDS:
            raise BadKey(f"key {key!r}: unknown record kind {kind!r}")
        names = KINDS[kind]
        if len(comps) != len(names) or "" in comps:
            raise BadKey(f"key {key!r}: {kind} keys have components {names}")
        # most components need no unquoting (a big lock's watch parses thousands of keys)
        return kind, {n: unquote(c) if "%" in c else c for n, c in zip(names, comps)}

    # --- convenience builders (full keys) ---
    def leader(self) -> str:
        return self.key("leader")

    def info(self, task: str, down_schema: str, down_table: str, source: str, up_schema: str,
             up_table: str) -> str:
        return self.key("info", task, down_schema, down_table, source, up_schema, up_table)

    def operation(self, task: str, down_schema: str, down_table: str, source: str, up_schema: str,
                  up_table: str) -> str:
        return self.key("operation", task, down_schema, down_table, source, up_schema, up_table)

    def dropped_column(self, lock: LockKey, column: str, source: str, up_schema: str, up_table: str) -> str:
        return self.key("dropped-column", lock.task, lock.down_schema, lock.down_table,
                        column, source, up_schema, up_table)

    def binlog_skip(self, task: str, source: str, file: str, pos: int) -> str:
        return self.key("binlog-skip", task, source, f"{file}:{pos}")

    def lock_prefix(self, kind: str, lock: LockKey) -> str:
        """Range prefix of all ``kind`` records (info/operation/dropped-column) of one lock."""
        return self.key(kind, lock.task, lock.down_schema, lock.down_table)
