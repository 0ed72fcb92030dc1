"""The operator's way out of each lock stage and each stopped subtask, as exact ``shardctl``
command lines (docs/master.md "Manual exits"), so the web page and the API can show the command
to run instead of describing it."""
from __future__ import annotations

import re
import shlex

# show-ddl-locks prints a shard table as source-`schema`.`table` (etcdproto.keys.TableRef)
_TABLE = re.compile(r"^(?P<source>.+?)-`(?P<schema>(?:[^`]|``)*)`\.`(?P<table>(?:[^`]|``)*)`$")


def parse_table(text: str) -> tuple[str, str, str] | None:
    """(source, schema, table) of a lock member as the master prints it; None if not that form."""
    m = _TABLE.match(text)
    if m is None:
        return None
    return m["source"], m["schema"].replace("``", "`"), m["table"].replace("``", "`")


def table_stage(waiting_for: str) -> str:
    """The stage a waiting table is in, from the master's explanation (lock.Lock.waiting_for)."""
    for stage in ("conflict", "skip-and-wait", "error", "redirected"):
        if waiting_for.startswith(stage + ":"):
            return stage
    if waiting_for.startswith("waiting for the worker"):
        return "executing"
    return "waiting"


def _q(*words: str) -> str:
    return " ".join(shlex.quote(w) for w in words)


def table_exits(lock_id: str, task: str, table: str, waiting_for: str) -> list[str]:
    """Commands that get ``table`` out of lock ``lock_id``, best first."""
    ref = parse_table(table)
    if ref is None:
        return [_q("shardctl", "shard-ddl-lock", task)]
    source, schema, name = ref
    unlock = ["shardctl", "shard-ddl-lock", "unlock", lock_id, "-s", source, "-d", schema, "-t", name]
    stage = table_stage(waiting_for)
    if stage in ("conflict", "skip-and-wait", "error"):
        return [_q(*unlock, "--action", "skip"), _q(*unlock, "--action", "exec"),
                _q("shardctl", "binlog", "skip", task, "-s", source)]
    if waiting_for.startswith("the tables' schemas cannot be joined"):
        return []              # held by another table's conflict: that table's exits apply
    if stage == "waiting":
        # the other tables went ahead and this one has not made the change yet: usually nothing to
        # do (its stream has not reached its DDL); removing it is for a table that never will
        return [NOT_YET, _q("shardctl", "shard-ddl-lock", "remove-table", lock_id, "-s", source, "-d", schema,
                            "-t", name)]
    return []                  # the worker is acting on an answer: nothing to do but wait


def lock_exits(lock_id: str) -> list[str]:
    """Ways to drop the whole lock."""
    return [_q("shardctl", "shard-ddl-lock", "unlock", lock_id, "--force-remove")]


# Exits are pasted into a shell as shown: advice is a comment line, which a shell ignores.
NOT_YET = ("# nothing to do while this table's own DDL is still to come (the lock resolves when it runs "
           "upstream and reaches the worker); only if this table will never make the change:")
MISFIT = ("# the downstream table does not fit these rows (was a DDL skipped with `unlock --action skip` or "
          "`binlog skip`?): make it match them first (e.g. run the upstream's ALTER downstream); a resume "
          "alone replays the same rows and fails again. Then:")

# MySQL errors of a row that does not fit the downstream table (unknown column, column count,
# no such table, value too long, value of the wrong type)
_MISFIT = re.compile(r"\b(1054|1136|1146|1406|1366)\b|Unknown column|doesn't exist|Data too long|Column count")


def subtask_exits(task: str, source: str, stage: str, error: str, waiting_for: str, lock_id: str) -> list[str]:
    """Commands for a subtask that stopped or paused (query-status row); [] when it runs."""
    if stage == "Error":
        out = []
        if "binlog skip" in error:
            out.append(_q("shardctl", "binlog", "skip", task, "-s", source))
        elif _MISFIT.search(error):
            out.append(MISFIT)
        out.append(_q("shardctl", "resume-task", "-s", source, task))
        return out
    if stage == "Paused":
        if waiting_for.startswith("paused by pause-task"):
            return [_q("shardctl", "resume-task", "-s", source, task)]
        if lock_id:
            return [_q("shardctl", "shard-ddl-lock", task), _q("shardctl", "binlog", "skip", task, "-s", source)]
        return [_q("shardctl", "resume-task", "-s", source, task)]
    return []
