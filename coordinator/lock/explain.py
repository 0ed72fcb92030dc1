"""The lock's explanations in words: why a table waits (``waiting_for``) and the messages of
its answers.  Kept apart from the decisions: they read the state, never change it."""
from __future__ import annotations

from coordinator.etcdproto import DroppedStage, Stage, TableRef
from coordinator.schema import TableSchema
from coordinator.shell import unlock_choice

from .schema_bag import cmp
from .shape import _describe
from .state import LockState, Member


def wait_runner(lock: LockState, by: TableRef) -> str:
    """A held table's message while ``by`` has not run the agreed change downstream yet."""
    r = lock.members.get(by)
    ddls = "; ".join(r.answer.ddls or r.answer.info.ddls) if r is not None and r.answer is not None else ""
    return f"waiting for {by} to run the agreed change downstream ({ddls}) before replaying"


def detected_message(lock: LockState, m: Member, prev: TableSchema, post: TableSchema) -> str:
    """Why ``m``'s conflicting DDL cannot be merged: the pending DDLs it disagrees with."""
    others = sorted(str(c) for c in lock.conflicts if c != m.table)
    reason = lock.join_error()
    reason = f": {reason}" if reason else ""
    if others:
        return (f"conflicts with the pending conflicting DDL of {', '.join(others)}{reason}; "
                "the two changes disagree")
    return f"cannot be merged with the other tables' schemas{reason}"


def skip_message(lock: LockState, m: Member) -> str:
    """``m`` is held (skip-and-wait): the tables that have not made its change yet."""
    new = m.conflict
    assert new is not None, "asked while m's conflicting DDL is pending"
    conflicts = lock.conflicts
    behind = sorted(str(t) for t, x in lock.members.items()
                    if t not in conflicts and cmp(x.schema, new) not in (0, 1))
    shown = ", ".join(behind[:5]) + (f" and {len(behind) - 5} more" if len(behind) > 5 else "")
    return (f"conflicting DDL (rename/type change/NOT NULL without default) is applied only when "
            f"every table makes the same change; waiting for {shown or 'the other tables'}")


def readd_message(lock: LockState, m: Member, name: str, key: str, same_info: bool) -> str:
    """``m`` re-adds column ``key`` whose drop is not complete downstream (dm PR #1510)."""
    if same_info:
        return (f"add column {name} that wasn't fully dropped in downstream: "
                f"column `{name}` is dropped and re-added in the same DDL batch; the DROP is not "
                "fully applied downstream yet. Skip the re-add (`shard-ddl-lock unlock LOCK_ID "
                "--action skip`) or run DROP and ADD as separate statements")
    holders = sorted(str(t) for t, x in lock.members.items() if t != m.table and x.final.column(key))
    per = lock.dropped_columns.get(key, {})
    unconfirmed = sorted(str(t) for t, st in per.items() if st == DroppedStage.NOT_DONE)
    parts = []
    if holders:
        parts.append(f"still present on {', '.join(holders[:10])}" + (" ..." if len(holders) > 10 else ""))
    if unconfirmed:
        parts.append(f"drop not yet confirmed by {', '.join(unconfirmed[:10])}")
    return (f"add column {name} that wasn't fully dropped in downstream: "
            f"re-adding column `{name}` that is not fully dropped downstream ("
            + ("; ".join(parts) or "downstream still holds its data")
            + "); wait until every table drops it, or skip this DDL "
            "(`shardctl binlog skip TASK -s SOURCE`, or `shard-ddl-lock unlock LOCK_ID --action skip`)")


def waiting_for(lock: LockState, t: TableRef, ready: dict[TableRef, bool] | None = None) -> str:
    """Why ``t`` keeps the lock open, in words ("" if it does not)."""
    m = lock.members.get(t)
    if m is None:
        return f"{t} is not a member of lock {lock.id}"
    if m.error:
        return f"error: {m.error}"
    a = m.answer
    if a is not None and a.stage is Stage.DETECTED:
        return (f"conflict: its DDL {a.info.ddls} {a.message}. Exit: fix the other tables, or "
                f"{unlock_choice(lock.id, t.source, t.schema, t.table)}")
    if a is not None and a.stage is Stage.SKIP_AND_WAIT and a.first:
        return (f"asked for a later change of its ALTER first: {a.first} (other tables are held on it); "
                f"waiting for the worker to send it, then {a.info.ddls} again")
    if a is not None and a.stage is Stage.SKIP_AND_WAIT and a.combine:
        return (f"asked to coordinate its DDL {a.info.ddls} together with {len(a.combine)} later change(s) as one "
                "ALTER (the other tables make the same renames in another order); waiting for the worker to send it")
    if a is not None and a.stage is Stage.SKIP_AND_WAIT:
        return (f"skip-and-wait: its DDL {a.info.ddls} was skipped; {a.message}. Exit: "
                f"{unlock_choice(lock.id, t.source, t.schema, t.table)}, or remove the tables that will never "
                "make the change")
    if a is not None and a.stage is Stage.ERROR:
        return (f"error: its DDL {a.info.ddls} was refused: {a.message}. Exit: "
                f"{unlock_choice(lock.id, t.source, t.schema, t.table)}")
    if a is not None and a.stage is Stage.RESOLVED:
        return "redirected: waiting for the worker to replay its skipped DDL"
    ready = lock.ready() if ready is None else ready
    if not ready.get(t, False):
        return _schema_gap(lock, m)
    if not m.done:
        return "waiting for the worker to execute its Operation and mark it done"
    return ""


def _schema_gap(lock: LockState, m: Member) -> str:
    """What separates ``m``'s schema from the joined one, column by column."""
    j = lock.joined()
    if j is None:
        return "the tables' schemas cannot be joined (a conflict is pending)"
    mine = {c.key: c for c in m.final.columns}
    reasons = []
    for c in j.columns:
        if c.key not in mine:
            if c.key in lock.dropped_columns and m.table in lock.dropped_columns[c.key]:
                holders = [str(t) for t, x in lock.members.items() if x.final.column(c.key)]
                reasons.append(f"dropped column `{c.name}`; waiting for {', '.join(sorted(holders)[:5])}"
                               + (" ..." if len(holders) > 5 else "") + " to drop it too")
            else:
                reasons.append(f"has not added column `{c.name}` yet (other tables have it)")
        elif mine[c.key].lattice_key() != c.lattice_key():
            reasons.append(f"column `{c.name}` is {_describe(mine[c.key])} here; the joined schema has "
                           f"{_describe(c)}")
    jidx = {i.key for i in j.indexes}
    for i in m.final.indexes:
        if i.key not in jidx:
            reasons.append(f"has index `{i.name}` that other tables do not have yet")
    if not reasons:
        reasons.append("its schema differs from the joined schema")
    return "; ".join(reasons)

