"""Typed refusals of a preview; each names the input and says what to give instead."""
from __future__ import annotations

from coordinator.errors import ShardMergeError


class PreviewError(ShardMergeError):
    """A ddl-preview request that cannot be answered."""


class BadStatement(PreviewError):
    """The statement does not parse, or is not a kind a shard lock coordinates."""


class TableNotInTask(PreviewError):
    """The statement's table is neither a target nor a routed shard table of the task, or the
    shard filters leave no table."""


class TaskNotRunning(PreviewError):
    """The task is not started (no config in etcd) or all its subtasks are paused."""


class BadPlan(PreviewError):
    """A ``--plan`` file that cannot be read: names the file, the step and the field."""
