"""WorkerRegistration: a live worker process on its lease, and its etcd operations (DM's
``ha/worker.go``, ``ha/keepalive.go``)."""
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
class WorkerRegistration(Record):
    """A live worker process; the key is attached to the worker's lease and vanishes with it."""
    KIND: typing.ClassVar[str] = "worker"
    worker: str
    addr: str = ""
    started_at: str = ""
    # The source this worker was started with (``shardctl worker --source FILE``) and that
    # file's text: the master registers the source if it is unknown and prefers this worker
    # when the source needs a (new) binding.  Empty for a pool worker.
    source: str = ""
    source_yaml: str = ""
    revision: int = _meta()


class WorkerOps(_Base):
    """A worker registers itself; masters read the registrations."""

    # caller: worker (process start)
    def register_worker(self, reg: WorkerRegistration, ttl: int = 10) -> Lease:
        """PUT the registration on a new lease; returns the lease (refresh it to stay alive)."""
        lease = self._call("granting worker lease", self.client.lease, ttl)
        self._put(self.keys.key("worker", reg.worker), reg, lease=lease.id)
        return lease

    # caller: any master (service, cluster, transfer, binlog-schema)
    def list_workers(self) -> Listing[WorkerRegistration]:
        return self._list(WorkerRegistration, self.keys.key("worker"))
