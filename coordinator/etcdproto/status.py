"""SubtaskStatus: what a worker reports for query-status, and its etcd operations."""
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .record import Listing, Record, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


@dataclass
class SubtaskStatus(Record):
    """What a worker reports for query-status: stage, positions, blocking DDL info.  ``detail`` is
    free-form JSON (binlog positions, lag, last error) owned by the worker."""
    KIND: typing.ClassVar[str] = "status"
    task: str
    source: str
    stage: str
    worker: str = ""
    block_ddl_owner: str = ""
    conflict_msg: str = ""
    detail: dict = field(default_factory=dict)
    updated_at: str = ""
    revision: int = _meta()


class StatusOps(_Base):
    """Written by the worker (on its lease); read by masters and workers."""

    # caller: worker (worker/status.py)
    def put_status(self, st: SubtaskStatus, lease: Any = None) -> int:
        return self._put(self.keys.key("status", st.task, st.source), st, lease=lease)

    # caller: any master (cluster, binder, transfer, binlog-schema), worker (process)
    def list_status(self, task: str | None = None) -> Listing[SubtaskStatus]:
        return self._list(SubtaskStatus, self.keys.key("status", *([task] if task else [])))
