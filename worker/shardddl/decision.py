"""What the worker does with a shard DDL and with the master's answer to it: pure functions
returning typed outcomes, no I/O (the etcd side is ``lock_client``, the loop is ``handler``).

Two decisions are made per DDL:

* :func:`route_kind` - before any lock: which path a statement of this kind takes
  (coordinate through a lock, create/drop the table's membership, ignore a TRUNCATE,
  refuse a RENAME, pass ADD/DROP PARTITION through to the target);
* :func:`on_operation` - for each Operation answering our Info: execute its statements, hold the
  table (skip-and-wait: other tables keep replicating), pause until the lock changes, or fail
  (strict mode).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from coordinator.etcdproto import Operation, Stage
from coordinator.schema.kinds import Route, StatementKind


@dataclass(frozen=True)
class TableDDL:
    """One upstream DDL statement on one table, as read from the binlog."""
    sql: str
    schema: str                 # upstream schema the statement names (or the session default)
    table: str
    kind: StatementKind
    position: str = ""          # binlog position of the event (text, for status and errors)
    timestamp: int | None = None
    end: str = ""               # binlog position after the event (names the statement to `binlog skip`)
    change: int | None = None   # which change of a multi-change ALTER this is (None: the whole statement)
    rest: tuple[int, ...] = ()  # that ALTER's changes still to come after this one, in their order
    combined: bool = False      # a held statement with later ones folded in (``DDLEvent.folds``): one change


_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
# partition maintenance DM runs on the merged table as the shard wrote it (DM_ADD_DROP_PARTITIONS):
# it changes no column or index, so there is nothing for a lock to join.  REORGANIZE, COALESCE,
# TRUNCATE, EXCHANGE ... PARTITION, PARTITION BY and REMOVE PARTITIONING are not in it: they stop
# the source for the operator (docs/worker.md, "Partition statements on a shard")
_PASS_THROUGH = re.compile(
    rf"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?{_NAME}(?:\s*\.\s*{_NAME})?\s+"
    r"(?:ADD|DROP)\s+PARTITION\b", re.I | re.S)


def route_kind(kind: StatementKind, sql: str = "") -> Route:
    """The path of a statement of ``kind``: its row's (``coordinator.schema.kinds.KIND_ROWS``), but a
    coordinated statement that is partition maintenance (told by its text ``sql``) passes through."""
    route = kind.row.route
    if route is Route.COORDINATE and _PASS_THROUGH.match(sql):
        return Route.PASS_THROUGH
    return route


# ----------------------------------------------------------------------------- answers
@dataclass(frozen=True)
class Execute:
    """Run ``statements`` downstream (none: the lock decided this shard's change needs nothing)."""
    statements: tuple[str, ...]


@dataclass(frozen=True)
class Hold:
    """Skip-and-wait: run nothing, hold this table until the lock redirects it."""
    message: str


@dataclass(frozen=True)
class Pause:
    """The lock reports a conflict: wait for a newer Operation (the lock changed or an operator
    unlocked); the subtask shows Paused with ``message``."""
    message: str


@dataclass(frozen=True)
class Fail:
    """Strict mode: a conflict fails the subtask at once."""
    message: str


@dataclass(frozen=True)
class Replay:
    """A redirect (``resolved``) is the first answer this Info sees (the hold before it was
    overwritten in the same burst, or read again after a broken watch): the table was held and
    its conflict is resolved, so send the DDL again and wait for that answer.  Executing the
    redirect as "nothing to run" would mark an Operation done that the lock cannot count."""
    message: str


@dataclass(frozen=True)
class Reorder:
    """Other tables are held on ``first``, a later change of this ALTER that commutes with the
    waiting one: coordinate ``first`` now and this change after it (no upstream row sits between
    two changes of one statement, so the order is the table's own affair)."""
    first: str
    message: str


@dataclass(frozen=True)
class Combine:
    """Other tables make this table's held rename and some of its later ones (``Info.ahead``) in
    another order: run the held statement together with the later ones ``indexes`` names, as
    one ALTER (docs/lock-algorithm.md, "Opposite orders across statements")."""
    indexes: tuple[int, ...]
    message: str


# What one Operation means for the worker's waiting DDL (the master wrote it from the lock engine's
# ``coordinator.lock.Answer``; the handler turns it into the syncer's ``DDLDecision``)
OperationOutcome = Execute | Hold | Pause | Fail | Replay | Reorder | Combine


def on_operation(op: Operation, *, strict: bool) -> OperationOutcome:
    """What an Operation answering our Info means for the waiting DDL."""
    if op.stage is Stage.SKIP_AND_WAIT and op.first:
        return Reorder(op.first, op.message)
    if op.stage is Stage.SKIP_AND_WAIT and op.combine:
        return Combine(tuple(op.combine), op.message)
    if op.stage is Stage.RESOLVED:
        return Replay(op.message or "conflict resolved: replay")
    if op.stage in (Stage.NONE, Stage.UNLOCKED):
        return Execute(tuple(op.ddls or ()))
    conflict = op.stage in (Stage.DETECTED, Stage.SKIP_AND_WAIT)
    if strict and conflict:
        return Fail(op.message or op.stage.value)
    if op.stage is Stage.SKIP_AND_WAIT:
        return Hold(op.message or "skip-and-wait")
    return Pause(op.message or op.stage.value)


def redirected(op: Operation) -> bool:
    """A held table's Operation was rewritten so that the table can replay from its DDL (with a
    later change of its ALTER first, for ``Operation.first``, or with later statements folded in,
    for ``Operation.combine``)."""
    return op.stage in (Stage.RESOLVED, Stage.UNLOCKED, Stage.NONE) or bool(op.first) or bool(op.combine)
