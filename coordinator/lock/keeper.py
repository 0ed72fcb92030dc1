"""LockKeeper: all optimistic locks of the master and the entry points the master calls.

The keeper keeps the registry (locks, SourceTables), adds members, parses Infos, checks that a
done mark or an unlock is for the current answer, and turns what a ``Lock`` decided (its
``Effects``) into Operations; the decisions themselves are ``Lock``'s (lock.py).  Pure logic.

Every entry point returns an ``LockChange`` listing what the master must persist (Operations,
dropped-column records, tables to delete, whether the lock is resolved); the master writes it
through ``coordinator.etcdproto.Store`` with its fence, then — only after a successful
``Store.remove_lock`` — calls ``drop_lock``.  See docs/lock-algorithm.md.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Iterable

from coordinator.etcdproto import (DoneMark, DroppedColumn, DroppedStage, Info, LockKey, Operation, RecordError,
                                   SourceTables, Stage, TableRef, parse_lock_id, parse_table_ref)
from coordinator.schema import SchemaError, TableSchema

from .errors import BadAction, LockNotFound, TableNotInLock, UnlockRefused
from .lock import Answer, Effects, Lock, Member
from .schema_bag import eq
from .views import Expectation, LockOwner, LockSummary, LockView, expectation, lock_state, lock_view

__all__ = ["Expectation", "LockChange", "LockKeeper", "LockOwner", "LockSummary", "LockView", "Rebuilt",
           "SchemaSource"]

SchemaSource = Callable[[LockKey, TableRef], "TableSchema | None"]


@dataclass
class LockChange:
    """What the master persists after one engine call."""
    lock: LockKey | None
    operation: Operation | None = None          # answer to the caller's Info (None: ignore-conflict/stale)
    others: list[Operation] = field(default_factory=list)   # redirects, re-evaluated detected tables
    dropped_puts: list[tuple[TableRef, list[str], DroppedStage]] = field(default_factory=list)
    dropped_deletes: list[str] = field(default_factory=list)   # columns whose records are all deleted
    removed_tables: list[TableRef] = field(default_factory=list)  # master: Store.delete_table
    resolved: bool = False       # master: Store.remove_lock(fence, lock, handled_revision) then drop_lock
    empty: bool = False          # the lock has no member left: master drops it (remove_lock + drop_lock)
    handled_revision: int = 0
    ignored: str = ""            # why the call changed nothing (stale Info, unknown lock)

    @property
    def operations(self) -> list[Operation]:
        return ([self.operation] if self.operation is not None else []) + self.others


@dataclass
class Rebuilt:
    """Result of ``LockKeeper.rebuild``: the keeper plus the final Operation of every member that
    has one (write each with ``skip_done=True``), dropped-column changes, resolved locks."""
    keeper: "LockKeeper"
    operations: list[Operation]
    dropped_puts: list[tuple[LockKey, TableRef, str, DroppedStage]]
    dropped_deletes: list[tuple[LockKey, str]]
    resolved: list[LockKey]
    errors: list[str]
    # tables that left while no leader watched (not in their source's SourceTables any more):
    # their records are deleted as ``remove_table``'s are, or the lock's removal would wait on them
    removed_tables: list[tuple[LockKey, TableRef]] = field(default_factory=list)


class LockKeeper:
    """All locks, keyed by ``LockKey``.  ``schema_source(lock, table)`` returns the starting
    schema of a table joining a lock (the master reads the worker's checkpoint); ``None`` falls
    back to the lock's init schema (the ``before`` of the Info that created it)."""

    def __init__(self, schema_source: SchemaSource | None = None):
        self.schema_source = schema_source
        self._locks: dict[LockKey, Lock] = {}
        self._source_tables: dict[tuple[str, str], SourceTables] = {}
        self._preload: dict[LockKey, list[DroppedColumn]] = {}
        self._targets: dict[LockKey, list[TableRef]] = {}
        self._members_current: set[LockKey] = set()
        # during a rebuild: tables with a stored Info (their record says what they ran, so they are
        # never taken for tables that joined ahead of the lock)
        self._with_info: set[tuple[LockKey, TableRef]] = set()

    # ------------------------------------------------------------------ lookup
    def get(self, lock_id: str | LockKey) -> Lock:
        key = lock_id if isinstance(lock_id, LockKey) else parse_lock_id(lock_id)
        lock = self._locks.get(key)
        if lock is None:
            raise LockNotFound(f"lock with ID {key.id} not found (it may have resolved); "
                               "list locks with `shardctl shard-ddl-lock`", lock_id=key.id)
        return lock

    def find(self, key: LockKey) -> Lock | None:
        return self._locks.get(key)

    def lock_keys(self) -> list[LockKey]:
        return list(self._locks)

    def drop_lock(self, key: LockKey) -> None:
        """Forget a lock (after its records were removed from etcd)."""
        self._locks.pop(key, None)
        self._members_current.discard(key)

    # ------------------------------------------------------------------ source tables
    def update_source_tables(self, st: SourceTables, deleted: bool = False) -> list[LockChange]:
        """A worker (re)wrote its SourceTables (or it was deleted): add new member tables to
        existing locks and remove tables that left."""
        k = (st.task, st.source)
        self._targets.clear()
        self._members_current.clear()
        if deleted:
            self._source_tables.pop(k, None)
        else:
            self._source_tables[k] = st
        outs = []
        for key, lock in list(self._locks.items()):
            if key.task != st.task:
                continue
            want = set() if deleted else {TableRef(st.source, s, t)
                                          for s, t in st.members(key.down_schema, key.down_table)}
            have = {t for t in lock.members if t.source == st.source}
            for t in sorted(want - have, key=str):
                lock.add_member(t, self._initial(key, t), joining=(key, t) not in self._with_info)
            for t in sorted(have - want, key=str):
                outs.append(self.remove_table(key, t, reason="table left the task (dropped upstream or "
                                                             "no longer routed)"))
        return outs

    def targets(self, key: LockKey) -> list[TableRef]:
        if key in self._targets:
            return self._targets[key]
        out = self._targets[key] = []
        for (task, source), st in sorted(self._source_tables.items()):
            if task == key.task:
                out.extend(TableRef(source, s, t) for s, t in sorted(st.members(key.down_schema, key.down_table)))
        return out

    def _member(self, lock: Lock, t: TableRef) -> Member:
        """``t``'s member of ``lock``, added (from its checkpoint schema) when new."""
        m = lock.members.get(t)
        return m if m is not None else lock.add_member(t, self._initial(lock.key, t),
                                                       joining=(lock.key, t) not in self._with_info)

    def _add_members(self, lock: Lock, tables: Iterable[TableRef]) -> None:
        """Add the new ones of ``tables``; their starting schemas are read in one go when the
        schema source can (``many``: a big lock's first Info brings thousands of members)."""
        new = [t for t in tables if t not in lock.members]
        bulk = getattr(self.schema_source, "many", None)
        if bulk is not None and len(new) > 1:
            try:
                schemas = bulk(lock.key, new)
            except Exception:   # noqa: BLE001 — as _initial: fall back to the init schema
                schemas = {}
            for t in new:
                lock.add_member(t, schemas.get(t), joining=(lock.key, t) not in self._with_info)
            return
        for t in new:
            self._member(lock, t)

    def _initial(self, key: LockKey, t: TableRef) -> TableSchema | None:
        if self.schema_source is None:
            return None
        try:
            return self.schema_source(key, t)
        except Exception:   # noqa: BLE001 — unreadable checkpoint: fall back to the init schema
            return None

    # ------------------------------------------------------------------ Info handling
    def handle_info(self, info: Info, target_tables: Iterable[TableRef] | None = None) -> LockChange:
        """Decide the Operation for ``info``.  ``target_tables`` are all
        shard tables routed to the Info's target (default: from the SourceTables the keeper was
        given).  Never raises for bad input: a bad Info gets an ``error`` Operation."""
        key, t = info.lock, info.table
        out = LockChange(key)
        try:
            before = TableSchema.from_json(info.before) if info.before is not None else None
            afters = [TableSchema.from_json(a) for a in info.afters]
        except (KeyError, TypeError, ValueError, SchemaError) as e:
            lock = self._ensure_lock(key, None)
            if lock is None:
                out.ignored = f"Info of {t} has an unreadable schema ({e}) and no lock exists for it"
                out.operation = self._op(key, t, info, Stage.ERROR, [], out.ignored)
                return out
            m = self._member(lock, t)
            return self._apply(lock, t, lock.settle(m, info, Answer(info, Stage.ERROR, [], f"unreadable schema in Info: {e}")),
                               out)
        lock = self._ensure_lock(key, before or (afters[-1] if afters else None))
        if lock is None:
            out.ignored = "Info carries no schema (no before/after); cannot create its lock"
            out.operation = self._op(key, t, info, Stage.ERROR, [], out.ignored)
            return out
        if target_tables is not None or key not in self._members_current:
            self._add_members(lock, self.targets(key) if target_tables is None else target_tables)
            if target_tables is None:
                self._members_current.add(key)   # until SourceTables change
        m = self._member(lock, t)
        if not lock.receive(m, info):
            out.ignored = (f"Info revision {info.revision} of {t} is older than the handled "
                           f"revision {m.info_revision}")
            return out
        if info.ignore_conflict and not info.ddls and afters:
            # `binlog-schema update --sync`: the operator set this table's structure; the lock
            # takes it as the table's schema (no DDL, nothing to answer) and re-joins
            return self._apply(lock, t, lock.take_schema(m, info, before, afters), out)
        if len(info.ddls) != len(afters) or not afters:
            return self._apply(lock, t, lock.settle(m, info, Answer(
                info, Stage.ERROR, [], f"inconsistent Info: {len(info.ddls)} DDLs but {len(afters)} "
                "after-schemas (worker bug; skip the event)")), out)
        if before is None:
            return self._apply(lock, t, lock.settle(m, info, Answer(info, Stage.ERROR, [], "Info has no before-schema")),
                               out)
        return self._apply(lock, t, lock.on_info(m, info, before, afters), out)

    def _ensure_lock(self, key: LockKey, init: TableSchema | None) -> Lock | None:
        lock = self._locks.get(key)
        if lock is None and init is not None:
            lock = Lock(key, init)
            for dc in self._preload.pop(key, []):
                lock.preload_dropped(dc.column, TableRef(dc.source, dc.up_schema, dc.up_table), DroppedStage(dc.stage))
            self._locks[key] = lock
        return lock

    def _apply(self, lock: Lock, t: TableRef, fx: Effects, out: LockChange) -> LockChange:
        """Turn what ``lock`` changed into the Operations and records the master writes."""
        if fx.answer is not None:
            out.operation = self._op_for(lock, t, fx.answer)
        out.others.extend(self._op_for(lock, x, a) for x, a in fx.others)
        out.dropped_puts.extend(fx.dropped_puts)
        out.dropped_deletes.extend(fx.dropped_deletes)
        out.handled_revision = lock.handled_revision
        out.resolved = lock.is_resolved()
        out.empty = not lock.members
        return out

    @staticmethod
    def _op_for(lock: Lock, t: TableRef, a: Answer) -> Operation:
        return Operation(lock_id=lock.id, task=lock.key.task, source=t.source,
                         up_schema=t.schema, up_table=t.table, down_schema=lock.key.down_schema,
                         down_table=lock.key.down_table, info_revision=a.info.revision, ddls=list(a.ddls),
                         stage=a.stage, message=a.message, done=False, cols=list(a.cols),
                         runner=str(a.runner) if a.runner is not None else "",
                         runs_after=str(a.runs_after) if a.runs_after is not None else "")

    @staticmethod
    def _op(key: LockKey, t: TableRef, info: Info, stage: Stage, ddls: list[str], msg: str) -> Operation:
        return Operation(lock_id=key.id, task=key.task, source=t.source, up_schema=t.schema,
                         up_table=t.table, down_schema=key.down_schema, down_table=key.down_table,
                         info_revision=info.revision, ddls=ddls, stage=stage, message=msg)

    # ------------------------------------------------------------------ done
    def mark_done(self, op: Operation | DoneMark) -> LockChange:
        """A worker marked ``op`` done: its done mark (watch), or a done Operation (rebuild)."""
        out = LockChange(op.lock)
        lock = self._locks.get(op.lock)
        m = lock.members.get(op.table) if lock else None
        if lock is None or m is None or m.answer is None:
            out.ignored = f"done Operation for {op.table} but lock {op.lock_id} or the table is unknown"
            return out
        if op.info_revision != m.answer.info.revision or op.stage is not m.answer.stage:
            out.ignored = (f"done Operation of {op.table} answers info revision {op.info_revision} "
                           f"(stage {op.stage.value}) but the lock's current answer is for revision "
                           f"{m.answer.info.revision} (stage {m.answer.stage.value})")
            return out
        if op.stage in (Stage.DETECTED, Stage.SKIP_AND_WAIT, Stage.RESOLVED):
            out.ignored = f"a {op.stage.value} Operation cannot be done"
            return out
        return self._apply(lock, m.table, lock.mark_done(m, op.cols, getattr(op, "ran", True)), out)

    # ------------------------------------------------------------------ operator exits
    def unlock(self, lock_id: str | LockKey, source: str, schema: str, table: str, action: str = "skip") -> LockChange:
        """Manual exit for a table blocked in ``detected``, ``skip-and-wait`` or ``error``:
        ``exec`` runs the table's DDLs downstream, ``skip`` runs nothing; either way the worker
        continues after the DDL (checkpoint kept) and the lock takes the table's new schema when it
        can be joined (else keeps the old one and says so)."""
        if action not in ("exec", "skip"):
            raise BadAction(f"unlock action {action!r} is not exec or skip", lock_id=str(lock_id))
        lock = self.get(lock_id)
        t = TableRef(source, schema, table)
        m = lock.members.get(t)
        if m is None:
            raise TableNotInLock(f"{t} is not a member of lock {lock.id}; members: "
                                 f"{', '.join(sorted(map(str, lock.members))[:10])}", lock_id=lock.id, table=str(t))
        a = m.answer
        if a is None or a.stage not in (Stage.DETECTED, Stage.SKIP_AND_WAIT, Stage.ERROR):
            stage = "no DDL" if a is None else a.stage.value
            raise UnlockRefused(f"{t} in lock {lock.id} is not blocked (it has {stage}); nothing to unlock. "
                                f"It is waiting for: {lock.waiting_for(t) or 'nothing'}",
                                lock_id=lock.id, table=str(t))
        return self._apply(lock, t, lock.unlock(m, action), LockChange(lock.key))

    def remove_table(self, lock_id: str | LockKey, t: TableRef, reason: str = "removed by operator") -> LockChange:
        """Take a shard table out of a lock (dropped upstream, or the operator decided it will never
        make the change — dm#2062).  The master deletes its Info/Operation/dropped-column records."""
        lock = self.get(lock_id)
        if t not in lock.members:
            raise TableNotInLock(f"{t} is not a member of lock {lock.id}", lock_id=lock.id, table=str(t))
        out = LockChange(lock.key, removed_tables=[t])
        return self._apply(lock, t, lock.remove(t, ran=self._ran_before_leaving(lock, lock.members[t])), out)

    def _ran_before_leaving(self, lock: Lock, m: Member) -> bool:
        """``m`` leaves with an answer to run not marked done: did its statements run anyway?
        Its worker records a DDL finished downstream before the done mark, and the schema source
        (the checkpoint) reports the finished DDL's schema: then the change must not be handed
        over to run a second time (invariant 5 of docs/lock-algorithm.md)."""
        a = m.answer
        if a is None or m.done or not a.ddls or a.stage not in (Stage.NONE, Stage.UNLOCKED) or not a.afters \
                or self.schema_source is None:
            return False
        try:
            s = self.schema_source(lock.key, m.table)
        except Exception:  # noqa: BLE001 — unreadable checkpoint: assume it did not run (hand over)
            return False
        return s is not None and eq(s, a.afters[-1])

    def remove_sources(self, task: str, sources: Iterable[str]) -> list[LockChange]:
        """stop-task -s: remove every table of ``sources`` from the task's locks."""
        srcs = set(sources)
        outs = []
        self._targets.clear()
        self._members_current.clear()
        for k in [k for k in self._source_tables if k[0] == task and k[1] in srcs]:
            del self._source_tables[k]
        for key, lock in list(self._locks.items()):
            if key.task != task:
                continue
            for t in [t for t in lock.members if t.source in srcs]:
                outs.append(self.remove_table(key, t, reason="source stopped"))
        return outs

    def remove_task(self, task: str) -> list[LockKey]:
        """stop-task (all sources) or force-removing an orphan task's locks (dm#1543): forget the
        task's locks; the master deletes the records (Store.delete_task)."""
        keys = [k for k in self._locks if k.task == task]
        for k in keys:
            self.drop_lock(k)
        self._targets.clear()
        self._members_current.clear()
        for sk in [sk for sk in self._source_tables if sk[0] == task]:
            del self._source_tables[sk]
        return keys

    def force_remove(self, lock_id: str | LockKey) -> LockView:
        """Forget one lock whatever its state (its task was stopped, or the operator gives up on
        it); the master deletes its records unguarded.  Checkpoints are untouched."""
        lock = self.get(lock_id)
        view = lock_view(lock)
        self.drop_lock(lock.key)
        return view

    def expectation(self, lock_id: str | LockKey) -> Expectation:
        """The schema the lock's downstream table should have now (see ``Expectation``)."""
        return expectation(self.get(lock_id))

    def mark_error(self, key: LockKey, reason: str, table: TableRef | None = None) -> None:
        """Record a bad/inconsistent record for a lock (rebuild): the lock shows state ``error``."""
        lock = self._locks.get(key)
        if lock is None:
            lock = Lock(key, TableSchema(columns=()))
            self._locks[key] = lock
        if table is not None:
            self._member(lock, table).error = reason
        else:
            lock.error = reason if not lock.error else f"{lock.error}; {reason}"

    # ------------------------------------------------------------------ views
    def waiting_for(self, lock_id: str | LockKey, t: TableRef) -> str:
        return self.get(lock_id).waiting_for(t)

    def locks(self, task: str | None = None, sources: Iterable[str] | None = None) -> list[LockView]:
        srcs = set(sources or ())
        out = []
        for key in sorted(self._locks, key=lambda k: k.id):
            if task and key.task != task:
                continue
            lock = self._locks[key]
            if srcs and not any(t.source in srcs for t in lock.members):
                continue
            out.append(lock_view(lock))
        return out

    def summaries(self) -> list[LockSummary]:
        """Per lock its state and how many tables it waits for: what the gauges need, without
        the per-table explanations of ``locks()`` (those walk every member's schema, far too much
        for a once-a-second gauge on a lock of thousands of tables)."""
        out = []
        for key, lock in self._locks.items():
            ready = lock.ready()
            out.append(LockSummary(lock.id, key.task, lock_state(lock), sum(1 for r in ready.values() if not r)))
        return out

    # ------------------------------------------------------------------ rebuild
    def _restore(self, info: Info, op: Operation) -> bool:
        """Take ``op``, the stored answer to ``info``, as the table's answer: the persisted
        resolution stands (invariant 2) instead of being re-decided by a replay whose order
        (the latest Info by revision) would pick another runner.  False when it cannot be taken
        (the Info does not parse: the replay then reports it)."""
        try:
            before = TableSchema.from_json(info.before) if info.before is not None else None
            afters = [TableSchema.from_json(a) for a in info.afters]
        except (KeyError, TypeError, ValueError, SchemaError):
            return False
        if before is None or not afters or len(afters) != len(info.ddls):
            return False
        lock = self._ensure_lock(info.lock, before)
        if lock is None:
            return False
        if info.lock not in self._members_current:
            self._add_members(lock, self.targets(info.lock))
            self._members_current.add(info.lock)
        m = lock.members.get(info.table) or lock.add_member(info.table, before)
        runner = parse_table_ref(op.runner) if op.runner else None
        after = parse_table_ref(op.runs_after) if op.runs_after else None
        # a done mark that says the statements did not run (``binlog skip``) is applied after the
        # restore, by ``rebuild``'s ``mark_done``: it hands a runner's change over
        lock.restore(m, info, before, afters, op.stage, list(op.ddls), op.message, list(op.cols), runner,
                     op.done and op.ran, runs_after=after)
        return True

    @classmethod
    def rebuild(cls, infos: Iterable[Info], operations: Iterable[Operation],
                source_tables: Iterable[SourceTables], dropped_columns: Iterable[DroppedColumn],
                bad: Iterable[RecordError] = (), schema_source: SchemaSource | None = None) -> Rebuilt:
        """Rebuild all locks from etcd listings (master start, docs/lock-algorithm.md).  A table whose
        stored Operation answers its current Info gets that answer back (``_restore``: the
        resolution and its runner are persisted, never re-decided); the other Infos are then
        decided in revision order; done Operations restore done flags; operator unlocks are
        re-applied.
        Never raises for bad data: the affected lock is marked ``error`` with the reason (dm#1185)."""
        k = cls(schema_source)
        errors: list[str] = []
        for st in source_tables:
            k._source_tables[(st.task, st.source)] = st
        persisted: dict[tuple[LockKey, str, TableRef], DroppedStage] = {}
        for dc in dropped_columns:
            lk = LockKey(dc.task, dc.down_schema, dc.down_table)
            k._preload.setdefault(lk, []).append(dc)
            persisted[(lk, dc.column.lower(), TableRef(dc.source, dc.up_schema, dc.up_table))] = DroppedStage(dc.stage)
        known_sources = set(k._source_tables)
        ops: dict[tuple[LockKey, TableRef], Operation] = {}
        for o in operations:
            ops[(o.lock, o.table)] = o
        infos = sorted(infos, key=lambda i: i.revision)
        k._with_info = {(i.lock, i.table) for i in infos}
        pending: list[Info] = []
        gone: list[tuple[LockKey, TableRef]] = []
        for info in infos:
            listed = (info.task, info.source) in known_sources
            if listed and (info.up_schema, info.up_table) not in k._source_tables[(info.task, info.source)].members(
                    info.down_schema, info.down_table):
                # the table left the task while no leader watched: restored like the others, then
                # removed as its departure would have been (``remove_table``: a runner that ran its
                # change is taken as done, one that did not hands it over)
                gone.append((info.lock, info.table))
            stored = ops.get((info.lock, info.table))
            try:
                restored = stored is not None and stored.info_revision == info.revision and k._restore(info, stored)
                if stored is not None and stored.stage is Stage.RESOLVED and stored.info_revision < info.revision:
                    # the replay of a redirect (a worker sends nothing else after one): the redirect
                    # is restored onto the DDL it replays, so the replay is decided as the leader that
                    # wrote it would (the runner chosen by a departure or a handover runs the change)
                    k._restore(dataclasses.replace(info, revision=stored.info_revision), stored)
            except Exception as e:  # noqa: BLE001 — one bad lock must not stop the master
                errors.append(f"{info.lock.id}: restoring the answer of {info.table} failed: {e}")
                k.mark_error(info.lock, f"restoring Operation revision {stored.revision if stored else 0} failed: {e}",
                             info.table)
                continue
            if not restored:
                pending.append(info)
        latest: dict[tuple[LockKey, TableRef], int] = {(i.lock, i.table): i.revision for i in infos}
        for (lk, t), op in ops.items():
            found = k._locks.get(lk)
            if found is not None and t in found.members and op.done and op.ddls \
                    and op.stage in (Stage.NONE, Stage.UNLOCKED) and op.info_revision < latest.get((lk, t), 0):
                # a runner's answer, done, then overwritten by its next Info: what a restored hold
                # waits for has finished (ran) or was skipped (hand it over)
                found.moved_on(t, op.ran)
        for lock in k._locks.values():
            lock.drain_redirects(Effects())   # runners already done release their redirects
        for info in pending:       # never answered (or answered for an older Info): decide now
            try:
                k.handle_info(info)
            except Exception as e:  # noqa: BLE001 — one bad lock must not stop the master
                errors.append(f"{info.lock.id}: replaying Info of {info.table} failed: {e}")
                k.mark_error(info.lock, f"replaying Info revision {info.revision} failed: {e}", info.table)
        for (lk, t), op in sorted(ops.items(), key=lambda x: x[1].revision):
            found = k._locks.get(lk)
            m = found.members.get(t) if found else None
            if m is None or m.answer is None or op.info_revision != m.answer.info.revision:
                continue
            try:
                if op.stage is Stage.UNLOCKED and m.answer.stage is not Stage.UNLOCKED:
                    k.unlock(lk, t.source, t.schema, t.table, "exec" if op.ddls else "skip")
                if op.done:
                    k.mark_done(op)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{lk.id}: restoring Operation of {t} failed: {e}")
                k.mark_error(lk, f"restoring Operation revision {op.revision} failed: {e}", t)
        for lk, t in gone:
            found = k._locks.get(lk)
            if found is not None and t in found.members:
                k.remove_table(lk, t, reason="table left the task while no leader watched")
        for lock in k._locks.values():
            lock.settle_departures()
        for dc in dropped_columns:
            # a not-done drop of a table whose worker has sent a later DDL since: its done mark was
            # missed by a master restart (the later Info overwrote the answer it marked)
            lk, t = LockKey(dc.task, dc.down_schema, dc.down_table), TableRef(dc.source, dc.up_schema, dc.up_table)
            found = k._locks.get(lk)
            m = found.members.get(t) if found else None
            if found is not None and m is not None and dc.stage == DroppedStage.NOT_DONE and dc.revision \
                    and m.info_revision > dc.revision:
                found.confirm_stale_drop(dc.column, t)
        for rec in bad:
            p = rec.parts
            if {"task", "down_schema", "down_table"} <= set(p):
                lk = LockKey(p["task"], p["down_schema"], p["down_table"])
                where = TableRef(p["source"], p["up_schema"], p["up_table"]) if "up_table" in p else None
                k.mark_error(lk, f"unreadable record {rec.etcd_key}: {rec.message}", where)
            errors.append(str(rec))
        out_ops: list[Operation] = []
        resolved: list[LockKey] = []
        final_cols: dict[tuple[LockKey, str, TableRef], DroppedStage] = {}
        for lk, lock in k._locks.items():
            for m in lock.members.values():
                if m.answer is not None and not m.error:
                    op = k._op_for(lock, m.table, m.answer)
                    op.done = m.done
                    out_ops.append(op)
            for col, per in lock.dropped_columns.items():
                for t, stage in per.items():
                    final_cols[(lk, col, t)] = stage
            if lock.is_resolved():
                resolved.append(lk)
        for lk, pre in k._preload.items():   # dropped columns of locks that were not rebuilt: keep
            for dc in pre:
                final_cols[(lk, dc.column.lower(), TableRef(dc.source, dc.up_schema, dc.up_table))] = DroppedStage(dc.stage)
        puts = [(lk, t, col, st) for (lk, col, t), st in final_cols.items() if persisted.get((lk, col, t)) != st]
        deleted_cols = {(lk, col) for (lk, col, _t) in persisted} - {(lk, col) for (lk, col, _t) in final_cols}
        k._with_info = set()
        return Rebuilt(k, out_ops, puts, sorted(deleted_cols, key=lambda x: (x[0].id, x[1])), resolved, errors, gone)
