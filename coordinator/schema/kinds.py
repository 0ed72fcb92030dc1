"""The one DDL classifier: what kind of statement a binlog query is and which tables it names.

Used by the worker (routing, the shard-DDL path, ``binlog skip``) and by ``coordinator.schema``
(``statement.parse_statement`` takes its kind from here), so a statement has one kind everywhere.
Rewriting replaces only the table-name tokens and keeps every other byte of the statement:
regenerating SQL through a parser loses MariaDB-only syntax, and the downstream must see the
user's statement.  A bare table name belongs to the event's session database
(``QueryEvent.schema``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from sqlglot.dialects.mysql import MySQL
from sqlglot.tokens import TokenType

from coordinator.errors import ShardMergeError
from coordinator.sql import quote_table


class StatementKind(str, Enum):
    """Kinds of statement the binlog carries; a ``str`` so records and logs keep plain text."""
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
        return self in TABLE_KINDS


K = StatementKind
CREATE_TABLE, ALTER_TABLE, DROP_TABLE, TRUNCATE_TABLE, RENAME_TABLE = (
    K.CREATE_TABLE, K.ALTER_TABLE, K.DROP_TABLE, K.TRUNCATE_TABLE, K.RENAME_TABLE)
CREATE_INDEX, DROP_INDEX = K.CREATE_INDEX, K.DROP_INDEX
CREATE_DATABASE, ALTER_DATABASE, DROP_DATABASE = K.CREATE_DATABASE, K.ALTER_DATABASE, K.DROP_DATABASE
OTHER, NOT_DDL = K.OTHER, K.NOT_DDL
TABLE_KINDS = frozenset({CREATE_TABLE, ALTER_TABLE, DROP_TABLE, TRUNCATE_TABLE, RENAME_TABLE, CREATE_INDEX,
                         DROP_INDEX})


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
        toks = [t for t in MySQL().tokenize(query)]
    except Exception as e:  # sqlglot raises its own TokenError
        raise DDLParseError(f"cannot tokenize statement: {e}", statement=query[:200]) from None
    words = [_word(t) for t in toks]
    if not toks:
        return ParsedDDL(NOT_DDL, query)
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
            return ParsedDDL(OTHER, query)   # temporary tables never reach a row-based binlog
        if i < len(toks) and words[i] == "TABLE":
            i += 1
            skip("IF", "NOT", "EXISTS")
            return ParsedDDL(CREATE_TABLE, query, (name(),))
        if i < len(toks) and words[i] in ("DATABASE", "SCHEMA"):
            i += 1
            skip("IF", "NOT", "EXISTS")
            return ParsedDDL(CREATE_DATABASE, query, (), toks[i].text if i < len(toks) else "")
        if i < len(toks) and words[i] == "INDEX":
            while i < len(toks) and words[i] != "ON":
                i += 1
            i += 1
            return ParsedDDL(CREATE_INDEX, query, (name(),))
        return ParsedDDL(OTHER, query)
    if head == "ALTER":
        skip("ONLINE", "OFFLINE", "IGNORE")
        if i < len(toks) and words[i] == "TABLE":
            i += 1
            skip("IF", "EXISTS")
            return ParsedDDL(ALTER_TABLE, query, (name(),))
        if i < len(toks) and words[i] in ("DATABASE", "SCHEMA"):
            i += 1
            db = toks[i].text if i < len(toks) and toks[i].token_type in _NAME_TYPES else default_schema
            return ParsedDDL(ALTER_DATABASE, query, (), db)
        return ParsedDDL(OTHER, query)
    if head == "DROP":
        if i < len(toks) and words[i] == "TEMPORARY":
            return ParsedDDL(OTHER, query)
        if i < len(toks) and words[i] == "TABLE":
            i += 1
            skip("IF", "EXISTS")
            names: list[TableName] = [name()]
            while i < len(toks) and toks[i].token_type == TokenType.COMMA:
                i += 1
                names.append(name())
            return ParsedDDL(DROP_TABLE, query, tuple(names))
        if i < len(toks) and words[i] in ("DATABASE", "SCHEMA"):
            i += 1
            skip("IF", "EXISTS")
            return ParsedDDL(DROP_DATABASE, query, (), toks[i].text if i < len(toks) else "")
        if i < len(toks) and words[i] == "INDEX":
            while i < len(toks) and words[i] != "ON":
                i += 1
            i += 1
            return ParsedDDL(DROP_INDEX, query, (name(),))
        return ParsedDDL(OTHER, query)
    if head == "TRUNCATE":
        skip("TABLE")
        return ParsedDDL(TRUNCATE_TABLE, query, (name(),))
    if head == "RENAME":
        # sqlglot lexes everything after RENAME as one string: parse the rest as its own text
        off = toks[0].end + 1
        # tools put comments there (gh-ost: ``rename /* gh-ost */ table ...``)
        blanks = _LEADING_BLANKS.match(query, off)
        off = blanks.end() if blanks else off
        if not query[off:].upper().startswith("TABLE"):
            return ParsedDDL(OTHER, query)
        return ParsedDDL(RENAME_TABLE, query, _rename_names(query, off, default_schema))
    return ParsedDDL(NOT_DDL, query)


_LEADING_BLANKS = re.compile(r"(?:\s+|/\*.*?\*/|--[^\n]*\n|#[^\n]*\n)*", re.S)


def _rename_names(query: str, off: int, default_schema: str) -> tuple[TableName, ...]:
    """``RENAME TABLE a TO b[, c TO d]``: the names with spans in the full statement."""
    toks = list(MySQL().tokenize(query[off:]))
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
