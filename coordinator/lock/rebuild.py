"""Rebuilding every lock from what etcd holds: a master's start, a leader change, a compacted
watch.  The stored answers stand (a resolution and its runner are persisted, never re-decided);
only what was never answered is decided afresh, in revision order.  The rule this keeps --
a rebuild yields exactly the answers the live engine would give -- is in docs/lock-algorithm.md.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from coordinator.etcdproto import (DroppedColumn, DroppedStage, Info, LockKey, Operation, RecordError, Remnant,
                                   SourceTables, Stage, TableRef)
from coordinator.schema import SchemaError, TableSchema

from .lock import Effects
from .state import Left

if TYPE_CHECKING:
    from .keeper import LockKeeper, SchemaSource


@dataclass
class Rebuilt:
    """Result of ``LockKeeper.rebuild``: the keeper plus the final Operation of every member that
    has one (write each with ``skip_done=True``), dropped-column changes, resolved locks."""
    keeper: LockKeeper
    operations: list[Operation]
    dropped_puts: list[tuple[LockKey, TableRef, str, DroppedStage]]
    dropped_deletes: list[tuple[LockKey, str]]
    resolved: list[LockKey]
    errors: list[str]
    # tables that left while no leader watched (not in their source's SourceTables any more):
    # their records are deleted as ``remove_table``'s are, or the lock's removal would wait on them
    removed_tables: list[tuple[LockKey, TableRef]] = field(default_factory=list)


def rebuild(cls: type[LockKeeper], infos: Iterable[Info], operations: Iterable[Operation],
            source_tables: Iterable[SourceTables], dropped_columns: Iterable[DroppedColumn],
            bad: Iterable[RecordError] = (), schema_source: SchemaSource | None = None,
            remnants: Iterable[Remnant] = ()) -> Rebuilt:
    """Rebuild all locks from etcd listings (master start, docs/lock-algorithm.md).  A table whose
    stored Operation answers its current Info gets that answer back (``_restore``: the
    resolution and its runner are persisted, never re-decided); the other Infos are then
    decided in revision order; done Operations restore done flags; operator unlocks are
    re-applied.  A lock created here starts with its target's remnants (tables that left an
    earlier lock), as the live keeper's does.
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
    for rem in remnants:
        try:
            k._remnants.setdefault(rem.lock, {})[rem.table] = Left(TableSchema.from_json(rem.schema),
                                                                     tuple(sorted(c.lower() for c in rem.dropped)))
        except (KeyError, TypeError, ValueError, SchemaError) as e:
            errors.append(f"{rem.lock.id}: the remnant of {rem.table} is unreadable: {e}")
    known_sources = set(k._source_tables)
    ops: dict[tuple[LockKey, TableRef], Operation] = {}
    for o in operations:
        ops[(o.lock, o.table)] = o
    infos = sorted(infos, key=lambda i: i.revision)
    departed = [i for i in infos if i.departed]      # tables that left: remnants, not members
    infos = [i for i in infos if not i.departed]
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
            # (an Info that repeats an answered one with more look-ahead keeps that answer too)
            answers = stored is not None and (stored.info_revision == info.revision or (
                0 < info.extends <= stored.info_revision < info.revision))
            restored = answers and stored is not None and k._restore(info, stored)
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
        if restored and stored is not None and stored.hopeful and stored.info_revision < info.revision:
            m = k._locks[info.lock].members.get(info.table) if info.lock in k._locks else None
            if m is not None and m.conflict is None:
                # an ADD held while its look-ahead may show its rename (``Lock._catch_up``): the
                # Info that extends it is decided, as the live leader would on reading it
                restored = False
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
    for info in departed:      # before the Infos decided now: the live lock had them by then
        try:
            left = TableSchema.from_json(info.before or {})
            into = k._ensure_lock(info.lock, left)
            if into is not None:
                into.note_departed(info.table, left)
                into.handled_revision = max(into.handled_revision, info.revision)
        except (KeyError, TypeError, ValueError, SchemaError) as e:
            errors.append(f"{info.lock.id}: the departed Info of {info.table} is unreadable: {e}")
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
        lock.recheck()
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
        if lock.is_resolved() or not lock.members:     # (only departed tables left: removable too)
            resolved.append(lk)
    for lk, pre in k._preload.items():   # dropped columns of locks that were not rebuilt: keep
        for dc in pre:
            final_cols[(lk, dc.column.lower(), TableRef(dc.source, dc.up_schema, dc.up_table))] = DroppedStage(dc.stage)
    puts = [(lk, t, col, st) for (lk, col, t), st in final_cols.items() if persisted.get((lk, col, t)) != st]
    deleted_cols = {(lk, col) for (lk, col, _t) in persisted} - {(lk, col) for (lk, col, _t) in final_cols}
    k._with_info = set()
    return Rebuilt(k, out_ops, puts, sorted(deleted_cols, key=lambda x: (x[0].id, x[1])), resolved, errors, gone)
