"""One single-change DDL statement in its canonical text, the form DM users read in
``shard-ddl-lock``, ``query-status`` and errors::

    ALTER TABLE `db`.`tb` ADD COLUMN `c` INT DEFAULT 1
    ALTER TABLE `db`.`tb` CHANGE COLUMN `b` `c` INT
    ALTER TABLE `db`.`tb` MODIFY COLUMN `id` INT DEFAULT 2

The text is also what runs downstream, so it is rebuilt from the statement's own tokens and
never reinterpreted: names the clause structure identifies (the table, the column, ``CHANGE``'s
old name, ``AFTER`` x, a dropped column or index) are quoted, keywords are upper-cased, runs of
white space become one space (inside strings nothing changes).  Everything else - types,
defaults, expressions, index definitions - keeps its tokens as written.
"""
from __future__ import annotations

import sqlglot
from sqlglot.tokens import TokenType

from .errors import SchemaError
from .kinds import ClauseKind, StatementKind
from .parse import _matching_paren, ident_name, raw, tokenize, tok_raw, word
from .render import quote_ident, table_ref
from .statement import Clause, parse_statement

# token types whose text is a name, a literal or punctuation: kept as written
_KEEP = {TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER, TokenType.BIT_STRING,
         TokenType.HEX_STRING, TokenType.NATIONAL_STRING, TokenType.BYTE_STRING, TokenType.L_PAREN,
         TokenType.R_PAREN, TokenType.COMMA, TokenType.DOT, TokenType.PARAMETER}


# keywords sqlglot's tokenizer leaves as plain words (upper-cased like the others; column names
# are case-insensitive in MariaDB, so an identifier spelled like one is unaffected)
_WORDS = {"less", "than", "maxvalue", "reorganize", "remove", "partitioning", "partitions", "coalesce",
          "exchange", "discard", "import", "rebuild", "optimize", "analyze", "repair", "tablespace", "stored",
          "virtual", "persistent", "invisible", "first", "after", "nopad", "add"}


def _tidy(text: str, *, quote_first: bool = False) -> str:
    """``text`` token by token: keywords upper-cased, white space between tokens collapsed (no
    space added where there was none), the first token quoted as a name when asked."""
    toks = tokenize(text)
    if len(toks) == 2 and toks[0].token_type in (TokenType.RENAME, TokenType.REPLACE) \
            and toks[1].token_type == TokenType.STRING:
        # sqlglot reads a leading RENAME / REPLACE as a command and the rest as one string (with
        # positions that do not match the text): tidy the rest on its own
        head = text.lstrip()
        cut = len(text) - len(head) + len(toks[0].text)
        return toks[0].text.upper() + " " + _tidy(text[cut:].lstrip())
    out: list[str] = []
    for n, t in enumerate(toks):
        if n and t.start > toks[n - 1].end + 1:
            out.append(" ")
        piece = tok_raw(text, t)
        if n == 0 and quote_first:
            piece = quote_ident(ident_name(t))
        elif (t.token_type not in _KEEP or (t.token_type == TokenType.VAR and piece.lower() in _WORDS)) \
                and piece.isascii() and not piece.startswith(("'", '"', "`")):
            piece = piece.upper()
        out.append(piece)
    return "".join(out)


_INDEX_HEAD = {"INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "PRIMARY KEY", "PRIMARY"}


def _index(defn: str) -> str:
    """``UNIQUE KEY u (a, b(10))`` -> ``UNIQUE KEY `u`(`a`, `b`(10))`` for the plain forms;
    any other index definition (USING, COMMENT, expressions) is only tidied."""
    toks = tokenize(defn)
    words = [t.text.upper() if t.token_type not in (TokenType.IDENTIFIER, TokenType.STRING) else "" for t in toks]
    k, head = 0, []
    while k < len(toks) and words[k] in _INDEX_HEAD:
        head.append(words[k])
        k += 1
    name = ""
    if k < len(toks) and toks[k].token_type in (TokenType.VAR, TokenType.IDENTIFIER):
        name, k = quote_ident(ident_name(toks[k])), k + 1
    if not head or k >= len(toks) or toks[k].token_type != TokenType.L_PAREN or toks[-1].token_type != TokenType.R_PAREN:
        return _tidy(defn)
    cols: list[list] = []
    cur: list = []
    i = k + 1
    while i < len(toks) - 1:
        t = toks[i]
        if t.token_type == TokenType.COMMA:
            cols.append(cur)
            cur = []
        else:
            cur.append(t)
        i += 1
    cols.append(cur)
    parts = []
    for c in cols:
        if not c or c[0].token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
            return _tidy(defn)
        text = quote_ident(ident_name(c[0]))
        rest = c[1:]
        if len(rest) >= 3 and rest[0].token_type == TokenType.L_PAREN and rest[1].token_type == TokenType.NUMBER \
                and rest[2].token_type == TokenType.R_PAREN:
            text, rest = text + f"({rest[1].text})", rest[3:]
        if rest and len(rest) == 1 and rest[0].text.upper() in ("ASC", "DESC"):
            text, rest = text + " " + rest[0].text.upper(), []
        if rest:
            return _tidy(defn)
        parts.append(text)
    return " ".join(head) + (f" {name}" if name else "") + "(" + ", ".join(parts) + ")"


# two operator characters that must not touch: together they would lex as another operator or a comment
_GLUED = {"--", "/*", "*/", "<=", ">=", "<>", "!=", "||", "&&", "<<", ">>", ":=", "=>", "=<", "==", "!<", "!>"}
_OPEN, _CLOSE, _COMMA, _DOT = TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA, TokenType.DOT
_WORDISH = (TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER, TokenType.BIT_STRING,
            TokenType.HEX_STRING, TokenType.NATIONAL_STRING, TokenType.BYTE_STRING, TokenType.PARAMETER)


def _column_names(expr: str) -> set[str]:
    """Lower-case names of the columns ``expr`` reads (sqlglot's view); empty when it cannot say."""
    try:
        tree = sqlglot.parse_one(f"SELECT {expr}", read="mysql")
    except sqlglot.errors.SqlglotError:
        return set()
    return {c.name.lower() for c in tree.find_all(sqlglot.exp.Column) if c.name}


def _expression(expr: str) -> str:
    """A generation expression as DM (TiDB's restore) prints it: column names quoted, keywords and
    function names upper-cased, no blanks around operator symbols or inside parentheses,
    ``, `` between arguments: ``id + 1`` -> ```id`+1``.  Only the blanks between tokens change,
    never where that would join two tokens into another (``a - -1`` keeps its blank)."""
    toks = tokenize(expr)
    cols = _column_names(expr)
    out: list[str] = []
    last, last_call = "", False  # the previous piece's kind ("open", "close", "comma", "dot", "sym", "word")
    for n, t in enumerate(toks):
        piece = tok_raw(expr, t)
        nxt = toks[n + 1] if n + 1 < len(toks) else None
        call = nxt is not None and nxt.token_type == _OPEN and nxt.start == t.end + 1
        prev_dot = n > 0 and toks[n - 1].token_type == _DOT
        if t.token_type in (TokenType.VAR, TokenType.IDENTIFIER) and not call and not prev_dot \
                and ident_name(t).lower() in cols:
            piece, kind = quote_ident(ident_name(t)), "word"
        elif t.token_type in (_OPEN, _CLOSE, _COMMA, _DOT):
            kind = {_OPEN: "open", _CLOSE: "close", _COMMA: "comma", _DOT: "dot"}[t.token_type]
        elif t.token_type in _WORDISH and not (t.token_type == TokenType.VAR and (call or piece.lower() in _WORDS)):
            kind = "word"
        elif piece[:1].isalpha() or piece[:1] == "_":
            piece, kind = piece.upper(), "word"     # a keyword (AND, NOT, NULL, DIV, INTERVAL, a function)
        else:
            kind = "sym"
        if out:
            if kind in ("close", "comma", "dot") or last in ("open", "dot"):
                gap = ""
            elif last == "comma":
                gap = " "
            elif kind == "open":
                gap = "" if last_call else " "
            elif last == "sym" or kind == "sym":
                gap = " " if (out[-1][-1:] + piece[:1]) in _GLUED else ""
            else:
                gap = " "
            out.append(gap)
        out.append(piece)
        last, last_call = kind, call
    return "".join(out)


def _generated(defn: str) -> str | None:
    """A column definition with a generation clause (``[GENERATED ALWAYS] AS (expr) [VIRTUAL |
    STORED | PERSISTENT]``) in DM's form: ``... GENERATED ALWAYS AS (<expr>) VIRTUAL|STORED ...``
    (MariaDB's PERSISTENT is its STORED); None for a column without one."""
    toks = tokenize(defn)
    k = next((i for i, t in enumerate(toks) if t.token_type == TokenType.ALIAS), None)
    if k is None or k + 1 >= len(toks) or toks[k + 1].token_type != _OPEN:
        return None
    end = _matching_paren(toks, k + 1)
    if end < 0:
        return None
    head = k
    if k >= 2 and word(toks[k - 2]) == "GENERATED" and word(toks[k - 1]) == "ALWAYS":
        head = k - 2
    kind, rest = "VIRTUAL", end + 1
    if rest < len(toks) and word(toks[rest]) in ("VIRTUAL", "STORED", "PERSISTENT"):
        kind = "VIRTUAL" if word(toks[rest]) == "VIRTUAL" else "STORED"
        rest += 1
    expr = defn[toks[k + 1].end + 1: toks[end].start]
    out = (f"{_tidy(raw(defn, toks, 0, head), quote_first=True)} GENERATED ALWAYS AS "
           f"({_expression(expr.strip())}) {kind}")
    tail = raw(defn, toks, rest, len(toks))
    return out + (f" {_tidy(tail)}" if tail else "")


def _column(defn: str) -> str:
    """A column definition (``c INT DEFAULT 1``) in canonical text."""
    return _generated(defn) or _tidy(defn, quote_first=True)


def _position(pos) -> str:
    if not pos:
        return ""
    kind, col = pos
    return " FIRST" if kind == "first" else f" AFTER {quote_ident(col)}"


def _clause(c: Clause) -> str | None:
    d = c.data
    if c.kind is ClauseKind.ADD_COLUMN:
        ine = "IF NOT EXISTS " if d.get("if_not_exists") else ""
        return f"ADD COLUMN {ine}{_column(d['def'])}{_position(d.get('position'))}"
    if c.kind in (ClauseKind.CHANGE_COLUMN, ClauseKind.MODIFY_COLUMN):
        ie = "IF EXISTS " if d.get("if_exists") else ""
        head = f"CHANGE COLUMN {ie}{quote_ident(d['old'])} " if c.kind is ClauseKind.CHANGE_COLUMN \
            else f"MODIFY COLUMN {ie}"
        return f"{head}{_column(d['def'])}{_position(d.get('position'))}"
    if c.kind is ClauseKind.ADD_INDEX:
        return "ADD " + _index(d["def"])
    if c.kind is ClauseKind.DROP_COLUMN:
        return f"DROP COLUMN {'IF EXISTS ' if d.get('if_exists') else ''}{quote_ident(d['name'])}"
    if c.kind is ClauseKind.DROP_INDEX:
        if d["name"].upper() == "PRIMARY":
            return "DROP PRIMARY KEY"
        return f"DROP INDEX {'IF EXISTS ' if d.get('if_exists') else ''}{quote_ident(d['name'])}"
    if c.kind is ClauseKind.RENAME_COLUMN:
        return f"RENAME COLUMN {quote_ident(d['old'])} TO {quote_ident(d['new'])}"
    if c.kind is ClauseKind.RENAME_INDEX:
        return f"RENAME INDEX {quote_ident(d['old'])} TO {quote_ident(d['new'])}"
    if c.kind is ClauseKind.ALTER_INDEX:
        return f"ALTER INDEX {quote_ident(d['name'])} {'IGNORED' if d['ignored'] else 'NOT IGNORED'}"
    if c.kind is ClauseKind.COLUMN_VISIBILITY:
        return f"ALTER COLUMN {quote_ident(d['name'])} SET {'INVISIBLE' if d['invisible'] else 'VISIBLE'}"
    if c.kind is ClauseKind.ALTER_DEFAULT:
        if d["default"] is None:
            return f"ALTER COLUMN {quote_ident(d['name'])} DROP DEFAULT"
        return f"ALTER COLUMN {quote_ident(d['name'])} SET DEFAULT {_tidy(d['default'])}"
    return None


def canonical_ddl(sql: str) -> str:
    """The canonical text of one statement (already split to one change, see ``split_ddl``).
    A statement this module does not know how to rewrite keeps its own text, tidied.

    >>> canonical_ddl("alter table t add column  b int after a")
    'ALTER TABLE `t` ADD COLUMN `b` INT AFTER `a`'
    >>> canonical_ddl("ALTER TABLE t RENAME INDEX i TO j")
    'ALTER TABLE `t` RENAME INDEX `i` TO `j`'
    """
    try:
        st = parse_statement(sql)
    except SchemaError:
        return sql
    ref = table_ref(tuple(p for p in st.table if p)) if st.table else ""
    if st.kind is StatementKind.ALTER_TABLE and len(st.clauses) == 1:
        body = _clause(st.clauses[0])
        if body is None:
            body = _tidy(st.clauses[0].text)
        return f"ALTER TABLE {ref} {body}"
    if st.kind is not StatementKind.ALTER_TABLE and st.table_span is not None:
        a, b = st.table_span
        return _tidy(st.sql[:a]) + " " + ref + (" " + _tidy(st.sql[b:]) if st.sql[b:].strip() else "")
    return _tidy(st.sql)


def tidy_ddl(sql: str) -> str:
    """Any statement with its keywords upper-cased and white space collapsed, for messages about
    statements the schema engine cannot rewrite (partitioning, unknown clauses)."""
    try:
        return _tidy(sql.strip().rstrip(";"))
    except SchemaError:
        return sql

