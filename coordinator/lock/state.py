"""One optimistic shard-DDL lock's state: its member tables with their schemas, pending
conflicting DDLs and answers, the redirect queue and dropped-column bookkeeping, kept consistent
by the setters here (the derived sets and bags are indexes a big lock cannot afford to rescan).
``lock.Lock`` adds the decision algorithm on top; nothing outside the package touches the
private state.  Pure logic: no etcd, no I/O.

Per member table the lock keeps its *normal* schema (last accepted), optionally a *conflict*
schema (what its pending conflicting DDL would produce), ``final`` = conflict or normal, whether
its last Operation was marked done, and its last answer (the Info and the Operation written for
it).  The joined schema of ``final`` is where every table is heading; a table is *ready* when its
final schema equals that join; the lock is *synced* when all are ready and *resolved* when
synced and every issued Operation is done.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import AbstractSet, Mapping

from coordinator.etcdproto import DroppedStage, Info, LockKey, Stage, TableRef
from coordinator.schema import ColumnType, SchemaConflict, TableSchema

from .schema_bag import SchemaBag, cmp, eq, try_join_all
from .shape import fits, tolerated, touched


@dataclass
class Answer:
    """The lock engine's decision for a member's latest Info, i.e. the Operation the master
    writes; the worker reads that Operation as a ``worker.shardddl.decision.OperationOutcome``."""
    info: Info
    stage: Stage
    ddls: list[str]
    message: str = ""
    cols: list[str] = field(default_factory=list)
    exec_drops: set[str] = field(default_factory=set)   # dropped columns whose DROP is in ddls
    afters: list[TableSchema] = field(default_factory=list)
    before: TableSchema | None = None
    runner: TableRef | None = None      # held/redirected: the table that runs the agreed change
    runs_after: TableRef | None = None  # held until this table's running answer is done (ordering)
    first: str = ""                     # held: coordinate this later change of the ALTER first (``Lock._reorder``)
    combine: tuple[int, ...] = ()       # held: coordinate this change with these later ones (``Lock._combine``)
    hopeful: bool = False               # held in hope another order agrees (``Lock._hopeful``), not a plain hold
    catch_up: tuple[tuple[str, str], ...] = ()   # the table's ``LockState._catching`` record, persisted with it


@dataclass(frozen=True)
class Left:
    """What a table that left one of a target's locks left downstream (its ``Remnant`` record):
    its schema, and the columns it dropped whose DROP never ran there."""
    schema: TableSchema
    dropped: tuple[str, ...] = ()

    def key(self) -> tuple:
        return self.schema.lattice_key(), self.dropped


@dataclass
class Member:
    table: TableRef
    schema: TableSchema
    conflict: TableSchema | None = None
    done: bool = True            # no Operation outstanding (members without Infos count as done)
    info_revision: int = 0       # highest Info revision handled for this table
    answer: Answer | None = None
    error: str = ""              # a bad record / unreadable Info for this table
    note: str = ""               # operator decisions worth showing (unlock/force)
    # this table's pending conflicting change, already run downstream by the table whose DDL
    # resolved the conflict: its replay after the redirect must not run it a second time
    applied_by_other: TableSchema | None = None
    applied_by: TableRef | None = None     # the table whose Operation runs ``applied_by_other``
    # joined with a schema the lock's join does not contain (a shard table created mid-lock from
    # a migrating one): it made its changes upstream but ran nothing downstream, until its next Info
    joined_ahead: bool = False

    @property
    def final(self) -> TableSchema:
        return self.conflict if self.conflict is not None else self.schema


@dataclass
class StepResult:
    changed: bool
    stage: Stage
    message: str = ""
    ddls: list[str] | None = None     # what runs downstream in place of the statement, when changed


class LockState:
    """The state of one lock and its invariant-keeping setters (``Lock`` decides)."""

    def __init__(self, key: LockKey, init_schema: TableSchema):
        self.key = key
        self.id = key.id
        self.init_schema = init_schema
        self.members: dict[TableRef, Member] = {}
        self._normal = SchemaBag()
        self._finals = SchemaBag()
        self._conflicts: set[TableRef] = set()
        self._detected: set[TableRef] = set()    # members whose current answer is `detected`
        self._not_done: set[TableRef] = set()    # members with an Operation not yet done
        self._running: set[TableRef] = set()     # members told to run DDLs downstream, not done yet
        # columns and indexes the running answers change (``shape.touched``), counted: the
        # ordering hold's overlap test
        self._run_cols: dict[TableRef, frozenset[str]] = {}
        self._noted: set[TableRef] = set()     # members carrying an operator note (``is_synced``'s slow path)
        self._run_touch: Counter[str] = Counter()
        self._columns: dict[str, Drops] = {}
        self.handled_revision = 0
        self.error = ""             # lock-level problem (bad records at rebuild)
        self._redirects: list[TableRef] = []   # filled by resolve(), drained by Lock.drain_redirects
        # a queued redirect waits for the table whose answer runs the agreed change downstream,
        # until that table's next done mark: the redirected table's replayed rows need the change
        self._redirect_after: dict[TableRef, TableRef] = {}
        self._gates: set[TableRef] = set()     # resolving tables not marked done since they resolved
        # conflicting changes (``change_sig``) the downstream already made: a table catching up on
        # one runs nothing; a table reaching the same shape another way cannot carry its values
        self._accepted: set[tuple] = set()
        # column key -> its type when first added (``check_add_drop``); a rebuild learns it from the
        # Infos it sees (``note_added``) and otherwise compares with the joined type, as DM does
        self._added_as: dict[str, ColumnType] = {}
        # column key -> the earliest upstream commit time (Info.timestamp) of a statement adding it
        # (``Lock._in_commit_order``); kept in memory, learnt again from the Infos at rebuild
        self._added_at: dict[str, int] = {}

        # held tables whose agreed shape was reached by another table's ordinary statements: their
        # values of the renamed/retyped columns cannot be carried downstream -> a conflict with exits
        self._uncarried: dict[TableRef, str] = {}
        # the caller of the last ``resolve`` when its DROP left it with neither column of the
        # agreed rename (a held table runs the rename; the caller's statement runs nothing)
        self._indifferent: tuple[TableRef, TableRef] | None = None   # (caller, runner)
        # while ``step`` decides a statement: (its table, the columns it drops), so that table
        # counts as one that dropped them (``Lock._taking_no_side``) before its drop is recorded
        self._dropping: tuple[TableRef, frozenset[str]] | None = None
        # tables that left (dropped upstream, removed by the operator) -> the schema they left
        # with: what they made downstream stays there (a column added by ordinary statements),
        # so a member reaching that shape by a rename still meets it.  Never part of a join or
        # an agreement (persisted as the departed Info, ``Info.departed``)
        self._departed: dict[TableRef, TableSchema] = {}
        # members held in hope that another order of the same renames agrees (``Answer.hopeful``)
        self._hoping: set[TableRef] = set()
        # members that took no side in an agreed rename (old, new) because they add the old column
        # later and then rename it: that ADD is coordinated with the rename (``Lock._catch_up``)
        self._catching: dict[TableRef, set[tuple[str, str]]] = {}
        self._restamp: set[TableRef] = set()     # tables whose record is newer than their stored answer

    # ------------------------------------------------------------------ membership
    def add_member(self, t: TableRef, schema: TableSchema | None, joining: bool = False) -> Member:
        """``joining``: the table joins a live lock from its SourceTables (created mid-lock), with
        its checkpoint's ``schema``."""
        m = self.members.get(t)
        if m is None:
            self._departed.pop(t, None)      # back (re-created, or still replicating): a member again
            m = Member(t, schema or self.init_schema)
            if joining and schema is not None and self.members:
                m.joined_ahead = self._ahead(schema)
            self.members[t] = m
            self._normal.add(m.schema)
            self._finals.add(m.final)
        return m

    def _ahead(self, schema: TableSchema) -> bool:
        """``schema`` has something the lock's join lacks (compared with the members that ran
        their changes, not the ones that joined ahead themselves)."""
        if any(x.joined_ahead for x in self.members.values()):
            joined = try_join_all([x.schema for x in self.members.values() if not x.joined_ahead])
        else:
            joined = self._normal.try_joined()
        return joined is not None and cmp(schema, joined) not in (-1, 0)

    def _remove_member(self, t: TableRef) -> list[str]:
        """Forget ``t``, except the columns it dropped whose DROP never ran downstream: those
        records stay (``partial``: it will never run the drop), so the lock still knows the
        downstream has a column a member dropped and completes the drop once no member has it
        (``Lock._orphan_drops``); forgetting them left the column downstream for good.  Returns
        the dropped columns whose record changed that way (the caller persists them)."""
        m = self.members.pop(t, None)
        if m is None:
            return []
        self._normal.remove(m.schema)
        self._finals.remove(m.final)
        self._conflicts.discard(t)
        self._detected.discard(t)
        self._hoping.discard(t)
        self._catching.pop(t, None)
        self._not_done.discard(t)
        self._running.discard(t)
        self._noted.discard(t)
        gone = self._run_cols.pop(t, None)
        if gone is not None:
            self._run_touch.subtract(gone)
        if t in self._gates:
            self._handover(t)
        if t in self._redirects:
            self._redirects.remove(t)
        self._redirect_after.pop(t, None)
        kept: list[str] = []
        for col, per in self._columns.items():
            if per.get(t) is DroppedStage.NOT_DONE:
                per[t] = DroppedStage.PARTIAL
                kept.append(col)
        return kept

    def _set_schema(self, m: Member, s: TableSchema) -> None:
        self._normal.remove(m.schema)
        self._finals.remove(m.final)
        m.schema = s
        self._normal.add(m.schema)
        self._finals.add(m.final)

    def _set_conflict(self, m: Member, s: TableSchema | None) -> None:
        self._finals.remove(m.final)
        m.conflict = s
        self._finals.add(m.final)
        (self._conflicts.add if s is not None else self._conflicts.discard)(m.table)

    def _set_answer(self, m: Member, a: Answer | None) -> None:
        if a is not None:
            a.catch_up = tuple(sorted(self._catching.get(m.table, ())))
        m.answer = a
        (self._detected.add if a is not None and a.stage is Stage.DETECTED else self._detected.discard)(m.table)
        (self._hoping.add if a is not None and a.hopeful else self._hoping.discard)(m.table)
        self._track_running(m)

    def _set_done(self, m: Member, done: bool) -> None:
        m.done = done
        if done:
            self._gates.discard(m.table)
        (self._not_done.discard if done else self._not_done.add)(m.table)
        self._track_running(m)

    def _set_note(self, m: Member, note: str) -> None:
        m.note = note
        (self._noted.add if note else self._noted.discard)(m.table)

    def _track_running(self, m: Member) -> None:
        a = m.answer
        running = a is not None and a.stage in (Stage.NONE, Stage.UNLOCKED) and bool(a.ddls) and not m.done
        (self._running.add if running else self._running.discard)(m.table)
        old = self._run_cols.pop(m.table, None)
        if old is not None:
            self._run_touch.subtract(old)
        if running and a is not None:
            keys = touched(a.before, a.afters[-1] if a.afters else None, a.ddls)
            if keys:
                self._run_cols[m.table] = keys
                self._run_touch.update(keys)

    def _queue_redirect(self, t: TableRef, after: TableRef | None) -> None:
        """Redirect ``t`` once ``after`` (if any) has run its answer's DDLs downstream."""
        if t not in self._redirects:
            self._redirects.append(t)
        if after is not None and after != t:
            self._redirect_after[t] = after
            self._gates.add(after)
        else:
            self._redirect_after.pop(t, None)

    def _handover(self, gone: TableRef, force: bool = False) -> None:
        """The runner of a resolution leaves, or its answer will not run (dropped upstream, the
        operator skipped its DDL or set its schema), before running the agreed change: the first
        table queued behind it runs it instead (its redirect is released now and its replay runs
        the change); the others wait for that one (invariant 1: nobody replays past a change
        that never ran).  ``force``: the caller knows the change did not run although ``gone``'s
        current answer says nothing of it (a rebuild reading an overwritten answer's done mark)."""
        self._gates.discard(gone)
        behind = [t for t, by in self._redirect_after.items() if by == gone and t != gone]
        for t in behind:
            if _ordering_hold(self.members.get(t)):
                # held only so that ``gone``'s statements run first: they will not, so nothing to
                # wait for (the drain releases it; its replay is decided afresh).  It never holds
                # the agreed change, so it cannot be the one to run it
                self._redirect_after.pop(t, None)
        # a table held only because its DROP completed the change (it takes no side) replays an
        # ordinary statement: a table holding the change itself runs it when there is one
        queued = sorted((t for t in behind if t in self._redirect_after),
                        key=lambda t: (_no_side_hold(self.members.get(t)), str(t)))
        g = self.members.get(gone)
        if not queued or (not force and g is not None and gone not in self._running and not _replays(g)):
            return
        new = queued[0]
        self._redirect_after.pop(new, None)
        m = self.members[new]
        m.applied_by_other, m.applied_by = None, None       # its replay runs the change itself
        for t in queued[1:]:
            self._redirect_after[t] = new
            if self.members[t].applied_by == gone:
                self.members[t].applied_by = new
        # gated even with nobody queued behind it: an ordinary statement on the same columns
        # (``Lock._order_conflict``) waits for its replay to run the change
        self._gates.add(new)

    def moved_on(self, t: TableRef, ran: bool) -> None:
        """Rebuild: ``t``'s stored Operation answers an older Info than its current one and is
        done (its worker marks an answer done before it sends its next DDL), so the answer a
        restored hold names ``t`` the runner of has finished: ``ran`` -- the change is made, the
        gate goes (it stayed, and ``t``'s next answer then held the replays, and that answer's
        `binlog skip` handed over a change that had run); not ``ran`` (the
        operator skipped it) -- the change is handed over, as ``mark_done`` would have."""
        if t not in self._gates:
            return
        if ran:
            self._gates.discard(t)
        else:
            self._handover(t, force=True)

    def gated_by(self, t: TableRef | None) -> bool:
        """``t`` resolved a conflict and its answer still has DDLs to run downstream (not done
        since): redirects and replays of the change wait for it."""
        if t is None or t not in self._gates:
            return False
        m = self.members.get(t)
        # running its answer's DDLs, or still to replay the held DDL it was chosen to run
        return t in self._running or (m is not None and _replays(m))

    # ------------------------------------------------------------------ sync state
    def joined(self) -> TableSchema | None:
        return self._finals.try_joined() if len(self._finals) else None

    def ready(self) -> dict[TableRef, bool]:
        j = self.joined()
        cache: dict = {}
        out = {}
        for t, m in self.members.items():
            k = m.final.lattice_key()
            if k not in cache:
                cache[k] = j is not None and (eq(m.final, j) or tolerated(m.final, j))
            out[t] = cache[k] or (bool(m.note) and m.conflict is None and (j is None or fits(m.final, j)))
        return out

    def is_synced(self) -> bool:
        """Every member at the joined schema, up to what the join tolerates without a DDL
        (charset/collation: DM_040), or -- for a table whose schema the operator set (unlock,
        ``binlog skip``, ``binlog-schema update --sync``) -- inside it (DM_130): no DDL will ever
        come from such a table, and waiting for one left the lock open forever (invariant 6)."""
        j = self.joined()
        if j is not None and all(eq(s, j) or tolerated(s, j) for s in self._finals.distinct()):
            return True
        # the slow path, only when the fast one fails: join the others without the forced tables
        if not self._noted:
            return False            # no operator decision: nothing more to look at (a big lock's usual case)
        forced = [m for m in self.members.values() if m.note and m.conflict is None]
        if not forced:
            return False
        rest = {m.final.lattice_key(): m.final for m in self.members.values() if not (m.note and m.conflict is None)}
        j = try_join_all(list(rest.values())) if rest else forced[0].final
        return j is not None and all(eq(s, j) or tolerated(s, j) for s in rest.values()) and \
            all(fits(m.final, j) for m in forced)

    def join_error(self) -> str:
        """Why the final schemas do not join ("" when they do)."""
        try:
            self._finals.joined()
        except SchemaConflict as e:
            return str(e)
        return ""

    def is_resolved(self) -> bool:
        return (bool(self.members) and not self._conflicts and not self._not_done and self.is_synced()
                and not any(m.error for m in self.members.values()))

    # ------------------------------------------------------------------ dropped columns
    def _record_dropped(self, t: TableRef, cols: list[str]) -> list[str]:
        new = []
        for c in cols:
            per = self._columns.setdefault(c.lower(), Drops())
            if t not in per:
                per[t] = DroppedStage.NOT_DONE
                new.append(c.lower())
        return new

    def _done_dropped(self, t: TableRef, cols: list[str],
                      exec_drops: set[str]) -> tuple[list[tuple[str, DroppedStage]], list[str]]:
        """Worker confirmed an Operation with ``cols``: returns (stage updates, cleared columns)."""
        updates: list[tuple[str, DroppedStage]] = []
        cleared: list[str] = []
        for c in cols:
            key = c.lower()
            per = self._columns.get(key)
            if not per or t not in per:
                continue
            per[t] = DroppedStage.DONE if key in exec_drops else DroppedStage.PARTIAL
            updates.append((key, per[t]))
            if not per.count[DroppedStage.NOT_DONE] and per.count[DroppedStage.DONE]:
                del self._columns[key]
                cleared.append(key)
                self._added_as.pop(key, None)
        return updates, cleared

    @property
    def dropped_columns(self) -> Mapping[str, Mapping[TableRef, DroppedStage]]:
        """Dropped column -> table -> stage (read-only: rebuild and views compare and show it)."""
        return self._columns

    def confirm_stale_drop(self, col: str, t: TableRef) -> None:
        """``t``'s worker has sent a later DDL than the one whose Operation dropped ``col``, so
        that Operation was done (a worker sends its next DDL only after its done mark and its
        checkpoint): a ``not-done`` stage whose done mark a master restart missed becomes
        ``partial`` (whether it ran the DROP is not known; the column stays recorded until a
        table that ran it confirms)."""
        per = self._columns.get(col.lower())
        if per is not None and per.get(t) is DroppedStage.NOT_DONE:
            per[t] = DroppedStage.PARTIAL

    def note_added(self, before: TableSchema, afters: list[TableSchema], timestamp: int = 0,
                   types: bool = True) -> None:
        """Rebuild: the columns an Info's statements add, with the type they are added as, and the
        columns it retypes, with the type they had before (the Info that added them may have been
        overwritten by this later one of the same table).  Infos come in revision order, so the
        earliest one seen wins; the earliest upstream time of an add (``timestamp``) is kept.
        ``types=False``: the Info's answer refused it (error, conflict), so the types it names
        were never added downstream and must not become the type a column was first added as."""
        prev = before
        for post in afters:
            for c in post.columns:
                p = prev.column(c.key)
                if p is None:
                    if types:
                        self._added_as.setdefault(c.key, c.type)
                    if timestamp:
                        self._added_at[c.key] = min(self._added_at.get(c.key, timestamp), timestamp)
                elif p.type != c.type and types:
                    self._added_as.setdefault(c.key, p.type)
            prev = post

    def note_departed(self, t: TableRef, schema: TableSchema) -> None:
        """``t`` left the lock with ``schema`` (a departure, or its departed Info at rebuild)."""
        if t not in self.members:
            self._departed[t] = schema

    @property
    def departed(self) -> Mapping[TableRef, TableSchema]:
        return self._departed

    def preload_dropped(self, col: str, t: TableRef, stage: DroppedStage) -> None:
        """A stored dropped-column record of a lock being created (rebuild)."""
        self._columns.setdefault(col.lower(), Drops())[t] = stage

    @property
    def conflicts(self) -> AbstractSet[TableRef]:
        """Members with a pending conflicting DDL (a read-only view: no copy per look-up)."""
        return self._conflicts



def _ordering_hold(m: Member | None) -> bool:
    """``m`` is held only until another table's running statements are done (``Lock._order_conflict``),
    not for a resolution's agreed change."""
    return m is not None and m.answer is not None and m.answer.runs_after is not None


def _no_side_hold(m: Member | None) -> bool:
    """``m`` is held until a runner ran the change its ordinary statement (a DROP) completed
    (``Lock.resolve``: a table that takes no side), not holding the change itself."""
    a = m.answer if m is not None else None
    return a is not None and a.stage is Stage.SKIP_AND_WAIT and a.runner is not None \
        and a.before is not None and bool(a.afters) and cmp(a.before, a.afters[-1]) is not None


def _replays(m: Member) -> bool:
    """``m`` is held or redirected: it still has to replay its DDL (a runner chosen to run the
    agreed change in its replay has not yet)."""
    return m.answer is not None and m.answer.stage in (Stage.RESOLVED, Stage.SKIP_AND_WAIT)


class Drops(dict):
    """One dropped column's tables -> their ``DroppedStage``, with a count per stage: the check
    "nobody still NOT_DONE and somebody DONE" after each done mark scanned every table, which
    made a big lock's DROP COLUMN quadratic."""

    def __init__(self) -> None:
        super().__init__()
        self.count: Counter = Counter()

    def __setitem__(self, t: TableRef, stage: DroppedStage) -> None:
        old = self.get(t)
        if old is not None:
            self.count[old] -= 1
        super().__setitem__(t, stage)
        self.count[stage] += 1

    def __delitem__(self, t: TableRef) -> None:
        self.count[self[t]] -= 1
        super().__delitem__(t)

    def pop(self, t, *default):  # type: ignore[override]
        if t in self:
            stage = super().pop(t)
            self.count[stage] -= 1
            return stage
        if default:
            return default[0]
        raise KeyError(t)

