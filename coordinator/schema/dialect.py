"""One statement's text for the downstream server it runs on: MySQL or MariaDB.

The schema model renders an index the optimizer skips as MariaDB does (``IGNORED``,
``ALTER INDEX i [NOT] IGNORED``); MySQL spells the same ``INVISIBLE`` / ``VISIBLE``.  Only
keyword tokens are rewritten, never quoted names or strings, and only in index context: a
column's ``INVISIBLE`` means the same on both servers and is left alone.
"""
from __future__ import annotations

from coordinator.schema.parse import tokenize, word

MYSQL, MARIADB = "mysql", "mariadb"


def server_flavor(version: str) -> str:
    """``mysql`` or ``mariadb`` from a server's version string (MariaDB always names itself)."""
    return MARIADB if "mariadb" in (version or "").lower() else MYSQL


def for_server(sql: str, flavor: str) -> str:
    """``sql`` as ``flavor`` takes it (unchanged for MariaDB, and for anything not tokenizable)."""
    if flavor != MYSQL or "IGNORED" not in sql.upper():
        return sql
    try:
        toks = tokenize(sql)
    except Exception:  # noqa: BLE001 — the statement runs as it is; the server says what is wrong
        return sql
    out, last, k = [], 0, 0
    while k < len(toks):
        if word(toks[k]) == "IGNORED":
            neg = k > 0 and word(toks[k - 1]) == "NOT"
            start = toks[k - 1].start if neg else toks[k].start
            out += [sql[last:start], "VISIBLE" if neg else "INVISIBLE"]
            last = toks[k].end + 1
        k += 1
    return "".join(out) + sql[last:]
