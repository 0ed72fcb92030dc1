"""The commands messages suggest, quoted so that pasting one into a shell runs it as shown.

A lock ID holds back-quotes (``task-`db`.`tbl```): unquoted, bash would run ``db`` and ``tbl``
as commands.  Each word goes through :func:`shlex.quote`, which leaves plain names as they are.

>>> shardctl("shard-ddl-lock", "unlock", "crm-`crm`.`customers`", "-s", "s1")
"shardctl shard-ddl-lock unlock 'crm-`crm`.`customers`' -s s1"
"""
from __future__ import annotations

import shlex


def shardctl(*words: object) -> str:
    """``shardctl`` with ``words`` as one shell-safe command line."""
    return " ".join(["shardctl", *(shlex.quote(str(w)) for w in words)])


def unlock(lock_id: str, source: str, schema: str, table: str, action: str = "skip") -> str:
    """The operator's unlock of one table of a lock, ready to paste."""
    return shardctl("shard-ddl-lock", "unlock", lock_id, "-s", source, "-d", schema, "-t", table, "--action", action)


def unlock_choice(lock_id: str, source: str, schema: str, table: str) -> str:
    """Both unlock exits, each a whole command (``--action skip|exec`` pasted would pipe to exec)."""
    return (f"`{unlock(lock_id, source, schema, table, 'skip')}` (or the same with `--action exec`)")
