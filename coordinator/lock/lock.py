"""One optimistic shard-DDL lock's decision algorithm (docs/lock-algorithm.md):
how a member's Info is answered (``on_info``, ``try_sync``, ``step``), when pending conflicting
DDLs agree (``resolve``) and who is redirected when (``drain_redirects``), and what a done mark,
an operator's unlock, a departure or a rebuild's restored answer change.  Each entry returns an
``Effects`` (the answers that changed, dropped-column records); ``LockKeeper`` turns them into
Operations.  Pure logic: no etcd, no I/O.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
import re
from dataclasses import dataclass, field

from coordinator.etcdproto import DroppedStage, Info, Stage, TableRef
from coordinator.schema import SchemaError, TableSchema, apply_ddl
from coordinator.schema.kinds import ClauseKind
from coordinator.schema.render import render_column, render_index
from coordinator.schema.statement import changed_columns, defined_columns, parse_statement
from coordinator.schema.diff import settle_mixed
from coordinator.shell import shardctl, unlock as unlock_command, unlock_choice
from coordinator.sql import quote_ident

from .explain import detected_message, readd_message, skip_message, wait_runner, waiting_for
from .schema_bag import cmp, eq, join2, key, try_join_all
from .shape import (_col, _narrowed_to, _no_charset, _shape_change, added_across_families, change_sig, default_clash,
                    default_only, lossy, narrows_below, renamed_indexes, retype_only, touched)
from .state import Answer, Drops, LockState, Member, StepResult, _replays

__all__ = ["Answer", "Drops", "Effects", "Lock", "Member", "StepResult", "new_unique_auto_increment"]

# how many later changes a held table may send as look-ahead (``Info.ahead``) before the lock stops
# hoping it makes a rename another table holds (``Lock._hope``)
MAX_AHEAD = 8
_HOPE = ("held: the tables holding another rename make this one later in their binlog; once every table's "
         "next renames are the same, they are coordinated as one ALTER")

# an ADD COLUMN that names its position (canonical text: `` FIRST`` / `` AFTER `c` `` at the end)
_POSITIONED = re.compile(r"\s(?:FIRST|AFTER\s+(?:`(?:[^`]|``)+`|[\w$]+))\s*$", re.I)


def _dropped_columns(ddls: list[str]) -> set[str]:
    """Columns (lower case) the statements drop (their DROP COLUMN clauses)."""
    return {c for d in ddls for c in changed_columns(d)[1]}


@dataclass
class Effects:
    """What one lock call changed, in order, for the keeper to persist: ``answer`` is the caller's
    (None: nothing to write for it), ``others`` the answers of other members that changed (one
    Operation each, in this order), then the dropped-column records to put and to delete."""
    answer: Answer | None = None
    others: list[tuple[TableRef, Answer]] = field(default_factory=list)
    dropped_puts: list[tuple[TableRef, list[str], DroppedStage]] = field(default_factory=list)
    dropped_deletes: list[str] = field(default_factory=list)
    departed: list[tuple[TableRef, TableSchema]] = field(default_factory=list)   # tables that left, their schema


class Lock(LockState):
    """State (``LockState``) and algorithm of one lock; ``LockKeeper`` owns the instances."""


    # ------------------------------------------------------------------ conflict predicates
    def _scope(self) -> tuple[frozenset[str], frozenset[str]]:
        """The columns and indexes the pending conflicting changes touch (``change_sig``): the
        conflict predicates compare the schemas only there, so a change some tables made before
        the conflicting one and others after it does not make them disagree."""
        cols: set[str] = set()
        idx: set[str] = set()
        seen: set[tuple[int, int]] = set()
        for c in self._conflicts:
            old, new = self.members[c].schema, self._pending(c)
            if (id(old), id(new)) in seen:      # schemas are interned: thousands of tables, few pairs
                continue
            seen.add((id(old), id(new)))
            gone, came, ix_gone, ix_came = change_sig(old, new)
            cols |= {k for k, _ in gone | came}
            idx |= ix_gone | ix_came
        return frozenset(cols), frozenset(idx)

    def _conflict_pairs(self, scope: tuple[frozenset[str], frozenset[str]]) -> list[tuple[TableSchema, TableSchema]]:
        """The distinct (old shape, new shape) of the pending conflicts, projected on ``scope``
        (a rename pending on thousands of tables is one pair)."""
        pairs: dict[tuple[int, int], tuple[TableSchema, TableSchema]] = {}
        for c in self._conflicts:
            old, new = _project(self.members[c].schema, scope), _project(self._pending(c), scope)
            pairs.setdefault((id(old), id(new)), (old, new))
        return list(pairs.values())

    @staticmethod
    def _all_smaller(j: TableSchema, pairs: list[tuple[TableSchema, TableSchema]]) -> bool:
        """Nobody in the set still has a conflict table's old shape in a comparable way."""
        return all(cmp(j, old) is None for old, _ in pairs)

    @staticmethod
    def _all_larger(xs: list[TableSchema], pairs: list[tuple[TableSchema, TableSchema]],
                    no_side: list[dict] | None = None) -> bool:
        """Every schema of the set already contains each conflict table's new shape, leaving
        out the columns ``no_side`` names for that shape and change (the tables holding it take
        no side there: ``_taking_no_side``)."""
        for i, (old, new) in enumerate(pairs):
            for t in xs:
                ign = no_side[i].get(t.lattice_key()) if no_side else None
                o, n, x = old, new, t
                if ign:
                    o, n, x = (_without(y, ign) for y in (old, new, t))
                k = join2(o, x) or x
                if cmp(k, n) not in (0, 1):
                    return False
        return True

    def _taking_no_side(self, scope: tuple[frozenset[str], frozenset[str]],
                        pairs: list[tuple[TableSchema, TableSchema]]) -> list[dict]:
        """Per pending change, the shapes (projected on ``scope``) whose tables take no side in
        some of it, with the columns they take no side on.  A table that dropped the change's
        old column -- a drop record, or the statement being decided (``_dropping``) -- and has
        neither column now takes no side in the whole change, which runs downstream when the
        others agree (its old rows keep their values under the new name, as a DROP keeps them
        under the old one).  A table with neither column of one of the change's renames because
        it has not added the old one yet takes no side in that rename when its look-ahead shows
        it adding the column and then renaming it (``_catching_up``): its ADD and its rename are
        then coordinated as one ALTER, which runs nothing."""
        out: list[dict] = []
        for old, new in pairs:
            sig = change_sig(old, new)
            gone, came = (frozenset(k for k, _ in x) for x in sig[:2])
            cols = gone - came
            every = gone | came
            droppers: set[TableRef] = set()
            for c in cols:
                droppers.update(self._columns.get(c, ()))
            if self._dropping is not None and self._dropping[1] & cols:
                droppers.add(self._dropping[0])
            exempt: dict = {}
            if droppers:
                held = Counter(key(self.members[t].final) for t in droppers if t in self.members)
                ok: set = set()
                bad: set = set()
                for f, n in self._finals.counts():
                    p = _project(f, scope)
                    if not every.isdisjoint(p.column_keys()):
                        continue
                    (ok if held.get(key(f), 0) == n else bad).add(p.lattice_key())
                exempt = {k: every for k in ok - bad}
            for k, part in self._catching_up(scope, old, new).items():
                exempt.setdefault(k, part)
            out.append(exempt)
        return out

    def _catching_up(self, scope: tuple[frozenset[str], frozenset[str]], old: TableSchema, new: TableSchema) -> dict:
        """The shapes (projected on ``scope``) whose every table catches up on renames of the
        change ``old -> new``: it has neither column of the rename, and its known later changes add the
        old column and then rename it (or drop it and add the new one), touching neither
        otherwise (``_hope``).  Each with the columns of those renames."""
        renames = _renames_of(old, new)
        if not renames:
            return {}
        shapes = {}
        for f, _ in self._finals.counts():
            p = _project(f, scope)
            if any(not (_sig_columns(w) & p.column_keys()) for w in renames):
                shapes[key(f)] = p.lattice_key()
        if not shapes:
            return {}
        per: dict = {}
        for m in self.members.values():
            k = key(m.final)
            if k not in shapes:
                continue
            a = m.answer
            steps = self._later(a)
            part: frozenset[str] = frozenset()
            for w in renames:
                if self._catches_up(a, steps, m.final.column_keys(), w):
                    part |= _sig_columns(w)
            per[shapes[k]] = part if shapes[k] not in per else per[shapes[k]] & part
        return {k: v for k, v in per.items() if v}

    def _no_conflict(self, xs: list[TableSchema], no_side: bool = False) -> bool:
        """``no_side``: ``xs`` are every member's final shape, and tables that dropped a pending
        change's old column take no side in it (``_taking_no_side``)."""
        scope = self._scope()
        ps = list({id(p): p for p in (_project(x, scope) for x in xs)}.values())
        j = try_join_all(ps)
        if j is None:
            return False
        pairs = self._conflict_pairs(scope)
        return self._all_smaller(j, pairs) and \
            self._all_larger(ps, pairs, self._taking_no_side(scope, pairs) if no_side else None)

    def _conflict_schemas(self) -> list[TableSchema]:
        return [self._pending(c) for c in self._conflicts]

    def _pending(self, c: TableRef) -> TableSchema:
        """The schema of ``c``'s pending conflicting DDL: ``_set_conflict`` keeps ``_conflicts``
        exactly the members whose ``conflict`` is set."""
        s = self.members[c].conflict
        assert s is not None, c
        return s

    def _same_change_elsewhere(self, m: Member, prev: TableSchema, post: TableSchema) -> bool:
        """Another member already made this conflicting change; this one is catching up.  A
        member that joined with the changed shape (created mid-lock) made it upstream only: the
        downstream does not have it, so it does not count."""
        others = self._normal.distinct_except(m.schema)
        if any(x.joined_ahead for x in self.members.values()):
            others = list({x.schema.lattice_key(): x.schema for x in self.members.values()
                           if x is not m and not x.joined_ahead}.values())
        # a table that left made its statements downstream too (``LockState._departed``)
        for t in [*others, *self._departed.values()]:
            j = join2(post, t)
            if j is None or cmp(j, prev) is not None:
                continue
            if cmp(join2(prev, t) or t, post) in (0, 1):
                return True
        return self._left_behind(prev, post) is not None

    def _left_behind(self, prev: TableSchema, post: TableSchema) -> TableRef | None:
        """A table that left the lock had already added, by ordinary statements that ran
        downstream, every column this rename brings (or redefined it so): the downstream has
        them, so the rename cannot run there.  It need not have dropped the old column first
        (a member must, to count: until then the others' rename is simply agreed later)."""
        came = change_sig(prev, post)[1]
        if not came or not change_sig(prev, post)[0]:
            return None
        for t, s in sorted(self._departed.items(), key=lambda x: str(x[0])):
            if all((c := s.column(k)) is not None and (prev.column(k) is None or c.lattice_key() == v)
                   for k, v in came):
                return t
        return None

    def resolve(self, caller: TableRef | None, executed: bool = False) -> None:
        """All pending conflicting DDLs agree and every table reached the new shape: accept them.
        Tables other than ``caller`` get a redirect (queued in ``self._redirects``).  ``executed``:
        the caller's own conflicting DDL is returned for execution, so the downstream makes the
        agreed change once; the redirected tables' replays then run nothing (a rename must not
        run twice: the second ``CHANGE a c`` fails with "Unknown column 'a'")."""
        runner = caller if executed else None
        self._indifferent = None
        indifferent = None
        if caller is not None and executed and self._partial(caller):
            # the caller takes no side in some of the agreed renames (``_catching_up``): its own
            # statement does not make them, so a held table whose change has them all runs it
            indifferent, caller, runner = caller, None, None
        elif caller is not None and not executed and self._left_both(caller):
            # the caller's ordinary statement dropped the old column without adding the new one:
            # it no longer has either, so the held tables' change is agreed but nobody ran it --
            # a held table runs it (values carried), as when a departure completes an agreement
            indifferent, caller = caller, None
        if caller is None:
            # a departure or an operator's unlock completed the agreement and nobody ran the change:
            # one held table (chosen once, persisted with the answers) replays and runs it -- unless
            # another table already reached the shape with ordinary statements (then it is as if
            # that table's statement had completed it: values that cannot be carried), or a
            # member's answer already runs it (a rebuild that restored a hold whose redirect the
            # store refused: the table's worker had put its Info again meanwhile)
            first = self.members[min(self._conflicts, key=lambda t: (self._partial(t), str(t)))]
            sig = change_sig(first.schema, self._pending(first.table))
            running = self._running_change(sig)
            by = self._reached_by_ordinary(first.schema, self._pending(first.table))
            if running is not None:
                runner = running
                self._gates.add(running)
            elif by is None:
                runner = first.table
                self._gates.add(runner)    # its replay runs the change (``_order_conflict`` waits for it)
            else:
                caller = by
        self._note_catching_up()
        for c in sorted(self._conflicts, key=str):
            m, new = self.members[c], self._pending(c)
            if runner is not None:
                self._accepted.add(change_sig(m.schema, new))
            elif c != caller and lossy(m.schema, new):
                # the shape was reached by ordinary statements that already ran downstream (ADD of
                # the new column, the old one kept for the others): this table's rename/retype
                # cannot run there and its values cannot follow
                self._uncarried[c] = (f"cannot carry its values to the agreed shape: {caller} reached it with "
                                     f"ordinary statements that already ran downstream ({_shape_change(m.schema, new)})")
                self._set_conflict(m, None)
                continue
            if c != caller:
                self._queue_redirect(c, runner if runner is not None else caller)
                if runner is not None and c != runner:
                    m.applied_by_other, m.applied_by = new, runner
            self._set_conflict(m, None)
            self._set_schema(m, new)
        if indifferent is not None and runner is not None:
            self._indifferent = (indifferent, runner)

    def _partial(self, t: TableRef) -> bool:
        """``t``'s pending change leaves out columns another pending change of the agreement
        touches (it catches up on those later: ``_catching_up``)."""
        mine = _sig_columns(change_sig(self.members[t].schema, self._pending(t)))
        return any(not _sig_columns(change_sig(self.members[c].schema, self._pending(c))) <= mine
                   for c in self._conflicts if c != t)

    def _catches_up(self, a: Answer | None, steps: list, has: frozenset[str], w: tuple) -> bool:
        """The table answered by ``a`` (list ``steps`` from ``_later``, columns ``has`` now) has
        neither column of the rename ``w``, does not hold it, and its list adds the old column
        and then renames it (``_hope``)."""
        if not steps:
            return False
        pending = change_sig(steps[0][1], steps[0][2])
        return not (_sig_columns(w) & has) and pending != w and self._hope(a, steps, w, pending) is True

    def _note_catching_up(self) -> None:
        """Before an agreement is accepted: the members that take no side in one of its renames
        because they add the old column later and then rename it (``_catching_up``).  Their ADD
        is coordinated with that rename (``_catch_up``): the look-ahead that showed it now is
        gone once the table replays."""
        renames = {w for c in self._conflicts for w in _renames_of(self.members[c].schema, self._pending(c))}
        for t, m in self.members.items():
            a = m.answer
            steps = self._later(a)
            for w in renames:
                if a is not None and self._catches_up(a, steps, m.final.column_keys(), w):
                    (old, _), = w[0]
                    (new, _), = w[1]
                    self._catching.setdefault(t, set()).add((old, new))
                    self._restamp.add(t)
                    a.catch_up = tuple(sorted(self._catching[t]))   # whatever writes it next carries it

    def _left_both(self, t: TableRef) -> bool:
        """``t`` has neither the columns the pending change removes nor those it brings (it
        dropped the old one by an ordinary statement): it takes no side in the change."""
        first = self.members[min(self._conflicts, key=str)]
        gone, came = (frozenset(k for k, _ in x) for x in change_sig(first.schema, self._pending(first.table))[:2])
        came -= gone
        s = self.members[t].schema
        return bool(came) and all(s.column(k) is None for k in gone | came)

    def _running_change(self, sig: tuple) -> TableRef | None:
        """A member whose answer runs the change ``sig`` downstream and is not done yet."""
        for t in sorted(self._running, key=str):
            a = self.members[t].answer
            if a is not None and a.ddls and a.before is not None and a.afters \
                    and change_sig(a.before, a.afters[-1]) == sig:
                return t
        return None

    def _reached_by_ordinary(self, prev: TableSchema, post: TableSchema) -> TableRef | None:
        """A member not holding this change whose schema already has the columns it brings
        (reached with ordinary statements that ran downstream), when the change is not one the
        downstream already made."""
        sig = change_sig(prev, post)
        if sig in self._accepted or not sig[0]:
            return None
        came = [k for k, _ in sig[1]]
        for t, m in sorted(self.members.items(), key=lambda x: str(x[0])):
            if t not in self._conflicts and not m.joined_ahead and all(m.schema.column(k) is not None for k in came):
                return t
        for t, s in sorted(self._departed.items(), key=lambda x: str(x[0])):
            if all(s.column(k) is not None for k in came):
                return t          # a table that left reached it (its statements ran downstream)
        return None

    def _onto_held_renames(self, by: TableRef, old: TableSchema, new: TableSchema) -> None:
        """``by``'s ordinary statement makes the downstream add a column that another table's
        held rename brings: that rename can no longer run downstream, and the table's values of
        the old column cannot be carried (``shape.lossy``).  It is ``detected`` now, with the
        exit that names (its ``skip`` is safe: the downstream has the column its rows write),
        rather than held for an agreement that cannot come."""
        added = new.column_keys() - old.column_keys()
        if not added:
            return
        for c in sorted(self._conflicts - {by}, key=str):
            m = self.members[c]
            pending = self._pending(c)
            sig = change_sig(m.schema, pending)
            if _pure_rename(sig) and not {k for k, _ in sig[1]}.isdisjoint(added) \
                    and {k for k, _ in sig[0]}.isdisjoint({k for k, _ in sig[1]}):
                self._uncarried[c] = (f"cannot carry its values to the new column: {by} added it with an ordinary "
                                     f"statement that ran downstream ({_shape_change(m.schema, pending)})")
                self._set_conflict(m, None)

    def _try_resolve(self, caller: TableRef | None = None, executed: bool = False) -> bool:
        if self._conflicts and self._no_conflict(self._finals.distinct(), no_side=True):
            self.resolve(caller, executed)
            return True
        return False

    # ------------------------------------------------------------------ the algorithm
    def step(self, m: Member, prev: TableSchema, post: TableSchema, sql: str = "") -> StepResult:
        """One statement ``sql`` of the caller, ``prev -> post``: accepted, held or a conflict."""
        self._set_conflict(m, None)   # one pending conflicting DDL per table: the new Info replaces it
        applied, m.applied_by_other, m.applied_by = m.applied_by_other, None, None
        idempotent = False
        if not eq(prev, m.schema):
            # the worker's view wins (restart, replay after redirect, re-created table)
            idempotent = eq(post, m.schema)
            self._set_schema(m, prev)
        if not idempotent:
            others = self._normal.distinct_except(m.schema)
            clash = added_across_families(prev, post, others) or default_clash(prev, post, others)
            if clash is not None:
                return StepResult(False, Stage.DETECTED, f"cannot be merged with the other tables' schemas: {clash}")
        order = cmp(prev, post)
        if order is None and default_only(prev, post):
            # a default change holds nobody: rows carry every value, so the tables may disagree
            # for a while (the join's default is then MIXED_DEFAULT and the downstream keeps its
            # own); the statement runs when the join has its default, i.e. with the last table
            order = 1
        if order is None and not idempotent:
            retyped = self._retype(m, prev, post)
            if retyped is not None:
                return retyped
        if order is not None and idempotent and applied is not None and eq(post, applied):
            # the replay of a DROP that completed a rename another table then ran (``resolve``,
            # the caller that took no side): the rename took the column away downstream
            self._set_schema(m, post)
            return StepResult(False, Stage.NONE)
        if order is not None:
            old = self._normal.try_joined()
            self._set_schema(m, post)
            new = self._normal.try_joined()
            if new is not None:
                self._dropping = (m.table, prev.column_keys() - post.column_keys())
                resolved = bool(self._conflicts) and self._try_resolve(m.table)
                self._dropping = None
                if resolved:
                    if self._indifferent is not None and self._indifferent[0] == m.table:
                        # its DROP of the old column completed a rename a held table now runs:
                        # the column goes with that rename.  Held until the rename ran (its next
                        # statement may add the new column), then its replay runs nothing
                        runner = self._indifferent[1]
                        self._queue_redirect(m.table, runner)
                        m.applied_by_other, m.applied_by = post, runner
                        return StepResult(False, Stage.SKIP_AND_WAIT, wait_runner(self, runner))
                    # the statement completed an agreement; what it runs downstream still follows
                    # the join as it is now (a DROP that reached a held rename's shape by ordinary
                    # statements must not run while the held table still has the column)
                    new = self._normal.try_joined()
                    if new is None or old is None:
                        return StepResult(True, Stage.NONE)
                if old is None:
                    return StepResult(True, Stage.NONE)
                self._onto_held_renames(m.table, old, new)
                if order > 0:
                    # a narrowing statement runs downstream only when the join narrowed the way it
                    # does: a DROP while another table still has the column (or a wider one) must not
                    return StepResult(not eq(old, new) and _narrowed_to(prev, post, new), Stage.NONE)
                # a widening or neutral statement that writes a column's whole definition runs only
                # when the join has exactly that definition: a shard catching up to a width others
                # passed, or moving a column (MODIFY ... AFTER), would narrow the downstream
                if eq(old, new) and not changed_columns(sql)[0] <= post.column_keys():
                    # an ADD and a later rename coordinated as one (``_catch_up``): the downstream
                    # has the column under its new name; the statement cannot run there
                    return StepResult(False, Stage.NONE)
                return StepResult(_defines_joined(sql, post, new), Stage.NONE)
            self._set_schema(m, prev)   # join fails: handle as a conflicting DDL
        elif renamed_indexes(prev, post):
            # nothing to hold: a name touches no row.  The downstream follows the join of the
            # indexes (those every table has): the first table's rename drops the old index, the
            # last one's adds it under the new name (``try_sync`` writes those statements,
            # ``_index_ddls``), so a later statement naming either name meets what it expects
            old = self._normal.try_joined()
            self._set_schema(m, post)
            joined = self._normal.try_joined()
            if joined is not None:
                if self._conflicts and self._try_resolve(m.table):
                    joined = self._normal.try_joined()
                changed = old is not None and joined is not None and \
                    {i.key for i in old.indexes} != {i.key for i in joined.indexes}
                return StepResult(changed, Stage.NONE)
            # the table's schema carries a change still pending on the lock (it is held): the
            # rename joins that pending change, as any later statement of a held table does
            self._set_schema(m, prev)
        # conflicting DDL
        if idempotent and applied is not None and eq(post, applied):
            # the replay of a change the resolving table already ran downstream
            self._set_schema(m, post)
            if self._conflicts:
                self._try_resolve(m.table)
            return StepResult(False, Stage.NONE)
        if not idempotent and self._same_change_elsewhere(m, prev, post):
            if change_sig(prev, post) in self._accepted:
                # a change the downstream already made (another table ran it): catch up, run nothing
                self._set_schema(m, post)
                if self._conflicts:
                    self._try_resolve(m.table)
                return StepResult(False, Stage.NONE)
            if lossy(prev, post):
                return StepResult(False, Stage.DETECTED, (
                    f"another table reached this shape with ordinary statements that already ran downstream "
                    f"({_shape_change(prev, post)}); this table's values cannot be carried there"))
            idempotent = True
        if idempotent:
            self._set_schema(m, post)
            if self._conflicts:
                self._try_resolve(m.table, executed=True)
            return StepResult(True, Stage.NONE)
        sig = change_sig(prev, post)
        if _pure_rename(sig) and sig[0] != sig[1] and self._downstream_has(sig, made_only=True):
            # the new column is downstream already (another table added it with an ordinary
            # statement): no agreement can run this rename there, and the table's values of the
            # old column cannot follow -- detected at once, as when the ADD comes after the hold
            # (``_onto_held_renames``); its `skip` exit is safe, the downstream has the column
            return StepResult(False, Stage.DETECTED, (
                f"cannot carry its values to the new column: another table added it with an ordinary statement "
                f"that ran downstream ({_shape_change(prev, post)})"))
        self._set_conflict(m, post)
        if not self._no_conflict(self._conflict_schemas(), no_side=True):
            return StepResult(False, Stage.DETECTED, detected_message(self, m, prev, post))
        if self._try_resolve(m.table, executed=True):
            if self._indifferent is not None and self._indifferent[0] == m.table:
                # it completed an agreement its own change is only part of: the runner's statement
                # makes it whole; this table's replay runs nothing (``resolve``)
                return StepResult(False, Stage.SKIP_AND_WAIT, wait_runner(self, self._indifferent[1]))
            return StepResult(True, Stage.NONE)
        return StepResult(False, Stage.SKIP_AND_WAIT, skip_message(self, m))

    def _retype(self, m: Member, prev: TableSchema, post: TableSchema) -> StepResult | None:
        """A retype to a type the others' join with it still holds (``VARCHAR(10) -> INT``: the
        join is ``VARCHAR(20)``) holds nobody: the downstream widens to that join (a synthesised
        ``MODIFY`` each such table runs), and the last table's statement, which makes the join
        its own type, runs as written.  Rows of every table fit the downstream all along.  None when
        the change is not such a retype, or the join fails (DM's conflict, held as before)."""
        cols = retype_only(prev, post)
        if not cols:
            return None
        old = self._normal.try_joined()
        self._set_schema(m, post)
        new = self._normal.try_joined()
        if old is None or new is None:
            self._set_schema(m, prev)
            return None
        if self._conflicts:
            self._try_resolve(m.table)
            new = self._normal.try_joined()
            if new is None:
                return StepResult(False, Stage.NONE)
        if _narrowed_to(prev, post, new):
            return StepResult(not eq(old, new), Stage.NONE)
        # every such retype runs the widening, not only the first (as every table's ADD of a
        # column runs): the first may leave the lock before its statement ran
        ddls = []
        settled = settle_mixed(old, new)     # the downstream keeps its default where tables disagree
        for k in sorted(cols):
            j = settled.column(k)
            if j is None:
                continue
            ddls.append(f"ALTER TABLE {quote_ident(self.key.down_schema)}.{quote_ident(self.key.down_table)} "
                        f"MODIFY COLUMN {render_column(j)}")
        return StepResult(bool(ddls), Stage.NONE, ddls=ddls)

    def _check_add_drop(self, m: Member, prev: TableSchema, post: TableSchema,
                        dropped_here: set[str], stmt: str) -> tuple[str | None, list[str]]:
        """Add/drop-column checks after an accepted statement (DM's add/drop column rules).  Returns
        (error message or None, dropped column names)."""
        others = self._normal.distinct_except(m.schema)
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
                pc = _col(post, x)
                oc = old.column(x)
                # charset/collation may differ (DM tolerates it); lengths and types may not (DM_110: the
                # downstream keeps the first definition).  Compared with the type the column was first
                # added as: other tables widening it since is a change this table has not made yet
                if oc is None:
                    self._added_as.setdefault(x, pc.type)
                elif _no_charset(self._added_as.get(x, oc.type)) != _no_charset(pc.type):
                    return (f"ADD COLUMN `{pc.name}` as {pc.type.sql()} but other tables of the lock have it "
                            f"as {oc.type.sql()}; downstream keeps the first definition (add columns with "
                            "different field lengths/types is refused: make the definitions equal)"), []
                if x in dropped_here or m.table in self._columns.get(x, {}):
                    return readd_message(self, m, pc.name, x, x in dropped_here), []
        drops: list[str] = []
        if order >= 0:
            drops = [_col(prev, x).name for x in sorted(prev_cols - post_cols)]
        return None, drops

    def _onto_left_behind(self, m: Member, sql: str, prev: TableSchema, post: TableSchema) -> tuple[str | None, str]:
        """An ADD COLUMN, run downstream, of a column no member has but a table that left the
        lock added by ordinary statements (so the downstream has it, with that table's
        definition): wider here, the MODIFY that widens it (the ADD would fail as a duplicate and
        keep the narrower type); the same or narrower, the ADD as it is (a duplicate, ignored);
        incompatible, refused as DM refuses two definitions of one column.  Returns (error or
        None, the statement to run)."""
        if not self._departed:
            return None, sql
        added = post.column_keys() - prev.column_keys()
        if len(added) != 1 or not prev.column_keys() <= post.column_keys():
            return None, sql
        [k] = added
        mine = _col(post, k)
        theirs = [(t, c) for t, s in sorted(self._departed.items(), key=lambda x: str(x[0]))
                  if (c := s.column(k)) is not None]
        if not theirs or any(x.column(k) is not None for x in self._normal.distinct_except(m.schema)):
            return None, sql        # a member has it: its own ADD settled the downstream column
        widen = False
        for t, c in theirs:
            order = cmp(TableSchema((c,)), TableSchema((mine,)))
            if order is None:
                return (f"ADD COLUMN `{mine.name}` as {mine.type.sql()} but {t}, which left the lock, added it "
                        f"downstream as {c.type.sql()}; downstream keeps that definition (make the definitions "
                        "equal upstream, or change the downstream column by hand and skip this DDL)"), sql
            widen = widen or order < 0
        if not widen:
            return None, sql
        return None, (f"ALTER TABLE {quote_ident(self.key.down_schema)}.{quote_ident(self.key.down_table)} "
                      f"MODIFY COLUMN {render_column(mine)}")

    # ------------------------------------------------------------------ one Info
    def receive(self, m: Member, info: Info) -> bool:
        """Take ``info`` as ``m``'s latest (False: older than one already handled, ignore it)."""
        if info.revision and info.revision < m.info_revision:
            return False
        m.joined_ahead = False
        m.info_revision = max(m.info_revision, info.revision)
        self.handled_revision = max(self.handled_revision, info.revision)
        m.error = ""
        if not info.ignore_conflict:
            self._set_note(m, "")      # an operator decision stands until the table sends its next DDL
        return True

    def on_info(self, m: Member, info: Info, before: TableSchema, afters: list[TableSchema]) -> Effects:
        """Decide the answer to ``m``'s parsed, consistent Info and settle it."""
        self._indifferent = None        # set by this Info's own ``resolve`` only
        if info.extends and m.answer is not None and m.answer.info.revision >= info.extends \
                and m.answer.info.ddls == info.ddls and not (m.answer.hopeful and m.conflict is None):
            # the same DDL with more look-ahead: its answer stands (re-stated for this revision)
            return self.settle(m, info, dataclasses.replace(m.answer, info=info))
        again = self._replayed_answer(m, info, before, afters)
        if again is not None:
            return self.settle(m, info, again)
        if m.table in self._catching:
            # a rename the table has reached (or whose old column it has: its ADD was not folded)
            # needs no more catching up
            left = {p for p in self._catching[m.table] if before.column(p[0]) is None and before.column(p[1]) is None}
            if left:
                self._catching[m.table] = left
            else:
                del self._catching[m.table]
        caught = self._catch_up(m, info, before, afters)
        if caught is not None:
            return self.settle(m, info, caught)
        applied, by = m.applied_by_other, m.applied_by
        # still held for ``by``'s change (not a released redirect: that one was released because the
        # change was in effect, and a later gate of ``by`` -- its next resolution, or another table
        # held until its next DDL ran -- is not this change's: holding the replay for it let a skip
        # of ``by``'s next DDL hand this change over to run again)
        held = m.answer is not None and m.answer.stage is Stage.SKIP_AND_WAIT and m.answer.runs_after is None
        fx = Effects()
        ans = self.try_sync(m, info, before, afters, fx)
        if ans.stage is Stage.DETECTED:
            # detected against another table's different pending change (a table held on the same
            # change as the others costs nothing here: a big lock's thousands of them stay flat)
            others = len(fx.others)
            asked = self._reorder(m, info, before, afters, fx)
            if asked is not None:
                ans = asked
            elif len(fx.others) > others:
                # the tables in the way were asked for another change first: decide this one again
                ans = self.try_sync(m, info, before, afters, fx)
            if ans.stage is Stage.DETECTED:
                ans = self._hopeful(m, ans)
        if (applied is not None and by is not None and by != m.table and held and self.gated_by(by)
                and ans.stage is Stage.NONE and not ans.ddls):
            # the replay of this table's change, which ``by`` was told to run downstream and has not
            # run yet (its worker died in between, say): the rows after it do not fit the downstream
            # yet.  Hold the table again until ``by`` is done; on one source the stream must get past
            # this table to reach ``by``'s DDL.  Only ``by`` gates it: an unrelated running DDL does not.
            m.applied_by_other, m.applied_by = applied, by
            ans = Answer(info, Stage.SKIP_AND_WAIT, [], wait_runner(self, by), [], set(), afters, before, runner=by)
            self._queue_redirect(m.table, by)
        elif self._indifferent is not None and self._indifferent[0] == m.table and ans.stage is Stage.SKIP_AND_WAIT:
            # held until the runner of the rename its DROP completed ran it (``step``): persisted
            # as a hold naming its runner, so a rebuild restores it
            ans = dataclasses.replace(ans, runner=self._indifferent[1])
        else:
            ans = self._ordered(m, ans)
        self._indifferent = None
        return self.settle(m, info, ans, fx)

    def _catch_up(self, m: Member, info: Info, before: TableSchema, afters: list[TableSchema]) -> Answer | None:
        """``m`` adds a column ``c`` the others no longer have, because they renamed it to
        ``c2`` (the join has ``c2`` with ``c``'s definition, nobody has ``c``), and its
        look-ahead renames it to ``c2`` too, touching neither column before: the ADD and the
        rename are one change for the downstream, ``ADD c2``, which it has.  The table is asked to
        coordinate them as one ALTER (``Answer.combine``); its rows between are written through
        the rename, into ``c2``.  Run as written, the ADD would bring ``c`` back downstream and
        the rows between would land there, not under the name the others' values have.  Held
        while its look-ahead may still show the rename (``Answer.hopeful``, no conflict); None
        when it is not such an ADD, or its later changes do something else first."""
        if len(info.ddls) != 1 or len(afters) != 1 or info.rest or info.ignore_conflict or not info.reads_ahead:
            return None
        post = afters[0]
        gone, came, ix_gone, ix_came = change_sig(before, post)
        if gone or ix_gone or ix_came or len(came) != 1:
            return None
        (c, ckey), = came
        joined = self._normal.try_joined()
        if joined is None or joined.column(c) is not None:
            return None
        targets = {x.key for x in joined.columns if before.column(x.key) is None
                   and x.lattice_key()[1:] == ckey[1:] and (c, x.key) in self._catching.get(m.table, ())}
        if not targets:
            return None
        prev = post
        for k, sql in enumerate(info.ahead):
            try:
                nxt = apply_ddl(prev, sql)
            except SchemaError:
                return None
            if nxt is None:
                return None
            g, n, _, _ = change_sig(prev, nxt)
            touched_here = {x for x, _ in g | n}
            if touched_here & ({c} | targets):
                w = _renames_of(prev, nxt)
                if len(g) == 1 and len(n) == 1 and w and next(iter(w[0][0]))[0] == c \
                        and next(iter(w[0][1]))[0] in targets:
                    return Answer(info, Stage.SKIP_AND_WAIT, [], (
                        f"coordinating this ADD of `{c}` together with its later rename: the other tables renamed "
                        "the column already, so the two are one change downstream, which has the new name; the "
                        "worker sends them as one ALTER"), [], set(), afters, before, combine=(k,))
                return None
            prev = nxt
        if len(info.ahead) >= MAX_AHEAD:
            return None
        return Answer(info, Stage.SKIP_AND_WAIT, [], (
            f"held: the other tables renamed `{c}` already; reading this table's next statements to see whether it "
            "renames the column the same way (then both are coordinated as one ALTER)"),
            [], set(), afters, before, hopeful=True)

    # ------------------------------------------------------------------ changes in another order
    def _reorder(self, m: Member, info: Info, before: TableSchema, afters: list[TableSchema],
                 fx: Effects) -> Answer | None:
        """Two different conflicting changes pending at once (``m``'s and another table's) wait
        for each other: each table waits for the others to make its change.  When every blocked
        table either holds one same change or has it later in the same ALTER (``Info.rest``:
        no upstream row between, so the order of the two is the table's own affair) and it
        commutes with what comes before it there, the tables that have it later are asked to
        coordinate it first (``Answer.first``); their own change is withdrawn until they send it
        again.  The others are then decided as usual.  Returns ``m``'s answer when ``m`` is the
        one asked, else None (``m``'s Info is decided as usual; other tables' new answers go to
        ``fx.others``)."""
        if len(info.ddls) != 1 or info.ignore_conflict or not afters:
            return None
        post = afters[-1]
        if cmp(before, post) is not None or renamed_indexes(before, post):
            return None       # not a conflicting change: the join takes it or not, as usual
        blocked: list[tuple[TableRef, TableSchema, TableSchema, str, list[str]]] = [
            (m.table, before, post, info.ddls[0], info.rest)]
        for t in sorted((self._conflicts | self._detected) - {m.table}, key=str):
            o = self.members[t]
            a = o.answer
            if a is None or a.before is None or not a.afters:
                return None
            prev, new = (o.schema, o.conflict) if o.conflict is not None else (a.before, a.afters[-1])
            one = len(a.info.ddls) == 1
            blocked.append((t, prev, new, a.info.ddls[0] if one else "", a.info.rest if one else []))
        if len(blocked) < 2:
            return None
        sigs = [change_sig(prev, new) for _, prev, new, _, _ in blocked]
        if all(s == sigs[0] for s in sigs):
            return None
        best: dict[TableRef, str] | None = None
        for want in dict.fromkeys(sigs):         # m's change first, then the others' in table order
            plan: dict[TableRef, str] = {}
            for (t, prev, new, sql, rest), sig in zip(blocked, sigs):
                if sig == want:
                    continue
                r = _first_in_rest(prev, new, sql, rest, want)
                if r is None:
                    break
                plan[t] = r
            else:
                # the fewest tables asked (the one arriving, rather than every table held before it)
                if best is None or len(plan) < len(best) or (len(plan) == len(best) and m.table in plan):
                    best = plan
        return None if best is None else self._ask_first(m, info, before, afters, best, fx)

    def _ask_first(self, m: Member, info: Info, before: TableSchema, afters: list[TableSchema],
                   plan: dict[TableRef, str], fx: Effects) -> Answer | None:
        """Carry out ``_reorder``'s plan: each table in it withdraws its pending change and is
        told which later change of its ALTER to send first."""
        mine: Answer | None = None
        for t, first in sorted(plan.items(), key=lambda x: str(x[0])):
            msg = (f"coordinating `{first}` first: other tables are held on that change, which this ALTER "
                   "also makes; this change is sent again after it")
            if t == m.table:            # (detected: ``try_sync`` left it before its change, no conflict)
                mine = Answer(info, Stage.SKIP_AND_WAIT, [], msg, [], set(), afters, before, first=first)
                continue
            o = self.members[t]
            a = o.answer
            assert a is not None
            if o.conflict is not None:
                self._set_conflict(o, None)
            elif a.before is not None and not eq(a.before, o.schema):
                self._set_schema(o, a.before)
            ans = Answer(a.info, Stage.SKIP_AND_WAIT, [], msg, [], set(), a.afters, a.before, first=first)
            self._set_answer(o, ans)
            self._set_done(o, False)
            fx.others.append((t, ans))
        return mine

    # ------------------------------------------------------------------ changes across statements
    @staticmethod
    def _later(a: Answer | None) -> list[tuple[str, TableSchema, TableSchema]]:
        """The pending change answered by ``a``, then the later ones its Info names (``rest``,
        then ``ahead``), each as (statement, schema before, schema after); stops at one that does
        not apply."""
        if a is None or a.before is None or len(a.info.ddls) != 1 or len(a.afters) != 1 or a.combine \
                or not a.info.reads_ahead:
            return []
        out = [(a.info.ddls[0], a.before, a.afters[0])]
        prev = a.afters[0]
        for sql in [*a.info.rest, *a.info.ahead]:
            try:
                post = apply_ddl(prev, sql)
            except SchemaError:
                break
            if post is None:            # a DROP TABLE: the table's list ends there
                break
            out.append((sql, prev, post))
            prev = post
        return out

    @staticmethod
    def _hope(a: Answer | None, steps: list, want: tuple, pending: tuple) -> bool | None:
        """Whether the table answered by ``a`` (pending change ``pending``, list ``steps`` from
        ``_later``) makes the rename ``want`` later too: True when its known later changes have
        it; False when they touch its columns otherwise, or the table has sent all the
        look-ahead it may (``MAX_AHEAD``); None: not known yet."""
        if pending == want:
            return True
        if not steps:
            return False
        cols = _sig_columns(want)
        # a table with neither column yet catches up: it adds the old one, then renames it
        added = False
        lacking = not (steps[0][2].column_keys() & cols)
        dropped = False
        for _, prev, post in steps[1:]:
            sig = change_sig(prev, post)
            if sig == want:
                return True
            if _sig_columns(sig) & cols:
                reach = _ordinary_reach(sig, want)
                if reach == "old" and lacking and not added:
                    added = True
                    continue
                if reach == "drop" and not dropped:
                    dropped = True
                    continue
                if reach == "add" and dropped:
                    return True
                return False
        return False if a is None or len(a.info.ahead) >= MAX_AHEAD else None

    def _covers(self, a: Answer, mine: list, steps: list, want: tuple) -> bool | None:
        """The other table's pending change (``steps[0]``, from ``_later``) renames columns only,
        ``want`` among them, and each of its other renames is one the table answered by ``a``
        (list ``mine``, pending ``want``) makes later or catches up on (``_hope``); None while
        its look-ahead does not tell yet."""
        theirs = change_sig(steps[0][1], steps[0][2])
        renames = _renames_of(steps[0][1], steps[0][2])
        if len(theirs[0]) < 2 or len(theirs[0]) != len(theirs[1]) or theirs[2] or theirs[3] or want not in renames:
            return False              # something besides renames
        hopes = {w: True if w == want else self._hope(a, mine, w, want) for w in renames}
        for maybe in (True, None):
            made = [w for w, h in hopes.items() if h is True or h is maybe]
            if {k for w in made for k, _ in w[0]} == {k for k, _ in theirs[0]} \
                    and {k for w in made for k, _ in w[1]} == {k for k, _ in theirs[1]}:
                return True if maybe else None
        return False

    def _hopeful(self, m: Member, ans: Answer) -> Answer:
        """``ans`` (``detected``: another table holds a different change) unless every table in the
        way makes ``m``'s change later too -- a rename, read past in its stream (``Info.ahead``) or
        later in its ALTER -- and nothing ``m`` is known to do contradicts theirs: then a hold,
        while the tables read further, until ``_combine`` finds the same renames at the head of
        every table's list (or ``_hope_lost`` finds one never will).  A rename in one order here
        and the other order there is two tables' same migration, not a conflict."""
        if len(ans.info.ddls) != 1 or ans.before is None or len(ans.afters) != 1 or ans.info.ignore_conflict \
                or not ans.info.reads_ahead:
            return ans
        want = change_sig(ans.before, ans.afters[0])
        if not _pure_rename(want) or self._downstream_has(want):
            return ans
        mine = self._later(ans)
        ahead = False
        for t in (self._conflicts | self._detected) - {m.table}:
            o = self.members[t].answer
            steps = self._later(o)
            if not steps:
                return ans
            theirs = change_sig(steps[0][1], steps[0][2])
            if theirs == want:
                continue
            if not _pure_rename(theirs) or self._hope(o, steps, want, theirs) is not True \
                    or self._hope(ans, mine, theirs, want) is False:
                return ans
            ahead = True
        if not ahead:
            return ans
        self._set_conflict(m, ans.afters[0])
        self._set_schema(m, ans.before)
        return Answer(ans.info, Stage.SKIP_AND_WAIT, [], _HOPE, [], set(), ans.afters, ans.before, hopeful=True)

    def _downstream_has(self, sig: tuple, made_only: bool = False) -> bool:
        """A rename ``sig`` whose new column the downstream already has (an ordinary ADD of
        another table ran there): no agreement can run it, so there is nothing to hope for.
        ``made_only``: leave out the tables that joined with a shape the downstream may not have
        (created mid-lock, or forced past a change by an operator's skip)."""
        joined = self._normal.try_joined()
        if made_only and any(x.joined_ahead for x in self.members.values()):
            made = [x.schema for x in self.members.values() if not x.joined_ahead]
            joined = try_join_all(made) if made else None
        came = {k for k, _ in sig[1]} - {k for k, _ in sig[0]}
        return joined is not None and any(joined.column(k) is not None for k in came)

    def _hope_lost(self, fx: Effects) -> None:
        """A table held in hope (``_hopeful``) whose hope is gone -- a table in the way, or the
        held one itself, turned out to touch the other's columns otherwise, or read all it may
        without the change -- is ``detected`` after all, with DM's message and exits."""
        for t in sorted(self._hoping & self._conflicts, key=str):
            m = self.members[t]
            a = m.answer
            assert a is not None and a.before is not None
            want = change_sig(a.before, a.afters[0])
            lost = ""
            mine = self._later(a)
            for o in sorted(self._conflicts - {t}, key=str):
                oa = self.members[o].answer
                steps = self._later(oa)
                theirs = change_sig(steps[0][1], steps[0][2]) if steps else None
                if theirs == want:
                    continue
                if theirs is not None and not _pure_rename(theirs) and self._covers(a, mine, steps, want) is not False:
                    continue        # a combined change with this rename, the rest caught up on here
                if theirs is None or not _pure_rename(theirs) or self._hope(oa, steps, want, theirs) is False \
                        or self._hope(a, mine, theirs, want) is False:
                    lost = str(o)
                    break
            if not lost:
                continue
            self._set_conflict(m, None)
            self._set_schema(m, a.before)
            ans = Answer(a.info, Stage.DETECTED, [], (
                f"there will be conflicts if DDLs {'; '.join(a.info.ddls)} are applied to the downstream: it conflicts "
                f"with the pending conflicting DDL of {lost}, which does not make this rename later (or this table "
                "does not make its change); the two changes disagree"), [], set(), a.afters, a.before)
            self._reanswer(m, ans, fx)

    def _combine(self, fx: Effects) -> None:
        """Every member is blocked on a rename (or held in hope), and every table's list
        (``_later``) has each of the pending renames, with only changes touching none of their
        columns between them: each table is asked to coordinate its renames of that set as one
        ALTER (``Answer.combine``: which of its later changes to fold into the pending one).  Its
        own change is withdrawn until the combined one arrives, which the lock then agrees as one
        change; the changes between stay where they are (they touch other columns).  Each
        table's rows between its renames are written through them (renames touch no value).  A
        table that adds a rename's old column only later (``_catching_up``) folds only the
        renames it makes; when the renames cannot be combined although every look-ahead tells,
        the tables held in hope on such a table are ``detected`` (``_no_way``)."""
        blocked = self._conflicts | self._detected
        if len(blocked) < 2 or len(blocked) != len(self.members):
            return
        lists = {t: self._later(self.members[t].answer) for t in sorted(blocked, key=str)}
        if any(not x for x in lists.values()):
            return
        want = {change_sig(x[0][1], x[0][2]) for x in lists.values()}
        if len(want) < 2 or not all(_pure_rename(w) for w in want):
            return
        cols = frozenset().union(*(_sig_columns(w) for w in want))
        # a table that has neither column of a rename yet and adds the old one later, then renames
        # it, takes no side in that rename (``_catching_up``): it folds only the others
        catching = {t: {w for w in want if self._catches_up(self.members[t].answer, steps, steps[0][2].column_keys(), w)}
                    for t, steps in lists.items()}
        caught = {t: frozenset().union(*(_sig_columns(w) for w in ws)) for t, ws in catching.items()}
        # the same columns before the renames (tables may differ elsewhere: an index one added)
        ref = next((steps for t, steps in lists.items() if not catching[t]), None)
        if ref is None:
            return
        plan = self._combine_plan(lists, want, cols, catching, caught, ref)
        if plan is None and not self._detected and any(catching.values()) and all(
                self._hope(self.members[t].answer, steps, w, change_sig(steps[0][1], steps[0][2])) is not None
                for t, steps in lists.items() for w in want):
            # the hope counted on a table catching up on a rename, every table's look-ahead tells
            # what it does with each rename, and they still cannot be combined.  (A detected
            # table waits for the operator, whose exit may leave the hope intact.)
            self._no_way(fx)
        if not isinstance(plan, dict):
            return
        for t, idx in plan.items():
            o = self.members[t]
            a = o.answer
            assert a is not None
            self._set_conflict(o, None)
            self._set_schema(o, a.before or o.schema)
            ans = Answer(a.info, Stage.SKIP_AND_WAIT, [], (
                f"coordinating this rename together with {len(idx)} later one(s) of the table (every table of "
                "the lock makes the same renames, in another order): the worker sends them as one ALTER"),
                [], set(), a.afters, a.before, combine=idx)
            self._reanswer(o, ans, fx)

    @staticmethod
    def _combine_plan(lists: dict, want: set, cols: frozenset[str], catching: dict, caught: dict,
                      ref: list) -> dict[TableRef, tuple[int, ...]] | bool | None:
        """``_combine``'s plan: per table, the later changes to fold into its pending one; None
        when the tables' lists are not the same renames in other orders, False when a table's
        list does not show all of them (yet)."""
        for t, steps in lists.items():
            scope: tuple[frozenset[str], frozenset[str]] = (cols - caught[t], frozenset())
            if _project(steps[0][1], scope).lattice_key() != _project(ref[0][1], scope).lattice_key():
                return None
        plan: dict[TableRef, tuple[int, ...]] = {}
        for t, steps in lists.items():
            mine = want - catching[t]
            mcols = cols - caught[t]
            found: list[int] = []
            for i, (_, prev, post) in enumerate(steps):
                sig = change_sig(prev, post)
                if sig in mine and i not in found:
                    found.append(i)
                    if len(found) == len(mine):
                        break
                elif _sig_columns(sig) & mcols:
                    return None     # something else done to these columns first: not a reordering
            if len(found) != len(mine) or len({change_sig(steps[i][1], steps[i][2]) for i in found}) != len(mine):
                return False        # not (yet) in its look-ahead
            if catching[t] and len(found) == 1:
                continue            # its pending change is all it makes of the set: it stays held on it
            plan[t] = tuple(i - 1 for i in found[1:])
        return plan

    def _no_way(self, fx: Effects) -> None:
        """Every table is blocked and the renames they hope for cannot be coordinated as one
        ALTER (a table reaches one by other statements between them, say): nothing will release
        the tables held in hope, so they are ``detected`` after all, with DM's exits."""
        for t in sorted(self._hoping & self._conflicts, key=str):
            m = self.members[t]
            a = m.answer
            assert a is not None and a.before is not None
            self._set_conflict(m, None)
            self._set_schema(m, a.before)
            self._reanswer(m, Answer(a.info, Stage.DETECTED, [], (
                f"there will be conflicts if DDLs {'; '.join(a.info.ddls)} are applied to the downstream: every "
                "table of the lock is held on a rename and their later statements reach the renames in ways "
                "that cannot be coordinated as one ALTER; the changes disagree"), [], set(), a.afters, a.before), fx)

    def _reanswer(self, m: Member, ans: Answer, fx: Effects) -> None:
        """``m``'s answer changed outside its own Info's decision: it is the caller's answer when
        ``fx`` is for ``m``'s Info, else one of the others to write."""
        self._set_answer(m, ans)
        self._set_done(m, False)
        if fx.answer is not None and fx.answer.info.table == m.table:
            fx.answer = ans
        else:
            fx.others.append((m.table, ans))

    def _ordered(self, m: Member, ans: Answer) -> Answer:
        """``ans`` unless it runs statements that change a column or index another member's
        still-running answer changes: then a hold until that answer is done.  The two workers run
        in any order, and in the wrong one a dropped column comes back (or an added one goes), a
        narrowed column is widened again under rows of the narrow type, a UNIQUE index dropped
        by one runs before the other adds it.  The replay is decided afresh against the lock as
        it is then (found by tests/sim)."""
        if ans.stage is not Stage.NONE or not ans.ddls:
            return ans
        first = self._order_conflict(m, ans)
        if first is None:
            return ans
        self._set_schema(m, ans.before if ans.before is not None else m.schema)
        self._queue_redirect(m.table, first)
        return Answer(ans.info, Stage.SKIP_AND_WAIT, [], (
            f"waiting for {first} to run its DDLs downstream first "
            f"({'; '.join(_ddls_of(self.members[first]))}): they change a column or index this DDL "
            "also changes, and the two must not run in either order"), [], set(), ans.afters, ans.before,
            runs_after=first)

    def _order_conflict(self, m: Member, a: Answer) -> TableRef | None:
        """Another member whose answer is still running (not done) changes a column or index
        ``m``'s answer ``a`` changes (``shape.touched``)."""
        mine = touched(a.before, a.afters[-1] if a.afters else None, a.ddls)
        # a runner still to replay the agreed change it was chosen to run (a handover, a
        # departure, a DROP that completed the agreement): its statements run later, so an
        # ordinary statement on the same columns (an ADD of the rename's new column) waits
        for t in sorted(self._gates - self._running - {m.table}, key=str):
            o = self.members.get(t)
            r = o.answer if o is not None else None
            if o is not None and r is not None and _replays(o) and r.before is not None and r.afters \
                    and mine & touched(r.before, r.afters[-1], []) and not _same_change(a, r):
                return t
        own = self._run_cols.get(m.table, frozenset())
        # counted per key (``LockState._track_running``): a big lock's thousands of running answers
        # are not walked per Info; only a real overlap looks for the table
        if not any(self._run_touch[k] - (k in own) > 0 for k in mine):
            return None
        for t in sorted(self._running - {m.table}, key=str):
            r = self.members[t].answer
            # the same change ends the same in either order (a handed-over change whose first
            # runner's answer is not marked yet, in RENAME here and CHANGE there): only different
            # changes are ordered
            if mine & self._run_cols.get(t, frozenset()) and r is not None and not _same_change(a, r):
                return t
        return None

    def _replayed_answer(self, m: Member, info: Info, before: TableSchema,
                         afters: list[TableSchema]) -> Answer | None:
        """The answer to a re-sent Info (worker restart, recheck) that repeats the DDL the table's
        current answer was decided for: that answer stands (invariant 2, docs/lock-algorithm.md).
        Re-deciding it against today's lock would pick a new runner or return a statement that
        already ran.  Done: the statements ran, so nothing runs again; not done: the same
        statements (the worker's intent row absorbs a repeat), or the same hold."""
        a = m.answer
        if a is None or m.error or a.stage not in (Stage.NONE, Stage.UNLOCKED, Stage.SKIP_AND_WAIT):
            return None
        if a.info.ddls != info.ddls or a.before is None or len(a.afters) != len(afters):
            return None
        if a.before.lattice_key() != before.lattice_key() or any(
                x.lattice_key() != y.lattice_key() for x, y in zip(a.afters, afters)):
            return None
        if a.stage is Stage.SKIP_AND_WAIT:
            # still held on the same pending change: the same hold (a resolved one is re-decided);
            # asked to combine it with its next changes: the same request until the combined one comes
            return dataclasses.replace(a, info=info) if m.conflict is not None or a.combine else None
        if m.done:
            return Answer(info, Stage.NONE, [], "already in effect: this DDL was answered and done before",
                          [], set(), afters, before)
        return dataclasses.replace(a, info=info)

    def try_sync(self, m: Member, info: Info, before: TableSchema, afters: list[TableSchema],
                 fx: Effects) -> Answer:
        """Run the Info's statements through ``step`` one by one; the first that is not accepted
        decides the answer.  New dropped-column records go to ``fx``."""
        if info.ignore_conflict and m.conflict is None and m.schema.lattice_key() != before.lattice_key():
            # the rest of a statement the operator skipped starts where the skipped change left
            # the table; a rebuild that took the table's schema from its checkpoint (already past
            # the whole statement) decides it from there too, as the live lock did
            self._set_schema(m, before)
        prev = before
        returned: list[str] = []
        cols: list[str] = []
        exec_drops: set[str] = set()
        dropped_here: set[str] = set()
        stage, msg = Stage.NONE, ""
        for sql, post in zip(info.ddls, afters):
            ai = new_unique_auto_increment(prev, post)
            if ai is not None:
                stage, msg = Stage.DETECTED, (
                    f"there will be conflicts if DDLs {sql} are applied to the downstream: column `{ai}` is a "
                    "new unique AUTO_INCREMENT column; every shard numbers it from 1, so the merged rows "
                    "would collide on it. Add it without UNIQUE/AUTO_INCREMENT upstream, or decide with "
                    f"{unlock_choice(self.id, m.table.source, m.table.schema, m.table.table)}, or "
                    f"`{shardctl('binlog', 'skip', self.key.task, '-s', m.table.source)}`")
                break
            # a column this statement adds, with the upstream time to order it by (DM keeps upstream
            # commit order); a rename is not an ADD (``RENAME COLUMN`` takes no position clause)
            adds = post.column_keys() - prev.column_keys() \
                if info.timestamp and prev.column_keys() <= post.column_keys() else set()
            down = self._normal.try_joined() if len(adds) == 1 else None
            ix_down = self._normal.try_joined() if renamed_indexes(prev, post) else None
            r = self.step(m, prev, post, sql)
            if r.stage is not Stage.NONE:
                stage, msg = r.stage, r.message
                if stage is Stage.DETECTED:   # DM's phrase, which runbooks and alerts grep for
                    msg = f"there will be conflicts if DDLs {sql} are applied to the downstream: {msg}"
                break
            err, drops = self._check_add_drop(m, prev, post, dropped_here, sql)
            if err is None and r.changed:
                err, sql = self._onto_left_behind(m, sql, prev, post)
            if err:
                stage, msg = Stage.ERROR, err
                break
            cols.extend(drops)
            dropped_here.update(d.lower() for d in drops)
            if down is not None:
                sql = self._in_commit_order(sql, next(iter(adds)), post, down, info.timestamp, r.changed)
            if r.changed and ix_down is not None and (now := self._normal.try_joined()) is not None:
                returned.extend(_index_ddls(sql, ix_down, now))
            elif r.changed:
                returned.extend([sql] if r.ddls is None else r.ddls)
                exec_drops.update(d.lower() for d in drops)
            prev = post
        if stage is Stage.NONE and cols:
            new = self._record_dropped(m.table, cols)
            if new:
                fx.dropped_puts.append((m.table, new, DroppedStage.NOT_DONE))
        if stage is not Stage.NONE:
            if info.ignore_conflict:
                # forced past a conflicting change the downstream never made (the rest of a
                # statement the operator skipped): like a table created with a shape ahead of the
                # lock, it does not count as one that made the change downstream
                ahead = self._ahead(afters[-1])
                self._set_conflict(m, None)
                self._set_schema(m, afters[-1])
                m.joined_ahead = ahead
            elif stage is not Stage.SKIP_AND_WAIT:
                self._set_conflict(m, None)
                self._set_schema(m, before)
            returned = []
        return Answer(info, stage, returned, msg, cols if stage is Stage.NONE else [],
                      exec_drops, afters, before)

    def _in_commit_order(self, sql: str, col: str, post: TableSchema, down: TableSchema, ts: int,
                         runs: bool) -> str:
        """The accepted statement adding ``col`` (committed upstream at ``ts``), placed before the
        columns other shards added downstream that were committed *later* upstream: their Infos
        reached the lock first (another worker was faster), but the merged table should follow
        upstream commit order, as DM's does when its Infos arrive in that order (DM_035).  The
        column goes right after its predecessor in this shard's own table (``AFTER p`` /
        ``FIRST``); an ADD that names its position, or whose predecessor is itself a later column,
        is left as it is.  Binlog times are whole seconds: adds within one second keep arrival
        order (docs/lock-algorithm.md, "Column order")."""
        known = self._added_at.get(col)
        self._added_at[col] = ts if known is None or down.column(col) is None else min(known, ts)
        if not runs or down.column(col) is not None:
            return sql
        later = {c.key for c in down.columns if self._added_at.get(c.key, 0) > ts}
        if not later or _POSITIONED.search(sql):
            return sql
        keys = [c.key for c in post.columns]
        i = keys.index(col)
        if i == 0:
            return f"{sql} FIRST"
        pred = post.columns[i - 1]
        if pred.key in later or down.column(pred.key) is None:
            return sql
        return f"{sql} AFTER {quote_ident(pred.name)}"

    def take_schema(self, m: Member, info: Info, before: TableSchema | None, afters: list[TableSchema]) -> Effects:
        """`binlog-schema update --sync`: the operator set this table's structure; the lock takes it
        as the table's schema (no DDL, nothing to answer) and re-joins."""
        self._set_conflict(m, None)
        self._set_schema(m, afters[-1])
        return self.settle(m, info, Answer(info, Stage.NONE, [], "", afters=afters, before=before))

    def settle(self, m: Member, info: Info, ans: Answer, fx: Effects | None = None) -> Effects:
        """Store the decision for ``m`` (``fx.answer``: the caller's answer to write, if any) and
        follow it up."""
        fx = Effects() if fx is None else fx
        if info.ignore_conflict:
            # the table's schema is forced (an operator's `binlog skip` of a held DDL): its
            # pending answer is withdrawn, it waits for nothing and the lock re-evaluates
            self._set_note(m, "schema set by the operator (binlog-schema update --sync)" if not info.ddls else
                           "schema forced by an ignore-conflict Info (binlog skip of a held DDL)")
            if m.table in self._gates:
                self._handover(m.table)      # it was to run a resolution: another table runs it
            self._set_answer(m, None)
            self._set_done(m, True)
        else:
            self._set_answer(m, ans)
            self._set_done(m, False)
            fx.answer = ans
        self._follow_up(fx, exclude=m.table)
        return fx

    def _follow_up(self, fx: Effects, exclude: TableRef | None = None) -> None:
        """Redirects for resolved conflicts, then re-evaluate tables whose DDL was `detected`
        (DM leaves them blocked until the operator acts; the lock has changed, so ask again)."""
        self.drain_redirects(fx)
        for t in sorted(self._restamp, key=str):
            # a new catch-up record is persisted with the table's answer at once (``_note_catching_up``)
            m = self.members.get(t)
            # only a hold, a redirect or a detected answer is written again: the worker may be marking any other
            # done meanwhile (the table's next answer carries the record)
            if m is not None and m.answer is not None \
                    and m.answer.stage in (Stage.SKIP_AND_WAIT, Stage.DETECTED, Stage.RESOLVED) and not m.done and not any(x == t for x, _ in fx.others) \
                    and not (fx.answer is not None and fx.answer.info.table == t):
                self._set_answer(m, m.answer)
                fx.others.append((t, m.answer))
        self._restamp.clear()
        for _ in range(len(self.members)):
            progressed = False
            for t in sorted(self._detected - {exclude}, key=str):
                m = self.members[t]
                a = m.answer
                assert a is not None and a.before is not None, "a detected member has its answer to a parsed Info"
                redo = Effects()
                self._indifferent = None
                ans = self.try_sync(m, a.info, a.before, a.afters, redo)
                if ans.stage is Stage.DETECTED:
                    ans = self._hopeful(m, ans)
                if ans.stage is Stage.DETECTED:
                    continue
                if self._indifferent is not None and self._indifferent[0] == m.table \
                        and ans.stage is Stage.SKIP_AND_WAIT:
                    ans = dataclasses.replace(ans, runner=self._indifferent[1])    # as ``on_info``
                self._indifferent = None
                ans = self._ordered(m, ans)
                self._set_answer(m, ans)
                self._set_done(m, False)
                fx.others.append((m.table, ans))
                fx.dropped_puts.extend(redo.dropped_puts)
                self.drain_redirects(fx)
                progressed = True
            if not progressed:
                break
        if self._hoping:
            self._hope_lost(fx)
        if len(self.members) > 1 and len(self._conflicts) + len(self._detected) >= len(self.members):
            self._combine(fx)      # (counted first: a big lock's Infos stay at a flat cost)

    def drain_redirects(self, fx: Effects) -> None:
        """Redirect the resolved tables whose resolving table has run its DDLs downstream (or runs
        none): their replayed rows need the changed downstream.  The others stay queued until that
        table's done mark (``mark_done``), or until it leaves the lock or its answer changes."""
        for t, why in sorted(self._uncarried.items(), key=lambda x: str(x[0])):
            m = self.members.get(t)
            if m is not None and m.answer is not None:
                a = m.answer
                self._set_answer(m, Answer(a.info, Stage.DETECTED, [], (
                    f"there will be conflicts if DDLs {'; '.join(a.info.ddls)} are applied to the downstream: {why}. "
                    f"Exit: `{unlock_command(self.id, t.source, t.schema, t.table, 'skip')}` (this table's values of the old column are not carried; the column is dropped "
                    "downstream once no table has it), or make every table take the same path upstream"),
                    [], set(), a.afters, a.before))
                self._set_done(m, False)
                fx.others.append((t, m.answer))
        self._uncarried.clear()
        if not self._redirects:
            return
        waiting: list[TableRef] = []
        for t in self._redirects:
            by = self._redirect_after.get(t)
            m = self.members.get(t)
            if by is not None and self.gated_by(by):
                waiting.append(t)
                if m is not None and m.answer is not None and m.answer.stage is Stage.SKIP_AND_WAIT \
                        and m.answer.runs_after is None and m.answer.runner != by:
                    # the resolution is persisted with the held table's answer: a rebuild restores
                    # who runs the change instead of re-deciding it.  Not an ordering hold
                    # (``runs_after``): ``by`` runs no agreed change for it, and naming ``by`` its
                    # runner made a rebuild, the operator and tests/sim take ``by``'s ordinary DDL
                    # for a resolution
                    a = m.answer
                    self._set_answer(m, Answer(a.info, Stage.SKIP_AND_WAIT, [], wait_runner(self, by), [], set(),
                                              a.afters, a.before, runner=by))
                    fx.others.append((t, m.answer))
                continue
            self._redirect_after.pop(t, None)
            if m is None or m.answer is None:
                continue
            a = m.answer
            # released from an ordering hold: the redirect keeps ``runs_after`` (persisted with it),
            # so a rebuild knows the change was not accepted but is decided afresh on the replay
            order_only = a.runs_after is not None and m.applied_by is None
            self._set_answer(m, Answer(a.info, Stage.RESOLVED, [], "conflict resolved: replay the skipped events",
                                      [], set(), a.afters, a.before,
                                      runner=m.applied_by or (by if a.runs_after is None else None),
                                      runs_after=a.runs_after if order_only else None))
            self._set_done(m, False)
            fx.others.append((t, m.answer))
        self._redirects = waiting

    # ------------------------------------------------------------------ done, exits, departures
    def mark_done(self, m: Member, cols: list[str], ran: bool) -> Effects:
        """``m``'s current answer was executed (``ran``: its statements did run): dropped-column
        stages advance and the redirects waiting for it are released."""
        a = m.answer
        assert a is not None, "the keeper checked that the done mark is for the current answer"
        fx = Effects()
        if not ran and m.table in self._gates:
            self._handover(m.table)          # its statements did not run: another table runs the change
        self._set_done(m, True)
        exec_drops = set(a.exec_drops)
        if not exec_drops and a.ddls:   # the ddls of the answer ``op`` marks (same revision, stage)
            exec_drops = _dropped_columns(a.ddls)
        updates, cleared = self._done_dropped(m.table, cols, exec_drops)
        for col, stage in updates:
            if col not in cleared:
                fx.dropped_puts.append((m.table, [col], stage))
        fx.dropped_deletes.extend(cleared)
        self.drain_redirects(fx)     # held until this execution was done
        return fx

    def unlock(self, m: Member, action: str) -> Effects:
        """The operator's exit for blocked ``m`` (``exec``/``skip``, checked by the keeper): the
        new schema when it joins with the others, else the old one; ``fx.answer`` is ``unlocked``."""
        a = m.answer
        assert a is not None, "the keeper refuses to unlock a table without a blocked answer"
        t = m.table
        fx = Effects()
        self._set_conflict(m, None)
        after = a.afters[-1] if a.afters else m.schema
        others = self._normal.distinct_except(m.schema)
        down = self._normal.try_joined()
        ddls = self._exec_statements(m, a, others) if action == "exec" else []
        if try_join_all(others + [after]) is not None:
            self._set_schema(m, after)
            self._set_note(m, f"unlocked with {action}")
        else:
            self._set_note(m, f"unlocked with {action}; its new schema cannot be joined with the others, the lock "
                              "keeps its previous schema")
        if action == "exec" and a.info.ddls:
            self._accept_exec(a)
        finish = self._orphan_drops()
        if action == "skip" and down is not None and a.before is not None:
            # a skipped rename (or drop) away from a column the downstream has, which no table
            # has any more (the others dropped it, or skipped their rename too): nobody else
            # would ever drop it
            for col in sorted(a.before.column_keys() - after.column_keys()):
                if col not in finish and down.column(col) is not None and not any(
                        x.final.column(col) is not None or x.schema.column(col) is not None
                        for x in self.members.values()) \
                        and not any(d.column(col) is not None for d in self._departed.values()):
                    finish.append(col)
        if finish:
            # columns every table has now dropped, but whose DROP never ran downstream (the table
            # that still had them was this one): its answer completes them
            self._record_dropped(t, finish)
            fx.dropped_puts.append((t, finish, DroppedStage.NOT_DONE))
            ddls += [f"ALTER TABLE {quote_ident(self.key.down_schema)}.{quote_ident(self.key.down_table)} "
                     f"DROP COLUMN {quote_ident(c)}" for c in finish]
        ans = Answer(a.info, Stage.UNLOCKED, ddls,
                     f"unlocked by operator: {action}" + (
                         f"; completes the drop of {', '.join(f'`{c}`' for c in finish)} (no table has "
                         "it any more)" if finish else ""), list(finish), set(finish), a.afters, a.before)
        self._set_answer(m, ans)
        self._set_done(m, False)
        fx.answer = ans
        self._try_resolve(None)
        self._follow_up(fx, exclude=t)
        return fx

    def _exec_statements(self, m: Member, a: Answer, others: list[TableSchema]) -> list[str]:
        """What ``unlock --action exec`` runs of the blocked Info: the operator's decision is to
        make the table's change, not to break invariant 4 for the others.  A statement that
        narrows the downstream below another table (a DROP of a column another still has, a
        narrowing MODIFY) is left out -- the table that drops it last runs it -- and an ADD of a
        column the downstream already has becomes the MODIFY that gives it the joined definition
        (an ADD would fail as a duplicate and keep the narrower type), also when a table that
        left the lock added it (``_onto_left_behind``).  A conflicting change
        (rename, retype, a default the tables disagree on) runs as written: that is the exit's
        point."""
        if a.before is None or len(a.afters) != len(a.info.ddls):
            return list(a.info.ddls)
        before_join = try_join_all(others + [m.schema])
        out: list[str] = []
        prev = a.before
        for sql, post in zip(a.info.ddls, a.afters):
            now = try_join_all(others + [post])
            order = cmp(prev, post)
            if default_clash(prev, post, others) is not None or added_across_families(prev, post, others) is not None:
                out.append(sql)      # DM's conflict the operator decided: the statement as written
            elif order is not None and order > 0:
                if not narrows_below(prev, post, others):
                    out.append(sql)
            elif now is None or order is None:
                out.append(sql)
            else:
                run = self._exec_widening(sql, post, now, before_join)
                if run == [sql]:
                    # onto a column a departed table left downstream: widened, not added twice
                    _, sql = self._onto_left_behind(m, sql, prev, post)
                    run = [sql]
                out.extend(run)
            prev = post
        return out

    def _exec_widening(self, sql: str, post: TableSchema, now: TableSchema,
                       before_join: TableSchema | None) -> list[str]:
        added = changed_columns(sql)[0]
        existing = [k for k in sorted(added) if before_join is not None and before_join.column(k) is not None]
        if not existing:
            return [sql] if _defines_joined(sql, post, now) else []
        out = []
        for k in existing:
            c, j = post.column(k), now.column(k)
            if c is not None and j is not None and j.lattice_key() == c.lattice_key():
                out.append(f"ALTER TABLE {quote_ident(self.key.down_schema)}.{quote_ident(self.key.down_table)} "
                           f"MODIFY COLUMN {render_column(c)}")
        return out

    def _accept_exec(self, a: Answer) -> None:
        """An ``unlock --action exec`` ran a rename/retype downstream: the other tables making the
        same change later catch up with nothing run, as after a resolution, instead of being told
        their values cannot be carried."""
        if a.before is not None and a.afters and cmp(a.before, a.afters[-1]) is None \
                and lossy(a.before, a.afters[-1]):
            self._accepted.add(change_sig(a.before, a.afters[-1]))

    def _orphan_drops(self) -> list[str]:
        """Dropped columns no member has any more and nobody dropped downstream."""
        out = []
        for col, per in sorted(self._columns.items()):
            if per.count[DroppedStage.DONE]:
                continue
            if any(m.final.column(col) is not None or m.schema.column(col) is not None for m in self.members.values()):
                continue
            out.append(col)
        return out

    def remove(self, t: TableRef, ran: bool = False) -> Effects:
        """``t`` leaves the lock: the others may now agree, and detected tables are asked again.
        ``ran``: its running answer's statements ran downstream and only the done mark is missing:
        the mark is taken first, so the change it ran is not handed over to run again."""
        fx = Effects()
        m = self.members.get(t)
        if ran and m is not None and m.answer is not None and not m.done:
            fx = self.mark_done(m, list(m.answer.cols), True)
        left = m.schema if m is not None else None
        if m is not None and not ran and not m.done and m.answer is not None and m.answer.ddls \
                and m.answer.before is not None:
            left = m.answer.before          # what it was told to run never ran downstream
        kept = self._remove_member(t)
        if left is not None:
            self.note_departed(t, left)
            fx.departed.append((t, left))
        if kept:
            fx.dropped_puts.append((t, kept, DroppedStage.PARTIAL))
        if self.members:
            self._try_resolve(None)
            self._follow_up(fx)
        return fx

    # ------------------------------------------------------------------ rebuild
    def settle_departures(self) -> Effects:
        """After a rebuild: a table that left while no leader watched (its SourceTables were
        rewritten without it, so its Info was not replayed) may have completed the agreement the
        held tables wait for; resolve it as ``remove`` would have (one runner, persisted with the
        answers the rebuild writes).  Otherwise nothing changes."""
        fx = Effects()
        if self.members and self._try_resolve(None):
            self._follow_up(fx)
        return fx

    def recheck(self) -> Effects:
        """After a rebuild: the detected tables are asked again, and held renames looked at, as
        the live lock did after the last record it read (an Info repeating a held one with more
        look-ahead is restored, not decided, so nothing else asks)."""
        fx = Effects()
        if self.members:
            self._follow_up(fx)
        return fx

    def restore(self, m: Member, info: Info, before: TableSchema, afters: list[TableSchema],
                stage: Stage, ddls: list[str], message: str, cols: list[str], runner: TableRef | None,
                done: bool, runs_after: TableRef | None = None, first: str = "", combine: tuple[int, ...] = (),
                hopeful: bool = False, catch_up: tuple[tuple[str, str], ...] = ()) -> None:
        """Take the stored answer to ``info`` as ``m``'s answer: the persisted resolution stands
        (invariant 2) instead of being re-decided by a replay whose order would pick another runner."""
        post = afters[-1]
        m.joined_ahead = False
        m.info_revision = info.revision
        self.handled_revision = max(self.handled_revision, info.revision)
        self.note_added(before, afters, info.timestamp, types=stage not in (Stage.ERROR, Stage.DETECTED))
        self._set_conflict(m, None)
        if stage is Stage.UNLOCKED:
            # as ``unlock`` decided: the new schema when it joins with the others, else the old one
            self._set_schema(m, post if try_join_all(self._normal.distinct_except(m.schema) + [post]) else before)
            if set(ddls) & set(info.ddls):       # an exec (a skip's answer only completes drops)
                self._accept_exec(Answer(info, stage, list(ddls), afters=afters, before=before))
        elif stage is Stage.RESOLVED and runs_after is not None:
            self._set_schema(m, before)               # released from an ordering hold: as live
        elif stage in (Stage.NONE, Stage.RESOLVED):
            self._set_schema(m, post)
            if stage is Stage.RESOLVED and runner is None and not done and cmp(before, post) is None:
                # released to run the agreed change in its replay (a handover, a DROP or a
                # departure that completed the agreement): gated as live (``_order_conflict``)
                self._gates.add(m.table)
        elif stage is Stage.SKIP_AND_WAIT and (runs_after is not None or first or combine
                                               or (hopeful and cmp(before, post) is not None)):
            # held for ordering only (decided afresh on replay), or asked to send a later change
            # of its ALTER first or its next changes with this one (its own change withdrawn until then)
            self._set_schema(m, before)
            if runs_after is not None:
                self._queue_redirect(m.table, runs_after)
        elif stage is Stage.SKIP_AND_WAIT and runner is None:
            self._set_schema(m, before)
            self._set_conflict(m, post)
        elif stage is Stage.SKIP_AND_WAIT:
            self._set_schema(m, post)
            self._queue_redirect(m.table, runner)
        else:
            self._set_schema(m, before)
        if runner is not None and runner != m.table:
            m.applied_by_other, m.applied_by = post, runner
            self._accepted.add(change_sig(before, post))
        elif stage in (Stage.NONE, Stage.RESOLVED) and runs_after is None and len(afters) == 1 \
                and cmp(before, post) is None and lossy(before, post):
            # an accepted rename/retype: the downstream has (or is getting) it, so a table catching up
            # on it later runs nothing rather than being told its values cannot be carried (DM_155)
            self._accepted.add(change_sig(before, post))
        exec_drops = _dropped_columns(ddls)
        if catch_up:
            self._catching[m.table] = set(catch_up)
        self._set_answer(m, Answer(info, stage, list(ddls), message, list(cols), exec_drops, afters,
                                  before, runner=runner, runs_after=runs_after, first=first, combine=combine,
                                  hopeful=hopeful))
        self._set_done(m, done)
        if stage is Stage.UNLOCKED:
            self._set_note(m, f"unlocked with {'exec' if ddls else 'skip'}")

    # ------------------------------------------------------------------ explanation
    def waiting_for(self, t: TableRef, ready: dict[TableRef, bool] | None = None) -> str:
        """Why ``t`` keeps the lock open, in words ("" if it does not)."""
        return waiting_for(self, t, ready)


_RENAME_INDEX = re.compile(r"^(ALTER\s+TABLE\s+.+?)\s+RENAME\s+(?:INDEX|KEY)\s", re.I | re.S)


def _first_in_rest(prev: TableSchema, new: TableSchema, sql: str, rest: list[str], want: tuple) -> str | None:
    """The change of ``rest`` (the later changes of an ALTER whose pending change ``sql`` is
    ``prev -> new``) that makes the change ``want`` (a ``change_sig``) when made first, if making it before
    the pending change and the rest before it ends in the same schema (they commute); else None."""
    for i, r in enumerate(rest):
        try:
            moved = apply_ddl(prev, r)
        except SchemaError:
            continue            # it needs a change before it: not this one
        if moved is None or change_sig(prev, moved) != want:
            continue
        try:
            asis: TableSchema | None = new
            for x in [*rest[:i], r]:
                asis = apply_ddl(asis, x)
            swapped: TableSchema | None = apply_ddl(moved, sql)
            for x in rest[:i]:
                swapped = apply_ddl(swapped, x)
        except SchemaError:
            return None
        if asis is None or swapped is None or asis.to_json() != swapped.to_json():
            return None
        return r
    return None


def _ordinary_reach(sig: tuple, want: tuple) -> str | None:
    """``sig`` as a step of reaching the rename ``want`` by ordinary statements: "drop" when it
    only drops the renamed column, "add" when it only adds the new one with the renamed
    column's definition, "old" when it only adds the renamed column itself (a table catching
    up before it renames it); None otherwise (or ``want`` is no rename)."""
    gone, came, ix_gone, ix_came = sig
    wgone, wcame = want[0], want[1]
    if ix_gone or ix_came or len(wgone) != 1 or len(wcame) != 1:
        return None
    (old, _), (new, _) = next(iter(wgone)), next(iter(wcame))
    if old == new:
        return None
    if gone == wgone and not came:
        return "drop"
    if came == wcame and not gone:
        return "add"
    if came == wgone and not gone:
        return "old"
    return None


def _renames_of(old: TableSchema, new: TableSchema) -> list[tuple]:
    """The renames (one column each, ``change_sig`` form) the change ``old -> new`` may make:
    each column only ``old`` has with each column only ``new`` has of the same definition.  Two
    renamed columns of one type cannot be told apart here (a schema's column order is not part
    of its lattice key), so the callers keep only the pairs a table's own statements show."""
    ok, nk = old.column_keys(), new.column_keys()
    gone = sorted((c for c in old.columns if c.key not in nk), key=lambda c: c.key)
    came = sorted((c for c in new.columns if c.key not in ok), key=lambda c: c.key)
    return [(frozenset({(g.key, g.lattice_key())}), frozenset({(c.key, c.lattice_key())}), frozenset(), frozenset())
            for g in gone for c in came if g.lattice_key()[1:] == c.lattice_key()[1:]]


def _without(s: TableSchema, cols: frozenset[str]) -> TableSchema:
    """``s`` without the columns ``cols`` (interned as ``_project``)."""
    return _project(s, (frozenset(c.key for c in s.columns if c.key not in cols),
                        frozenset(i.key for i in s.indexes)))


def _sig_columns(sig: tuple) -> frozenset[str]:
    """The columns (keys) a ``change_sig`` removes, adds or redefines."""
    return frozenset(k for k, _ in sig[0] | sig[1])


def _pure_rename(sig: tuple) -> bool:
    """``change_sig`` of a change rows pass through: it renames one column and changes nothing
    else about it, or changes one column's default only (and no index) -- rows written under
    the old name fit the new one, and a row event carries every value whatever the default."""
    gone, came, ix_gone, ix_came = sig
    if len(gone) != 1 or len(came) != 1 or ix_gone or ix_came:
        return False
    (old, okey), (new, nkey) = next(iter(gone)), next(iter(came))
    if old != new:
        return okey[1:] == nkey[1:]
    return okey[:3] == nkey[:3] and okey[4:] == nkey[4:]


def _index_ddls(sql: str, old: TableSchema, new: TableSchema) -> list[str]:
    """What an index rename ``sql`` runs downstream when the join of the indexes went from
    ``old`` to ``new``: the statement itself when the join renamed exactly that way (a lock of
    one table), else the old index dropped (the first table to rename) and the new one added
    (the last), each only where the join changed."""
    gone = [i for i in old.indexes if new.index(i.name) is None]
    came = [i for i in new.indexes if old.index(i.name) is None]
    m = _RENAME_INDEX.match(sql)
    if m is None:
        return [sql]
    head = m.group(1)
    if len(gone) == 1 and len(came) == 1 and gone[0].lattice_key() == came[0].lattice_key():
        return [sql]
    drops = [i.name for i in gone]
    if came:
        # the old name goes with the new one's arrival even when no rename dropped it downstream
        # (a statement the operator skipped); a DROP of an index already gone is a no-op there
        drops += [o for o, n in _renamed_names(sql) if new.index(o) is None and new.index(n) is not None
                  and o.lower() not in {d.lower() for d in drops}]
    return ([f"{head} DROP INDEX {quote_ident(d)}" for d in drops]
            + [f"{head} ADD {render_index(i)}" for i in came])


def _renamed_names(sql: str) -> list[tuple[str, str]]:
    """(old, new) of each RENAME INDEX / KEY clause of ``sql``."""
    try:
        st = parse_statement(sql)
    except Exception:  # noqa: BLE001 — not a statement the model reads: nothing to add
        return []
    return [(c.data["old"], c.data["new"]) for c in st.clauses if c.kind is ClauseKind.RENAME_INDEX]


def new_unique_auto_increment(prev: TableSchema, post: TableSchema) -> str | None:
    """The name of a column ``post`` adds with AUTO_INCREMENT under a unique key (PRIMARY or
    UNIQUE), else None: shards would each count it from 1 into one merged table (DM holds it)."""
    for c in post.columns:
        if not c.auto_increment or prev.column(c.name) is not None:
            continue
        for ix in post.indexes:
            if ix.kind in ("primary", "unique") and ix.columns and ix.columns[0][0].lower() == c.key:
                return c.name
    return None


_PROJECTED: dict[tuple[int, tuple], tuple[TableSchema, TableSchema]] = {}
_INTERNED: dict[tuple, TableSchema] = {}


def _project(s: TableSchema, scope: tuple[frozenset[str], frozenset[str]]) -> TableSchema:
    """``s`` with only the columns and indexes of ``scope`` (``Lock._scope``).  Memoised on the
    (immutable) schema's identity and interned, so equal projections are one object and the
    identity-keyed joins and compares of ``schema_bag`` hit their memo.  An entry holds its
    schema, so the id is not reused while it exists."""
    e = _PROJECTED.get((id(s), scope))
    if e is not None and e[0] is s:
        return e[1]
    if len(_PROJECTED) > 50_000:
        _PROJECTED.clear()
        _INTERNED.clear()
    cols, idx = scope
    p = TableSchema(tuple(c for c in s.columns if c.key in cols), tuple(i for i in s.indexes if i.key in idx))
    p = _INTERNED.setdefault(p.lattice_key(), p)
    _PROJECTED[(id(s), scope)] = (s, p)
    return p


def _same_change(a: Answer, b: Answer) -> bool:
    if a.ddls == b.ddls:
        return True
    if a.before is None or b.before is None or not a.afters or not b.afters:
        return False
    if retype_only(a.before, a.afters[-1]):
        return False    # one table's widening to the join and the last one's retype: other statements
    return change_sig(a.before, a.afters[-1]) == change_sig(b.before, b.afters[-1])


def _defines_joined(sql: str, post: TableSchema, joined: TableSchema) -> bool:
    """Every column whose definition ``sql`` writes has exactly that definition (``post``'s) in
    the joined schema."""
    for k in defined_columns(sql):
        c, j = post.column(k), joined.column(k)
        if c is not None and (j is None or j.lattice_key() != c.lattice_key()):
            return False
    return True


def _ddls_of(m: Member) -> list[str]:
    return list(m.answer.ddls) if m.answer is not None else []
