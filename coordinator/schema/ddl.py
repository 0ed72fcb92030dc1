"""Applying one DDL statement to a TableSchema (MySQL semantics, clause by clause)."""
from __future__ import annotations

from dataclasses import replace

from . import typesys as ts
from .errors import InvalidDDL, SchemaError, UnsupportedDDL
from .model import Column, Index, TableSchema
from .parse import (auto_index_name, complete_charset, finish_indexes, parse_column_def,
                    parse_create_table, parse_index_def, sort_indexes)
from .kinds import ClauseKind, StatementKind
from .statement import Clause, parse_statement

_MBMAXLEN = {"latin1": 1, "ascii": 1, "binary": 1, "utf8mb3": 3, "utf8mb4": 4, "ucs2": 2,
             "utf16": 4, "utf32": 4, "cp1251": 1, "latin2": 1, "gbk": 2, "big5": 2}
_TEXT_BYTES = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295}


def apply_ddl(schema: TableSchema | None, sql: str) -> TableSchema | None:
    """Apply one statement.  ``schema`` None means the table does not exist
    (only CREATE TABLE applies); DROP TABLE returns None."""
    st = parse_statement(sql)
    if st.kind is StatementKind.CREATE_TABLE:
        if schema is not None:
            if st.data["if_not_exists"]:
                return schema
            raise InvalidDDL(f"table `{st.table[1]}` already exists", statement=sql)
        return parse_create_table(st.sql)
    if schema is None:
        if st.kind is StatementKind.DROP_TABLE and st.data["if_exists"]:
            return None
        raise InvalidDDL(f"table `{st.table[1]}` does not exist", statement=sql)
    if st.kind is StatementKind.DROP_TABLE:
        return None
    if st.kind is StatementKind.TRUNCATE_TABLE:
        return replace(schema, options=tuple(o for o in schema.options if o[0] != "AUTO_INCREMENT"))
    if st.kind is StatementKind.RENAME_TABLE:
        return schema.with_name(st.data["new"][1])
    if st.kind is StatementKind.CREATE_INDEX:
        schema = _apply_clause(schema, Clause(ClauseKind.ADD_INDEX, st.data["def"],
                                              {"def": st.data["def"],
                                               "if_not_exists": st.data.get("if_not_exists", False)}), sql)
        return replace(schema, indexes=tuple(sort_indexes(schema.columns, schema.indexes)))
    if st.kind is StatementKind.DROP_INDEX:
        return _apply_clause(schema, Clause(ClauseKind.DROP_INDEX, "", {"name": st.data["name"],
                                                                        "if_exists": st.data.get("if_exists", False)}),
                             sql)
    for clause in st.clauses:
        schema = _apply_clause(schema, clause, sql)
    _check_auto_increment(schema, sql)
    return replace(schema, indexes=tuple(sort_indexes(schema.columns, schema.indexes)))


def _apply_clause(s: TableSchema, c: Clause, sql: str) -> TableSchema:
    try:
        return _CLAUSES[c.kind](s, c.data, sql, c.text)
    except SchemaError as e:
        e.statement = sql
        if c.text and (e.clause is None or isinstance(e, UnsupportedDDL)):
            e.clause = c.text
        raise


def _err(msg, sql, clause, **kw):
    return InvalidDDL(msg, statement=sql, clause=clause, **kw)


def _place(cols: list[Column], col: Column, position, sql, clause) -> list[Column]:
    if position is None:
        return cols + [col]
    if position[0] == "first":
        return [col] + cols
    after = position[1].lower()
    for k, c in enumerate(cols):
        if c.key == after:
            return cols[:k + 1] + [col] + cols[k + 1:]
    raise _err(f"unknown column `{position[1]}` in AFTER", sql, clause, column=position[1])


def _with_inline_keys(s: TableSchema, col: Column, inline, sql, clause) -> TableSchema:
    for kind in inline:
        body = "PRIMARY KEY" if kind == "primary" else "UNIQUE KEY"
        ix = Index("PRIMARY" if kind == "primary" else "", kind, ((col.name, None),))
        s = _add_index(s, ix, sql, clause + f" ({body})")
    return s


def _add_column(s, d, sql, clause):
    col, inline = parse_column_def(d["def"], s.charset, s.collation, statement=sql, clause=clause)
    if s.column(col.name) is not None:
        if d.get("if_not_exists"):
            return s
        raise _err(f"duplicate column `{col.name}`", sql, clause, column=col.name)
    cols = _place(list(s.columns), col, d["position"], sql, clause)
    return _with_inline_keys(replace(s, columns=tuple(cols)), col, inline, sql, clause)


def _drop_column(s, d, sql, clause):
    name = d["name"]
    if s.column(name) is None:
        if d.get("if_exists"):
            return s
        raise _err(f"unknown column `{name}`", sql, clause, column=name)
    cols = [c for c in s.columns if c.key != name.lower()]
    if not cols:
        raise _err("cannot drop the last column; use DROP TABLE", sql, clause, column=name)
    idx = []
    for ix in s.indexes:
        parts = tuple(p for p in ix.columns if p[0].lower() != name.lower())
        if parts:
            idx.append(replace(ix, columns=parts))
    return replace(s, columns=tuple(cols), indexes=tuple(idx))


def _replace_column(s, old_name, d, sql, clause, keep_def: Column | None = None):
    old = s.column(old_name)
    if old is None:
        if d.get("if_exists"):
            return s
        raise _err(f"unknown column `{old_name}`", sql, clause, column=old_name)
    if keep_def is not None:
        new, inline = keep_def, []
    else:
        new, inline = parse_column_def(d["def"], s.charset, s.collation, statement=sql, clause=clause)
    other = s.column(new.name)
    if other is not None and other.key != old.key:
        raise _err(f"duplicate column `{new.name}`", sql, clause, column=new.name)
    rest = [c for c in s.columns if c.key != old.key]
    pos = d.get("position")
    if pos is None:
        k = [c.key for c in s.columns].index(old.key)
        cols = rest[:k] + [new] + rest[k:]
    else:
        if pos[0] == "after" and pos[1].lower() == old.key and new.key != old.key:
            raise _err(f"unknown column `{pos[1]}` in AFTER", sql, clause, column=pos[1])
        cols = _place(rest, new, pos, sql, clause)
    idx = tuple(replace(ix, columns=tuple((new.name if c.lower() == old.key else c, p)
                                          for c, p in ix.columns)) for ix in s.indexes)
    cols, idx = finish_indexes(cols, list(idx))
    return _with_inline_keys(replace(s, columns=tuple(cols), indexes=tuple(idx)), new, inline, sql, clause)


def _modify_column(s, d, sql, clause):
    col, _ = parse_column_def(d["def"], s.charset, s.collation, statement=sql, clause=clause)
    return _replace_column(s, col.name, d, sql, clause)


def _change_column(s, d, sql, clause):
    return _replace_column(s, d["old"], d, sql, clause)


def _rename_column(s, d, sql, clause):
    old = s.column(d["old"])
    if old is None:
        raise _err(f"unknown column `{d['old']}`", sql, clause, column=d["old"])
    return _replace_column(s, d["old"], {}, sql, clause, keep_def=replace(old, name=d["new"]))


def _column_visibility(s, d, sql, clause):
    col = s.column(d["name"])
    if col is None:
        raise _err(f"unknown column `{d['name']}`", sql, clause, column=d["name"])
    new = replace(col, invisible=d["invisible"])
    return replace(s, columns=tuple(new if c is col else c for c in s.columns))


def _alter_default(s, d, sql, clause):
    col = s.column(d["name"])
    if col is None:
        raise _err(f"unknown column `{d['name']}`", sql, clause, column=d["name"])
    if d["default"] is None:
        new = replace(col, default="NULL" if col.nullable else None)
    else:
        dflt = ts.canon_default(d["default"], col.type)
        if dflt == "NULL" and not col.nullable:
            raise _err(f"invalid default NULL for NOT NULL column `{col.name}`", sql, clause,
                       column=col.name)
        if col.auto_increment:
            raise _err(f"AUTO_INCREMENT column `{col.name}` cannot have a default", sql, clause,
                       column=col.name)
        new = replace(col, default=dflt)
    return replace(s, columns=tuple(new if c.key == col.key else c for c in s.columns))


def _add_index(s: TableSchema, ix: Index, sql, clause) -> TableSchema:
    for c, _ in ix.columns:
        if s.column(c) is None:
            raise _err(f"key column `{c}` doesn't exist in table", sql, clause, column=c)
    if ix.kind == "primary":
        if s.primary_key is not None:
            raise _err("multiple primary key defined", sql, clause, index="PRIMARY")
    elif not ix.name:
        ix = replace(ix, name=auto_index_name({i.key for i in s.indexes}, ix.columns[0][0]))
    elif s.index(ix.name) is not None or ix.key == "primary":
        raise _err(f"duplicate key name `{ix.name}`", sql, clause, index=ix.name)
    cols, idx = finish_indexes(list(s.columns), list(s.indexes) + [ix])
    return replace(s, columns=tuple(cols), indexes=tuple(idx))


def _add_index_clause(s, d, sql, clause):
    ix = parse_index_def(d["def"], statement=sql, clause=clause)
    if d.get("if_not_exists") and ix.name and s.index(ix.name) is not None:
        return s
    return _add_index(s, ix, sql, clause)


def _drop_index(s, d, sql, clause):
    if s.index(d["name"]) is None:
        if d.get("if_exists"):
            return s
        raise _err(f"can't DROP INDEX `{d['name']}`; check that it exists", sql, clause,
                   index=d["name"])
    return replace(s, indexes=tuple(i for i in s.indexes if i.key != d["name"].lower()))


def _alter_index(s, d, sql, clause):
    ix = s.index(d["name"])
    if ix is None:
        raise _err(f"key `{d['name']}` does not exist", sql, clause, index=d["name"])
    if ix.kind == "primary" and d["ignored"]:
        raise _err("a primary key cannot be ignored", sql, clause, index=d["name"])
    return replace(s, indexes=tuple(replace(i, ignored=d["ignored"]) if i is ix else i for i in s.indexes))


def _rename_index(s, d, sql, clause):
    ix = s.index(d["old"])
    if ix is None or ix.kind == "primary":
        raise _err(f"key `{d['old']}` does not exist", sql, clause, index=d["old"])
    if d["new"].lower() != ix.key and (s.index(d["new"]) is not None or d["new"].lower() == "primary"):
        raise _err(f"duplicate key name `{d['new']}`", sql, clause, index=d["new"])
    return replace(s, indexes=tuple(replace(i, name=d["new"]) if i is ix else i for i in s.indexes))


# Table options MySQL 8 / MariaDB 10.11 accept in CREATE/ALTER TABLE; anything else is not an
# option but a clause this engine does not know, and must not be recorded as one.
KNOWN_TABLE_OPTIONS = frozenset({
    "ENGINE", "AUTO_INCREMENT", "AVG_ROW_LENGTH", "CHECKSUM", "TABLE_CHECKSUM", "COMMENT", "COMPRESSION",
    "CONNECTION", "DATA DIRECTORY", "INDEX DIRECTORY", "DELAY_KEY_WRITE", "ENCRYPTED", "ENCRYPTION",
    "ENCRYPTION_KEY_ID", "INSERT_METHOD", "KEY_BLOCK_SIZE", "MAX_ROWS", "MIN_ROWS", "PACK_KEYS",
    "PAGE_CHECKSUM", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL", "PASSWORD", "ROW_FORMAT", "SEQUENCE",
    "STATS_AUTO_RECALC", "STATS_PERSISTENT", "STATS_SAMPLE_PAGES", "TABLESPACE", "TRANSACTIONAL", "UNION",
    "IETF_QUOTES", "SECONDARY_ENGINE", "AUTOEXTEND_SIZE", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE",
    "STORAGE", "START TRANSACTION",
})


def _table_options(s, d, sql, clause):
    for k, _ in d["options"]:
        if k.upper() not in KNOWN_TABLE_OPTIONS:
            raise UnsupportedDDL(f"unknown table option or clause {k!r}", statement=sql, clause=clause)
    cs, coll = d["charset"], d["collation"]
    if cs is not None or coll is not None:
        if cs is None and s.charset is not None and coll is not None \
                and ts.charset_of_collation(coll) != s.charset:
            raise _err(f"collation {coll} is not valid for charset {s.charset}", sql, clause)
        cs, coll = complete_charset(cs, coll)
        s = replace(s, charset=cs, collation=coll)
    opts = list(s.options)
    for k, v in d["options"]:
        opts = [o for o in opts if o[0] != k]
        if not (k == "COMMENT" and v == "''"):
            opts.append((k, v))
    return replace(s, options=tuple(opts))


def _convert_type(col: Column, cs: str, coll: str) -> Column:
    t = col.type
    if not t.has_charset:
        return col
    base = t.base
    if base in _TEXT_BYTES and t.charset in _MBMAXLEN and cs in _MBMAXLEN:
        need = _TEXT_BYTES[base] // _MBMAXLEN[t.charset] * _MBMAXLEN[cs]
        base = next(b for b in ts.TEXT_FAMILY if _TEXT_BYTES[b] >= need) \
            if need <= _TEXT_BYTES["longtext"] else "longtext"
    return replace(col, type=replace(t, base=base, charset=cs, collation=coll))


def _convert_charset(s, d, sql, clause):
    cs, coll = complete_charset(ts.norm_charset(d["charset"]), ts.norm_collation(d["collation"]))
    cols = tuple(_convert_type(c, cs, coll) for c in s.columns)
    return replace(s, columns=cols, charset=cs, collation=coll)


def _rename_table(s, d, sql, clause):
    return s.with_name(d["table"][1])


def _noop(s, d, sql, clause):
    return s


_CLAUSES = {
    ClauseKind.ADD_COLUMN: _add_column, ClauseKind.DROP_COLUMN: _drop_column,
    ClauseKind.MODIFY_COLUMN: _modify_column, ClauseKind.CHANGE_COLUMN: _change_column,
    ClauseKind.RENAME_COLUMN: _rename_column, ClauseKind.ALTER_DEFAULT: _alter_default,
    ClauseKind.COLUMN_VISIBILITY: _column_visibility, ClauseKind.ADD_INDEX: _add_index_clause,
    ClauseKind.DROP_INDEX: _drop_index, ClauseKind.RENAME_INDEX: _rename_index, ClauseKind.ALTER_INDEX: _alter_index,
    ClauseKind.TABLE_OPTIONS: _table_options, ClauseKind.CONVERT_CHARSET: _convert_charset,
    ClauseKind.RENAME_TABLE: _rename_table, ClauseKind.NOOP: _noop,
}


def _check_auto_increment(s: TableSchema, sql: str) -> None:
    """MySQL requires an AUTO_INCREMENT column to lead some index."""
    ai = [c for c in s.columns if c.auto_increment]
    if len(ai) > 1:
        raise InvalidDDL("there can be only one AUTO_INCREMENT column", statement=sql,
                         column=ai[1].name)
    if ai and not any(ix.columns and ix.columns[0][0].lower() == ai[0].key for ix in s.indexes):
        raise InvalidDDL(f"AUTO_INCREMENT column `{ai[0].name}` must be defined as a key",
                         statement=sql, column=ai[0].name)
