"""SourceBinding: which worker runs a source, and its etcd operations (DM's ``ha/bound.go``)."""
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING

from etcd3 import transactions as T

from .leader import Fence
from .record import Listing, Record, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


@dataclass
class SourceBinding(Record):
    """Which worker runs a source (written by the master)."""
    KIND: typing.ClassVar[str] = "binding"
    source: str
    worker: str
    revision: int = _meta()


class BindingOps(_Base):
    """Written by the master leader (scheduler); read by masters and workers."""

    # caller: any master (service, cluster, transfer, binlog-schema), worker (process, binlog-schema)
    def list_bindings(self) -> Listing[SourceBinding]:
        return self._list(SourceBinding, self.keys.key("binding"))

    # caller: none in the tree today (tests); kept for symmetry with get_source/get_task
    def get_binding(self, source: str) -> SourceBinding | None:
        return self._get(SourceBinding, self.keys.key("binding", source))[0]

    # caller: master leader (cluster, transfer, fenced)
    def put_binding(self, fence: Fence, b: SourceBinding, expect_revision: int | None = None) -> bool:
        """Bind a source to a worker; with ``expect_revision`` only if the binding key still has
        that mod revision (0 = absent).  Returns False when that compare failed."""
        key = self.keys.key("binding", b.source)
        cmp = [] if expect_revision is None else [T.Mod(key) == expect_revision]
        ok, _, _ = self._fenced(fence, f"binding {b.source} to {b.worker}", cmp, [T.Put(key, b.encode())])
        return ok

    # caller: master leader (cluster, fenced)
    def delete_binding(self, fence: Fence, source: str) -> int:
        _, rev, _ = self._fenced(fence, f"unbinding {source}", [], [T.Delete(self.keys.key("binding", source))])
        return rev
