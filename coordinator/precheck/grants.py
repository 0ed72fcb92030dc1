"""What ``SHOW GRANTS`` gives the current user: global, per-database and per-table privileges.

The prechecks ask "may this user SELECT `db`.`tb`?" and "does it hold REPLICATION SLAVE?"
without trying (a binlog dump cannot be tried cheaply).  Column-level grants, roles and
PROXY are not counted: the worker needs whole tables.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_GRANT = re.compile(r"^GRANT (.+?) ON (?:(?:TABLE|FUNCTION|PROCEDURE|PACKAGE(?: BODY)?) )?(\S+) TO ", re.IGNORECASE)
_IDENT = r"(?:`(?:[^`]|``)+`|\*|[^.`\s]+)"
_SCOPE = re.compile(rf"^({_IDENT})\.({_IDENT})$")


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def _db_pattern(name: str) -> re.Pattern:
    """A database name in GRANT may hold ``%`` and ``_`` wildcards (``\\_`` is a literal)."""
    out, i = [], 0
    while i < len(name):
        ch = name[i]
        if ch == "\\" and i + 1 < len(name):
            out.append(re.escape(name[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("^" + "".join(out) + "$")


def _privileges(text: str) -> set[str]:
    """``SELECT, INSERT, UPDATE (a, b)`` -> {SELECT, INSERT}: column grants do not count."""
    text = re.sub(r"\s+WITH\s+.*$", "", text)
    out = set()
    depth, cur = 0, ""
    for ch in text + ",":
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            p = cur.strip().upper()
            if p and "(" not in p:
                out.add("ALL" if p in ("ALL", "ALL PRIVILEGES") else p)
            cur = ""
        else:
            cur += ch
    return out


@dataclass
class Grants:
    global_privs: set[str] = field(default_factory=set)
    db_privs: list[tuple[re.Pattern, set[str]]] = field(default_factory=list)
    table_privs: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def has_global(self, priv: str) -> bool:
        return "ALL" in self.global_privs or priv in self.global_privs

    def on_table(self, priv: str, schema: str, table: str) -> bool:
        if self.has_global(priv):
            return True
        if any(p.match(schema) and ("ALL" in privs or priv in privs) for p, privs in self.db_privs):
            return True
        privs = self.table_privs.get((schema, table.lower()), set())
        return "ALL" in privs or priv in privs


def parse_grants(lines: list[str]) -> Grants:
    g = Grants(lines=list(lines))
    for line in lines:
        m = _GRANT.match(line.strip())
        if not m:
            continue          # role grants (GRANT `r` TO u), PROXY, ...
        privs = _privileges(m.group(1))
        s = _SCOPE.match(m.group(2))
        if not s:
            continue
        db, tb = s.group(1), s.group(2)
        if db == "*":
            g.global_privs |= privs
        elif tb == "*":
            g.db_privs.append((_db_pattern(_unquote(db)), privs))
        else:
            g.table_privs.setdefault((_unquote(db), _unquote(tb).lower()), set()).update(privs)
    return g


def current_grants(conn) -> Grants:
    with conn.cursor() as cur:
        cur.execute("SHOW GRANTS FOR CURRENT_USER()")
        return parse_grants([r[0] for r in cur.fetchall()])
