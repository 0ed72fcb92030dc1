"""Splitting multi-change DDL into single-change statements and retargeting
them to another table (the lock engine works per change, like DM)."""
from __future__ import annotations

from .errors import SchemaError
from .render import table_ref
from .kinds import ClauseKind, StatementKind
from .statement import parse_statement


def rename_ddl_table(sql: str, target) -> str:
    """Rewrite the (first) table reference of one statement to ``target``
    (``"t"`` or ``("db", "t")``), keeping the rest of the text verbatim."""
    st = parse_statement(sql)
    a, b = st.table_span
    return st.sql[:a] + table_ref(target) + st.sql[b:]


def split_ddl(sql: str, target=None) -> list[str]:
    """One statement per change.  ALTER TABLE clauses that change nothing
    (ALGORITHM=, LOCK=, FORCE) are dropped; other statements pass through
    (retargeted when ``target`` is given)."""
    st = parse_statement(sql)
    a, b = st.table_span
    ref = table_ref(target) if target is not None else st.sql[a:b]
    if st.kind is not StatementKind.ALTER_TABLE:
        return [st.sql[:a] + ref + st.sql[b:]]
    head = st.sql[:a]
    return [f"{head}{ref} {c.text}" for c in st.clauses if c.kind is not ClauseKind.NOOP]


def combine_ddls(first: str, later: list[str]) -> str:
    """One ALTER TABLE of ``first`` followed by the clauses of the ``later`` ALTERs of the same
    table (the lock's ``Operation.combine``: changes the other shards make in another order, run
    as one statement).  Raises ``SchemaError`` for a statement that is not an ALTER TABLE."""
    clauses = []
    for sql in later:
        st = parse_statement(sql)
        if st.kind is not StatementKind.ALTER_TABLE:
            raise SchemaError(f"only ALTER TABLE changes can be combined, not {sql!r}")
        clauses += [c.text for c in st.clauses if c.kind is not ClauseKind.NOOP]
    return ", ".join([first.rstrip().rstrip(";"), *clauses])
