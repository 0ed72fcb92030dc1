"""MasterRegistration: a live master process on its own lease, and its etcd operations (DM
lists every master in ``list-member``, not only the leader)."""
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .leader import Lease
from .record import Listing, Record, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


@dataclass
class MasterRegistration(Record):
    """A live master (leader or follower); the key is on the master's own lease, so it vanishes
    when the process dies.  ``addr`` is its gRPC address, ``http_addr`` its metrics/API one."""
    KIND: typing.ClassVar[str] = "master"
    member: str
    addr: str = ""
    http_addr: str = ""
    started_at: str = ""
    revision: int = _meta()


class MasterOps(_Base):
    """A master registers itself; any master lists them."""

    # caller: master (membership keepalive, coordinator/master/membership.py)
    def register_master(self, reg: MasterRegistration, ttl: int = 10) -> Lease:
        """PUT the registration on a new lease; returns the lease (refresh it to stay listed)."""
        lease = self._call("granting master lease", self.client.lease, ttl)
        self._put(self.keys.key("master", reg.member), reg, lease=lease.id)
        return lease

    # caller: any master (service ListMember, HTTP /api/v1/cluster/masters)
    def list_masters(self) -> Listing[MasterRegistration]:
        return self._list(MasterRegistration, self.keys.key("master"))
