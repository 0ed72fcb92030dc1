"""``transfer-source SOURCE WORKER``: move a source's binding to another worker by hand.

DM's rules (dmctl transfer-source): the source must exist; the worker must be online and *free*
(bound to no source); a source whose running subtasks are still in the full load (units Dump or
Load) is not moved.  Unlike DM, naming the worker the source is already bound to is refused (DM
returns success doing nothing); the command only reports success when the binding moved.

No pause/resume round trip is needed (DM pauses on the old worker, re-binds, resumes on the new
one): the binding write itself is the hand-over.  The old worker sees the binding go, stops its
subtasks between micro-batches (checkpoints flushed); the new worker starts them from the
checkpoints in the downstream under the new binding's epoch (``worker.sync.fence``), so a batch
the old one is still finishing can no longer commit — nothing is written twice or lost.  The
write compares the binding's revision, so a concurrent re-binding (a worker died meanwhile)
makes the command fail with nothing changed.
"""
from __future__ import annotations

from coordinator.etcdproto import Fence, SourceBinding

from . import metrics
from .cluster import Cluster, CommandResult
from .errors import RequestError

LOADING_UNITS = ("Dump", "Load")


def transfer_source(cluster: Cluster, fence: Fence, source: str, worker: str) -> CommandResult:
    store = cluster.store
    if not source or not worker:
        raise RequestError("transfer-source needs a SOURCE and a WORKER: shardctl transfer-source SOURCE WORKER")
    known = sorted(s.source for s in store.list_sources().items)
    if source not in known:
        raise RequestError(f"source {source!r} not found; registered sources: {', '.join(known) or 'none'} "
                           "(`shardctl operate-source show`)", source=source)
    live = sorted(w.worker for w in store.list_workers().items)
    if worker not in live:
        raise RequestError(f"worker {worker!r} is not online (no live registration in etcd); online workers: "
                           f"{', '.join(live) or 'none'} (`shardctl list-member`)", worker=worker)
    bindings = store.list_bindings().items
    cur = next((b for b in bindings if b.source == source), None)
    if cur is not None and cur.worker == worker:
        raise RequestError(f"source {source!r} is already bound to worker {worker!r}; nothing to transfer",
                           source=source, worker=worker)
    busy = sorted(b.source for b in bindings if b.worker == worker)
    if busy:
        raise RequestError(f"worker {worker!r} is not free: it is bound to source(s) {', '.join(busy)}; "
                           "transfer-source needs a free worker (start one, or transfer its source away first)",
                           source=source, worker=worker)
    loading = _loading_subtasks(cluster, source)
    if loading:
        raise RequestError(f"source {source!r} has subtasks still in the full load ({', '.join(loading)}); "
                           "transfer-source moves a source only while its subtasks replicate the binlog (unit "
                           "Sync): wait for the load to finish (`shardctl query-status`)", source=source)
    if not store.put_binding(fence, SourceBinding(source, worker), expect_revision=cur.revision if cur else 0):
        raise RequestError(f"the binding of source {source!r} changed while transferring it (a worker came or "
                           "went); nothing was changed, look at `shardctl operate-source show` and retry",
                           source=source, worker=worker)
    metrics.TRANSFERS.inc()
    was = cur.worker if cur else "no worker"
    cluster.log.info("source transferred", source=source, worker=worker, previous=was)
    return CommandResult(True, f"source {source} transferred from {was} to {worker}; its subtasks continue "
                               f"there from their checkpoints", [(source, True, "")])


def _loading_subtasks(cluster: Cluster, source: str) -> list[str]:
    """``task (unit)`` of each running subtask of ``source`` whose status says full load."""
    out = []
    status = {(s.task, s.source): s for s in cluster.store.list_status().items}
    for t in cluster.store.list_tasks().items:
        if source not in t.sources or t.stage_of(source) != "running":
            continue
        st = status.get((t.task, source))
        unit = (st.detail or {}).get("unit") if st is not None else None
        if st is not None and st.stage not in ("Finished", "Stopped") and unit in LOADING_UNITS:
            out.append(f"{t.task} ({unit})")
    return out
