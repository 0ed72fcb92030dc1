"""One optimistic shard-DDL lock: the shard tables routed to one downstream table, their
schemas, pending conflicting DDLs, dropped-column bookkeeping and the decision algorithm
(docs/lock-algorithm.md, design doc §4).  Pure logic: no etcd, no I/O.

Per member table the lock keeps its *normal* schema (last accepted), optionally a *conflict*
schema (what its pending conflicting DDL would produce), ``final`` = conflict or normal, whether
its last Operation was marked done, and its last answer (the Info and the Operation written for
it).  The joined schema of ``final`` is where every table is heading; a table is *ready* when its
final schema equals that join; the lock is *synced* when all are ready and *resolved* when
synced and every issued Operation is done.
"""
from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field, replace

from coordinator.etcdproto import DroppedStage, Info, LockKey, Stage, TableRef
from coordinator.schema import SchemaConflict, TableSchema

from coordinator.schema.lattice import join_type

from .schema_bag import SchemaBag, cmp, eq, join2, try_join_all


@dataclass
class Answer:
    """The decision for a member's latest Info, i.e. the Operation the master writes."""
    info: Info
    stage: Stage
    ddls: list[str]
    message: str = ""
    cols: list[str] = field(default_factory=list)
    exec_drops: set[str] = field(default_factory=set)   # dropped columns whose DROP is in ddls
    afters: list[TableSchema] = field(default_factory=list)
    before: TableSchema | None = None
    runner: TableRef | None = None      # held/redirected: the table that runs the agreed change


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

    @property
    def final(self) -> TableSchema:
        return self.conflict if self.conflict is not None else self.schema


@dataclass
class StepResult:
    changed: bool
    stage: Stage
    message: str = ""


class Lock:
    """State and algorithm of one lock; ``LockKeeper`` owns the instances."""

    def __init__(self, key: LockKey, init_schema: TableSchema):
        self.key = key
        self.id = key.id
        self.init_schema = init_schema
        self.members: dict[TableRef, Member] = {}
        self.normal = SchemaBag()
        self.finals = SchemaBag()
        self.conflicts: set[TableRef] = set()
        self.detected: set[TableRef] = set()    # members whose current answer is `detected`
        self.not_done: set[TableRef] = set()    # members with an Operation not yet done
        self.running: set[TableRef] = set()     # members told to run DDLs downstream, not done yet
        self.columns: dict[str, Drops] = {}
        self.handled_revision = 0
        self.error = ""             # lock-level problem (bad records at rebuild)
        self.redirects: list[TableRef] = []   # filled by resolve(), drained by the keeper
        # a queued redirect waits for the table whose answer runs the agreed change downstream,
        # until that table's next done mark: the redirected table's replayed rows need the change
        self.redirect_after: dict[TableRef, TableRef] = {}
        self.gates: set[TableRef] = set()     # resolving tables not marked done since they resolved
        # conflicting changes (``change_sig``) the downstream already made: a table catching up on
        # one runs nothing; a table reaching the same shape another way cannot carry its values
        self.accepted: set[tuple] = set()
        # held tables whose agreed shape was reached by another table's ordinary statements: their
        # values of the renamed/retyped columns cannot be carried downstream -> a conflict with exits
        self.uncarried: dict[TableRef, str] = {}

    # ------------------------------------------------------------------ membership
    def add_member(self, t: TableRef, schema: TableSchema | None) -> Member:
        m = self.members.get(t)
        if m is None:
            m = Member(t, schema or self.init_schema)
            self.members[t] = m
            self.normal.add(m.schema)
            self.finals.add(m.final)
        return m

    def remove_member(self, t: TableRef) -> list[str]:
        """Forget ``t``; returns the dropped-column names that had an entry for it."""
        m = self.members.pop(t, None)
        if m is None:
            return []
        self.normal.remove(m.schema)
        self.finals.remove(m.final)
        self.conflicts.discard(t)
        self.detected.discard(t)
        self.not_done.discard(t)
        self.running.discard(t)
        if t in self.gates:
            self.handover(t)
        if t in self.redirects:
            self.redirects.remove(t)
        self.redirect_after.pop(t, None)
        cols = []
        for col, per in list(self.columns.items()):
            if per.pop(t, None) is not None:
                cols.append(col)
            if not per:
                del self.columns[col]
        return cols

    def set_schema(self, m: Member, s: TableSchema) -> None:
        self.normal.remove(m.schema)
        self.finals.remove(m.final)
        m.schema = s
        self.normal.add(m.schema)
        self.finals.add(m.final)

    def set_conflict(self, m: Member, s: TableSchema | None) -> None:
        self.finals.remove(m.final)
        m.conflict = s
        self.finals.add(m.final)
        (self.conflicts.add if s is not None else self.conflicts.discard)(m.table)

    def set_answer(self, m: Member, a: Answer | None) -> None:
        m.answer = a
        (self.detected.add if a is not None and a.stage is Stage.DETECTED else self.detected.discard)(m.table)
        self._track_running(m)

    def set_done(self, m: Member, done: bool) -> None:
        m.done = done
        if done:
            self.gates.discard(m.table)
        (self.not_done.discard if done else self.not_done.add)(m.table)
        self._track_running(m)

    def _track_running(self, m: Member) -> None:
        a = m.answer
        running = a is not None and a.stage in (Stage.NONE, Stage.UNLOCKED) and bool(a.ddls) and not m.done
        (self.running.add if running else self.running.discard)(m.table)

    def queue_redirect(self, t: TableRef, after: TableRef | None) -> None:
        """Redirect ``t`` once ``after`` (if any) has run its answer's DDLs downstream."""
        if t not in self.redirects:
            self.redirects.append(t)
        if after is not None and after != t:
            self.redirect_after[t] = after
            self.gates.add(after)
        else:
            self.redirect_after.pop(t, None)

    def handover(self, gone: TableRef) -> None:
        """The runner of a resolution leaves, or its answer will not run (dropped upstream, the
        operator skipped its DDL or set its schema), before running the agreed change: the first
        table queued behind it runs it instead (its redirect is released now and its replay runs
        the change); the others wait for that one (invariant 1: nobody replays past a change
        that never ran)."""
        self.gates.discard(gone)
        queued = sorted((t for t, by in self.redirect_after.items() if by == gone and t != gone), key=str)
        if not queued or (gone in self.members and gone not in self.running
                          and not (self.members[gone].answer is not None
                                   and self.members[gone].answer.stage in (Stage.RESOLVED, Stage.SKIP_AND_WAIT))):
            return
        new = queued[0]
        self.redirect_after.pop(new, None)
        m = self.members[new]
        m.applied_by_other, m.applied_by = None, None       # its replay runs the change itself
        for t in queued[1:]:
            self.redirect_after[t] = new
            if self.members[t].applied_by == gone:
                self.members[t].applied_by = new
        if queued[1:]:
            self.gates.add(new)

    def gated_by(self, t: TableRef | None) -> bool:
        """``t`` resolved a conflict and its answer still has DDLs to run downstream (not done
        since): redirects and replays of the change wait for it."""
        if t is None or t not in self.gates:
            return False
        m = self.members.get(t)
        # running its answer's DDLs, or still to replay the held DDL it was chosen to run
        return t in self.running or (m is not None and m.answer is not None
                                     and m.answer.stage in (Stage.RESOLVED, Stage.SKIP_AND_WAIT))

    # ------------------------------------------------------------------ sync state
    def joined(self) -> TableSchema | None:
        return self.finals.try_joined() if len(self.finals) else None

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
        if j is not None and all(eq(s, j) or tolerated(s, j) for s in self.finals.distinct()):
            return True
        # the slow path, only when the fast one fails: join the others without the forced tables
        forced = [m for m in self.members.values() if m.note and m.conflict is None]
        if not forced:
            return False
        rest = {m.final.lattice_key(): m.final for m in self.members.values() if not (m.note and m.conflict is None)}
        j = try_join_all(list(rest.values())) if rest else forced[0].final
        return j is not None and all(eq(s, j) or tolerated(s, j) for s in rest.values()) and \
            all(fits(m.final, j) for m in forced)

    def is_resolved(self) -> bool:
        return (bool(self.members) and not self.conflicts and not self.not_done and self.is_synced()
                and not any(m.error for m in self.members.values()))

    # ------------------------------------------------------------------ conflict predicates
    def _all_smaller(self, j: TableSchema) -> bool:
        """Nobody in the set still has a conflict table's old shape in a comparable way."""
        return all(cmp(j, self.members[c].schema) is None for c in self.conflicts)

    def _all_larger(self, xs: list[TableSchema]) -> bool:
        """Every schema of the set already contains each conflict table's new shape."""
        for c in self.conflicts:
            m = self.members[c]
            for t in xs:
                k = join2(m.schema, t) or t
                if cmp(k, m.conflict) not in (0, 1):
                    return False
        return True

    def _no_conflict(self, xs: list[TableSchema]) -> bool:
        j = try_join_all(xs)
        return j is not None and self._all_smaller(j) and self._all_larger(xs)

    def _conflict_schemas(self) -> list[TableSchema]:
        return [self.members[c].conflict for c in self.conflicts]

    def _same_change_elsewhere(self, m: Member, prev: TableSchema, post: TableSchema) -> bool:
        """Another member already made this conflicting change; this one is catching up."""
        for t in self.normal.distinct_except(m.schema):
            j = join2(post, t)
            if j is None or cmp(j, prev) is not None:
                continue
            if cmp(join2(prev, t) or t, post) in (0, 1):
                return True
        return False

    def resolve(self, caller: TableRef | None, executed: bool = False) -> None:
        """All pending conflicting DDLs agree and every table reached the new shape: accept them.
        Tables other than ``caller`` get a redirect (queued in ``self.redirects``).  ``executed``:
        the caller's own conflicting DDL is returned for execution, so the downstream makes the
        agreed change once; the redirected tables' replays then run nothing (a rename must not
        run twice: the second ``CHANGE a c`` fails with "Unknown column 'a'")."""
        runner = caller if executed else None
        if caller is None:
            # a departure or an operator's unlock completed the agreement and nobody ran the change:
            # one held table (chosen once, persisted with the answers) replays and runs it -- unless
            # another table already reached the shape with ordinary statements (then it is as if
            # that table's statement had completed it: values that cannot be carried)
            first = self.members[min(self.conflicts, key=str)]
            by = self._reached_by_ordinary(first.schema, first.conflict)
            if by is None:
                runner = first.table
            else:
                caller = by
        for c in sorted(self.conflicts, key=str):
            m = self.members[c]
            new = m.conflict
            if runner is not None:
                self.accepted.add(change_sig(m.schema, new))
            elif c != caller and lossy(m.schema, new):
                # the shape was reached by ordinary statements that already ran downstream (ADD of
                # the new column, the old one kept for the others): this table's rename/retype
                # cannot run there and its values cannot follow
                self.uncarried[c] = (f"cannot carry its values to the agreed shape: {caller} reached it with "
                                     f"ordinary statements that already ran downstream ({_shape_change(m.schema, new)})")
                self.set_conflict(m, None)
                continue
            if c != caller:
                self.queue_redirect(c, runner if runner is not None else caller)
                if runner is not None and c != runner:
                    m.applied_by_other, m.applied_by = new, runner
            self.set_conflict(m, None)
            self.set_schema(m, new)

    def _reached_by_ordinary(self, prev: TableSchema, post: TableSchema) -> TableRef | None:
        """A member not holding this change whose schema already has the columns it brings
        (reached with ordinary statements that ran downstream), when the change is not one the
        downstream already made."""
        sig = change_sig(prev, post)
        if sig in self.accepted or not sig[0]:
            return None
        came = [k for k, _ in sig[1]]
        for t, m in sorted(self.members.items(), key=lambda x: str(x[0])):
            if t not in self.conflicts and all(m.schema.column(k) is not None for k in came):
                return t
        return None

    def try_resolve(self, caller: TableRef | None = None, executed: bool = False) -> bool:
        if self.conflicts and self._no_conflict(self.finals.distinct()):
            self.resolve(caller, executed)
            return True
        return False

    # ------------------------------------------------------------------ the algorithm
    def step(self, m: Member, prev: TableSchema, post: TableSchema) -> StepResult:
        """One statement of the caller: prev -> post (design doc §4.3)."""
        self.set_conflict(m, None)   # one pending conflicting DDL per table: the new Info replaces it
        applied, m.applied_by_other, m.applied_by = m.applied_by_other, None, None
        idempotent = False
        if not eq(prev, m.schema):
            # the worker's view wins (restart, replay after redirect, re-created table)
            idempotent = eq(post, m.schema)
            self.set_schema(m, prev)
        order = cmp(prev, post)
        if order is not None:
            old = self.normal.try_joined()
            self.set_schema(m, post)
            new = self.normal.try_joined()
            if new is not None:
                if self.conflicts and self.try_resolve(m.table):
                    return StepResult(True, Stage.NONE)
                if old is None:
                    return StepResult(True, Stage.NONE)
                if order > 0:
                    # a narrowing statement runs downstream only when the join narrowed the way it
                    # does: a DROP while another table still has the column (or a wider one) must not
                    return StepResult(not eq(old, new) and _narrowed_to(prev, post, new), Stage.NONE)
                return StepResult(True, Stage.NONE)
            self.set_schema(m, prev)   # join fails: handle as a conflicting DDL
        # conflicting DDL
        if idempotent and applied is not None and eq(post, applied):
            # the replay of a change the resolving table already ran downstream
            self.set_schema(m, post)
            if self.conflicts:
                self.try_resolve(m.table)
            return StepResult(False, Stage.NONE)
        if not idempotent and self._same_change_elsewhere(m, prev, post):
            if change_sig(prev, post) in self.accepted:
                # a change the downstream already made (another table ran it): catch up, run nothing
                self.set_schema(m, post)
                if self.conflicts:
                    self.try_resolve(m.table)
                return StepResult(False, Stage.NONE)
            if lossy(prev, post):
                return StepResult(False, Stage.DETECTED, (
                    f"another table reached this shape with ordinary statements that already ran downstream "
                    f"({_shape_change(prev, post)}); this table's values cannot be carried there"))
            idempotent = True
        if idempotent:
            self.set_schema(m, post)
            if self.conflicts:
                self.try_resolve(m.table, executed=True)
            return StepResult(True, Stage.NONE)
        self.set_conflict(m, post)
        if not self._no_conflict(self._conflict_schemas()):
            return StepResult(False, Stage.DETECTED, self._detected_message(m, prev, post))
        if self.try_resolve(m.table, executed=True):
            return StepResult(True, Stage.NONE)
        return StepResult(False, Stage.SKIP_AND_WAIT, self._skip_message(m))

    def _detected_message(self, m: Member, prev: TableSchema, post: TableSchema) -> str:
        others = sorted(str(c) for c in self.conflicts if c != m.table)
        reason = ""
        try:
            self.finals.joined()
        except SchemaConflict as e:
            reason = f": {e}"
        if others:
            return (f"conflicts with the pending conflicting DDL of {', '.join(others)}{reason}; "
                    "the two changes disagree")
        return f"cannot be merged with the other tables' schemas{reason}"

    def _skip_message(self, m: Member) -> str:
        behind = sorted(str(t) for t, x in self.members.items()
                        if t not in self.conflicts and cmp(x.schema, m.conflict) not in (0, 1))
        shown = ", ".join(behind[:5]) + (f" and {len(behind) - 5} more" if len(behind) > 5 else "")
        return (f"conflicting DDL (rename/type change/NOT NULL without default) is applied only when "
                f"every table makes the same change; waiting for {shown or 'the other tables'}")

    def check_add_drop(self, m: Member, prev: TableSchema, post: TableSchema,
                       dropped_here: set[str], stmt: str) -> tuple[str | None, list[str]]:
        """Add/drop-column checks after an accepted statement (design doc §4.5).  Returns
        (error message or None, dropped column names)."""
        others = self.normal.distinct_except(m.schema)
        old = try_join_all(others + [prev])
        new = try_join_all(others + [post])
        if old is None or new is None:
            return None, []
        order = cmp(old, new)
        if order is None:
            return None, []
        prev_cols = prev.column_keys()
        post_cols = post.column_keys()
        if order <= 0:
            for x in sorted(post_cols - prev_cols):
                pc = post.column(x)
                oc = old.column(x)
                # charset/collation may differ (DM tolerates it); lengths and types may not
                if oc is not None and _no_charset(oc.type) != _no_charset(pc.type):
                    return (f"ADD COLUMN `{pc.name}` as {pc.type.sql()} but other tables of the lock have it "
                            f"as {oc.type.sql()}; downstream keeps the first definition (add columns with "
                            "different field lengths/types is refused: make the definitions equal)"), []
                if x in dropped_here or m.table in self.columns.get(x, {}):
                    return self._readd_message(m, pc.name, x, x in dropped_here), []
        drops: list[str] = []
        if order >= 0:
            drops = [prev.column(x).name for x in sorted(prev_cols - post_cols)]
        return None, drops

    def _readd_message(self, m: Member, name: str, key: str, same_info: bool) -> str:
        if same_info:
            return (f"add column {name} that wasn't fully dropped in downstream: "
                    f"column `{name}` is dropped and re-added in the same DDL batch; the DROP is not "
                    "fully applied downstream yet. Skip the re-add (`shard-ddl-lock unlock LOCK_ID "
                    "--action skip`) or run DROP and ADD as separate statements")
        holders = sorted(str(t) for t, x in self.members.items() if t != m.table and x.final.column(key))
        per = self.columns.get(key, {})
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

    # ------------------------------------------------------------------ dropped columns
    def record_dropped(self, t: TableRef, cols: list[str]) -> list[str]:
        new = []
        for c in cols:
            per = self.columns.setdefault(c.lower(), Drops())
            if t not in per:
                per[t] = DroppedStage.NOT_DONE
                new.append(c.lower())
        return new

    def done_dropped(self, t: TableRef, cols: list[str], exec_drops: set[str]):
        """Worker confirmed an Operation with ``cols``: returns (stage updates, cleared columns)."""
        updates, cleared = [], []
        for c in cols:
            key = c.lower()
            per = self.columns.get(key)
            if not per or t not in per:
                continue
            per[t] = DroppedStage.DONE if key in exec_drops else DroppedStage.PARTIAL
            updates.append((key, per[t]))
            if not per.count[DroppedStage.NOT_DONE] and per.count[DroppedStage.DONE]:
                del self.columns[key]
                cleared.append(key)
        return updates, cleared

    # ------------------------------------------------------------------ explanation
    def waiting_for(self, t: TableRef, ready: dict | None = None) -> str:
        """Why ``t`` keeps the lock open, in words ("" if it does not)."""
        m = self.members.get(t)
        if m is None:
            return f"{t} is not a member of lock {self.id}"
        if m.error:
            return f"error: {m.error}"
        a = m.answer
        if a is not None and a.stage is Stage.DETECTED:
            return (f"conflict: its DDL {a.info.ddls} {a.message}. Exit: fix the other tables, or "
                    f"`shardctl shard-ddl-lock unlock {self.id} -s {t.source} -d {t.schema} -t {t.table} "
                    "--action skip|exec`")
        if a is not None and a.stage is Stage.SKIP_AND_WAIT:
            return (f"skip-and-wait: its DDL {a.info.ddls} was skipped; {a.message}. Exit: unlock "
                    "--action skip|exec, or remove the tables that will never make the change")
        if a is not None and a.stage is Stage.ERROR:
            return f"error: its DDL {a.info.ddls} was refused: {a.message}. Exit: unlock --action skip|exec"
        if a is not None and a.stage is Stage.RESOLVED:
            return "redirected: waiting for the worker to replay its skipped DDL"
        ready = self.ready() if ready is None else ready
        if not ready.get(t, False):
            return self._schema_gap(m)
        if not m.done:
            return "waiting for the worker to execute its Operation and mark it done"
        return ""

    def _schema_gap(self, m: Member) -> str:
        j = self.joined()
        if j is None:
            return "the tables' schemas cannot be joined (a conflict is pending)"
        mine = {c.key: c for c in m.final.columns}
        reasons = []
        for c in j.columns:
            if c.key not in mine:
                if c.key in self.columns and m.table in self.columns[c.key]:
                    holders = [str(t) for t, x in self.members.items() if x.final.column(c.key)]
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


def tolerated(s: TableSchema, j: TableSchema) -> bool:
    """``s`` differs from the joined ``j`` only in column charsets/collations (which the join
    tolerates, DM_040): the downstream needs no DDL for it."""
    if s.column_keys() != j.column_keys() or {i.key: i.lattice_key() for i in s.indexes} != \
            {i.key: i.lattice_key() for i in j.indexes}:
        return False
    for c in s.columns:
        d = j.column(c.key)
        if d.lattice_key() != c.lattice_key() and (
                _no_charset(c.type) != _no_charset(d.type) or replace(c, type=d.type).lattice_key() != d.lattice_key()):
            return False
    return True


def fits(s: TableSchema, j: TableSchema) -> bool:
    """Every row of ``s`` fits the joined ``j`` as it is (same columns and indexes; each type
    equal or wider there, NULL allowed where ``s`` allows it; defaults may differ)."""
    if s.column_keys() != j.column_keys() or {i.key for i in s.indexes} != {i.key for i in j.indexes}:
        return False
    for c in s.columns:
        d = j.column(c.key)
        if c.nullable and not d.nullable:
            return False
        if _no_charset(c.type) != _no_charset(d.type):
            try:
                w = join_type(d.type, c.type)
            except Exception:  # noqa: BLE001 — incompatible types
                return False
            if _no_charset(w) != _no_charset(d.type):
                return False
    return True


def change_sig(prev: TableSchema, post: TableSchema) -> tuple:
    """What a change does to columns and indexes, independent of everything else in the table:
    (columns it removes or redefines, as they were; columns it adds or redefines, as they are;
    index keys it removes; index keys it adds)."""
    pk, qk = prev.column_keys(), post.column_keys()
    gone = frozenset((k, prev.column(k).lattice_key()) for k in pk
                     if k not in qk or prev.column(k).lattice_key() != post.column(k).lattice_key())
    came = frozenset((k, post.column(k).lattice_key()) for k in qk
                     if k not in pk or prev.column(k).lattice_key() != post.column(k).lattice_key())
    pi, qi = {i.key for i in prev.indexes}, {i.key for i in post.indexes}
    return gone, came, frozenset(pi - qi), frozenset(qi - pi)


def lossy(prev: TableSchema, post: TableSchema) -> bool:
    """The change removes or redefines a column that holds values (a rename, a type change):
    reaching its shape any other way loses or mixes those values downstream."""
    return bool(change_sig(prev, post)[0])


def _shape_change(prev: TableSchema, post: TableSchema) -> str:
    gone, came, _, _ = change_sig(prev, post)
    names = [prev.column(k).name for k, _ in sorted(gone)]
    new = [post.column(k).name for k, _ in sorted(came)]
    return f"column(s) {', '.join(f'`{n}`' for n in names)} -> {', '.join(f'`{n}`' for n in new) or 'none'}"


def _describe(c) -> str:
    """A column as the waiting text shows it: type, charset/collation, NULL-ness and default (two
    columns that differ only in charset or default must not print the same)."""
    t = c.type
    out = t.sql()
    if t.charset:
        out += f" CHARACTER SET {t.charset}"
    if t.collation:
        out += f" COLLATE {t.collation}"
    out += "" if c.nullable else " NOT NULL"
    if c.default is not None:
        out += f" DEFAULT {c.default}"
    return out


def _narrowed_to(prev: TableSchema, post: TableSchema, joined: TableSchema) -> bool:
    """Every column and index the statement ``prev -> post`` drops is gone from ``joined``, and
    every column it narrows has exactly its new definition there: running it downstream then
    keeps the downstream at least as wide as every member (invariant 4, docs/lock-algorithm.md)."""
    pk, qk = prev.column_keys(), post.column_keys()
    for x in pk - qk:
        if joined.column(x) is not None:
            return False
    for x in pk & qk:
        pc, qc = prev.column(x), post.column(x)
        if pc.lattice_key() != qc.lattice_key():
            jc = joined.column(x)
            if jc is None or jc.lattice_key() != qc.lattice_key():
                return False
    gone = {i.key for i in prev.indexes} - {i.key for i in post.indexes}
    return not (gone & {i.key for i in joined.indexes})


@functools.lru_cache(maxsize=4096)
def _no_charset(t) -> tuple:
    """A column type's identity without its charset and collation (memoised: types are frozen,
    and a big lock compares the same few per Info)."""
    return replace(t, charset=None, collation=None).lattice_key()
