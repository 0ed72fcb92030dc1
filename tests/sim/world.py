"""The simulated deployment: one master (the real ``LockKeeper`` behind ``SimStore``), one
worker per shard table following the real handler's steps and decisions, and the downstream
table's schema.  ``World.step(action)`` performs one atomic action; ``World.check()`` raises
``Violation`` when an invariant of docs/lock-algorithm.md does not hold."""
from __future__ import annotations

import copy
import dataclasses
import enum
import re
import types
from collections import Counter
from dataclasses import dataclass, field

from coordinator.etcdproto import DoneMark, Info, LockKey, Operation, SourceTables, Stage, TableRef
from coordinator.lock import LockKeeper
from coordinator.lock.schema_bag import cmp, eq, join2
from coordinator.schema import Column, ColumnType, Index, SchemaError, TableSchema, apply_ddl, classify, parse_create_table
from coordinator.schema.lattice import join_type
from worker.shardddl.decision import Execute, Hold, Pause, Replay, on_operation, redirected

from .scripts import BASE
from .store import SimStore, Violation

LOCK = LockKey("task", "db", "t")
READ_AHEAD = 4        # how many later events a held table's stream reads past (Info.ahead)

# Values nothing mutates once made (frozen dataclasses, and the etcd records: every change stores
# a new one), shared by ``World.fork`` instead of copied: copying them was 95% of the explorer's time.
_SHARED = frozenset({str, int, float, bool, type(None), bytes, frozenset, ColumnType, Column, Index, TableSchema,
                     TableRef, LockKey, Info, Operation, DoneMark, types.FunctionType})


def _clone(x, memo: dict):
    """A deep copy of the lock engine's state for ``World.fork`` (``copy.deepcopy``'s protocol
    without its per-object cost): immutable values and hashable tuples/sets' members are shared,
    containers and plain objects copied once each (``memo``: shared references stay shared)."""
    t = type(x)
    if t in _SHARED:
        return x
    if t is tuple:
        try:
            hash(x)
            return x
        except TypeError:
            return tuple(_clone(v, memo) for v in x)
    y = memo.get(id(x))
    if y is not None:
        return y
    if t is dict:
        y = memo[id(x)] = {}
        for k, v in x.items():
            y[k] = _clone(v, memo)
    elif t is list:
        y = memo[id(x)] = []
        y.extend(_clone(v, memo) for v in x)
    elif t is set:
        y = memo[id(x)] = set(x)              # members are hashable: immutable values
    elif t is Counter:
        y = memo[id(x)] = Counter(x)
    elif t is types.MethodType:
        y = types.MethodType(x.__func__, _clone(x.__self__, memo))
    elif isinstance(x, (enum.Enum, BaseException)):
        return x
    elif isinstance(x, dict) and hasattr(x, "__dict__"):        # a dict with counters (lock.Drops)
        y = memo[id(x)] = t.__new__(t)
        dict.update(y, x)
        y.__dict__.update({k: _clone(v, memo) for k, v in x.__dict__.items()})
    elif hasattr(x, "__dict__") and not hasattr(t, "__slots__"):
        y = memo[id(x)] = object.__new__(t)
        y.__dict__.update({k: _clone(v, memo) for k, v in x.__dict__.items()})
    else:
        return copy.deepcopy(x, memo)
    return y


@dataclass
class Worker:
    t: TableRef
    events: list[list[str]]
    schemas: list[TableSchema]          # schema at each checkpoint position
    jsons: list[tuple[dict, list[dict]]]  # per DDL: its Info's before and afters (JSON)
    pos: int = 0                        # checkpoint: events before it are done (persisted downstream)
    phase: str = "run"                  # run | wait | held | paused | exec | mark | advance
    info: Info | None = None
    rev: int = 0
    seen: int = 0
    op: Operation | None = None
    intent: tuple[int, tuple[str, ...]] | None = None   # persisted downstream: (pos, statements) ran
    met: int = -1                       # the DDL at this position was met (the rows before it are applied)
    ran: int = -1                       # persisted: the DDL at this position ran (rule 8b's finished intent)
    gone: bool = False                  # its table left the lock (abrupt departure): no more events
    unborn: bool = False                # created mid-lock: not there yet (``World.create``)
    born_ahead: bool = False            # created with columns the downstream lacks: rows wait (retry)
    skipped: bool = False               # its DDL was skipped (``binlog skip``): rows wait for the change
    # positions where the binlog has rows: every position when each statement is its own Info;
    # only statement boundaries when one ALTER's changes are coordinated one at a time (no row
    # of the upstream sits between two changes of one statement)
    rows_at: frozenset[int] | None = None
    skip_to: int = 0                    # a skip of the statement: the checkpoint moves to its end
    read_ahead: int = 0                 # held: how many later events its stream has read past (sent as Info.ahead)


    def rows_here(self) -> bool:
        return self.rows_at is None or self.pos in self.rows_at

    @property
    def finished(self) -> bool:
        return self.gone or (not self.unborn and self.pos >= len(self.events) and self.phase == "run")


@dataclass
class World:
    events: list[list[list[str]]]
    base: TableSchema = field(default_factory=lambda: parse_create_table(BASE))
    log: list[str] = field(default_factory=list)
    sources: int = 2
    # worker index -> k: that shard table is created mid-lock with the schema after the first k
    # events of its path (a new shard made from a migrating one), then makes the rest
    born: dict[int, int] = field(default_factory=dict)
    # the worker's coordination unit (docs/lock-algorithm.md, "One change at a time"): "change"
    # sends each change of a multi-change ALTER as its own Info once the previous one is done;
    # "statement" sends the whole ALTER as one Info (the protocol before that rule)
    unit: str = "change"
    # compare the lock rebuilt at a master crash with the live one (master_crash)
    check_rebuild: bool = True

    def __post_init__(self) -> None:
        self.store = SimStore()
        self.workers: list[Worker] = []
        for i, evs in enumerate(self.events):
            t = TableRef(f"s{i % self.sources + 1}", "db", f"t{i}")
            rows_at = None
            if self.unit == "change":
                starts, flat = [], []
                for ev in evs:
                    starts.append(len(flat))
                    flat.extend([stmt] for stmt in ev)
                starts.append(len(flat))
                if i in self.born:
                    self.born = {**self.born, i: starts[self.born[i]]}
                evs, rows_at = flat, frozenset(starts)
            schemas, jsons = _walk(self.base, evs)
            w = Worker(t, evs, schemas, jsons, rows_at=rows_at)
            if i in self.born:
                w.pos = self.born[i]
                w.unborn = w.born_ahead = True
            self.workers.append(w)
        self.by_table = {w.t: w for w in self.workers}
        self.down = self.base
        self.keeper = self._new_keeper()
        self.cursor = 0                 # master's position in the watch
        self.final = self.workers[0].schemas[-1]
        self.executed: list[tuple[str, str]] = []
        self.left: TableSchema | None = None   # join of the schemas the departed tables had

    def fork(self) -> World:
        """An independent copy of this state for the explorer (``tests/sim/explore.py``): the
        workers and the store's maps are copied, the keeper deep-copied (its ``schema_source``
        rebinds to the copy), immutable values shared; the watch events the master has read are
        left behind."""
        new = object.__new__(World)
        new.__dict__.update(self.__dict__)
        new.store = self.store.fork(self.cursor)
        new.cursor = 0
        new.workers = [copy.copy(w) for w in self.workers]
        new.by_table = {w.t: w for w in new.workers}
        new.executed, new.log = list(self.executed), list(self.log)
        new.keeper = _clone(self.keeper, {id(self): new})
        return new

    # ------------------------------------------------------------------ master
    def _source_tables(self) -> list[SourceTables]:
        out: dict[str, SourceTables] = {}
        for w in self.workers:
            st = out.setdefault(w.t.source, SourceTables(LOCK.task, w.t.source))
            if not w.gone and not w.unborn:
                st.add(w.t.schema, w.t.table, LOCK.down_schema, LOCK.down_table)
        return list(out.values())

    def _checkpoint_schema(self, _lock: LockKey, t: TableRef) -> TableSchema | None:
        w = self.by_table.get(t)
        if w is None:
            return None
        if w.skip_to:       # a skipped statement: the worker saved its checkpoint past it (ddl_skipped)
            return w.schemas[w.skip_to]
        # checkpoint_schema.current_info: a finished DDL's schema while the checkpoint is before it
        return w.schemas[w.pos + 1] if w.ran == w.pos and w.pos < len(w.events) else w.schemas[w.pos]

    def _new_keeper(self) -> LockKeeper:
        k = LockKeeper(schema_source=self._checkpoint_schema)
        for st in self._source_tables():
            k.update_source_tables(st)
        return k

    def _persist(self, out) -> None:
        for op in out.operations:
            self.store.put_operation(op)
        for t, cols, stage in out.dropped_puts:
            self.store.put_dropped(out.lock, t, cols, stage)
        for col in out.dropped_deletes:
            self.store.delete_dropped(out.lock, col)
        for t in out.removed_tables:
            self.store.depart_table(out.lock, t, out.departed.get(t))
        if out.lock is not None and (out.resolved or out.empty):
            self._remove_lock(out.lock, out.handled_revision)

    def _remove_lock(self, lk: LockKey, handled_revision: int) -> None:
        """As the master's: the remnants first, then the lock's records, then the lock."""
        self.store.put_remnants(lk, *self.keeper.remnant_writes(lk))
        if self.store.remove_lock(lk, handled_revision):
            self.keeper.drop_lock(lk)

    def master_step(self) -> bool:
        if self.cursor >= len(self.store.events):
            return False
        kind, rec = self.store.events[self.cursor]
        self.cursor += 1
        if kind == "info":
            self._persist(self.keeper.handle_info(rec))
        elif kind == "tables":
            for out in self.keeper.update_source_tables(rec):
                self._persist(out)
        else:
            self._persist(self.keeper.mark_done(rec))
        return True

    def master_crash(self) -> None:
        """The leader dies; a new one rebuilds every lock from etcd and watches from now on.
        When the dead leader had handled every record, the rebuilt lock must be the live one:
        the same member schemas, pending conflicts and answers (docs/lock-algorithm.md, "a
        rebuild yields exactly the answers the live engine would give")."""
        live = _lock_signature(self.keeper) if self.cursor >= len(self.store.events) else None
        infos, ops, dcs = self.store.listing()
        listed = len(self.store.events)       # the new leader watches from the listing on, its own writes included
        r = LockKeeper.rebuild(infos, ops, self._source_tables(), dcs, schema_source=self._checkpoint_schema,
                               remnants=self.store.remnant_listing())
        if live is not None and self.check_rebuild:
            rebuilt = _lock_signature(r.keeper)
            if rebuilt != live:
                diff = sorted(set(live) ^ set(rebuilt), key=str)
                raise Violation("rebuild-differs", f"the lock rebuilt from etcd is not the live one: {diff[:4]}")
        self.keeper = r.keeper
        for op in r.operations:
            cur = self.store.get_operation(op.lock, op.table)
            if cur is not None and cur.same_answer(op):
                continue
            self.store.put_operation(op, skip_done=True)
        for lk, t, col, stage in r.dropped_puts:
            self.store.put_dropped(lk, t, [col], stage)
        for lk, col in r.dropped_deletes:
            self.store.delete_dropped(lk, col)
        for lk, t in r.removed_tables:
            self.store.depart_table(lk, t, r.keeper.departed_json(lk, t))
        for lk in r.resolved:
            lock = self.keeper.find(lk)
            self._remove_lock(lk, lock.handled_revision if lock else 0)
        self.cursor = listed

    def operator_unlock(self) -> bool:
        """The exit a lock names for a table blocked in ``detected``/``error``: unlock (skip/exec)."""
        lock = self.keeper.find(LOCK)
        if lock is None:
            return False
        for t, m in sorted(lock.members.items(), key=lambda x: str(x[0])):
            if m.answer is not None and m.answer.stage in (Stage.DETECTED, Stage.ERROR):
                w = self.by_table[t]
                if w.phase not in ("paused", "held"):
                    continue
                # the exit the message names: skip a conflict whose values cannot be carried; exec
                # an error (e.g. an ADD the lock refused after a restart forgot the column's first type)
                action = "skip" if m.answer.stage is Stage.DETECTED else "exec"
                self._persist(self.keeper.unlock(LOCK, t.source, t.schema, t.table, action))
                self.log.append(f"operator: unlock {t} {action}")
                return True
        return False

    # ------------------------------------------------------------------ workers
    def _info(self, w: Worker) -> Info:
        before, afters = w.jsons[w.pos]      # computed once (parsing the DDLs is the costly part)
        end = self._statement_end(w)
        start = max((p for p in w.rows_at if p <= w.pos), default=0) if w.rows_at is not None else w.pos
        # as the worker: only a statement handled whole reads ahead (``handler``: ``ddl.change is None``);
        # the changes of a multi-change ALTER are coordinated one at a time and never folded into
        return Info(task=LOCK.task, source=w.t.source, up_schema=w.t.schema, up_table=w.t.table,
                    down_schema=LOCK.down_schema, down_table=LOCK.down_table, ddls=list(w.events[w.pos]),
                    before=before, afters=list(afters),
                    rest=[s for ev in w.events[w.pos + 1:end] for s in ev], reads_ahead=end - start == 1)

    @staticmethod
    def _statement_end(w: Worker) -> int:
        """The position after the last change of the statement ``w`` is in."""
        return min(p for p in w.rows_at if p > w.pos) if w.rows_at is not None else w.pos + 1

    def _reorder(self, w: Worker, first: str) -> None:
        """The lock asked for ``first``, a later change of the statement at ``w.pos``, to be
        coordinated now (handler: ``Reorder``): the unfinished changes of the statement are
        reordered (the worker persists the order with its intent row) and the first re-sent."""
        end = self._statement_end(w)
        j = next(p for p in range(w.pos + 1, end) if w.events[p] == [first])
        w.events = [*w.events[:w.pos], w.events[j], *w.events[w.pos:j], *w.events[j + 1:]]
        schemas, jsons = _walk(w.schemas[w.pos], w.events[w.pos:end])
        w.schemas = [*w.schemas[:w.pos], *schemas, *w.schemas[end + 1:]]
        w.jsons = [*w.jsons[:w.pos], *jsons, *w.jsons[end:]]
        self.log.append(f"{w.t}: {first} coordinated first")

    def can_read_ahead(self, w: Worker) -> bool:
        return w.info is not None and w.read_ahead < READ_AHEAD and \
            self._statement_end(w) + w.read_ahead < len(w.events)

    def _read_ahead(self, w: Worker) -> bool:
        """Held, the worker's stream reads past the table (its rows are dropped, re-read after the
        redirect) and meets its next statement: the Info is put again with it in ``ahead``."""
        end = self._statement_end(w)
        if not self.can_read_ahead(w):
            return False
        w.read_ahead += 1
        ahead = [s for ev in w.events[end:end + w.read_ahead] for s in ev]
        w.info = dataclasses.replace(w.info, ahead=ahead, extends=w.info.extends or w.rev)
        w.rev, w.seen = self.store.put_info(w.info), 0
        return True

    def _combine(self, w: Worker, idx: list[int]) -> None:
        """The lock asked for the change at ``w.pos`` and the later ones ``idx`` (0: the next) as
        one ALTER (as ``worker/sync/folds.py`` does, docs/lock-algorithm.md): it sends them as one
        statement; its tracker takes the renames at once, so the rows between
        are written through them, the changes between (other columns) stay where they are, and
        the ones folded in are skipped when the stream reaches them (persisted with the
        checkpoint)."""
        folded = [w.pos + 1 + i for i in idx]
        combined = w.events[w.pos][0] + "".join(", " + _clauses(w.events[p][0]) for p in folded)
        keep = [p for p in range(w.pos + 1, len(w.events)) if p not in folded]
        rows = w.rows_at
        w.events = [*w.events[:w.pos], [combined], *[w.events[p] for p in keep]]
        if rows is not None:
            # a boundary after position p moves back by the folded changes before it
            w.rows_at = frozenset(p - sum(1 for f in folded if f < p) for p in rows)
        schemas, jsons = _walk(w.schemas[w.pos], w.events[w.pos:])
        w.schemas = [*w.schemas[:w.pos], *schemas]
        w.jsons = [*w.jsons[:w.pos], *jsons]
        self.log.append(f"{w.t}: {combined} coordinated as one")

    def worker_step(self, w: Worker) -> bool:
        """One atomic action of ``w``'s worker; False when it cannot progress now."""
        if w.gone:
            return False
        if w.unborn:
            return self.create(w)
        if w.phase == "run" and w.ran == w.pos and w.pos < len(w.events):
            # syncer rule 8b (handler.resume_finished): not coordinated again; the done mark if missing
            info, op = self.store.get_info(LOCK, w.t), self.store.get_operation(LOCK, w.t)
            if info is not None and info.ddls == w.events[w.pos] and op is not None and not op.done \
                    and op.info_revision == info.revision and op.stage in (Stage.NONE, Stage.UNLOCKED):
                self.store.mark_done(op)
            w.phase = "advance"
            return True
        if w.phase == "run":
            if w.met != w.pos and w.rows_here():
                if w.born_ahead and self._rows_misfit(w, w.schemas[w.pos]):
                    return False     # a table created ahead of the downstream: its apply fails and is retried
                w.born_ahead = False
                self._write_rows(w, w.schemas[w.pos])   # rows before the DDL (or after the last one)
            if w.pos >= len(w.events):
                return False
            w.met = w.pos
            info = self._info(w)
            op = self.store.get_operation(LOCK, w.t)
            cur = self.store.get_info(LOCK, w.t)
            if (op is not None and op.stage is Stage.UNLOCKED and not op.done and cur is not None
                    and cur.revision == op.info_revision
                    and (cur.ddls, cur.before, cur.afters) == (info.ddls, info.before, info.afters)):
                w.info, w.rev, w.op, w.phase = cur, cur.revision, op, "exec"     # unlocked_answer
                return True
            rev = 0
            if cur is not None and (cur.ddls, cur.before, cur.afters) == (info.ddls, info.before, info.afters) \
                    and not (op is not None and op.info_revision == cur.revision and op.stage is Stage.RESOLVED):
                rev = cur.revision                   # lock_client.stored_info: wait on the same Info
            w.info, w.rev, w.seen, w.phase = info, rev or self.store.put_info(info), 0, "wait"
            return True
        if w.phase in ("wait", "paused", "held"):
            op = self.store.get_operation(LOCK, w.t)
            if op is None or op.info_revision != w.rev or op.revision <= w.seen:
                cur = self.store.get_info(LOCK, w.t)
                if w.phase == "wait" and (cur is None or cur.revision != w.rev):   # the recheck re-puts
                    w.rev, w.seen = self.store.put_info(w.info), 0
                    return True
                if w.phase == "held":
                    return self._read_ahead(w)
                return False
            w.seen = op.revision
            if op.first:
                self._reorder(w, op.first)
                w.phase, w.read_ahead = "run", 0
                return True
            if op.combine:
                self._combine(w, list(op.combine))
                w.phase, w.read_ahead = "run", 0
                return True
            if w.phase == "held":
                if redirected(op):
                    w.phase, w.read_ahead = "run", 0     # rewind: replay from the held DDL (a new Info)
                return True
            v = on_operation(op, strict=False)
            if isinstance(v, Replay):
                w.rev, w.seen = self.store.put_info(w.info), 0     # send the DDL again
            elif isinstance(v, Execute):
                w.op, w.phase = op, "exec"
            elif isinstance(v, Hold):
                w.phase = "held"
            else:
                assert isinstance(v, Pause)
                w.phase = "paused"
            return True
        if w.phase == "exec":
            stmts = tuple(w.op.ddls)
            if w.intent != (w.pos, stmts):          # rule 8: the intent row says it already ran
                w.intent = (w.pos, stmts)
                self._execute(w, stmts)
            w.ran = w.pos
            w.phase = "mark"
            return True
        if w.phase == "mark":
            self.store.mark_done(w.op)              # stale: the real client logs and goes on
            w.phase = "advance"
            return True
        if w.phase == "advance":
            nxt = max(w.skip_to, w.pos + 1)
            rows = w.rows_at is None or nxt in w.rows_at
            if w.skipped and rows and self._rows_misfit(w, w.schemas[nxt]):
                return False                        # the skipped change is not downstream yet
            w.skipped = w.skipped and not rows
            w.pos, w.skip_to = nxt, 0
            w.phase, w.op, w.info, w.intent = "run", None, None, None
            if w.rows_here():
                self._write_rows(w, w.schemas[w.pos])
            return True
        raise AssertionError(w.phase)

    def worker_crash(self, w: Worker) -> None:
        """SIGKILL: everything but the checkpoint and the intent row is lost."""
        w.phase, w.info, w.rev, w.seen, w.op, w.read_ahead = "run", None, 0, 0, None, 0

    def table_dropped(self, w: Worker) -> bool:
        """Issue 28 case 5, an abrupt departure: ``w``'s table leaves the lock at any point
        (SIGKILL first), whatever its answer was (run, held, done), as the operator's
        `remove-table` takes it out (or a source's SourceTables rewritten without it).  Since
        b6cf591 a table dropped upstream no longer leaves at its worker's restart: it stays a
        member until the worker's replay meets its DROP TABLE, so it runs what it was told to run
        first; the fault keeps the abrupt departure at any point, of which that one is a case."""
        if w.gone:
            return False
        self.worker_crash(w)
        w.gone = True
        # what the lock may have seen of it: its checkpoint, and the Info it may have sent
        for s in w.schemas[w.pos:w.pos + 2]:
            self.left = s if self.left is None else (join2(self.left, s) or self.left)
        [st] = [x for x in self._source_tables() if x.source == w.t.source]
        self.store.put_source_tables(st)
        return True

    def create(self, w: Worker) -> bool:
        """The shard table is created upstream and its worker replays the CREATE: its checkpoint
        (the finished intent) holds the created schema before SourceTables names it, as the
        worker writes them; from then on it is a member like the others."""
        if not w.unborn:
            return False
        w.unborn = False
        [st] = [x for x in self._source_tables() if x.source == w.t.source]
        self.store.put_source_tables(st)
        return True

    def can_skip(self, w: Worker) -> bool:
        """``w`` is about to run the agreed change of a resolution other tables are held for (a
        redirect already released names its runner too, but that answer ran: skipping a later,
        ordinary DDL would be the operator dropping a change nobody else makes)."""
        return (not w.gone and w.phase == "exec" and w.op is not None and bool(w.op.ddls)
                and w.intent != (w.pos, tuple(w.op.ddls))
                and any(o.runner == str(w.t) and o.stage is Stage.SKIP_AND_WAIT
                        for (_, t), o in self.store.ops.items() if t != w.t))

    def binlog_skip(self, w: Worker) -> bool:
        """Issue 28 case 5: the runner's execution failed and the operator skipped the DDL
        (``binlog skip``): the done mark says it did not run; the worker's rows after it wait
        (a worker in error, resumed) until the change it skipped is made downstream by another."""
        if not self.can_skip(w):
            return False
        assert w.op is not None
        self.store.mark_done(w.op, ran=False)
        # the skip covers the change that failed; the statement's later changes, never sent, are
        # coordinated as usual (handler: the skipped change is recorded finished, the rest follow)
        w.ran, w.skipped, w.phase, w.skip_to = w.pos, True, "advance", w.pos + 1
        return True

    def broken_watch(self, w: Worker) -> None:
        """The worker's watch broke: it re-reads, and may see the current Operation again."""
        w.seen = 0

    # ------------------------------------------------------------------ downstream
    def _execute(self, w: Worker, stmts: tuple[str, ...]) -> None:
        prev = w.schemas[w.pos]
        for stmt in stmts:
            before = self.down
            self.executed.append((str(w.t), stmt))
            try:
                after = _apply_ddl(before, stmt)
            except SchemaError as e:
                low = str(e).lower()
                if ("exists" in low or "duplicate" in low or "no such" in low or "unknown" in low
                        or "not found" in low or "does not" in low):
                    if _renames(stmt):
                        raise Violation("rerun", f"{w.t} ran {stmt!r} on a downstream that already has it "
                                                 f"({e})") from None
                    continue                   # ignorable repeat (1060/1061/1091)
                raise Violation("ddl-failed", f"{w.t} ran {stmt!r}: {e}") from None
            try:
                post = _apply_ddl(prev, stmt)
            except SchemaError:
                post = None
            if post is not None and classify(prev, post) == "narrowing" and eq(after, before) \
                    and not _drops(stmt):
                raise Violation("rerun", f"{w.t} ran the narrowing {stmt!r} again")
            self.down = after
            if post is not None:
                prev = post

    def _write_rows(self, w: Worker, s: TableSchema) -> None:
        """Rows of ``w``'s table in schema ``s`` are applied downstream: each column must exist
        there with a type that holds its values."""
        bad = self._rows_misfit(w, s)
        if bad is not None:
            raise Violation(*bad)

    def _rows_misfit(self, w: Worker, s: TableSchema) -> tuple[str, str] | None:
        for c in s.columns:
            d = self.down.column(c.name)
            if d is None:
                return ("row-lost", f"{w.t} writes column `{c.name}`, which the downstream does not have "
                                    f"(downstream: {_cols(self.down)})")
            try:
                j = join_type(d.type, c.type)
            except Exception:  # noqa: BLE001
                j = None
            if j is None or _tkey(j) != _tkey(d.type):
                return ("row-truncated", f"{w.t} writes `{c.name}` {c.type.sql()} into downstream {d.type.sql()}")
        return None

    def _departure_leftovers(self) -> bool:
        """Known limit (docs/lock-algorithm.md): a departure does not run the DDL it enables (the
        DROP COLUMN, narrowing MODIFY or ADD INDEX the departed table was the last to miss).  True
        when the downstream differs from the joined schema only that way: each extra or wider
        column is one a departed table had, and the indexes missing are ones the others added."""
        assert self.left is not None
        for c in self.down.columns:
            f = self.final.column(c.name)
            if f is not None and _tkey(f.type) == _tkey(c.type):
                continue
            if self.left.column(c.name) is None:
                return False
            if f is not None and cmp(TableSchema((f,)), TableSchema((c,))) != -1:
                return False
        if any(self.down.column(c.name) is None for c in self.final.columns):
            return False
        for i in self.down.indexes:
            if self.final.index(i.name or "PRIMARY") is None and self.left.index(i.name or "PRIMARY") is None:
                return False
        return True

    # ------------------------------------------------------------------ quiet
    def quiet_check(self) -> None:
        lock = self.keeper.find(LOCK)
        if lock is not None or any(k[0] == LOCK for k in self.store.infos):
            why = "; ".join(f"{t}: {lock.waiting_for(t)}" for t in lock.members if lock.waiting_for(t)) if lock else ""
            raise Violation("never-resolves", f"lock left after every worker finished: {why or 'records left'}")
        stuck = [f"{w.t} {w.phase} at {w.pos}/{len(w.events)}" for w in self.workers if not w.finished]
        if stuck:
            raise Violation("never-resolves", f"workers stuck: {', '.join(stuck)}")
        if eq(self.down, self.final):
            return
        if self.left is not None and self._departure_leftovers():
            return
        raise Violation("schema-differs", f"downstream {_cols(self.down)} != joined {_cols(self.final)}")


def _walk(start: TableSchema, events: list[list[str]]) -> tuple[list[TableSchema], list[tuple[dict, list[dict]]]]:
    """The schema at each position of ``events`` from ``start`` (one more than the events) and per
    event its Info's before and afters (JSON)."""
    schemas, jsons = [start], []
    for ev in events:
        s = schemas[-1]
        afters = []
        for stmt in ev:
            s = _apply_ddl(s, stmt)
            afters.append(s.to_json())
        jsons.append((schemas[-1].to_json(), afters))
        schemas.append(s)
    return schemas, jsons


_APPLIED: dict[tuple[int, str], tuple[TableSchema, object]] = {}


def _apply_ddl(s: TableSchema, stmt: str) -> TableSchema:
    """``apply_ddl`` memoised on the (immutable) schema's identity: the explorer runs the same
    statements on the same schemas in many interleavings.  An entry holds its schema, so the id
    is not reused while it exists."""
    e = _APPLIED.get((id(s), stmt))
    if e is None or e[0] is not s:
        if len(_APPLIED) > 50_000:
            _APPLIED.clear()
        try:
            r: object = apply_ddl(s, stmt)
        except SchemaError as ex:
            r = ex
        e = _APPLIED[(id(s), stmt)] = (s, r)
    if isinstance(e[1], SchemaError):
        raise e[1]
    return e[1]  # type: ignore[return-value]


def _clauses(stmt: str) -> str:
    """An ALTER's clauses, without ``ALTER TABLE name``."""
    return re.sub(r"^\s*ALTER\s+TABLE\s+(?:`[^`]+`|\w+)\s+", "", stmt, flags=re.I)


def _renames(stmt: str) -> bool:
    s = stmt.upper()
    return " RENAME COLUMN " in s or " CHANGE " in s


def _drops(stmt: str) -> bool:
    return " DROP " in stmt.upper()


def _tkey(t) -> tuple:
    return dataclasses.replace(t, charset=None, collation=None).lattice_key()


def _cols(s: TableSchema) -> str:
    return ", ".join(f"{c.name} {c.type.sql()}" for c in s.columns) + (
        " | " + ", ".join(i.name for i in s.indexes if i.name) if s.indexes else "")


def _lock_signature(keeper) -> tuple:
    """What a lock would answer from: per member its schema, its pending conflict and its
    current answer (stage and statements)."""
    lock = keeper.find(LOCK)
    kept = tuple(sorted((f"remnant {t}", x.key()) for t, x in keeper.remnants(LOCK).items()))
    if lock is None:
        return kept
    return kept + tuple(sorted((str(t), m.schema.lattice_key(), m.conflict.lattice_key() if m.conflict is not None else None,
                         m.answer.stage.value if m.answer else "", tuple(m.answer.ddls) if m.answer else ())
                        for t, m in lock.members.items())) + tuple(
        sorted((f"departed {t}", s.lattice_key()) for t, s in lock.departed.items()))
