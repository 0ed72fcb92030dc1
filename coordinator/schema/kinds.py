"""The one DDL classifier: what kind of statement a binlog query is and which tables it names.

Used by the worker (routing, the shard-DDL path, ``binlog skip``) and by ``coordinator.schema``
(``statement.parse_statement`` takes its kind from here), so a statement has one kind everywhere.
What the worker does with a kind is its row in :data:`KIND_ROWS`, read instead of branching on the
kind; the changes inside an ALTER TABLE are :class:`ClauseKind`.
Rewriting replaces only the table-name tokens and keeps every other byte of the statement:
regenerating SQL through a parser loses MariaDB-only syntax, and the downstream must see the
user's statement.  A bare table name belongs to the event's session database
(``QueryEvent.schema``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from sqlglot.tokens import TokenType

from coordinator.errors import ShardMergeError
from coordinator.sql import quote_table

from .lexer import mysql_tokens


class StatementKind(str, Enum):
    """Kinds of statement the binlog carries; a ``str`` so records and logs keep plain text
    (``DDLEvent.kind`` holds the value).  Each kind has its row in :data:`KIND_ROWS`."""
    CREATE_TABLE = "create_table"
    ALTER_TABLE = "alter_table"
    DROP_TABLE = "drop_table"
    TRUNCATE_TABLE = "truncate_table"
    RENAME_TABLE = "rename_table"
    CREATE_INDEX = "create_index"
    DROP_INDEX = "drop_index"
    CREATE_DATABASE = "create_database"
    ALTER_DATABASE = "alter_database"
    DROP_DATABASE = "drop_database"
    OTHER = "other"          # a DDL we do not replicate (CREATE VIEW, temporary tables, ...)
    NOT_DDL = "not_ddl"      # BEGIN/COMMIT/SET/DML

    def __str__(self) -> str:
        return self.value

    @property
    def on_table(self) -> bool:
        return self.row.expand is not Expand.DATABASE

    @property
    def row(self) -> KindRow:
        return KIND_ROWS[self]


class ClauseKind(str, Enum):
    """One change inside an ALTER TABLE (``statement.Clause.kind``); a ``str`` whose value is the
    name the clause always had, so anything printing or comparing it sees the same text."""
    ADD_COLUMN = "add_column"
    DROP_COLUMN = "drop_column"
    MODIFY_COLUMN = "modify_column"
    CHANGE_COLUMN = "change_column"
    RENAME_COLUMN = "rename_column"
    ALTER_DEFAULT = "alter_default"
    COLUMN_VISIBILITY = "column_visibility"
    ADD_INDEX = "add_index"
    DROP_INDEX = "drop_index"
    RENAME_INDEX = "rename_index"
    ALTER_INDEX = "alter_index"
    TABLE_OPTIONS = "table_options"
    CONVERT_CHARSET = "convert_charset"
    RENAME_TABLE = "rename_table"
    NOOP = "noop"            # ALGORITHM= / LOCK= / FORCE / a CHECK constraint: changes nothing here

    def __str__(self) -> str:
        return self.value


# ----------------------------------------------------------------------------- one row per kind
class Route(Enum):
    """The shard-DDL path of a table statement (``worker.shardddl.decision.route_kind``)."""
    COORDINATE = "coordinate"   # ALTER / CREATE INDEX / DROP INDEX: Info -> lock -> Operation
    CREATE = "create"           # a new shard table: created downstream if missing, joins the lock
    DROP = "drop"               # a shard table leaves: nothing runs downstream
    IGNORE = "ignore"           # TRUNCATE of one shard: the merged table keeps the others' rows
    REFUSE = "refuse"           # RENAME TABLE: not supported in optimistic mode
    PASS_THROUGH = "pass"       # ADD / DROP PARTITION: run on the target as written, no lock
    NONE = "none"               # not a table statement: never reaches the shard path


class Direct(Enum):
    """What a statement runs downstream when no lock coordinates it
    (``worker.sync.ddl_handler.direct_decision``)."""
    NOT_REPLICATED = "not_replicated"     # nothing runs: not a statement we replicate
    CREATE_DATABASE = "create_database"   # ``CREATE DATABASE IF NOT EXISTS`` the target schema
    DATABASE_SKIPPED = "database_skipped"  # nothing runs: database-level statement not propagated
    REWRITE = "rewrite"                   # the statement on its routed target(s) (CREATE made IF NOT EXISTS)
    DROP_TARGET = "drop_target"           # ``DROP TABLE IF EXISTS`` the routed target
    SHARD_SKIPPED = "shard_skipped"       # nothing runs: one shard's change is not the merged table's
    REFUSE = "refuse"                     # an error the operator resolves (RENAME of a sharded table)


class Track(Enum):
    """How the upstream table's tracked schema follows the statement."""
    NONE = "none"            # no table schema changes
    CREATE = "create"        # the statement's table schema becomes the tracked one
    FORGET = "forget"        # the table is gone: forget it
    APPLY = "apply"          # apply the statement as written (``schema.apply_ddl``)
    APPLY_SPLIT = "split"    # apply it change by change (``schema.split_ddl``), as the lock sees it


class Expand(Enum):
    """Which tables one statement event stands for (``worker.sync.statement_route.statement_tables``)."""
    DATABASE = "database"    # none: the statement names a database (or the session's)
    FIRST = "first"          # its first named table (RENAME a TO b: ``a``)
    EACH = "each"            # naming several tables, one ``DROP TABLE`` per table


@dataclass(frozen=True)
class KindRow:
    """Everything the worker decides by a statement's kind alone.  Adding a kind is this row plus
    its parse (``parse_ddl``, ``statement.parse_statement``) and its schema effect (``ddl.apply_ddl``)."""
    route: Route             # shard path (ALTER ... ADD/DROP PARTITION is PASS_THROUGH by its text)
    direct: Direct           # no lock, table not sharded
    direct_sharded: Direct   # no lock, table sharded (several upstream tables merged into one)
    track: Track
    expand: Expand
    event: str               # DM's binlog-event-filter name ("": only ``sql-pattern`` applies)


_S, _R, _D, _T, _E = StatementKind, Route, Direct, Track, Expand
KIND_ROWS: dict[StatementKind, KindRow] = {
    # kind                       route           direct                 direct_sharded         track           expand       event
    _S.CREATE_TABLE:     KindRow(_R.CREATE,      _D.REWRITE,            _D.REWRITE,            _T.CREATE,      _E.FIRST,    "create table"),
    _S.ALTER_TABLE:      KindRow(_R.COORDINATE,  _D.REWRITE,            _D.REWRITE,            _T.APPLY_SPLIT, _E.FIRST,    "alter table"),
    _S.DROP_TABLE:       KindRow(_R.DROP,        _D.DROP_TARGET,        _D.SHARD_SKIPPED,      _T.FORGET,      _E.EACH,     "drop table"),
    _S.TRUNCATE_TABLE:   KindRow(_R.IGNORE,      _D.REWRITE,            _D.SHARD_SKIPPED,      _T.APPLY,       _E.FIRST,    "truncate table"),
    _S.RENAME_TABLE:     KindRow(_R.REFUSE,      _D.REWRITE,            _D.REFUSE,             _T.APPLY,       _E.FIRST,    "rename table"),
    _S.CREATE_INDEX:     KindRow(_R.COORDINATE,  _D.REWRITE,            _D.REWRITE,            _T.APPLY,       _E.FIRST,    "create index"),
    _S.DROP_INDEX:       KindRow(_R.COORDINATE,  _D.REWRITE,            _D.REWRITE,            _T.APPLY,       _E.FIRST,    "drop index"),
    _S.CREATE_DATABASE:  KindRow(_R.NONE,        _D.CREATE_DATABASE,    _D.CREATE_DATABASE,    _T.NONE,        _E.DATABASE, "create database"),
    _S.ALTER_DATABASE:   KindRow(_R.NONE,        _D.DATABASE_SKIPPED,   _D.DATABASE_SKIPPED,   _T.NONE,        _E.DATABASE, "alter database"),
    _S.DROP_DATABASE:    KindRow(_R.NONE,        _D.DATABASE_SKIPPED,   _D.DATABASE_SKIPPED,   _T.NONE,        _E.DATABASE, "drop database"),
    _S.OTHER:            KindRow(_R.NONE,        _D.NOT_REPLICATED,     _D.NOT_REPLICATED,     _T.NONE,        _E.DATABASE, ""),
    _S.NOT_DDL:          KindRow(_R.NONE,        _D.NOT_REPLICATED,     _D.NOT_REPLICATED,     _T.NONE,        _E.DATABASE, ""),
}


def kinds_routed(route: Route) -> frozenset[StatementKind]:
    """The kinds whose row takes ``route``."""
    return frozenset(k for k, r in KIND_ROWS.items() if r.route is route)


class DDLParseError(ShardMergeError):
    """A DDL statement could not be understood; names the statement."""


@dataclass(frozen=True)
class TableName:
    schema: str
    table: str
    span: tuple[int, int]   # character span of the name (incl. schema qualifier) in the statement


@dataclass(frozen=True)
class ParsedDDL:
    kind: StatementKind
    query: str
    tables: tuple[TableName, ...] = ()
    database: str = ""       # for database-level statements

    def rewrite(self, names: list[str]) -> str:
        """The statement with each table name replaced by the given (already quoted) name."""
        if len(names) != len(self.tables):
            raise ValueError("one replacement per table name")
        out, last = [], 0
        for t, new in sorted(zip(self.tables, names), key=lambda x: x[0].span[0]):
            out.append(self.query[last:t.span[0]])
            out.append(new)
            last = t.span[1]
        out.append(self.query[last:])
        return "".join(out)


def quote(schema: str, table: str | None = None) -> str:
    return quote_table(schema, table)


_NAME_TYPES = {TokenType.IDENTIFIER, TokenType.VAR}
_PUNCT = {TokenType.DOT, TokenType.COMMA, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.SEMICOLON,
          TokenType.STRING, TokenType.NUMBER, TokenType.EQ}


def _word(tok) -> str:
    return tok.text.upper() if tok.token_type not in (TokenType.IDENTIFIER, TokenType.STRING) else ""


def parse_ddl(query: str, default_schema: str) -> ParsedDDL:
    """Kind and table names of one statement; NOT_DDL for BEGIN/COMMIT/DML/SET etc."""
    try:
        toks = mysql_tokens(query)
    except Exception as e:  # sqlglot raises its own TokenError
        raise DDLParseError(f"cannot tokenize statement: {e}", statement=query[:200]) from None
    words = [_word(t) for t in toks]
    if not toks:
        return ParsedDDL(StatementKind.NOT_DDL, query)
    i = 0

    def skip(*ws: str) -> None:
        nonlocal i
        while i < len(toks) and words[i] in ws:
            i += 1

    def name() -> TableName:
        nonlocal i
        if i >= len(toks) or toks[i].token_type in _PUNCT:
            raise DDLParseError("expected a table name", statement=query[:200])
        first = toks[i]
        if i + 2 < len(toks) and toks[i + 1].token_type == TokenType.DOT:
            second = toks[i + 2]
            i += 3
            return TableName(first.text, second.text, (first.start, second.end + 1))
        i += 1
        return TableName(default_schema, first.text, (first.start, first.end + 1))

    head = words[0]
    i = 1
    if head == "CREATE":
        skip("OR", "REPLACE", "ONLINE", "OFFLINE", "UNIQUE", "FULLTEXT", "SPATIAL", "DEFINER")
        if i < len(toks) and words[i] == "TEMPORARY":
            return ParsedDDL(StatementKind.OTHER, query)   # temporary tables never reach a row-based binlog
        if i < len(toks) and words[i] == "TABLE":
            i += 1
            skip("IF", "NOT", "EXISTS")
            return ParsedDDL(StatementKind.CREATE_TABLE, query, (name(),))
        if i < len(toks) and words[i] in ("DATABASE", "SCHEMA"):
            i += 1
            skip("IF", "NOT", "EXISTS")
            return ParsedDDL(StatementKind.CREATE_DATABASE, query, (), toks[i].text if i < len(toks) else "")
        if i < len(toks) and words[i] == "INDEX":
            while i < len(toks) and words[i] != "ON":
                i += 1
            i += 1
            return ParsedDDL(StatementKind.CREATE_INDEX, query, (name(),))
        return ParsedDDL(StatementKind.OTHER, query)
    if head == "ALTER":
        skip("ONLINE", "OFFLINE", "IGNORE")
        if i < len(toks) and words[i] == "TABLE":
            i += 1
            skip("IF", "EXISTS")
            return ParsedDDL(StatementKind.ALTER_TABLE, query, (name(),))
        if i < len(toks) and words[i] in ("DATABASE", "SCHEMA"):
            i += 1
            db = toks[i].text if i < len(toks) and toks[i].token_type in _NAME_TYPES else default_schema
            return ParsedDDL(StatementKind.ALTER_DATABASE, query, (), db)
        return ParsedDDL(StatementKind.OTHER, query)
    if head == "DROP":
        if i < len(toks) and words[i] == "TEMPORARY":
            return ParsedDDL(StatementKind.OTHER, query)
        if i < len(toks) and words[i] == "TABLE":
            i += 1
            skip("IF", "EXISTS")
            names: list[TableName] = [name()]
            while i < len(toks) and toks[i].token_type == TokenType.COMMA:
                i += 1
                names.append(name())
            return ParsedDDL(StatementKind.DROP_TABLE, query, tuple(names))
        if i < len(toks) and words[i] in ("DATABASE", "SCHEMA"):
            i += 1
            skip("IF", "EXISTS")
            return ParsedDDL(StatementKind.DROP_DATABASE, query, (), toks[i].text if i < len(toks) else "")
        if i < len(toks) and words[i] == "INDEX":
            while i < len(toks) and words[i] != "ON":
                i += 1
            i += 1
            return ParsedDDL(StatementKind.DROP_INDEX, query, (name(),))
        return ParsedDDL(StatementKind.OTHER, query)
    if head == "TRUNCATE":
        skip("TABLE")
        return ParsedDDL(StatementKind.TRUNCATE_TABLE, query, (name(),))
    if head == "RENAME":
        # sqlglot lexes everything after RENAME as one string: parse the rest as its own text
        off = toks[0].end + 1
        # tools put comments there (gh-ost: ``rename /* gh-ost */ table ...``)
        blanks = _LEADING_BLANKS.match(query, off)
        off = blanks.end() if blanks else off
        if not query[off:].upper().startswith("TABLE"):
            return ParsedDDL(StatementKind.OTHER, query)
        return ParsedDDL(StatementKind.RENAME_TABLE, query, _rename_names(query, off, default_schema))
    return ParsedDDL(StatementKind.NOT_DDL, query)


_LEADING_BLANKS = re.compile(r"(?:\s+|/\*.*?\*/|--[^\n]*\n|#[^\n]*\n)*", re.S)


def _rename_names(query: str, off: int, default_schema: str) -> tuple[TableName, ...]:
    """``RENAME TABLE a TO b[, c TO d]``: the names with spans in the full statement."""
    toks = mysql_tokens(query[off:])
    words = [_word(t) for t in toks]
    i = 1 if words and words[0] == "TABLE" else 0
    names = []
    while i < len(toks):
        if words[i] in ("TO", "WAIT", "NOWAIT") or toks[i].token_type in (TokenType.COMMA, TokenType.NUMBER):
            i += 1
            continue
        first = toks[i]
        if i + 2 < len(toks) and toks[i + 1].token_type == TokenType.DOT:
            second = toks[i + 2]
            names.append(TableName(first.text, second.text, (off + first.start, off + second.end + 1)))
            i += 3
        else:
            names.append(TableName(default_schema, first.text, (off + first.start, off + first.end + 1)))
            i += 1
    return tuple(names)
