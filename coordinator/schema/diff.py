"""DDL that turns one (joined) downstream schema into another."""
from __future__ import annotations

from dataclasses import replace

from . import typesys as ts
from .ddl import apply_ddl
from .errors import InvalidDDL
from .model import Column, TableSchema
from .render import quote_ident, render_column, render_index, table_ref


def _lcs(a: list[str], b: list[str]) -> set[str]:
    """Names on a longest common subsequence: columns that need not move."""
    n, m = len(a), len(b)
    dp = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            dp[i][j] = dp[i + 1][j + 1] + 1 if a[i] == b[j] else max(dp[i + 1][j], dp[i][j + 1])
    out, i, j = set(), 0, 0
    while i < n and j < m:
        if a[i] == b[j]:
            out.add(a[i])
            i, j = i + 1, j + 1
        elif dp[i + 1][j] >= dp[i][j + 1]:
            i += 1
        else:
            j += 1
    return out


def _coldef(c: Column) -> str:
    return render_column(c, explicit_charset=True)


def settle_mixed(old: TableSchema, new: TableSchema) -> TableSchema:
    """``new`` with each ``MIXED_DEFAULT`` (tables disagree on the default) replaced by ``old``'s
    default for that column, or no default for a column ``old`` lacks: the merged table keeps
    the default it has until the tables agree, and nothing renders the top."""
    if not any(c.default == ts.MIXED_DEFAULT for c in new.columns):
        return new
    cols = []
    for c in new.columns:
        if c.default == ts.MIXED_DEFAULT:
            o = old.column(c.key)
            keep = o.default if o is not None and o.default != ts.MIXED_DEFAULT else None
            c = replace(c, default=None if keep is None else ts.canon_default(keep, c.type))
        cols.append(c)
    return replace(new, columns=tuple(cols))


def diff_ddls(old: TableSchema, new: TableSchema, table) -> list[str]:
    """ALTER TABLE statements (one change each) taking ``old`` to ``new``.

    Applying them in order to ``old`` gives ``new`` exactly (``settle_mixed(old, new)`` where the
    tables disagree on a default): columns in
    new's order with new's definitions, new's indexes (primary first, the
    others in new's order), charset/collation and table options.  A change
    MySQL only accepts together (an AUTO_INCREMENT column and the key it
    needs) is emitted as one multi-clause statement."""
    new = settle_mixed(old, new)
    ref = table_ref(table)
    clauses: list[str] = []
    if (old.charset, old.collation) != (new.charset, new.collation) and new.charset:
        clauses.append(f"DEFAULT CHARSET={new.charset} COLLATE={new.collation}")
    for k, v in new.options:
        if k not in ("PARTITION", "AUTO_INCREMENT") and old.option(k) != v:
            clauses.append(f"{k}={v}")
    if old.option("COMMENT") is not None and new.option("COMMENT") is None:
        clauses.append("COMMENT=''")

    # indexes: keep the unchanged ones whose relative order already matches
    new_idx = {i.key: i for i in new.indexes}
    kept = [i for i in old.indexes if new_idx.get(i.key) == i and i.kind != "primary"]
    want = [i for i in new.indexes if i.kind != "primary"]
    prefix = 0
    while prefix < min(len(kept), len(want)) and kept[prefix] == want[prefix]:
        prefix += 1
    keep_keys = {i.key for i in kept[:prefix]}
    if old.primary_key is not None and old.primary_key == new.primary_key:
        keep_keys.add("primary")
    for i in old.indexes:
        if i.key not in keep_keys:
            clauses.append("DROP PRIMARY KEY" if i.kind == "primary"
                           else f"DROP INDEX {quote_ident(i.name)}")

    new_keys = {c.key for c in new.columns}
    old_cols = {c.key: c for c in old.columns}
    stay = _lcs([c.key for c in old.columns if c.key in new_keys], [c.key for c in new.columns])
    prev: Column | None = None
    for c in new.columns:
        pos = "FIRST" if prev is None else f"AFTER {quote_ident(prev.name)}"
        if c.key not in old_cols:
            clauses.append(f"ADD COLUMN {_coldef(c)} {pos}")
        elif c.key not in stay:
            clauses.append(f"MODIFY COLUMN {_coldef(c)} {pos}")
        elif old_cols[c.key] != c:
            if old_cols[c.key].name != c.name:
                clauses.append(f"CHANGE COLUMN {quote_ident(old_cols[c.key].name)} {_coldef(c)}")
            else:
                clauses.append(f"MODIFY COLUMN {_coldef(c)}")
        prev = c
    # drops last: a table may not lose all its columns on the way
    for c in old.columns:
        if c.key not in new_keys:
            clauses.append(f"DROP COLUMN {quote_ident(c.name)}")

    if new.primary_key is not None and "primary" not in keep_keys:
        clauses.append("ADD " + render_index(new.primary_key))
    for i in want:
        if i.key not in keep_keys:
            clauses.append("ADD " + render_index(i))
    return _group(old, ref, clauses)


def _group(old: TableSchema, ref: str, clauses: list[str]) -> list[str]:
    """One clause per statement, except where MySQL needs several at once."""
    out: list[str] = []
    cur = old
    pending: list[str] = []
    for cl in clauses:
        pending.append(cl)
        stmt = f"ALTER TABLE {ref} " + ", ".join(pending)
        try:
            cur = apply_ddl(cur, stmt)
        except InvalidDDL as e:
            if "AUTO_INCREMENT" not in e.message:
                raise
            continue
        out.append(stmt)
        pending = []
    if pending:
        out.append(f"ALTER TABLE {ref} " + ", ".join(pending))
    return out
