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

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from coordinator.etcdproto import (DoneMark, DroppedColumn, DroppedStage, Info, LockKey, Operation, RecordError, Remnant,
                                   SourceTables, Stage, TableRef, parse_lock_id, parse_table_ref)
from coordinator.schema import SchemaError, TableSchema

from .errors import BadAction, LockNotFound, TableNotInLock, UnlockRefused
from .lock import Answer, Effects, Lock, Member
from .state import Left
from .rebuild import Rebuilt, rebuild
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
    removed_tables: list[TableRef] = field(default_factory=list)  # master: Store.depart_table
    departed: dict[TableRef, dict] = field(default_factory=dict)  # a removed table's schema (JSON): its departed Info
    resolved: bool = False       # master: Store.remove_lock(fence, lock, handled_revision) then drop_lock
    empty: bool = False          # the lock has no member left: master drops it (remove_lock + drop_lock)
    handled_revision: int = 0
    ignored: str = ""            # why the call changed nothing (stale Info, unknown lock)

    @property
    def operations(self) -> list[Operation]:
        return ([self.operation] if self.operation is not None else []) + self.others


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
        # per target, the remnants etcd holds (``Remnant``: tables that left an earlier lock); a new
        # lock of the target starts with them as its departed tables
        self._remnants: dict[LockKey, dict[TableRef, Left]] = {}
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

    def departed_json(self, key: LockKey, t: TableRef) -> dict | None:
        """The schema ``t`` left lock ``key`` with (its departed Info's), None if unknown."""
        lock = self._locks.get(key)
        left = lock.departed.get(t) if lock is not None else None
        return left.to_json() if left is not None else None

    def lock_keys(self) -> list[LockKey]:
        return list(self._locks)

    def drop_lock(self, key: LockKey) -> None:
        """Forget a lock (after its records were removed from etcd, and its remnants written:
        ``remnant_writes``, kept for the target's next lock)."""
        self._locks.pop(key, None)
        self._members_current.discard(key)

    def remnant_writes(self, key: LockKey) -> tuple[list[Remnant], list[TableRef]]:
        """What the caller writes before removing lock ``key`` (``Store.put_remnants``): the
        remnant of each table that left it and the stored remnants of tables that are members
        again.  From then on they are the target's stored remnants (a removal deferred by a newer
        Info leaves them written: the tables did leave)."""
        lock = self._locks.get(key)
        if lock is None:
            return [], []
        stored = self._remnants.get(key, {})
        now = {t: Left(s, tuple(sorted(c for c, per in lock.dropped_columns.items() if t in per)))
               for t, s in lock.departed.items()}
        puts = [Remnant.of(key, t, x.schema.to_json(), x.dropped) for t, x in now.items()
                if t not in stored or stored[t].key() != x.key()]
        deletes = [t for t in stored if t not in now]
        if now:
            self._remnants[key] = now
        else:
            self._remnants.pop(key, None)
        return puts, deletes

    def remnants(self, key: LockKey) -> Mapping[TableRef, Left]:
        """The stored remnants of target ``key`` (tables that left one of its locks)."""
        return self._remnants.get(key, {})

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
        if info.departed:
            return self._departed_info(info, out)
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

    def _departed_info(self, info: Info, out: LockChange) -> LockChange:
        """The Info the master wrote for a table that left (``Store.depart_table``): its lock keeps
        the schema as the table's remnant (a rebuild learns it here; the live lock already did).
        Nothing to answer; the lock may now be removable (the write moved its Info revisions)."""
        lock = self._locks.get(info.lock)
        if lock is None:
            out.ignored = f"departed Info of {info.table} for a lock that no longer exists"
            return out
        try:
            lock.note_departed(info.table, TableSchema.from_json(info.before or {}))
        except (KeyError, TypeError, ValueError, SchemaError) as e:
            out.ignored = f"departed Info of {info.table} has an unreadable schema ({e})"
        lock.handled_revision = max(lock.handled_revision, info.revision)
        return self._apply(lock, info.table, Effects(), out)

    def _ensure_lock(self, key: LockKey, init: TableSchema | None) -> Lock | None:
        lock = self._locks.get(key)
        if lock is None and init is not None:
            lock = Lock(key, init)
            for dc in self._preload.pop(key, []):
                lock.preload_dropped(dc.column, TableRef(dc.source, dc.up_schema, dc.up_table), DroppedStage(dc.stage))
            for t, left in self._remnants.get(key, {}).items():
                lock.note_departed(t, left.schema)
                for col in left.dropped:
                    lock.preload_dropped(col, t, DroppedStage.PARTIAL)
            self._locks[key] = lock
        return lock

    def _apply(self, lock: Lock, t: TableRef, fx: Effects, out: LockChange) -> LockChange:
        """Turn what ``lock`` changed into the Operations and records the master writes."""
        if fx.answer is not None:
            out.operation = self._op_for(lock, t, fx.answer)
        out.others.extend(self._op_for(lock, x, a) for x, a in fx.others)
        out.dropped_puts.extend(fx.dropped_puts)
        out.dropped_deletes.extend(fx.dropped_deletes)
        for x, s in fx.departed:
            out.departed[x] = s.to_json()
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
                         runs_after=str(a.runs_after) if a.runs_after is not None else "", first=a.first,
                         combine=list(a.combine), hopeful=a.hopeful, catch_up=[list(p) for p in a.catch_up])

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
                     op.done and op.ran, runs_after=after, first=op.first, combine=tuple(op.combine),
                     hopeful=op.hopeful, catch_up=tuple((p[0], p[1]) for p in op.catch_up))
        return True

    @classmethod
    def rebuild(cls, infos: Iterable[Info], operations: Iterable[Operation],
                source_tables: Iterable[SourceTables], dropped_columns: Iterable[DroppedColumn],
                bad: Iterable[RecordError] = (), schema_source: SchemaSource | None = None,
                remnants: Iterable[Remnant] = ()) -> Rebuilt:
        """All locks from etcd listings (``coordinator.lock.rebuild``)."""
        return rebuild(cls, infos, operations, source_tables, dropped_columns, bad, schema_source, remnants)
