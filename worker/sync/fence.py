"""Fenced writers: a worker that lost its source to another can never write downstream.

A worker cut off from etcd (a partition, a long GC or SIGSTOP) may still be finishing a batch
while the master has bound its source to another worker.  Each subtask runs with its binding's
*epoch* (the binding key's etcd mod revision: every re-binding raises it).  The epoch is stored
on the source's global checkpoint row (``writer_epoch``):

* at start the subtask **claims** the row: it writes its epoch unless a higher one is there
  (then it is the stale one: :class:`FencedOut`, nothing written);
* every downstream transaction of the subtask (each apply partition, checkpoint flush,
  safe-until and DDL-intent write) reads the row's epoch *in the same transaction*
  (``LOCK IN SHARE MODE``; an apply does it last, just before its commit, so the row is
  share-locked only for that instant) and rolls back on a different one.  The claim takes the
  row's exclusive lock: an old transaction past its check commits first (it ran before the
  claim), every other one sees the new epoch and rolls back;
* a DDL cannot share a transaction (MariaDB commits around it): the epoch is checked just before
  it.  A stale DDL could slip between that check and a claim; the new writer then meets it
  "already in effect" (checkpoint rule 8).

Epoch 0 (tests, tools that run a syncer by hand) turns fencing off.

Not fenced: the full load's chunk writes (a re-bound load restarts from its own chunk
checkpoints; a stale chunk write rewrites the same rows) and the online-DDL table.  A writer
frozen *inside* a transaction keeps its row locks until the downstream drops its connection: the
new writer then waits on them (as with any stuck client), it cannot write past them.
"""
from __future__ import annotations

from worker.sync.errors import SyncError


class FencedOut(SyncError):
    """The source is bound to a newer writer (a higher epoch is stored): this one stops writing."""


FENCE_COLUMN = "writer_epoch"
# the source's global checkpoint row by its whole unique key (id, cp_schema, cp_table): a lookup
# by ``id`` and ``is_global`` alone scans, and share-locks, every table row of the source in every
# apply transaction (thousands of rows for a source of thousands of shard tables)
GLOBAL_ROW = "id = %s AND cp_schema = '' AND cp_table = '' AND is_global = 1"


def check_fence(cur, fq: str, source_id: str, epoch: int, *, lock: str = "LOCK IN SHARE MODE") -> None:
    """Raise :class:`FencedOut` unless the stored epoch of ``source_id`` is ``epoch`` (0: no-op).
    Runs inside the caller's transaction so the write it guards lands only under this epoch."""
    if not epoch:
        return
    cur.execute(f"SELECT {FENCE_COLUMN} FROM {fq} WHERE {GLOBAL_ROW} {lock}", (source_id,))
    row = cur.fetchone()
    stored = int(row[0]) if row else 0
    if stored != epoch:
        raise FencedOut(f"source {source_id} is written by a newer binding now (epoch {stored} stored, this "
                        f"writer has {epoch}); this worker lost the source and writes nothing more",
                        source=source_id)
