"""Later statements of a table that a combined DDL already ran (checkpoint rule 11).

Two shards rename the same columns in opposite orders, one rename per statement, with rows in
between: the lock asks a held table to run its held rename together with later ones of its own
stream (``Operation.combine``, docs/lock-algorithm.md "Opposite orders across statements").
The statements folded in stay in the binlog.  Until the table's point passes one, the table's
rows are written through its renames (a row event names the columns as the upstream had them
when it was written, the downstream already has the new names); when the stream reaches it
nothing runs.  The list lives in the table's checkpoint row (``TablePoint.folded``), so a
restart keeps both rules.
"""
from __future__ import annotations

import dataclasses

from coordinator.schema.split import combine_ddls
from worker.binlog import RowsTable
from worker.events import DDLEvent, Position
from worker.sync.checkpoint import CheckpointStore


def combined_event(ev: DDLEvent, folds: list[dict]) -> DDLEvent:
    """``ev`` (a statement handled whole) with the ``folds``' statements appended as clauses."""
    return dataclasses.replace(ev, query=combine_ddls(ev.query, [f["statement"] for f in folds]),
                               folds=tuple(folds), change=None, changes=1, rest=None)


def as_combined(store: CheckpointStore, ev: DDLEvent) -> DDLEvent:
    """``ev`` as its table's intent row says the lock asked to run it: combined with the later
    statements it names (``DDLIntent.record_combine``), or as it is."""
    tp = store.tables.get((ev.schema, ev.table)) if ev.table is not None and not ev.folds else None
    intent = tp.ddl_intent if tp is not None else None
    if not intent or not intent.get("combine") or not Position.from_json(intent["pos"]).same_point(ev.end):
        return ev
    return combined_event(ev, intent["combine"])


def skipped_folds(store: CheckpointStore, ev: DDLEvent) -> list | None:
    """``folded_after`` for a combined statement the operator skipped (``binlog skip``): its
    folded statements are still passed over (the tracked schema has them), but nothing ran
    downstream, so rows keep the names they were written with."""
    return folded_after(store, dataclasses.replace(ev, folds=tuple({**f, "renames": []} for f in ev.folds)))


def fold_at(store: CheckpointStore, ev: DDLEvent) -> dict | None:
    """The folded statement ``ev`` is (the table's list names its end position), or None."""
    tp = store.tables.get((ev.schema, ev.table)) if ev.table is not None else None
    if tp is None or not tp.folded:
        return None
    return next((f for f in tp.folded if Position.from_json(f["at"]).same_point(ev.end)), None)


def folded_after(store: CheckpointStore, ev: DDLEvent) -> list | None:
    """The table's folded list once ``ev`` is done: with ``ev``'s folds added (a combined
    statement), else None (unchanged)."""
    if not ev.folds or ev.table is None:
        return None
    tp = store.tables.get((ev.schema, ev.table))
    have = list(tp.folded) if tp is not None else []
    new = [f for f in ev.folds if f not in have]
    return sorted(have + new, key=lambda f: Position.from_json(f["at"]).key)


def through_folds(store: CheckpointStore, txns: list) -> list:
    """``txns`` (a chunk's ``[(position, changes)]``) with the columns of each table that has
    folded statements ahead of a row renamed as those statements rename them."""
    if not store.folding:
        return txns              # (every chunk comes here: nothing but this test when nothing is folded)
    folds = {k: [(Position.from_json(f["at"]), f.get("renames") or []) for f in store.tables[k].folded]
             for k in store.folding}
    out = []
    for pos, changes in txns:
        moved = []
        for kind, rt, rows in changes:
            fl = folds.get((rt.up_schema, rt.up_table))
            if fl:
                rt = _renamed(rt, [r for at, renames in fl if pos < at for r in renames])
            moved.append((kind, rt, rows))
        out.append((pos, type(changes)(moved)))
    return out


def _renamed(rt: RowsTable, renames: list) -> RowsTable:
    """``rt`` with each ``[old, new]`` applied to its column names in turn (case-insensitive, as
    MySQL compares column names)."""
    if not renames:
        return rt
    cols = list(rt.cols)
    for old, new in renames:
        cols = [new if isinstance(c, str) and c.lower() == old.lower() else c for c in cols]
    return rt._replace(cols=tuple(cols))
