"""The statements of ``shardctl binlog replace``, checked and grouped the way the worker runs them.

The worker handles a replacement at the binlog position of the statement it replaces, one event
per table; a table's checkpoint moves past that position once, so every change to one table
must be one statement: consecutive ``ALTER TABLE``s of a table merge into one (DM's test form
``ALTER TABLE t ADD c INT; ALTER TABLE t ADD UNIQUE(c)`` becomes ``ALTER TABLE t ADD c INT,
ADD UNIQUE(c)``), other repeats are refused with the way out.
"""
from __future__ import annotations

from .kinds import StatementKind, parse_ddl
from .statement import parse_statement


class ReplacementError(ValueError):
    """A replacement the worker cannot run; the message names the statement and the fix."""


def split_statements(text: str) -> list[str]:
    """``"a; b;"`` -> ``["a", "b"]``: split on semicolons outside quotes and backticks."""
    out: list[str] = []
    cur: list[str] = []
    quote = ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == ";":
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def plan_replacement(statements: list[str], session_schema: str = "", cmd: str = "binlog replace") -> list[str]:
    """The statements to run, one per table, in order (see the module docstring).  Raises
    :class:`ReplacementError` for an empty list, a statement that is not a DDL on a table, or a
    table changed by two statements that cannot be merged.  ``cmd`` names the command in errors
    (``binlog inject`` checks its statements the same way)."""
    stmts = [s for text in statements for s in split_statements(text)]
    what = "injected" if cmd.endswith("inject") else "replacement"
    if not stmts:
        raise ReplacementError(f"{cmd} needs at least one statement, e.g. "
                               "\"ALTER TABLE db.t ADD COLUMN c INT\"")
    plan: list[tuple[tuple[str, str], StatementKind, str]] = []
    for sql in stmts:
        try:
            parsed = parse_ddl(sql, session_schema)
        except Exception as e:  # noqa: BLE001 — any parse failure is the operator's input
            raise ReplacementError(f"{what} statement {sql!r} cannot be parsed: {e}") from None
        if parsed.kind is StatementKind.NOT_DDL or not parsed.tables:
            raise ReplacementError(f"{what} statement {sql!r} is not a DDL on a table; {cmd} "
                                   "takes DDL statements (ALTER/CREATE/DROP TABLE, CREATE/DROP INDEX ...)")
        t = parsed.tables[0]
        key = (t.schema.lower(), t.table.lower())
        if plan and plan[-1][0] == key and plan[-1][1] is StatementKind.ALTER_TABLE \
                and parsed.kind is StatementKind.ALTER_TABLE:
            st = parse_statement(sql)
            assert st.table_span is not None
            plan[-1] = (key, parsed.kind, f"{plan[-1][2]},{st.sql[st.table_span[1]:]}")
            continue
        earlier = next((s for k, _, s in plan if k == key), None)
        if earlier is not None:
            name = f"{t.schema}.{t.table}" if t.schema else t.table
            raise ReplacementError(f"{what} statements change table {name} in two statements that cannot be "
                                   f"merged ({earlier!r} and {sql!r}); give its changes as one ALTER TABLE")
        plan.append((key, parsed.kind, sql))
    return [sql for _, _, sql in plan]
