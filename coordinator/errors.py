"""Typed errors shared by every part of shardmerge.

Each error carries the context an operator needs to act (lock ID, source, table, binlog
position, config file and key) and prints it after the message, so a log line or a CLI
error is actionable without a stack trace.
"""
from __future__ import annotations

_CONTEXT_ORDER = ("file", "key", "task", "lock_id", "source", "table", "position", "etcd_key", "worker")


class ShardMergeError(Exception):
    """Base of every error shardmerge raises on purpose."""

    def __init__(self, message: str, **context):
        super().__init__(message)
        self.message = message
        self.context = {k: v for k, v in context.items() if v not in (None, "")}

    def __str__(self) -> str:
        if not self.context:
            return self.message
        keys = [k for k in _CONTEXT_ORDER if k in self.context] + sorted(
            k for k in self.context if k not in _CONTEXT_ORDER)
        return f"{self.message} [" + ", ".join(f"{k}={self.context[k]}" for k in keys) + "]"

    def to_dict(self) -> dict:
        return {"error": type(self).__name__, "message": self.message, **{k: str(v) for k, v in self.context.items()}}


class ConfigError(ShardMergeError):
    """A task/source/process configuration is invalid; names the file and the key."""


class ConfigErrors(ConfigError):
    """Every error found in one configuration file, so that one run shows all that needs fixing
    (each item keeps its own key)."""

    def __init__(self, errors: list[ConfigError], file: str):
        self.errors = list(errors)
        lines = [f"{len(self.errors)} errors in {file}:"]
        for e in self.errors:
            key = e.context.get("key")
            lines.append(f"  - {e.message}" + (f" [key={key}]" if key else ""))
        super().__init__("\n".join(lines), file=file)


class TransientError(ShardMergeError):
    """Something that may succeed when retried (a connection dropped, a leader changed)."""
