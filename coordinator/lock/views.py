"""What the keeper shows of a lock: show-ddl-locks' ``LockView`` (with every table's reason),
the gauges' state, and force-remove's ``Expectation`` of the downstream table.  They read a
lock, never change it."""
from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.etcdproto import Stage
from coordinator.schema import TableSchema

from .lock import Lock
from .schema_bag import try_join_all


@dataclass
class LockOwner:
    """One table of a lock that sent it a DDL (an Info): dmctl's lock ``owner``.  DM names only
    the conflicting ones; every one is listed here with where its DDL stands: ``conflict``
    (detected, held at the DDL), ``held`` (skip-and-wait), ``error``, ``executing`` (its Operation
    is not marked done yet), ``redirected`` (replaying a skipped DDL) or ``done`` (executed or
    skipped; the table goes on while the lock waits for the others)."""
    table: str
    DDLs: list[str]
    state: str
    waiting_for: str = ""

    def to_dict(self) -> dict:
        return {"owner": self.table, "DDLs": self.DDLs, "state": self.state, "waitingFor": self.waiting_for}


@dataclass
class LockView:
    """One lock as show-ddl-locks prints it; ``waiting`` explains every unfinished table."""
    ID: str
    task: str
    mode: str
    owner: str
    DDLs: list[str]
    synced: list[str]
    unsynced: list[str]
    state: str                   # syncing | conflict | resolved | error
    error: str
    waiting: list[tuple[str, str]]
    owners: list[LockOwner] = field(default_factory=list)   # every table that sent a DDL
    joined: str = ""             # CREATE TABLE of the joined schema ("" if none)

    def to_dict(self) -> dict:
        return {"ID": self.ID, "task": self.task, "mode": self.mode, "owner": self.owner,
                "DDLs": self.DDLs, "synced": self.synced, "unsynced": self.unsynced,
                "state": self.state, "error": self.error, "owners": [o.to_dict() for o in self.owners],
                "waiting": [{"table": t, "reason": r} for t, r in self.waiting], "joined": self.joined}


@dataclass
class LockSummary:
    """One lock as the gauges need it (``LockKeeper.summaries``)."""
    ID: str
    task: str
    state: str
    unsynced: int


@dataclass
class Expectation:
    """What a lock says its downstream table holds right now (force-remove's schema check).

    ``now`` is the join over the members of the schema the downstream has *confirmed* for each:
    its accepted schema when its last Operation is done, else the schema before that outstanding
    Operation (its worker may not have run the DDLs yet).  Not the lock's joined schema: that one
    also contains pending conflicting DDLs (``skip-and-wait``) that were never run downstream, so
    comparing with it would report them as corruption.  ``issued`` is the join of the accepted
    schemas, i.e. the downstream once every issued Operation is executed; a downstream equal to
    ``now`` or ``issued`` (or between them) agrees with the lock.  ``outstanding`` lists the
    Operations not yet marked done (table, stage, DDLs), ``pending`` the blocked DDLs that were
    never applied downstream (table, stage, DDLs), ``notes`` operator decisions that legitimately
    make the downstream differ (a table unlocked with ``skip``).  ``error`` says why ``now`` or
    ``issued`` cannot be computed (the accepted schemas do not join)."""
    ID: str
    down_table: tuple[str, str]
    now: TableSchema | None
    issued: TableSchema | None
    outstanding: list[tuple[str, str, list[str]]] = field(default_factory=list)
    pending: list[tuple[str, str, list[str]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str = ""
    joined: TableSchema | None = None     # the lock's joined schema, pending conflicting DDLs included


def expectation(lock: Lock) -> Expectation:
    """The schema the lock's downstream table should have now (see ``Expectation``)."""
    confirmed: list[TableSchema] = []
    accepted: list[TableSchema] = []
    exp = Expectation(lock.id, (lock.key.down_schema, lock.key.down_table), None, None)
    blocked = (Stage.DETECTED, Stage.SKIP_AND_WAIT, Stage.ERROR)
    for t, m in sorted(lock.members.items(), key=lambda x: str(x[0])):
        a = m.answer
        accepted.append(m.schema)
        if m.done or a is None:
            confirmed.append(m.schema)
        else:
            confirmed.append(a.before if a.before is not None else m.schema)
            if a.stage in blocked:
                exp.pending.append((str(t), a.stage.value, list(a.info.ddls)))
            else:
                ddls = list(a.info.ddls) if a.stage is Stage.RESOLVED else list(a.ddls)
                exp.outstanding.append((str(t), a.stage.value, ddls))
        if a is not None and a.stage is Stage.UNLOCKED and not a.ddls and a.info.ddls:
            exp.notes.append(f"{t} was unlocked with skip: its DDLs {list(a.info.ddls)} were not run downstream")
    if not confirmed:
        confirmed = accepted = [lock.init_schema]
    exp.now, exp.issued = try_join_all(confirmed), try_join_all(accepted)
    exp.joined = lock.joined()
    if exp.now is None or exp.issued is None:
        exp.error = ("the schemas the lock accepted for its tables cannot be joined, so it has no single "
                     "expected downstream schema")
    bad = [lock.error] if lock.error else []
    bad += [f"{t}: {m.error}" for t, m in sorted(lock.members.items(), key=lambda x: str(x[0])) if m.error]
    if bad:
        exp.error = "the lock is in state error, so its schemas are not reliable (" + "; ".join(bad)[:500] + ")"
    return exp


def lock_state(lock: Lock) -> str:
    """error | conflict | resolved | syncing (show-ddl-locks, the gauges)."""
    if lock.error or any(m.error for m in lock.members.values()):
        return "error"
    if any(m.answer is not None and m.answer.stage in (Stage.DETECTED, Stage.SKIP_AND_WAIT, Stage.ERROR)
           for m in lock.members.values()):
        return "conflict"
    return "resolved" if lock.is_resolved() else "syncing"

def lock_view(lock: Lock) -> LockView:
    """One lock as show-ddl-locks prints it, with every unfinished table's reason."""
    ready = lock.ready()
    waiting = []
    for t in sorted(lock.members, key=str):
        r = lock.waiting_for(t, ready)
        if r:
            waiting.append((str(t), r))
    owners = sorted(str(t) for t, m in lock.members.items()
                    if m.answer is not None and m.answer.stage is Stage.DETECTED)
    owner_ddls: list[str] = []
    if owners:
        first = next(m.answer for t, m in lock.members.items() if str(t) == owners[0])
        assert first is not None     # an owner is a member whose answer is `detected`
        owner_ddls = list(first.info.ddls)
    errs = [lock.error] if lock.error else []
    errs += [f"{t}: {m.error}" for t, m in sorted(lock.members.items(), key=lambda x: str(x[0])) if m.error]
    state = lock_state(lock)
    j = lock.joined()
    return LockView(ID=lock.id, task=lock.key.task, mode="optimistic", owner=owners[0] if owners else "",
                    DDLs=owner_ddls, synced=sorted(str(t) for t, r in ready.items() if r),
                    unsynced=sorted(str(t) for t, r in ready.items() if not r), state=state,
                    error="; ".join(errs), waiting=waiting, owners=_owners(lock, dict(waiting)),
                    joined=j.to_create_sql((lock.key.down_schema, lock.key.down_table)) if j and j.columns else "")

def _owners(lock: Lock, waits: dict[str, str]) -> list[LockOwner]:
    out = []
    for t, m in sorted(lock.members.items(), key=lambda x: str(x[0])):
        a = m.answer
        if a is None:
            continue
        if m.error or a.stage is Stage.ERROR:
            state = "error"
        elif a.stage is Stage.DETECTED:
            state = "conflict"
        elif a.stage is Stage.SKIP_AND_WAIT:
            state = "held"
        elif a.stage is Stage.RESOLVED:
            state = "redirected"
        elif not m.done:
            state = "executing"
        else:
            state = "done"
        out.append(LockOwner(str(t), list(a.info.ddls), state, waits.get(str(t), "")))
    return out
