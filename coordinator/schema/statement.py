"""Statement and clause structure of DDL text.

Splits a DDL statement into its kind, table reference and (for ALTER
TABLE) its top-level clauses, keeping each clause's exact original text.
sqlglot's MySQL tokenizer provides the tokens; clause bodies (column and
index definitions) are handed to sqlglot's parser in parse.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from sqlglot.tokens import TokenType

from coordinator.schema.parse import parse_table_options

from .errors import SchemaError, UnsupportedDDL
from .kinds import ClauseKind, DDLParseError, StatementKind, parse_ddl
from .parse import ident_name, raw, tokenize, word

# the tokenizer keeps "PRIMARY KEY" / "FOREIGN KEY" / "ORDER BY" as single tokens
_INDEX_WORDS = {"INDEX", "KEY", "UNIQUE", "PRIMARY", "PRIMARY KEY", "FULLTEXT", "SPATIAL",
                "CONSTRAINT", "FOREIGN", "FOREIGN KEY", "CHECK"}
_NOOP_WORDS = {"ALGORITHM", "LOCK", "FORCE"}


@dataclass
class Clause:
    """One change inside an ALTER TABLE; ``text`` is what split_ddl emits."""
    kind: ClauseKind
    text: str
    data: dict = field(default_factory=dict)


@dataclass
class Statement:
    kind: StatementKind            # a table statement's kind (the shared classifier's)
    sql: str
    table: tuple[str | None, str] | None = None
    table_span: tuple[int, int] | None = None   # character span of the table reference
    clauses: list[Clause] = field(default_factory=list)
    data: dict = field(default_factory=dict)


def _is_name(tok) -> bool:
    return tok.token_type not in (TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA,
                                  TokenType.STRING, TokenType.EQ, TokenType.SEMICOLON,
                                  TokenType.DOT, TokenType.NUMBER)


def _table_at(sql, tokens, i):
    """Parse ``[db.]name`` at tokens[i]; returns ((db, name), span, next index)."""
    if i >= len(tokens) or not _is_name(tokens[i]):
        raise UnsupportedDDL("expected a table name", statement=sql)
    if i + 2 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT:
        return (tokens[i].text, tokens[i + 2].text), (tokens[i].start, tokens[i + 2].end + 1), i + 3
    return (None, tokens[i].text), (tokens[i].start, tokens[i].end + 1), i + 1


def split_top_level(tokens, i, j, depth0: int = 0):
    """Yield (start, end) token ranges separated by commas at paren depth depth0."""
    depth, start = 0, i
    for k in range(i, j):
        tt = tokens[k].token_type
        if tt == TokenType.L_PAREN:
            depth += 1
        elif tt == TokenType.R_PAREN:
            depth -= 1
        elif tt == TokenType.COMMA and depth == depth0:
            yield start, k
            start = k + 1
    yield start, j


def _position(sql, tokens, i, j):
    """Strip a trailing FIRST / AFTER col; returns (end index, position)."""
    if j - 1 >= i and word(tokens[j - 1]) == "FIRST":
        return j - 1, ("first", None)
    if j - 2 >= i and word(tokens[j - 2]) == "AFTER":
        return j - 2, ("after", tokens[j - 1].text)
    return j, None


def _skip(tokens, i, j, *words) -> tuple[int, bool]:
    n = len(words)
    if tuple(word(t) for t in tokens[i:i + n]) == words and i + n <= j:
        return i + n, True
    return i, False


def _is_check_clause(w0: str, w1: str, w2: str, w3: str) -> bool:
    """``ADD [CONSTRAINT [name]] CHECK (...)``, ``DROP CHECK name``, ``ALTER CHECK name [NOT]
    ENFORCED`` (MySQL also says ALTER CONSTRAINT for a CHECK)."""
    if w0 == "ADD":
        return w1 == "CHECK" or (w1 == "CONSTRAINT" and "CHECK" in (w2, w3))
    if w0 == "DROP":
        return w1 == "CHECK"
    if w0 == "ALTER":
        return w1 in ("CHECK", "CONSTRAINT")
    return False


def parse_clause(sql, tokens, i, j) -> list[Clause]:
    text = raw(sql, tokens, i, j)
    w0 = word(tokens[i]) if i < j else ""
    w = lambda k: word(tokens[k]) if k < j else ""  # noqa: E731

    def unsupported(why: str):
        return UnsupportedDDL(f"unsupported ALTER TABLE clause ({why}): {text}",
                              statement=sql, clause=text)

    if _is_check_clause(w0, w(i + 1), w(i + 2), w(i + 3)):
        # a CHECK constraint is not merged: one shard's constraint need not hold for the other
        # shards' rows in the merged table (docs/mysql.md); the statement changes nothing here
        return [Clause(ClauseKind.NOOP, text, {"check": True})]
    if w0 == "ADD":
        k = i + 1
        k, is_col = _skip(tokens, k, j, "COLUMN")
        if not is_col and w(k) in _INDEX_WORDS:
            k2, ine = k, False
            # ADD INDEX IF NOT EXISTS name (...): drop the IF NOT EXISTS for sqlglot
            body_toks = list(range(k, j))
            for m in range(k, j - 2):
                if (w(m), w(m + 1), w(m + 2)) == ("IF", "NOT", "EXISTS"):
                    ine = True
                    body_toks = list(range(k, m)) + list(range(m + 3, j))
                    break
            body = " ".join(raw(sql, tokens, m, m + 1) for m in body_toks) if ine else raw(sql, tokens, k2, j)
            return [Clause(ClauseKind.ADD_INDEX, text, {"def": body, "if_not_exists": ine})]
        if w(k) == "PARTITION":
            raise unsupported("partitioning")
        k, ine = _skip(tokens, k, j, "IF", "NOT", "EXISTS")
        if k < j and tokens[k].token_type == TokenType.L_PAREN:
            if tokens[j - 1].token_type != TokenType.R_PAREN:
                raise unsupported("unterminated column list")
            out = []
            for a, b in split_top_level(tokens, k + 1, j - 1):
                body = raw(sql, tokens, a, b)
                if word(tokens[a]) in _INDEX_WORDS:
                    out.append(Clause(ClauseKind.ADD_INDEX, "ADD " + body, {"def": body, "if_not_exists": False}))
                else:
                    out.append(Clause(ClauseKind.ADD_COLUMN, "ADD COLUMN " + body,
                                      {"def": body, "position": None, "if_not_exists": ine}))
            return out
        end, pos = _position(sql, tokens, k, j)
        return [Clause(ClauseKind.ADD_COLUMN, text, {"def": raw(sql, tokens, k, end), "position": pos,
                                            "if_not_exists": ine})]
    if w0 == "DROP":
        k = i + 1
        if w(k) == "PRIMARY KEY" or (w(k), w(k + 1)) == ("PRIMARY", "KEY"):
            return [Clause(ClauseKind.DROP_INDEX, text, {"name": "PRIMARY", "if_exists": False})]
        if w(k) in ("INDEX", "KEY"):
            k, ie = _skip(tokens, k + 1, j, "IF", "EXISTS")
            return [Clause(ClauseKind.DROP_INDEX, text, {"name": tokens[k].text, "if_exists": ie})]
        if w(k) in ("FOREIGN", "FOREIGN KEY", "CONSTRAINT", "CHECK", "PARTITION", "PERIOD", "SYSTEM"):
            raise unsupported(f"DROP {w(k)}")
        k, _ = _skip(tokens, k, j, "COLUMN")
        k, ie = _skip(tokens, k, j, "IF", "EXISTS")
        if k + 1 != j:
            raise unsupported("trailing tokens after DROP COLUMN")
        return [Clause(ClauseKind.DROP_COLUMN, text, {"name": tokens[k].text, "if_exists": ie})]
    if w0 in ("MODIFY", "CHANGE"):
        k, _ = _skip(tokens, i + 1, j, "COLUMN")
        k, ie = _skip(tokens, k, j, "IF", "EXISTS")
        old = None
        if w0 == "CHANGE":
            old, k = tokens[k].text, k + 1
        end, pos = _position(sql, tokens, k, j)
        data = {"def": raw(sql, tokens, k, end), "position": pos, "if_exists": ie}
        if w0 == "CHANGE":
            data["old"] = old
            return [Clause(ClauseKind.CHANGE_COLUMN, text, data)]
        return [Clause(ClauseKind.MODIFY_COLUMN, text, data)]
    if w0 == "RENAME":
        k = i + 1
        if w(k) == "COLUMN" and w(k + 2) == "TO" and k + 4 == j:
            return [Clause(ClauseKind.RENAME_COLUMN, text, {"old": tokens[k + 1].text, "new": tokens[k + 3].text})]
        if w(k) in ("INDEX", "KEY") and w(k + 2) == "TO" and k + 4 == j:
            return [Clause(ClauseKind.RENAME_INDEX, text, {"old": tokens[k + 1].text, "new": tokens[k + 3].text})]
        if w(k) in ("TO", "AS"):
            k += 1
        table, _, nxt = _table_at(sql, tokens, k)
        if nxt != j:
            raise unsupported("RENAME")
        return [Clause(ClauseKind.RENAME_TABLE, text, {"table": table})]
    if w0 == "ALTER":
        k, _ = _skip(tokens, i + 1, j, "COLUMN")
        if w(k) == "INDEX" or w(k) == "KEY":
            # MariaDB's ALTER INDEX i [NOT] IGNORED, and MySQL's ALTER INDEX i VISIBLE / INVISIBLE
            m = k + 2 + (w(k + 2) == "NOT")
            if k + 1 < j and w(m) == "IGNORED" and m + 1 == j:
                return [Clause(ClauseKind.ALTER_INDEX, text, {"name": tokens[k + 1].text, "ignored": w(k + 2) != "NOT"})]
            if k + 3 == j and w(k + 2) in ("VISIBLE", "INVISIBLE"):
                return [Clause(ClauseKind.ALTER_INDEX, text, {"name": tokens[k + 1].text, "ignored": w(k + 2) == "INVISIBLE"})]
            raise unsupported("ALTER INDEX")
        name, k = tokens[k].text, k + 1
        if (w(k), w(k + 1)) == ("SET", "DEFAULT") and k + 2 < j:
            return [Clause(ClauseKind.ALTER_DEFAULT, text, {"name": name, "default": raw(sql, tokens, k + 2, j)})]
        if (w(k), w(k + 1)) == ("DROP", "DEFAULT") and k + 2 == j:
            return [Clause(ClauseKind.ALTER_DEFAULT, text, {"name": name, "default": None})]
        if w(k) == "SET" and w(k + 1) in ("VISIBLE", "INVISIBLE") and k + 2 == j:     # MySQL 8.0.23+
            return [Clause(ClauseKind.COLUMN_VISIBILITY, text, {"name": name, "invisible": w(k + 1) == "INVISIBLE"})]
        raise unsupported("ALTER COLUMN form")
    if w0 == "CONVERT":
        k, ok = _skip(tokens, i + 1, j, "TO", "CHARACTER", "SET")
        if not ok:
            k, ok = _skip(tokens, i + 1, j, "TO", "CHARSET")
        if not ok or k >= j:
            raise unsupported("CONVERT")
        cs, k = tokens[k].text, k + 1
        coll = None
        if w(k) == "COLLATE" and k + 1 < j:
            coll, k = tokens[k + 1].text, k + 2
        if k != j:
            raise unsupported("CONVERT")
        return [Clause(ClauseKind.CONVERT_CHARSET, text, {"charset": cs, "collation": coll})]
    if w0 in _NOOP_WORDS:
        return [Clause(ClauseKind.NOOP, text)]
    if w0 in ("ORDER", "ORDER BY", "ENABLE", "DISABLE", "DISCARD", "IMPORT", "PARTITION", "REMOVE",
              "COALESCE", "REORGANIZE", "EXCHANGE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD",
              "REPAIR", "TRUNCATE", "ADD", "WITH", "WITHOUT", "UPGRADE"):
        raise unsupported(w0)
    try:
        cs, coll, opts, part = parse_table_options(sql, tokens, i, j, statement=sql)
    except UnsupportedDDL:
        raise unsupported("unknown clause") from None
    if part is not None:
        raise unsupported("partitioning")
    return [Clause(ClauseKind.TABLE_OPTIONS, text, {"charset": cs, "collation": coll, "options": opts})]


def create_like_source(sql: str) -> tuple[str | None, str] | None:
    """The model table ``(database or None, name)`` of ``CREATE TABLE [IF NOT EXISTS] t LIKE m``
    (also ``(LIKE m)``); None for any other statement.  The text does not say what ``t`` looks
    like: the schema tracker copies its tracked ``m`` at this binlog position, as DM's tracker does
    (the upstream's *current* ``m`` or ``t`` may already carry later DDLs, or be gone)."""
    try:
        tokens = tokenize(sql.strip().rstrip(";").strip())
    except UnsupportedDDL:
        return None
    n = len(tokens)
    w = lambda k: word(tokens[k]) if k < n else ""  # noqa: E731
    if w(0) != "CREATE" or w(1) != "TABLE":
        return None
    k, _ = _skip(tokens, 2, n, "IF", "NOT", "EXISTS")
    try:
        _, _, k = _table_at(sql, tokens, k)
        if k < n and tokens[k].token_type == TokenType.L_PAREN:
            k += 1
        if w(k) != "LIKE":
            return None
        model, _, _ = _table_at(sql, tokens, k + 1)
    except UnsupportedDDL:
        return None
    return model


def parse_statement(sql: str) -> Statement:
    sql = sql.strip().rstrip(";").strip()
    tokens = tokenize(sql)
    if not tokens:
        raise UnsupportedDDL("empty statement", statement=sql)
    n = len(tokens)
    w = lambda k: word(tokens[k]) if k < n else ""  # noqa: E731
    w0 = w(0)
    try:
        kind = parse_ddl(sql, "").kind
    except DDLParseError:
        kind = StatementKind.OTHER
    if kind is StatementKind.ALTER_TABLE:
        k = 1
        while w(k) in ("ONLINE", "IGNORE"):
            k += 1
        if w(k) != "TABLE":
            raise UnsupportedDDL(f"unsupported statement ALTER {w(k)}", statement=sql)
        k, _ = _skip(tokens, k + 1, n, "IF", "EXISTS")
        table, span, k = _table_at(sql, tokens, k)
        if w(k) == "WAIT":        # MariaDB's lock-wait hint (WAIT n | NOWAIT): changes nothing
            k += 2
        elif w(k) == "NOWAIT":
            k += 1
        clauses: list[Clause] = []
        if k < n:
            for a, b in split_top_level(tokens, k, n):
                if a == b:
                    raise UnsupportedDDL("empty ALTER TABLE clause", statement=sql)
                clauses.extend(parse_clause(sql, tokens, a, b))
        return Statement(StatementKind.ALTER_TABLE, sql, table, span, clauses)
    if w0 == "CREATE":     # incl. temporary tables and CREATE OR REPLACE, refused below
        k = 1
        if w(k) == "OR" and w(k + 1) == "REPLACE":
            raise UnsupportedDDL("CREATE OR REPLACE is not modelled", statement=sql)
        if w(k) == "TEMPORARY":
            raise UnsupportedDDL("temporary tables are not replicated", statement=sql)
        if w(k) == "TABLE":
            k, ine = _skip(tokens, k + 1, n, "IF", "NOT", "EXISTS")
            table, span, k = _table_at(sql, tokens, k)
            if w(k) in ("LIKE", "AS", "SELECT") or (k < n and tokens[k].token_type != TokenType.L_PAREN):
                raise UnsupportedDDL("CREATE TABLE ... LIKE / AS SELECT is not modelled", statement=sql)
            return Statement(StatementKind.CREATE_TABLE, sql, table, span, data={"if_not_exists": ine})
        kind = "key"
        if w(k) in ("UNIQUE", "FULLTEXT", "SPATIAL"):
            kind, k = w(k).lower(), k + 1
        if w(k) == "INDEX":
            k, ine = _skip(tokens, k + 1, n, "IF", "NOT", "EXISTS")
            if k >= n:
                raise UnsupportedDDL("unsupported CREATE INDEX form", statement=sql)
            name = tokens[k].text
            k += 1
            if w(k) != "ON":
                raise UnsupportedDDL("unsupported CREATE INDEX form", statement=sql)
            table, span, k = _table_at(sql, tokens, k + 1)
            prefix = {"key": "INDEX", "unique": "UNIQUE INDEX", "fulltext": "FULLTEXT INDEX",
                      "spatial": "SPATIAL INDEX"}[kind]
            body = f"{prefix} `{name}` " + raw(sql, tokens, k, n)
            return Statement(StatementKind.CREATE_INDEX, sql, table, span, data={"def": body, "if_not_exists": ine})
        raise UnsupportedDDL(f"unsupported statement CREATE {w(k)}", statement=sql)
    if w0 == "DROP":
        if w(1) == "INDEX":
            k, ie = _skip(tokens, 2, n, "IF", "EXISTS")
            if k + 1 >= n or w(k + 1) != "ON":
                raise UnsupportedDDL("unsupported DROP INDEX form", statement=sql)
            name = tokens[k].text
            table, span, _ = _table_at(sql, tokens, k + 2)
            return Statement(StatementKind.DROP_INDEX, sql, table, span, data={"name": name, "if_exists": ie})
        k = 1
        if w(k) == "TEMPORARY":
            raise UnsupportedDDL("temporary tables are not replicated", statement=sql)
        if w(k) != "TABLE":
            raise UnsupportedDDL(f"unsupported statement DROP {w(k)}", statement=sql)
        k, ie = _skip(tokens, k + 1, n, "IF", "EXISTS")
        table, span, k = _table_at(sql, tokens, k)
        if k < n and tokens[k].token_type == TokenType.COMMA:
            raise UnsupportedDDL("DROP TABLE of several tables: split it first", statement=sql)
        return Statement(StatementKind.DROP_TABLE, sql, table, span, data={"if_exists": ie})
    if kind is StatementKind.TRUNCATE_TABLE:
        k, _ = _skip(tokens, 1, n, "TABLE")
        table, span, _ = _table_at(sql, tokens, k)
        return Statement(StatementKind.TRUNCATE_TABLE, sql, table, span)
    if kind is StatementKind.RENAME_TABLE and n == 2 and tokens[1].token_type == TokenType.STRING:
        # sqlglot's tokenizer treats RENAME as a command and swallows the rest
        base = tokens[0].end + 1
        rest = tokenize(sql[base:])
        m = len(rest)
        if not rest or word(rest[0]) != "TABLE":
            raise UnsupportedDDL("unsupported RENAME statement", statement=sql)
        table, span, k = _table_at(sql[base:], rest, 1)
        span = (span[0] + base, span[1] + base)
        if k >= m or word(rest[k]) != "TO":
            raise UnsupportedDDL("malformed RENAME TABLE", statement=sql)
        new, _, k = _table_at(sql[base:], rest, k + 1)
        if k != m:
            raise UnsupportedDDL("RENAME TABLE of several tables is not modelled", statement=sql)
        return Statement(StatementKind.RENAME_TABLE, sql, table, span, data={"new": new})
    raise UnsupportedDDL(f"unsupported statement {w0 or sql[:20]}", statement=sql)


@lru_cache(maxsize=4096)
def changed_columns(sql: str) -> tuple[frozenset[str], frozenset[str]]:
    """(added, dropped): lower-case names of the columns one statement's ADD COLUMN and DROP COLUMN
    clauses name (indexes and constraints are not columns); both empty for any other statement and
    for one the parser refuses.  Cached: the lock engine asks for the same few statements often."""
    try:
        st = parse_statement(sql)
    except SchemaError:
        return frozenset(), frozenset()
    added, dropped = set(), set()
    for c in st.clauses:
        if c.kind is ClauseKind.ADD_COLUMN:
            toks = tokenize(c.data["def"])
            if toks:
                added.add(ident_name(toks[0]).lower())
        elif c.kind is ClauseKind.DROP_COLUMN:
            dropped.add(c.data["name"].lower())
    return frozenset(added), frozenset(dropped)


@lru_cache(maxsize=4096)
def defined_columns(sql: str) -> frozenset[str]:
    """Lower-case names of the columns whose whole definition one statement writes (ADD, MODIFY
    and CHANGE COLUMN clauses; CHANGE by its new name): running it sets each to the written
    definition, whatever the column was, even when the clause only moves it (``AFTER``/``FIRST``).
    Empty for any other statement and for one the parser refuses."""
    try:
        st = parse_statement(sql)
    except SchemaError:
        return frozenset()
    out = set()
    for c in st.clauses:
        if c.kind in (ClauseKind.ADD_COLUMN, ClauseKind.MODIFY_COLUMN, ClauseKind.CHANGE_COLUMN):
            toks = tokenize(c.data["def"])
            if toks:
                out.add(ident_name(toks[0]).lower())
    return frozenset(out)


_INDEX_DEF = re.compile(r"^\s*(?:CONSTRAINT(?:\s+(?:`(?:[^`]|``)+`|[\w$]+))?\s+)?(?P<kind>PRIMARY\s+KEY|UNIQUE|FULLTEXT|SPATIAL)?"
                        r"\s*(?:INDEX|KEY)?\s*(?P<name>`(?:[^`]|``)+`|(?!USING\b)[\w$]+)?\s*(?:USING\s+\w+\s*)?\(", re.I)


def _index_def_name(defn: str) -> str | None:
    m = _INDEX_DEF.match(defn)
    if m is None:
        return None
    if m.group("kind") and m.group("kind").upper().startswith("PRIMARY"):
        return "primary"
    name = m.group("name")
    return None if name is None else name.strip("`").replace("``", "`").lower()


@lru_cache(maxsize=4096)
def index_names(sql: str) -> frozenset[str]:
    """Lower-case names of the indexes one statement adds, drops, renames or alters (``primary``
    for the primary key); an index added without a name is left out (its name comes from its
    first column).  Empty for a statement the parser refuses."""
    try:
        st = parse_statement(sql)
    except SchemaError:
        return frozenset()
    out: set[str | None] = set()
    if st.kind is StatementKind.CREATE_INDEX:
        out.add(_index_def_name(st.data.get("def", "")))
    elif st.kind is StatementKind.DROP_INDEX:
        out.add(st.data.get("name", "").lower() or None)
    for c in st.clauses:
        if c.kind is ClauseKind.ADD_INDEX:
            out.add(_index_def_name(c.data["def"]))
        elif c.kind in (ClauseKind.DROP_INDEX, ClauseKind.ALTER_INDEX):
            out.add(c.data["name"].lower())
        elif c.kind is ClauseKind.RENAME_INDEX:
            out |= {c.data["old"].lower(), c.data["new"].lower()}
    out.discard(None)
    return frozenset(x for x in out if x)
