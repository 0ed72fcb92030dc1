"""Leader election of masters on etcd: one leader key on a lease.

A master campaigns by creating the leader key (``Store.campaign``); the key's create revision
is its ``Fence``, which every leader write carries, so a master whose lease expired can never
overwrite state even if it has not noticed yet.  The loop polls: a follower re-campaigns when the
key is gone (it looks every 0.1 s: one single-key read), a leader refreshes its lease and checks the
key is still its own every TTL/3.  Takeover after a leader dies therefore takes at most one TTL
plus 0.1 s, plus the new leader's lock rebuild (``bench/master_failover.py``).
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from coordinator.etcdproto import EtcdUnavailable, Fence, Fenced, LeaderRecord, Store
from coordinator.obs import logger
from coordinator.retry import is_transient

from . import metrics


class Election:
    """Runs the campaign loop on a thread and calls ``on_elected(fence)`` / ``on_deposed()``
    (from that thread, never concurrently)."""

    def __init__(self, store: Store, member: str, addr: str, ttl: int,
                 on_elected: Callable[[Fence], None], on_deposed: Callable[[], None]):
        self.store, self.member, self.addr, self.ttl = store, member, addr, max(1, int(ttl))
        self.on_elected, self.on_deposed = on_elected, on_deposed
        self.poll = min(1.0, self.ttl / 3)        # leader: lease refresh
        self.follow_poll = 0.1                    # follower: is the leader key gone?
        self.fence: Fence | None = None
        self.leader: LeaderRecord | None = None     # last seen leader (self or other)
        self.etcd_ok = False
        self.etcd_error = ""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="master-election", daemon=True)
        self.log = logger("master.election", member=member)

    # ------------------------------------------------------------------ public
    def start(self) -> "Election":
        self._thread.start()
        return self

    def stop(self, resign: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        if resign and self.fence is not None:
            fence, self.fence = self.fence, None
            try:
                self.store.resign(fence)
            except Exception as e:  # noqa: BLE001 — the lease expires anyway
                self.log.warning("resign failed; the leader key expires with its lease", error=str(e))
            self.on_deposed()

    @property
    def is_leader(self) -> bool:
        return self.fence is not None

    def leader_addr(self) -> str:
        return self.leader.addr if self.leader else ""

    def leader_name(self) -> str:
        return self.leader.member if self.leader else ""

    def lost(self) -> None:
        """A fenced write failed: give up leadership now instead of at the next poll."""
        self._wake.set()
        self._lost = True

    # ------------------------------------------------------------------ loop
    _lost = False

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.fence is None:
                    self._follow()
                else:
                    self._keep()
                self.etcd_ok, self.etcd_error = True, ""
            except (EtcdUnavailable, Fenced, Exception) as e:  # noqa: BLE001 — the loop must survive
                # raw client calls (lease refresh) raise etcd3's own errors, not EtcdUnavailable
                self.etcd_ok = not (isinstance(e, EtcdUnavailable) or is_transient(e))
                self.etcd_error = str(e)
                self.log.warning("election round failed", error=str(e))
                if self.fence is not None and not self._lease_alive():
                    self._depose("lease could not be refreshed")
            self._wake.wait(self.poll if self.fence is not None else self.follow_poll)
            self._wake.clear()

    def _follow(self) -> None:
        cur = self.store.leader()
        if cur is None:
            fence = self.store.campaign(self.member, self.addr, self.ttl)
            if fence is not None:
                self._lost = False
                self.fence = fence
                self._refreshed = time.monotonic()
                self.leader = LeaderRecord(self.member, self.addr, create_revision=fence.revision)
                metrics.IS_LEADER.set(1)
                metrics.LEADER_CHANGES.inc()
                self.log.info("elected leader", fence=fence.revision, addr=self.addr)
                try:
                    self.on_elected(fence)
                except Exception as e:  # noqa: BLE001 — a failed start must give up leadership
                    self.log.error("starting leader duties failed; resigning", error=str(e))
                    self._resign()
                return
            cur = self.store.leader()
        if (self.leader is None) != (cur is None) or (cur and self.leader and cur.member != self.leader.member):
            self.log.info("leader changed", leader=cur.member if cur else "", leader_addr=cur.addr if cur else "")
        self.leader = cur

    _refreshed = 0.0

    def _keep(self) -> None:
        fence = self.fence
        if fence is None:        # deposed meanwhile (the next round follows)
            return
        if self._lost:
            self._depose("a fenced write was refused")
            return
        if fence.lease is None:  # campaign() always grants one
            self._depose("leader fence without a lease")
            return
        resp = list(self.store.client.refresh_lease(fence.lease.id))
        if not resp or resp[0].TTL <= 0:
            self._depose("leader lease expired")
            return
        self._refreshed = time.monotonic()
        cur = self.store.leader()
        if cur is None or cur.create_revision != fence.revision:
            self._depose(f"leader key now belongs to {cur.member if cur else 'nobody'}")
            self.leader = cur

    def _lease_alive(self) -> bool:
        return time.monotonic() - self._refreshed < self.ttl

    def _depose(self, why: str) -> None:
        self.log.warning("lost leadership", reason=why)
        self.fence = None
        self.leader = None
        metrics.IS_LEADER.set(0)
        try:
            self.on_deposed()
        except Exception as e:  # noqa: BLE001
            self.log.error("stopping leader duties failed", error=str(e))

    def _resign(self) -> None:
        fence = self.fence
        self._depose("resigned")
        if fence is not None:
            try:
                self.store.resign(fence)
            except Exception:  # noqa: BLE001
                pass
