"""TaskRecord: a started task's config, sources and desired stage, and its etcd operations (DM's
``ha/subtask.go`` and ``ha/stage.go``)."""
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from etcd3 import transactions as T
from etcd3 import utils as eu

from .leader import Fence
from .record import Listing, Record, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


TASK_STAGES = ("running", "paused", "stopped")


@dataclass
class TaskRecord(Record):
    """A started task: its YAML config text, the sources it runs on and its desired stage.

    ``stage`` (running / paused / stopped) is the desired stage of every source, except those
    listed in ``source_stages`` (format v2: ``pause-task -s``), which override it per source.
    A record without overrides is still written as v1, so older workers keep reading whole-task
    pauses; a per-source override is v2, which an older reader cannot decode (``UnknownVersion``):
    it then runs none of the task's subtasks rather than a source that was paused.  Every write gets a new etcd
    revision: a worker restarts a subtask that stopped on an error when the revision changes
    (that is how ``resume-task`` restarts it)."""
    KIND: typing.ClassVar[str] = "task"
    VERSION: typing.ClassVar[int] = 2
    task: str
    yaml: str
    sources: list[str] = field(default_factory=list)
    stage: str = "running"
    source_stages: dict = field(default_factory=dict)   # v2: source -> stage, only where != stage
    revision: int = _meta()

    def validate(self) -> None:
        for where, st in [("stage", self.stage)] + [(f"source_stages[{s!r}]", v)
                                                     for s, v in self.source_stages.items()]:
            if st not in TASK_STAGES:
                raise ValueError(f"{where} is {st!r}, expected one of {', '.join(TASK_STAGES)}")

    def to_dict(self) -> dict:
        d = super().to_dict()
        if not self.source_stages:           # nothing v2-only: stay readable by v1 readers
            d["v"] = 1
            del d["source_stages"]
        return d

    def stage_of(self, source: str) -> str:
        """Desired stage of ``source``'s subtask."""
        return self.source_stages.get(source, self.stage)

    def with_stages(self, stages: dict[str, str], sources: list[str] | None = None) -> "TaskRecord":
        """A copy whose sources are ``sources`` (default: the same) with the desired stages of
        ``stages`` applied (sources not named keep theirs; new sources default to running);
        stored compactly: one ``stage`` when all agree, overrides only for the exceptions."""
        srcs = list(self.sources if sources is None else sources)
        eff = {s: stages.get(s, self.stage_of(s) if s in self.sources else "running") for s in srcs}
        values = set(eff.values())
        base = values.pop() if len(values) == 1 else ("running" if "running" in values else self.stage)
        if not eff:
            base = self.stage
        return TaskRecord(self.task, self.yaml, srcs, base, {s: v for s, v in sorted(eff.items()) if v != base})


class TaskOps(_Base):
    """Written by the master leader (start/pause/resume/stop-task); read by masters and workers."""

    # caller: any master (cluster, binder, transfer), worker (process: which subtasks to run)
    def list_tasks(self) -> Listing[TaskRecord]:
        return self._list(TaskRecord, self.keys.key("task"))

    # caller: any master (cluster, locks, checkpoint schema), worker (binlog-schema)
    def get_task(self, task: str) -> TaskRecord | None:
        return self._get(TaskRecord, self.keys.key("task", task))[0]

    # caller: master leader (start/pause/resume-task, fenced)
    def put_task(self, fence: Fence, cfg: TaskRecord) -> int:
        _, rev, _ = self._fenced(fence, f"writing task {cfg.task}", [],
                                 [T.Put(self.keys.key("task", cfg.task), cfg.encode())])
        return rev

    # caller: master leader (stop-task, fenced)
    def delete_task_config(self, fence: Fence, task: str) -> int:
        p = self.keys.key("status", task)
        _, rev, _ = self._fenced(fence, f"removing task {task}", [],
                                 [T.Delete(self.keys.key("task", task)),
                                  T.Delete(p, eu.prefix_range_end(eu.to_bytes(p)))])
        return rev
