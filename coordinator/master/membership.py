"""This master's entry in ``list-member``: its registration on its own lease, kept alive.

Leader or follower, every master is listed (DM lists every master).  The registration is
separate from the leader key: a follower has no leader lease, and losing it must not touch the
election.  A lease lost to an etcd restart or a long pause is registered again at the next round.
"""
from __future__ import annotations

import threading
import time

from coordinator.etcdproto import MasterRegistration, Store
from coordinator.etcdproto.leader import Lease
from coordinator.obs import logger


class Membership:
    def __init__(self, store: Store, member: str, addr: str, http_addr: str, ttl: int):
        self.store, self.ttl = store, max(1, int(ttl))
        self.reg = MasterRegistration(member=member, addr=addr, http_addr=http_addr,
                                      started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.lease: Lease | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="master-membership", daemon=True)
        self.log = logger("master.membership", member=member)

    def start(self) -> "Membership":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        lease, self.lease = self.lease, None
        if lease is not None:
            try:
                lease.revoke()          # leave the list now rather than after the TTL
            except Exception:  # noqa: BLE001 — the key expires with its lease anyway
                pass

    def _run(self) -> None:
        failing = False
        while True:
            try:
                self._round()
                if failing:
                    self.log.info("master registration restored")
                failing = False
            except Exception as e:  # noqa: BLE001 — etcd away: try again next round
                if not failing:
                    self.log.warning("master registration failed; retrying", error=str(e))
                failing, self.lease = True, None
            if self._stop.wait(self.ttl / 3):
                return

    def _round(self) -> None:
        if self.lease is not None:
            resp = list(self.store.client.refresh_lease(self.lease.id))
            if resp and resp[0].TTL > 0:
                return
            self.lease = None        # expired (etcd restarted, or the process was paused): register again
        self.lease = self.store.register_master(self.reg, self.ttl)
