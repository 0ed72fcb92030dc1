"""Which downstream table a previewed statement changes, and which shard tables run it.

The statement may name the merged target (``shop.orders``) or any shard table routed to it
(``shop_01.orders_0``); an unqualified name must match exactly one of them.  The shards are the
members the workers listed in their SourceTables (what the lock itself takes as its members),
narrowed by ``-s SOURCE`` and ``--tables PATTERN`` (a glob on ``schema.table`` or ``table``)."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Sequence

from coordinator.etcdproto import LockKey, SourceTables, TableRef
from coordinator.schema import SchemaError, split_ddl
from coordinator.schema.canonical import canonical_ddl
from coordinator.schema.kinds import ClauseKind, Route, kinds_routed
from coordinator.schema.split import rename_ddl_table
from coordinator.schema.statement import parse_statement

from .errors import BadStatement, TableNotInTask

# statements a shard lock coordinates (their row's route, coordinator.schema.kinds.KIND_ROWS)
_COORDINATED = kinds_routed(Route.COORDINATE)

# MySQL/MariaDB table options: the schema model reads any ``NAME [=] value`` pair as one, so a
# misspelt clause (``ADDD COLUMN c INT``) would pass as an option; the preview refuses it
_TABLE_OPTIONS = {
    "ENGINE", "AUTO_INCREMENT", "AVG_ROW_LENGTH", "CHARACTER_SET", "CHARSET", "DEFAULT", "CHECKSUM", "COLLATE",
    "COMMENT", "COMPRESSION", "CONNECTION", "DATA_DIRECTORY", "DATA", "INDEX_DIRECTORY", "INDEX", "DELAY_KEY_WRITE",
    "ENCRYPTION", "ENCRYPTED", "ENCRYPTION_KEY_ID", "INSERT_METHOD", "KEY_BLOCK_SIZE", "MAX_ROWS", "MIN_ROWS",
    "PACK_KEYS", "PASSWORD", "ROW_FORMAT", "STATS_AUTO_RECALC", "STATS_PERSISTENT", "STATS_SAMPLE_PAGES",
    "TABLESPACE", "UNION", "PAGE_CHECKSUM", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL", "TRANSACTIONAL",
    "IETF_QUOTES", "SEQUENCE", "WITH", "WITHOUT", "STORAGE", "SECONDARY_ENGINE", "AUTOEXTEND_SIZE",
    "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "START", "CONVERT"}


@dataclass(frozen=True)
class Statement:
    """One previewed upstream statement: its single-change parts (as the worker splits it) and
    the table it names."""
    sql: str
    parts: tuple[str, ...]
    schema: str            # "" when unqualified
    table: str

    def routed(self, key: LockKey) -> list[str]:
        """The parts as the lock and the downstream see them (worker.shardddl.routed_ddls)."""
        return [canonical_ddl(rename_ddl_table(p, (key.down_schema, key.down_table))) for p in self.parts]


def parse(sql: str, where: str = "the statement") -> Statement:
    """``sql`` read as the worker would read it from the binlog; ``BadStatement`` names it."""
    text = sql.strip().rstrip(";").strip()
    if not text:
        raise BadStatement(f"{where} is empty; give one ALTER TABLE / CREATE INDEX / DROP INDEX statement")
    try:
        st = parse_statement(text)
        parts = tuple(split_ddl(text))
    except (SchemaError, ValueError) as e:
        raise BadStatement(f"{where} {text!r} does not parse: {e}; give one ALTER TABLE / CREATE INDEX / "
                           "DROP INDEX statement as MySQL/MariaDB accept it", statement=text[:200]) from None
    if st.kind not in _COORDINATED:
        raise BadStatement(f"{where} {text!r} is a {st.kind.value.replace('_', ' ').upper()} statement; "
                           "ddl-preview previews what a shard lock coordinates: ALTER TABLE, CREATE INDEX, "
                           "DROP INDEX", statement=text[:200])
    for c in st.clauses:
        if "def" in (c.data or {}) and not str(c.data["def"]).strip():
            raise BadStatement(f"{where} {text!r} does not parse: {c.text!r} has no column definition; give one "
                               "ALTER TABLE / CREATE INDEX / DROP INDEX statement as MySQL/MariaDB accept it",
                               statement=text[:200])
        unknown = [" ".join(o) for o in (c.data or {}).get("options", ()) if c.kind is ClauseKind.TABLE_OPTIONS
                   and str(o[0]).upper().replace(" ", "_") not in _TABLE_OPTIONS]
        if unknown:
            raise BadStatement(f"{where} {text!r} does not parse: {c.text!r} is neither an ALTER TABLE clause nor a "
                               "table option; give one ALTER TABLE / CREATE INDEX / DROP INDEX statement as "
                               "MySQL/MariaDB accept it", statement=text[:200])
    if not parts:
        raise BadStatement(f"{where} {text!r} changes nothing (only ALGORITHM/LOCK options)", statement=text[:200])
    schema, table = st.table if st.table else (None, "")
    return Statement(text, parts, schema or "", table)


def resolve_target(stmt: Statement, task: str, tables: list[SourceTables]) -> LockKey:
    """The merged target the statement's table is (or is routed to)."""
    targets: dict[tuple[str, str], set[TableRef]] = {}
    for st in tables:
        for (ds, dt), ups in st.targets().items():
            targets.setdefault((ds, dt), set()).update(TableRef(st.source, us, ut) for us, ut in ups)
    name = f"{stmt.schema}.{stmt.table}" if stmt.schema else stmt.table

    def same(a: str, b: str) -> bool:
        return a.lower() == b.lower()

    hits = {k for k in targets if same(k[1], stmt.table) and (not stmt.schema or same(k[0], stmt.schema))}
    if not hits:
        hits = {k for k, ups in targets.items() for t in ups
                if same(t.table, stmt.table) and (not stmt.schema or same(t.schema, stmt.schema))}
    if len(hits) == 1:
        ds, dt = next(iter(hits))
        return LockKey(task, ds, dt)
    known = ", ".join(f"{ds}.{dt}" for ds, dt in sorted(targets)[:10]) or "none (no worker listed its tables yet)"
    if hits:
        raise TableNotInTask(f"table {name} of the statement matches several targets of task {task} "
                             f"({', '.join(f'{a}.{b}' for a, b in sorted(hits))}); qualify it with its schema",
                             task=task, table=name)
    raise TableNotInTask(f"table {name} of the statement is not in task {task}: it is neither a merged target "
                         f"nor a shard table routed by the task; its targets are {known}", task=task, table=name)


def shards(key: LockKey, tables: list[SourceTables], sources: Sequence[str] = (), pattern: str = "") -> list[TableRef]:
    """The target's shard tables, narrowed by ``sources`` (in that order) and ``pattern``."""
    by_source: dict[str, list[TableRef]] = {}
    for st in tables:
        by_source.setdefault(st.source, []).extend(
            TableRef(st.source, us, ut) for us, ut in sorted(st.members(key.down_schema, key.down_table)))
    unknown = [s for s in sources if s not in by_source]
    if unknown:
        raise TableNotInTask(f"source(s) {', '.join(unknown)} have no shard table of {key.down_schema}."
                             f"{key.down_table} in task {key.task}; its sources are "
                             f"{', '.join(sorted(s for s, v in by_source.items() if v)) or 'none'}",
                             task=key.task, source=",".join(unknown))
    order = list(sources) if sources else sorted(by_source)
    out = [t for s in order for t in by_source.get(s, [])]
    if pattern:
        out = [t for t in out if fnmatch.fnmatchcase(f"{t.schema}.{t.table}", pattern)
               or fnmatch.fnmatchcase(t.table, pattern)]
    if not out:
        what = f" matching --tables {pattern!r}" if pattern else ""
        raise TableNotInTask(f"no shard table of {key.down_schema}.{key.down_table} in task {key.task}{what}"
                             + (f" on source(s) {', '.join(sources)}" if sources else ""),
                             task=key.task, table=f"{key.down_schema}.{key.down_table}")
    return out
