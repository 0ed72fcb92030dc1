"""One statement's text for the downstream server it runs on: MySQL or MariaDB.

The schema model renders an index the optimizer skips as MariaDB does (``IGNORED``,
``ALTER INDEX i [NOT] IGNORED``); MySQL spells the same ``INVISIBLE`` / ``VISIBLE``.  Only
keyword tokens are rewritten, never quoted names or strings: a column's ``INVISIBLE`` means the
same on both servers and is left alone.

Collations: MySQL 8's default ``utf8mb4_0900_*`` (UCA 9.0) do not exist on MariaDB, whose
nearest are the UCA 14.0 ``utf8mb4_uca1400_*`` (10.10+), and the reverse on MySQL.  A MySQL
source's table created or changed on a MariaDB downstream gets the MariaDB name.
"""
from __future__ import annotations

import re

from coordinator.schema.parse import tokenize, word

MYSQL, MARIADB = "mysql", "mariadb"


def server_flavor(version: str) -> str:
    """``mysql`` or ``mariadb`` from a server's version string (MariaDB always names itself)."""
    return MARIADB if "mariadb" in (version or "").lower() else MYSQL


_TO_MARIADB = {"utf8mb4_0900_ai_ci": "utf8mb4_uca1400_ai_ci", "utf8mb4_0900_as_ci": "utf8mb4_uca1400_as_ci",
               "utf8mb4_0900_as_cs": "utf8mb4_uca1400_as_cs", "utf8mb4_0900_bin": "utf8mb4_bin"}
_TO_MYSQL = {v: k for k, v in _TO_MARIADB.items() if v != "utf8mb4_bin"}
_COLL = {MARIADB: (re.compile(r"\b(" + "|".join(_TO_MARIADB) + r")\b", re.I), _TO_MARIADB),
         MYSQL: (re.compile(r"\b(" + "|".join(_TO_MYSQL) + r")\b", re.I), _TO_MYSQL)}


def for_server(sql: str, flavor: str) -> str:
    """``sql`` as ``flavor`` takes it (unchanged where nothing differs, and when not tokenizable)."""
    pattern, names = _COLL[MYSQL if flavor == MYSQL else MARIADB]
    sql = pattern.sub(lambda m: names[m.group(1).lower()], sql)
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
