"""Parsing of CREATE TABLE text and of single column/index definitions.

sqlglot (MySQL dialect) parses statements and column/index definitions;
its AST is mapped onto the model here.  sqlglot's tokenizer is reused for
the few places where its parser drops information (table options, clause
boundaries), so offsets always point back into the original text.
"""
from __future__ import annotations

import re

from dataclasses import replace

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from . import typesys as ts
from .errors import UnsupportedDDL, InvalidDDL
from .lexer import mysql_tokens
from .model import Column, ColumnType, Index, TableSchema


_DTYPE_MAP = {
    "TINYINT": "tinyint", "SMALLINT": "smallint", "MEDIUMINT": "mediumint", "INT": "int",
    "BIGINT": "bigint", "DECIMAL": "decimal", "DOUBLE": "double", "FLOAT": "float",
    "TIMESTAMPTZ": "timestamp", "TIMESTAMP": "timestamp", "TIMESTAMPLTZ": "timestamp",
    "DATETIME": "datetime", "DATE": "date", "TIME": "time", "YEAR": "year", "BIT": "bit",
    "CHAR": "char", "VARCHAR": "varchar", "NCHAR": "char", "NVARCHAR": "varchar",
    "BINARY": "binary", "VARBINARY": "varbinary", "TEXT": "text", "TINYTEXT": "tinytext",
    "MEDIUMTEXT": "mediumtext", "LONGTEXT": "longtext", "BLOB": "blob",
    "TINYBLOB": "tinyblob", "MEDIUMBLOB": "mediumblob", "LONGBLOB": "longblob",
    "ENUM": "enum", "SET": "set", "JSON": "json", "BOOLEAN": "tinyint", "UUID": "uuid",
    "GEOMETRY": "geometry",
}
_UNSIGNED = {"UTINYINT", "USMALLINT", "UMEDIUMINT", "UINT", "UBIGINT", "UDECIMAL",
             "UDOUBLE", "UFLOAT"}


def tokenize(sql: str):
    try:
        return mysql_tokens(sql)
    except TokenError as e:
        raise UnsupportedDDL(f"cannot tokenize statement: {e}", statement=sql) from e


def raw(sql: str, tokens, i: int, j: int) -> str:
    """Original text of tokens[i:j] (j exclusive)."""
    if i >= j:
        return ""
    return sql[tokens[i].start: tokens[j - 1].end + 1]


def tok_raw(sql: str, tok) -> str:
    return sql[tok.start: tok.end + 1]


def word(tok) -> str:
    """Upper-cased keyword text; quoted identifiers and strings are never keywords."""
    if tok.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
        return ""
    return tok.text.upper()


def ident_name(tok) -> str:
    """Name from an identifier token (backticks already stripped by the tokenizer)."""
    return tok.text


def strip_float_unsigned(sql: str) -> tuple[str, set[str]]:
    """sqlglot rejects ``float[(M,D)] unsigned``: cut the UNSIGNED out and
    return the (lower-case) names of the columns it belonged to."""
    try:
        tokens = mysql_tokens(sql)
    except TokenError:
        return sql, set()
    cuts, names = [], set()
    for k, t in enumerate(tokens):
        if t.token_type not in (TokenType.FLOAT, TokenType.DOUBLE) or k == 0:
            continue
        m = k + 1
        if m < len(tokens) and tokens[m].token_type == TokenType.L_PAREN:
            while m < len(tokens) and tokens[m].token_type != TokenType.R_PAREN:
                m += 1
            m += 1
        if m < len(tokens) and tokens[m].text.lower() == "unsigned" and t.token_type == TokenType.FLOAT:
            cuts.append((tokens[m].start, tokens[m].end + 1))
            names.add(tokens[k - 1].text.lower())
    for a, b in reversed(cuts):
        sql = sql[:a] + sql[b:]
    return sql, names


def _persistent_as_stored(sql: str) -> str:
    """MariaDB's ``AS (expr) PERSISTENT`` is its older spelling of ``STORED`` (kept verbatim in
    the binlog), which sqlglot does not know."""
    if "persistent" not in sql.lower():
        return sql
    try:
        tokens = mysql_tokens(sql)
    except TokenError:
        return sql
    for k in range(len(tokens) - 1, 0, -1):
        t = tokens[k]
        if t.token_type == TokenType.VAR and t.text.upper() == "PERSISTENT" \
                and tokens[k - 1].token_type == TokenType.R_PAREN:
            sql = sql[:t.start] + "STORED" + sql[t.end + 1:]
    return sql


def _parse_one(sql: str, *, statement: str | None = None, clause: str | None = None):
    try:
        return sqlglot.parse_one(_persistent_as_stored(sql), read="mysql")
    except (ParseError, TokenError) as e:
        msg = str(e).splitlines()[0]
        raise UnsupportedDDL(f"sqlglot cannot parse {clause or sql!r}: {msg}",
                             statement=statement or sql, clause=clause) from e


# ------------------------------------------------------------------ types

def _literal_int(node) -> int:
    if isinstance(node, exp.DataTypeParam):
        node = node.this
    return int(node.name)


def build_type(kind: exp.DataType, *, clause: str | None = None,
               statement: str | None = None) -> ColumnType:
    name = kind.this.name
    unsigned = name in _UNSIGNED
    if unsigned:
        name = name[1:]
    base = _DTYPE_MAP.get(name)
    if base is None:
        raise UnsupportedDDL(f"unsupported column type {kind.sql('mysql')}",
                             clause=clause, statement=statement)
    params = list(kind.expressions)
    length = scale = None
    members: tuple[str, ...] = ()
    if name == "BOOLEAN":
        length = 1
    elif base in ("enum", "set"):
        members = tuple(p.name for p in params)
    elif base in ts.INT_BITS:
        length = _literal_int(params[0]) if params else ts.default_int_width(base, unsigned)
    elif base == "decimal":
        length = _literal_int(params[0]) if params else 10
        scale = _literal_int(params[1]) if len(params) > 1 else 0
    elif base in ("float", "double"):
        if len(params) == 2:
            length, scale = _literal_int(params[0]), _literal_int(params[1])
        elif len(params) == 1 and _literal_int(params[0]) > 24:
            base = "double"
    elif base in ts.FSP_TYPES:
        length = (_literal_int(params[0]) if params else 0) or None
    elif base in ("char", "binary", "bit"):
        length = _literal_int(params[0]) if params else 1
    elif base in ("varchar", "varbinary"):
        if not params:
            raise InvalidDDL(f"{base} needs a length", clause=clause, statement=statement)
        length = _literal_int(params[0])
    elif base == "year":
        length = 4
    return ColumnType(base=base, length=length, scale=scale, unsigned=unsigned,
                      members=members)


def resolve_charset(ctype: ColumnType, cs: str | None, coll: str | None,
                    table_cs: str | None, table_coll: str | None) -> ColumnType:
    """Fill in the effective charset/collation of a string-typed column."""
    if not ctype.has_charset:
        return ctype
    cs, coll = ts.norm_charset(cs), ts.norm_collation(coll)
    if coll is not None:
        cs = cs or ts.charset_of_collation(coll)
    elif cs is not None:
        coll = table_coll if cs == table_cs else ts.DEFAULT_COLLATION.get(cs)
    else:
        cs, coll = table_cs, table_coll
    return replace(ctype, charset=cs, collation=coll)


# ------------------------------------------------------------------ columns

def _expr_sql(node) -> str:
    if isinstance(node, exp.Null):
        return "NULL"
    if isinstance(node, exp.Literal) and node.is_string:
        return ts.quote_string(node.this)
    return _sql(node)


def _sql(node) -> str:
    """Expression text in MariaDB's style (quoted names, lower-case functions)."""
    return node.sql("mysql", identify=True, normalize_functions="lower")


def build_column(cd: exp.ColumnDef, table_cs: str | None, table_coll: str | None, *,
                 clause: str | None = None, statement: str | None = None,
                 force_unsigned: bool = False):
    """Map a sqlglot ColumnDef to a Column; also returns inline key kinds ('primary'/'unique')."""
    kind = cd.args.get("kind")
    if kind is None:
        raise UnsupportedDDL("column definition without a type", clause=clause, statement=statement)
    ctype = build_type(kind, clause=clause, statement=statement)
    if force_unsigned:
        ctype = replace(ctype, unsigned=True)
    nullable: bool | None = None
    default = on_update = comment = generated = check = None
    auto_inc = stored = invisible = zerofill = False
    cs = coll = None
    inline_keys: list[str] = []
    for cons in cd.args.get("constraints") or []:
        k = cons.args.get("kind")
        if isinstance(k, exp.NotNullColumnConstraint):
            nullable = bool(k.args.get("allow_null"))
        elif isinstance(k, exp.DefaultColumnConstraint):
            default = _expr_sql(k.this)
        elif isinstance(k, exp.AutoIncrementColumnConstraint):
            auto_inc = True
        elif isinstance(k, exp.CharacterSetColumnConstraint):
            cs = k.this.name
        elif isinstance(k, exp.CollateColumnConstraint):
            coll = k.this.name
        elif isinstance(k, exp.CommentColumnConstraint):
            comment = k.this.name
        elif isinstance(k, exp.OnUpdateColumnConstraint):
            on_update = _expr_sql(k.this)
        elif isinstance(k, exp.ZeroFillColumnConstraint):
            zerofill = True
        elif isinstance(k, exp.InvisibleColumnConstraint):
            invisible = True
        elif isinstance(k, exp.ComputedColumnConstraint):
            expr = k.this.this if isinstance(k.this, exp.Paren) else k.this
            generated = _sql(expr)
            stored = bool(k.args.get("persisted"))
        elif isinstance(k, exp.CheckColumnConstraint):
            check = _sql(k.this)
        elif isinstance(k, exp.PrimaryKeyColumnConstraint):
            inline_keys.append("primary")
        elif isinstance(k, exp.UniqueColumnConstraint):
            inline_keys.append("unique")
        else:
            raise UnsupportedDDL(f"unsupported column attribute {cons.sql('mysql')}",
                                 column=cd.name, clause=clause, statement=statement)
    if zerofill:
        ctype = replace(ctype, zerofill=True, unsigned=True)
        if ctype.base in ts.INT_BITS and not kind.expressions:
            ctype = replace(ctype, length=ts.default_int_width(ctype.base, True))
    if ctype.base in ts.INT_BITS and not kind.expressions and ctype.unsigned and kind.this.name != "BOOLEAN":
        ctype = replace(ctype, length=ts.default_int_width(ctype.base, True))
    ctype = resolve_charset(ctype, cs, coll, table_cs, table_coll)
    if "primary" in inline_keys and nullable is None:
        nullable = False
    if nullable is None:
        nullable = True
    default = ts.canon_default(default, ctype)
    on_update = ts.canon_default(on_update, ctype) if on_update else None
    if default is None and nullable and not auto_inc and generated is None:
        default = "NULL"
    col = Column(name=cd.name, type=ctype, nullable=nullable, default=default,
                 auto_increment=auto_inc, on_update=on_update, comment=comment,
                 generated=generated, stored=stored, invisible=invisible, check=check)
    return col, inline_keys


def parse_column_def(text: str, table_cs: str | None, table_coll: str | None, *,
                     statement: str | None = None, clause: str | None = None):
    """Parse ``name type attrs...`` (no FIRST/AFTER) into (Column, inline key kinds)."""
    fixed, unsigned = strip_float_unsigned(f"CREATE TABLE _t ({text})")
    tree = _parse_one(fixed, statement=statement, clause=clause or text)
    elems = tree.this.expressions if isinstance(tree.this, exp.Schema) else []
    if len(elems) != 1 or not isinstance(elems[0], exp.ColumnDef):
        raise UnsupportedDDL(f"not a single column definition: {text}",
                             statement=statement, clause=clause or text)
    return build_column(elems[0], table_cs, table_coll, clause=clause or text, statement=statement,
                        force_unsigned=elems[0].name.lower() in unsigned)


# ------------------------------------------------------------------ indexes

def _index_part(node, *, clause, statement) -> tuple[str, int | None]:
    if isinstance(node, exp.ColumnPrefix):
        return node.this.name, int(node.expression.name)
    if isinstance(node, (exp.Column, exp.Identifier)):
        return node.name, None
    raise UnsupportedDDL(f"unsupported index part {node.sql('mysql')}",
                         clause=clause, statement=statement)


def _index_opts(node) -> tuple[str | None, str | None, bool]:
    """(USING, COMMENT, ignored) of an index node (MariaDB's IGNORED arrives as INVISIBLE, see
    ``ignored_as_invisible``)."""
    using = comment = None
    ignored = False
    itype = node.args.get("index_type")
    if isinstance(itype, str):
        using = itype.upper()
    elif isinstance(itype, exp.Expression):
        using = itype.name.upper()
    inc = node.args.get("include")
    if isinstance(inc, exp.IndexParameters) and inc.args.get("using") is not None:
        using = inc.args["using"].name.upper()
    for opt in node.args.get("options") or []:
        if opt.args.get("using") is not None:
            u = opt.args["using"]
            using = (u if isinstance(u, str) else u.name).upper()
        if opt.args.get("comment") is not None:
            comment = opt.args["comment"].name
        if opt.args.get("visible") is False:
            ignored = True
    return using, comment, ignored


def is_check_constraint(node) -> bool:
    """A table-level ``[CONSTRAINT name] CHECK (...)`` element (MySQL 8.0.16+, MariaDB)."""
    if isinstance(node, exp.CheckColumnConstraint):
        return True
    return isinstance(node, exp.Constraint) and len(node.expressions) == 1 \
        and isinstance(node.expressions[0], exp.CheckColumnConstraint)


def build_index(node, *, clause: str | None = None, statement: str | None = None) -> Index | None:
    """Map a sqlglot index node to an Index; the name is '' when not given.

    Returns None for non-index schema elements (not produced here)."""
    name = None
    if isinstance(node, exp.Constraint):
        name = node.name or None
        inner = node.expressions
        if len(inner) != 1 or not isinstance(inner[0], (exp.PrimaryKey, exp.UniqueColumnConstraint)):
            raise UnsupportedDDL(f"unsupported constraint {node.sql('mysql')}",
                                 clause=clause, statement=statement)
        node = inner[0]
    if isinstance(node, exp.PrimaryKey):
        parts = tuple(_index_part(p, clause=clause, statement=statement) for p in node.expressions)
        using, comment, ignored = _index_opts(node)
        return Index("PRIMARY", "primary", parts, using, comment, ignored)
    if isinstance(node, exp.UniqueColumnConstraint):
        schema = node.this
        if not isinstance(schema, exp.Schema):
            raise UnsupportedDDL("UNIQUE without column list", clause=clause, statement=statement)
        if schema.this is not None:
            name = schema.this.name
        parts = tuple(_index_part(p, clause=clause, statement=statement) for p in schema.expressions)
        using, comment, ignored = _index_opts(node)
        return Index(name or "", "unique", parts, using, comment, ignored)
    if isinstance(node, exp.IndexColumnConstraint):
        kind = (node.args.get("kind") or "key").lower()
        if kind not in ("fulltext", "spatial", "key"):
            raise UnsupportedDDL(f"unsupported index kind {kind}", clause=clause, statement=statement)
        parts = tuple(_index_part(p, clause=clause, statement=statement) for p in node.expressions)
        using, comment, ignored = _index_opts(node)
        return Index(node.name or "", kind, parts, using, comment, ignored)
    raise UnsupportedDDL(f"unsupported table element {node.sql('mysql')}",
                         clause=clause, statement=statement)


def parse_index_def(text: str, *, statement: str | None = None, clause: str | None = None) -> Index:
    tree = _parse_one(ignored_as_invisible(f"CREATE TABLE _t ({text})"), statement=statement, clause=clause or text)
    elems = tree.this.expressions if isinstance(tree.this, exp.Schema) else []
    if len(elems) != 1:
        raise UnsupportedDDL(f"not a single index definition: {text}",
                             statement=statement, clause=clause or text)
    return build_index(elems[0], clause=clause or text, statement=statement)


def auto_index_name(existing: set[str], first_column: str) -> str:
    """MySQL's name for an unnamed index: first column, then _2, _3, ..."""
    name, n = first_column, 2
    while name.lower() in existing or name.lower() == "primary":
        name, n = f"{first_column}_{n}", n + 1
    return name


# ------------------------------------------------------------------ table options

_MULTI = {("DEFAULT", "CHARSET"): "CHARSET", ("DEFAULT", "CHARACTER", "SET"): "CHARSET",
          ("CHARACTER", "SET"): "CHARSET", ("CHARSET",): "CHARSET",
          ("DEFAULT", "COLLATE"): "COLLATE", ("COLLATE",): "COLLATE"}


def parse_table_options(sql: str, tokens, i: int, j: int, *, statement: str):
    """Parse ``NAME [=] value`` table options in tokens[i:j].

    Returns (charset, collation, [(NAME, value_text)], partition_text)."""
    cs = coll = None
    opts: list[tuple[str, str]] = []
    while i < j:
        if word(tokens[i]) in ("PARTITION", "PARTITION BY"):
            return cs, coll, opts, raw(sql, tokens, i, j)
        if tokens[i].token_type == TokenType.COMMA:
            i += 1
            continue
        name = None
        for pat, canon in _MULTI.items():
            if tuple(word(t) for t in tokens[i:i + len(pat)]) == pat:
                name, i = canon, i + len(pat)
                break
        if name is None:
            name = word(tokens[i])
            if not name or tokens[i].token_type in (TokenType.L_PAREN, TokenType.R_PAREN):
                raise UnsupportedDDL(f"cannot parse table option at {raw(sql, tokens, i, j)!r}",
                                     statement=statement, clause=raw(sql, tokens, i, j))
            i += 1
        if i < j and tokens[i].token_type == TokenType.EQ:
            i += 1
        if i >= j:
            raise UnsupportedDDL(f"table option {name} without value", statement=statement)
        tok = tokens[i]
        i += 1
        if name == "CHARSET":
            cs = ts.norm_charset(tok.text)
        elif name == "COLLATE":
            coll = ts.norm_collation(tok.text)
        elif tok.token_type == TokenType.STRING:
            if tok.text == "" and name == "COMMENT":
                opts = [o for o in opts if o[0] != "COMMENT"]
            else:
                opts = [o for o in opts if o[0] != name] + [(name, ts.quote_string(tok.text))]
        else:
            opts = [o for o in opts if o[0] != name] + [(name, tok_raw(sql, tok))]
    return cs, coll, opts, None


def complete_charset(cs: str | None, coll: str | None) -> tuple[str | None, str | None]:
    if coll is not None and cs is None:
        cs = ts.charset_of_collation(coll)
    if cs is not None and coll is None:
        coll = ts.DEFAULT_COLLATION.get(cs)
    return cs, coll


# ------------------------------------------------------------------ CREATE TABLE

def _matching_paren(tokens, i: int) -> int:
    depth = 0
    for k in range(i, len(tokens)):
        tt = tokens[k].token_type
        if tt == TokenType.L_PAREN:
            depth += 1
        elif tt == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return k
    return -1


def sort_indexes(columns, indexes) -> list[Index]:
    """MariaDB's key order: unique keys first (NOT NULL ones, then PRIMARY,
    then those without prefix parts), fulltext keys last, otherwise creation
    order.  SHOW CREATE TABLE prints keys in this order."""
    nullable = {c.key for c in columns if c.nullable}

    def rank(ix: Index):
        if ix.kind in ("primary", "unique"):
            has_null = any(c.lower() in nullable for c, _ in ix.columns)
            has_prefix = any(p is not None for _, p in ix.columns)
            return (0, has_null, ix.kind != "primary", has_prefix, 0)
        return (1, False, False, False, ix.kind == "fulltext")
    return sorted(indexes, key=rank)


def finish_indexes(columns: list[Column], indexes: list[Index]) -> tuple[list[Column], list[Index]]:
    """Apply MySQL's implicit effects of keys: PK columns become NOT NULL,
    keys are kept in MariaDB's order."""
    pk = next((ix for ix in indexes if ix.kind == "primary"), None)
    if pk is not None:
        keys = {c.lower() for c, _ in pk.columns}
        columns = [replace(c, nullable=False, default=None if c.default == "NULL" else c.default)
                   if c.key in keys and c.nullable else c for c in columns]
    return columns, sort_indexes(columns, indexes)


def _without_partitioning(sql: str) -> str:
    """The statement up to its partition clause (``PARTITION BY ...`` after the table body):
    partitioning is not part of the joined schema, and sqlglot cannot parse MariaDB's form of it
    (such shard tables would otherwise be left out of their lock).  The clause is still kept as a
    table option by ``parse_table_options``."""
    tokens = tokenize(sql)
    try:
        open_i = next(k for k, t in enumerate(tokens) if t.token_type == TokenType.L_PAREN)
    except StopIteration:
        return sql
    close_i = _matching_paren(tokens, open_i)
    for k in range(close_i + 1, len(tokens)):
        w = word(tokens[k])        # the tokenizer may keep "PARTITION BY" as one token
        if w == "PARTITION BY" or (w == "PARTITION" and k + 1 < len(tokens) and word(tokens[k + 1]) == "BY"):
            return sql[:tokens[k].start].rstrip()
    return sql


def ignored_as_invisible(sql: str) -> str:
    """MariaDB's index attribute ``IGNORED`` / ``NOT IGNORED`` (10.6+, its form of MySQL 8's
    INVISIBLE / VISIBLE), which sqlglot does not parse, rewritten to the MySQL words it does: an
    ``IGNORED`` word ending an element of the table body (before ``,`` or the closing paren)."""
    tokens = tokenize(sql)
    out, last, depth = [], 0, 0
    for k, t in enumerate(tokens):
        if t.token_type == TokenType.L_PAREN:
            depth += 1
        elif t.token_type == TokenType.R_PAREN:
            depth -= 1
        elif (depth == 1 and word(t) == "IGNORED" and k + 1 < len(tokens)
              and tokens[k + 1].token_type in (TokenType.COMMA, TokenType.R_PAREN)):
            negated = word(tokens[k - 1]) == "NOT"
            start = tokens[k - 1].start if negated else t.start
            out += [sql[last:start], "VISIBLE" if negated else "INVISIBLE"]
            last = t.end + 1
    return "".join(out) + sql[last:] if out else sql


_EXECUTABLE_COMMENT = re.compile(r"/\*!\d{5,6}\s(.*?)\*/", re.S)
_ENFORCED = re.compile(r"\)\s*(?:NOT\s+)?ENFORCED\b", re.I)


def executable_comments(sql: str) -> str:
    """MySQL's ``SHOW CREATE TABLE`` wraps newer attributes in versioned comments
    (``/*!80023 INVISIBLE */``, ``/*!80016 NOT ENFORCED */``); the server that printed them runs
    them, so they are part of the definition."""
    if "/*!" in sql:
        sql = _EXECUTABLE_COMMENT.sub(lambda m: m.group(1), sql)
    # a CHECK's [NOT] ENFORCED (not merged anyway, and sqlglot does not parse it)
    return _ENFORCED.sub(")", sql) if "ENFORCED" in sql.upper() else sql


def parse_create_table(sql: str) -> TableSchema:
    fixed, float_unsigned = strip_float_unsigned(_without_partitioning(ignored_as_invisible(executable_comments(sql))))
    tree = _parse_one(fixed, statement=sql)
    if not isinstance(tree, exp.Create) or (tree.args.get("kind") or "").upper() != "TABLE":
        raise UnsupportedDDL("expected CREATE TABLE", statement=sql)
    if tree.args.get("expression") is not None or not isinstance(tree.this, exp.Schema):
        raise UnsupportedDDL("CREATE TABLE ... LIKE / AS SELECT is not modelled", statement=sql)
    table = tree.this.this
    tokens = tokenize(sql)
    open_i = next(k for k, t in enumerate(tokens) if t.token_type == TokenType.L_PAREN)
    close_i = _matching_paren(tokens, open_i)
    cs, coll, opts, partition = parse_table_options(sql, tokens, close_i + 1, len(tokens),
                                                    statement=sql)
    if partition is not None:
        opts.append(("PARTITION", partition))
    cs, coll = complete_charset(cs, coll)
    columns: list[Column] = []
    indexes: list[Index] = []
    pending: list[Index] = []
    for elem in tree.this.expressions:
        if isinstance(elem, exp.ColumnDef):
            col, inline = build_column(elem, cs, coll, statement=sql, clause=elem.sql("mysql"),
                                       force_unsigned=elem.name.lower() in float_unsigned)
            if col.key in {c.key for c in columns}:
                raise InvalidDDL(f"duplicate column `{col.name}`", column=col.name, statement=sql)
            columns.append(col)
            for k in inline:
                pending.append(Index("PRIMARY" if k == "primary" else "", k, ((col.name, None),)))
        elif not is_check_constraint(elem):        # table-level CHECKs are not merged (docs/mysql.md)
            pending.append(build_index(elem, statement=sql, clause=elem.sql("mysql")))
    names: set[str] = set()
    colkeys = {c.key for c in columns}
    for ix in pending:
        for c, _ in ix.columns:
            if c.lower() not in colkeys:
                raise InvalidDDL(f"index refers to unknown column `{c}`", column=c, statement=sql)
        if not ix.name:
            ix = replace(ix, name=auto_index_name(names, ix.columns[0][0]))
        if ix.key in names:
            raise InvalidDDL(f"duplicate key name `{ix.name}`", index=ix.name, statement=sql)
        names.add(ix.key)
        indexes.append(ix)
    columns, indexes = finish_indexes(columns, indexes)
    return TableSchema(columns=tuple(columns), indexes=tuple(indexes), charset=cs,
                       collation=coll, options=tuple(opts), name=table.name)
