"""Leader duty: keep every source bound to one live worker.

Runs a reconcile at start (so bindings are repaired on every leader change), then
whenever a worker or source record changes (etcd watch) and every few seconds as a safety net.
The same periodic round refreshes the subtask-stage gauges (``gauges.SubtaskGauges``).
"""
from __future__ import annotations

import threading

from coordinator.etcdproto import Fence, Fenced, Store
from coordinator.obs import logger

from .cluster import Cluster
from .gauges import SubtaskGauges


class Binder:
    def __init__(self, store: Store, cluster: Cluster, fence: Fence, on_fenced, period: float = 3.0):
        self.store, self.cluster, self.fence, self.on_fenced = store, cluster, fence, on_fenced
        self.period = period
        self.wake = threading.Event()
        self._stop = threading.Event()
        self._watches: list[int] = []
        self._thread = threading.Thread(target=self._run, name="master-binder", daemon=True)
        self.log = logger("master.binder")
        self.subtask_gauges = SubtaskGauges()

    def start(self) -> "Binder":
        rev = self.store.revision()
        for kind in ("worker", "source"):
            try:
                self._watches.append(self.store.watch(kind, rev + 1, lambda _ev: self.wake.set()))
            except Exception as e:  # noqa: BLE001 — the periodic reconcile still runs
                self.log.warning("cannot watch records; relying on periodic reconcile", kind=kind, error=str(e))
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.wake.set()
        for w in self._watches:
            try:
                self.store.client.cancel_watch(w)
            except Exception:  # noqa: BLE001
                pass
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        self.subtask_gauges.clear()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.wake.clear()
            try:
                self.cluster.reconcile_bindings(self.fence)
            except Fenced as e:
                self.log.warning("binding write fenced; leadership lost", error=str(e))
                self.on_fenced()
                return
            except Exception as e:  # noqa: BLE001 — retry on the next round
                self.log.warning("reconciling bindings failed; will retry", error=str(e))
            try:
                self.subtask_gauges.update(self.store.list_tasks().items, self.store.list_status().items)
            except Exception as e:  # noqa: BLE001 — metrics only; the next round tries again
                self.log.warning("refreshing subtask gauges failed", error=str(e))
            self.wake.wait(self.period)
