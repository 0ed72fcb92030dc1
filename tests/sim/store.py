"""An in-memory etcd holding the shard-DDL records with the guards of ``coordinator.etcdproto.
Store``: Operations guarded on the revision of the Info they answer, done marks guarded on the
Operation's mod revision, a lock's removal guarded on its handled Info revision.  Every write
gets the next revision and queues a watch event for the master."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from coordinator.etcdproto import (DoneMark, DroppedColumn, DroppedStage, Info, LockKey, Operation, Remnant,
                                   SourceTables, TableRef)


class Violation(Exception):
    """An invariant of docs/lock-algorithm.md does not hold."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


@dataclass
class Put:
    put: bool
    reason: str = ""


class SimStore:
    def __init__(self) -> None:
        self.rev = 0
        self.infos: dict[tuple[LockKey, TableRef], Info] = {}
        self.ops: dict[tuple[LockKey, TableRef], Operation] = {}
        self.marks: dict[tuple[LockKey, TableRef], int] = {}      # done mark -> Operation mod revision
        self.unran: set[tuple[LockKey, TableRef, int]] = set()     # done marks with ran=False (binlog skip)
        self.dropped: dict[tuple[LockKey, str, TableRef], DroppedStage] = {}
        self.dropped_rev: dict[tuple[LockKey, str, TableRef], int] = {}   # each record's mod revision
        self.remnants: dict[tuple[LockKey, TableRef], Remnant] = {}   # tables that left a removed lock
        self.events: list[tuple[str, object]] = []                # the master's watch, in order

    def fork(self, consumed: int) -> "SimStore":
        """A copy for the explorer, without the ``consumed`` watch events the master has read.
        The records are never mutated once stored (every change stores a new one), so they are
        shared."""
        new = SimStore.__new__(SimStore)
        new.rev = self.rev
        new.infos, new.ops, new.marks = dict(self.infos), dict(self.ops), dict(self.marks)
        new.unran = set(self.unran)
        new.dropped, new.dropped_rev = dict(self.dropped), dict(self.dropped_rev)
        new.remnants = dict(self.remnants)
        new.events = self.events[consumed:]
        return new

    def _next(self) -> int:
        self.rev += 1
        return self.rev

    # ---------------------------------------------------------------- worker side
    def put_info(self, info: Info) -> int:
        info = dataclasses.replace(info, revision=self._next())
        self.infos[(info.lock, info.table)] = info
        self.events.append(("info", info))
        return info.revision

    def get_info(self, lock: LockKey, t: TableRef) -> Info | None:
        return self.infos.get((lock, t))

    def get_operation(self, lock: LockKey, t: TableRef) -> Operation | None:
        op = self.ops.get((lock, t))
        if op is None:
            return None
        marked = self.marks.get((lock, t)) == op.revision
        return dataclasses.replace(op, done=op.done or marked,
                                   ran=not marked or (lock, t, op.revision) not in self.unran)

    def mark_done(self, op: Operation, ran: bool = True) -> bool:
        """False: stale (deleted or replaced) — the real client logs and returns.  ``ran=False``:
        the mark of a DDL the operator skipped (``binlog skip``) after its execution failed."""
        cur = self.ops.get((op.lock, op.table))
        if cur is None or cur.revision != op.revision:
            return False
        if self.marks.get((op.lock, op.table)) == op.revision:
            return True
        self.marks[(op.lock, op.table)] = op.revision
        self._next()
        if not ran:
            self.unran.add((op.lock, op.table, op.revision))
        if ran:
            self.events.append(("done", dataclasses.replace(op, done=True)))
        else:
            self.events.append(("done", DoneMark(
                info_revision=op.info_revision, op_revision=op.revision, stage=op.stage, cols=list(op.cols),
                ran=False, task=op.task, down_schema=op.down_schema, down_table=op.down_table, source=op.source,
                up_schema=op.up_schema, up_table=op.up_table, revision=self.rev)))
        return True

    def put_source_tables(self, st: SourceTables) -> None:
        """A worker rewrote its source's tables (one left: the departure fault)."""
        self._next()
        self.events.append(("tables", st))

    # ---------------------------------------------------------------- master side
    def put_operation(self, op: Operation, *, skip_done: bool = False) -> Put:
        key = (op.lock, op.table)
        info = self.infos.get(key)
        cur = self.get_operation(*key)
        if skip_done and cur is not None and cur.done and cur.info_revision == op.info_revision:
            return Put(False, "done")
        if op.info_revision:
            if info is None:
                return Put(False, "info-gone")
            if info.revision != op.info_revision:
                if not 0 < info.extends <= op.info_revision < info.revision:
                    return Put(False, "newer-info")
                op = dataclasses.replace(op, info_revision=info.revision)   # as the real store's
                if skip_done and cur is not None and cur.done and cur.info_revision == op.info_revision:
                    return Put(False, "done")
        if cur is not None and cur.done and cur.info_revision == op.info_revision and not cur.same_answer(op):
            raise Violation("done-rewritten", f"the done Operation of {op.table} (stage {cur.stage.value}) "
                                              f"was overwritten with stage {op.stage.value} {op.ddls}")
        op = dataclasses.replace(op, done=False, revision=self._next())
        self.ops[key] = op
        return Put(True)

    def put_dropped(self, lock: LockKey, t: TableRef, cols: list[str], stage: DroppedStage) -> None:
        rev = self._next()
        for c in cols:
            self.dropped[(lock, c.lower(), t)] = stage
            self.dropped_rev[(lock, c.lower(), t)] = rev

    def delete_dropped(self, lock: LockKey, col: str) -> None:
        for k in [k for k in self.dropped if k[0] == lock and k[1] == col.lower()]:
            del self.dropped[k]
        self._next()

    def remove_lock(self, lock: LockKey, handled_revision: int) -> bool:
        if any(i.revision > handled_revision for (lk, _), i in self.infos.items() if lk == lock):
            return False
        for d in (self.infos, self.ops, self.marks):
            for k in [k for k in d if k[0] == lock]:
                del d[k]
        for k in [k for k in self.dropped if k[0] == lock]:
            del self.dropped[k]
        self._next()
        return True

    def put_remnants(self, lock: LockKey, puts: list[Remnant], deletes: list[TableRef]) -> None:
        for r in puts:
            self.remnants[(lock, r.table)] = r
        for t in deletes:
            self.remnants.pop((lock, t), None)
        self._next()

    def depart_table(self, lock: LockKey, t: TableRef, schema: dict | None) -> None:
        """As the real store's: the Operation and done mark go, the Info becomes the departed
        one (the master's watch sees it, as etcd's would)."""
        if schema is None:
            self.delete_table(lock, t)
            return
        self.ops.pop((lock, t), None)
        self.marks.pop((lock, t), None)
        info = Info.of_departed(lock, t, schema, revision=self._next())
        self.infos[(lock, t)] = info
        self.events.append(("info", info))

    def delete_table(self, lock: LockKey, t: TableRef) -> None:
        """As the real store's: the table's dropped-column records stay with the lock."""
        for d in (self.infos, self.ops, self.marks):
            d.pop((lock, t), None)
        self._next()

    def remnant_listing(self) -> list[Remnant]:
        return list(self.remnants.values())

    def listing(self) -> tuple[list[Info], list[Operation], list[DroppedColumn]]:
        ops = [self.get_operation(*k) for k in self.ops]
        dcs = [DroppedColumn(stage=st, task=lk.task, down_schema=lk.down_schema, down_table=lk.down_table,
                             column=col, source=t.source, up_schema=t.schema, up_table=t.table,
                             revision=self.dropped_rev.get((lk, col, t), 0))
               for (lk, col, t), st in self.dropped.items()]
        return list(self.infos.values()), [o for o in ops if o is not None], dcs
