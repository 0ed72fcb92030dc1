"""SourceRecord: a registered upstream source's config, and its etcd operations (DM's
``ha/source.go``)."""
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
class SourceRecord(Record):
    """A registered upstream source: its YAML config text (parsed by coordinator.config)."""
    KIND: typing.ClassVar[str] = "source"
    source: str
    yaml: str
    # what the master's check saw when the source was registered or updated ("" for a source a
    # worker registered from its --source-file, or one registered before checks were recorded)
    checked: str = ""
    revision: int = _meta()


class SourceOps(_Base):
    """Written by the master leader (operate-source); read by masters and workers."""

    # caller: any master (cluster view, transfer)
    def list_sources(self) -> Listing[SourceRecord]:
        return self._list(SourceRecord, self.keys.key("source"))

    # caller: any master (cluster, precheck), worker (process start)
    def get_source(self, source: str) -> SourceRecord | None:
        return self._get(SourceRecord, self.keys.key("source", source))[0]

    # caller: master leader (operate-source create, fenced)
    def put_source(self, fence: Fence, cfg: SourceRecord) -> int:
        _, rev, _ = self._fenced(fence, f"registering source {cfg.source}", [],
                                 [T.Put(self.keys.key("source", cfg.source), cfg.encode())])
        return rev

    # caller: master leader (operate-source stop, fenced)
    def delete_source(self, fence: Fence, source: str) -> int:
        _, rev, _ = self._fenced(fence, f"removing source {source}", [],
                                 [T.Delete(self.keys.key("source", source)),
                                  T.Delete(self.keys.key("binding", source))])
        return rev
