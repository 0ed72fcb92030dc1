"""LeaderRecord and Fence: master election on the leader key, and the fence every master write
carries (DM's ``election`` package)."""
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from etcd3 import transactions as T

from .errors import EtcdUnavailable
from .record import Record, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


@dataclass
class LeaderRecord(Record):
    """Value of the leader key (attached to the leader's lease)."""
    KIND: typing.ClassVar[str] = "leader"
    member: str
    addr: str = ""
    create_revision: int = _meta()


class Lease(Protocol):
    """What a fence needs of an etcd3 lease (etcd3 ships no type information)."""
    id: int

    def refresh(self) -> Any: ...
    def revoke(self) -> Any: ...


@dataclass(frozen=True)
class Fence:
    """Proof of leadership: the leader key's create revision at election.  Pass it to every
    master write.  ``lease`` is the etcd lease keeping the leader key alive (refresh it)."""
    revision: int
    member: str
    lease: Lease | None = None


class LeaderOps(_Base):
    """Campaign, read and give up the leader key."""

    # caller: any master (master/election.py)
    def campaign(self, member: str, addr: str = "", ttl: int = 10) -> Fence | None:
        """Try once to become leader: create the leader key on a new lease if it is absent.
        Returns the ``Fence`` (leader key's create revision) or None if someone else leads.
        The caller refreshes ``fence.lease`` more often than ``ttl`` seconds."""
        lease = self._call("granting leader lease", self.client.lease, ttl)
        key = self.keys.leader()
        ok, rev, _ = self._txn("campaigning", [T.Create(key) == 0],
                               [T.Put(key, LeaderRecord(member, addr).encode(), lease=lease.id)])
        if not ok:
            self._call("revoking unused lease", lease.revoke)
            return None
        return Fence(rev, member, lease)

    # caller: any master (election, service: who leads)
    def leader(self) -> LeaderRecord | None:
        resp = self._call("reading leader", self.client.get_response, self.keys.leader())
        if not resp.kvs:
            return None
        kv = resp.kvs[0]
        rec = LeaderRecord.decode(self.keys.leader(), kv.value, create_revision=kv.create_revision)
        return rec

    # caller: any master (leadership check; only tests call it today)
    def check_fence(self, fence: Fence) -> None:
        """Raise ``Fenced`` unless ``fence`` is still the current leadership."""
        self._fenced(fence, "checking leadership", [], [])

    # caller: master leader (master/election.py, on shutdown)
    def resign(self, fence: Fence) -> bool:
        """Delete the leader key if it is still ours; revoke the lease."""
        ok, _, _ = self._txn("resigning", [self._fence_cmp(fence)], [T.Delete(self.keys.leader())])
        if fence.lease is not None:
            try:
                self._call("revoking leader lease", fence.lease.revoke)
            except EtcdUnavailable:
                pass
        return ok
