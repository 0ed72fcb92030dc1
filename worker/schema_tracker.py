"""Upstream table schemas as of the binlog position the worker is at.

Row events carry values, a DDL changes the table: the worker must know each upstream table's
shape at *its* position, not the shape the upstream has now.  The tracker starts from the
schema stored with each table checkpoint (or, for a table never seen, ``SHOW CREATE TABLE``
on the upstream), then follows every DDL of the binlog through ``coordinator.schema``.

The schema of a table is saved with its checkpoint (``table_info`` column, JSON text from
:func:`schema_to_json`), so after a restart the tracker is rebuilt from the checkpoints alone
and agrees with them (schema state and checkpoints never disagree).

For a sharded DDL the coordinator needs the schema *before* and after *each* single-change
statement (:meth:`SchemaTracker.preview`); it commits them only once the Operation allows it,
and rolls back otherwise.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from coordinator.errors import ShardMergeError
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.errors import SchemaError
from coordinator.schema.kinds import StatementKind, Track
from coordinator.schema.model import TableSchema
from coordinator.schema.parse import parse_create_table
from coordinator.schema.statement import create_like_source, parse_statement
from coordinator.sql import show_create_table


class SchemaTrackError(ShardMergeError):
    """A DDL could not be applied to the tracked schema, or a schema could not be read;
    names the source, the table, the statement and (when known) the binlog position."""


def schema_to_json(schema: TableSchema | None) -> str:
    """Text for the checkpoint's ``table_info`` column (``"null"`` for an absent table)."""
    return json.dumps(None if schema is None else schema.to_json(), sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)


def schema_from_json(text: str | bytes | dict | None) -> TableSchema | None:
    """Inverse of :func:`schema_to_json`; accepts the text, a parsed dict, or SQL NULL."""
    if text is None:
        return None
    if isinstance(text, (str, bytes)):
        try:
            text = json.loads(text)
        except ValueError as e:
            raise SchemaTrackError(f"stored table schema is not JSON: {e}") from None
    if text is None:
        return None
    try:
        return TableSchema.from_json(text)
    except (KeyError, TypeError, ValueError) as e:
        raise SchemaTrackError(f"stored table schema is not a shardmerge schema: {e!r}") from None




@dataclass(frozen=True)
class Preview:
    """Schemas around a DDL: ``before`` (None for CREATE TABLE) and one ``afters[i]`` after each
    statement (None after DROP TABLE)."""
    schema: str
    table: str
    statements: tuple[str, ...]
    before: TableSchema | None
    afters: tuple[TableSchema | None, ...]

    @property
    def after(self) -> TableSchema | None:
        return self.afters[-1] if self.afters else self.before


class SchemaTracker:
    """Tracked schemas of one source's upstream tables, keyed by exact (schema, table) names
    (MariaDB on Linux compares table names case-sensitively).  Thread-safe."""

    def __init__(self, source: str = "", connect=None):
        """``connect()`` returns a pymysql connection to the upstream (for tables not yet
        tracked); without it unknown tables raise ``SchemaTrackError``."""
        self.source = source
        self._connect = connect
        self._tables: dict[tuple[str, str], TableSchema] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ reading
    @property
    def can_load(self) -> bool:
        """True when unknown tables can be read from the upstream."""
        return self._connect is not None

    def get(self, schema: str, table: str) -> TableSchema | None:
        with self._lock:
            return self._tables.get((schema, table))

    def tables(self) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(self._tables)

    def __contains__(self, item) -> bool:
        with self._lock:
            return tuple(item) in self._tables

    def ensure(self, schema: str, table: str, *, position: str = "") -> TableSchema | None:
        """The tracked schema, loading it from the upstream the first time.  The upstream's
        *current* shape is the best we have for a table that has neither a checkpoint nor a
        CREATE TABLE in the binlog we read; it is stored with the table's checkpoint at once."""
        with self._lock:
            cur = self._tables.get((schema, table))
            if cur is not None or self._connect is None:
                return cur
            return self.load_upstream(schema, table, position=position)

    def load_upstream(self, schema: str, table: str, *, position: str = "") -> TableSchema | None:
        """(Re)read one table's schema with ``SHOW CREATE TABLE`` and track it."""
        if self._connect is None:
            raise SchemaTrackError("no upstream connection to read the table schema from",
                                   source=self.source, table=f"{schema}.{table}", position=position)
        try:
            conn = self._connect()
            try:
                sql = show_create_table(conn, schema, table)
            finally:
                conn.close()
        except SchemaTrackError:
            raise
        except Exception as e:  # pymysql errors: name the table and the server error
            raise SchemaTrackError(f"cannot read the schema of `{schema}`.`{table}` from the upstream: {e}",
                                   source=self.source, table=f"{schema}.{table}", position=position) from e
        if sql is None:
            return None
        try:
            ts = parse_create_table(sql).with_name(table)
        except SchemaError as e:
            raise SchemaTrackError(f"cannot model the upstream schema of `{schema}`.`{table}`: {e}",
                                   source=self.source, table=f"{schema}.{table}", position=position) from e
        self.set(schema, table, ts)
        return ts

    def load_all_upstream(self, tables) -> dict[tuple[str, str], TableSchema | None]:
        """Read many tables at once (subtask start without checkpoints): one connection."""
        out = {}
        if self._connect is None:
            raise SchemaTrackError("no upstream connection to read table schemas from", source=self.source)
        conn = self._connect()
        try:
            for schema, table in tables:
                sql = show_create_table(conn, schema, table)
                try:
                    ts = None if sql is None else parse_create_table(sql).with_name(table)
                except SchemaError:
                    continue   # not modelled: left untracked, ensure() reports it on first use
                self.set(schema, table, ts)
                out[(schema, table)] = ts
        finally:
            conn.close()
        return out

    # ------------------------------------------------------------------ writing
    def set(self, schema: str, table: str, ts: TableSchema | None) -> None:
        """Track ``ts`` for the table (None forgets it: the table does not exist)."""
        with self._lock:
            if ts is None:
                self._tables.pop((schema, table), None)
            else:
                self._tables[(schema, table)] = ts.with_name(table)

    def forget(self, schema: str, table: str) -> None:
        self.set(schema, table, None)

    def forget_schema(self, schema: str) -> None:
        """DROP DATABASE upstream."""
        with self._lock:
            for k in [k for k in self._tables if k[0] == schema]:
                del self._tables[k]

    def load_checkpoint(self, schema: str, table: str, table_info) -> TableSchema | None:
        """Track the schema stored with a table checkpoint (``table_info`` text/dict/None).
        A NULL ``table_info`` leaves the table untracked (it is loaded on first use)."""
        ts = schema_from_json(table_info)
        if ts is not None:
            self.set(schema, table, ts)
        return ts

    def preview(self, schema: str, table: str, statements, *, position: str = "") -> Preview:
        """Apply single-change ``statements`` (already split) to a copy of the table's schema;
        the tracker itself is unchanged.  ``SchemaTrackError`` names the failing statement."""
        statements = tuple(statements)
        before = None
        first_kind = _kind(statements[0]) if statements else None
        if first_kind is None or first_kind.row.track is not Track.CREATE:
            before = self.ensure(schema, table, position=position)
        else:
            before = self.get(schema, table)
        cur = before
        afters = []
        for sql in statements:
            try:
                like = create_like_source(sql)
                cur = self._copy_model(schema, table, like, sql, position) if like else _apply(cur, sql, table)
            except SchemaError as e:
                raise SchemaTrackError(f"cannot apply DDL to the tracked schema of `{schema}`.`{table}`: "
                                       f"{e}", source=self.source, table=f"{schema}.{table}",
                                       position=position, statement=sql) from e
            afters.append(cur)
        return Preview(schema, table, statements, before, tuple(afters))

    def _copy_model(self, schema: str, table: str, like: tuple[str | None, str], sql: str,
                    position: str) -> TableSchema:
        """``CREATE TABLE table LIKE model``: the tracked model (read from the upstream only when
        it was never tracked), renamed."""
        m_schema, m_table = like[0] or schema, like[1]
        model = self.ensure(m_schema, m_table, position=position)
        if model is None:
            raise SchemaTrackError(f"CREATE TABLE ... LIKE `{m_schema}`.`{m_table}`: the model table is not "
                                   f"tracked and cannot be read from the upstream", source=self.source,
                                   table=f"{schema}.{table}", position=position, statement=sql)
        return model.with_name(table)

    def commit(self, p: Preview) -> None:
        """Make the previewed result the tracked schema."""
        self.set(p.schema, p.table, p.after)

    def apply(self, schema: str, table: str, statements, *, position: str = "") -> Preview:
        """Preview and commit in one step (non-coordinated DDLs)."""
        p = self.preview(schema, table, statements, position=position)
        self.commit(p)
        return p

    # ------------------------------------------------------------------ whole-tracker JSON
    def to_json(self) -> dict:
        """``{"schema.table": <schema json>}`` keyed by JSON-encoded [schema, table] pairs
        (names may contain dots)."""
        with self._lock:
            return {json.dumps([s, t]): v.to_json() for (s, t), v in sorted(self._tables.items())}

    @classmethod
    def from_json(cls, d: dict, source: str = "", connect=None) -> "SchemaTracker":
        tr = cls(source, connect)
        for k, v in d.items():
            s, t = json.loads(k)
            tr.set(s, t, TableSchema.from_json(v))
        return tr


def _kind(sql: str) -> StatementKind:
    try:
        return parse_statement(sql).kind
    except SchemaError:   # CREATE TABLE ... LIKE is not modelled from the text, but is a CREATE
        return StatementKind.CREATE_TABLE if create_like_source(sql) else StatementKind.OTHER


def _apply(cur: TableSchema | None, sql: str, table: str) -> TableSchema | None:
    out = apply_ddl(cur, sql)
    return None if out is None else out.with_name(table)
