"""Errors of the master's request handlers (``cluster``, ``locks``, ``optimist``, ``schema_ops``,
``transfer``, ``precheck_task``), mapped to a refusal by ``service``."""
from __future__ import annotations

from coordinator.errors import ShardMergeError


class RequestError(ShardMergeError):
    """A request the master refuses (unknown task/source, already running...); the message is
    what the CLI prints."""
