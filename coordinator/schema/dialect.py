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


def server_version(version: str) -> int:
    """A version string as the number executable comments compare with (``10.11.6-MariaDB`` ->
    101106, ``9.7.0`` -> 90700); 0 when it has no version.  MariaDB's handshake says
    ``5.5.5-10.11.6-MariaDB`` (a prefix old clients needed): the real version follows it."""
    version = version or ""
    if server_flavor(version) == MARIADB and version.startswith("5.5.5-"):
        version = version[len("5.5.5-"):]
    m = re.match(r"\s*(\d+)\.(\d+)\.(\d+)", version)
    return int(m.group(1)) * 10000 + int(m.group(2)) * 100 + int(m.group(3)) if m else 0


_EXEC_HEAD = re.compile(r"/\*(M?)!(\d{5,6})?")


def executed_text(sql: str, server: str | None = None) -> str:
    """``sql`` as the server ``server`` (its version string; None: a MariaDB of any version)
    executed it: the body of each executable comment the server runs (``/*! ... */``,
    ``/*!50110 ... */`` and ``/*!100100 ... */`` up to its version, on MariaDB ``/*M! ... */``
    too but no five-digit version from 50700 on) becomes plain text, one it skips is removed.  The shard-DDL path models, coordinates and runs the text, so an
    ``ALTER TABLE t ADD q INT /*M! , ADD r INT */`` from a MariaDB source adds both columns
    everywhere, as it did upstream.  Quoted strings and names are left alone."""
    if "/*" not in sql or "!" not in sql:
        return sql
    flavor = MARIADB if server is None else server_flavor(server)
    version = server_version(server or "") or 10**7
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            j = i + 1
            while j < n:
                if sql[j] == "\\" and ch != "`":
                    j += 2
                    continue
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:     # a doubled quote inside the literal
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i:j + 1])
            i = j + 1
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end
            m = _EXEC_HEAD.match(sql, i)
            if m is None:
                out.append(sql[i:end + 2])
            else:
                mariadb_only, digits = m.group(1) == "M", m.group(2) or ""
                need = int(digits or 0)
                runs = (flavor == MARIADB or not mariadb_only) and need <= version
                if flavor == MARIADB and len(digits) == 5 and need >= 50700:
                    runs = False     # MariaDB skips MySQL-only code past 5.7 (measured on 10.11)
                if runs:
                    out.append(" " + executed_text(sql[m.end():end], server) + " ")
            i = end + 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)
