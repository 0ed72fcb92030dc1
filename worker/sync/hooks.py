"""Failure injection into the syncer (tests): stop it at an exact point, like a killed process."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

Hook = Callable[[dict[str, Any]], None]    # called with a small dict; may raise (e.g. SimulatedCrash)


class SimulatedCrash(Exception):
    """Raised by test hooks to stop the syncer at an exact point, like a killed process."""


@dataclass
class Hooks:
    """Failure-injection points (tests): each is called with a small dict and may raise."""
    after_apply: Hook | None = None        # DML of a segment committed, checkpoint not yet advanced
    after_ddl_execute: Hook | None = None  # DDL executed downstream, checkpoint not yet advanced
    after_flush: Hook | None = None        # a checkpoint flush completed

    def fire(self, name: str, info: dict[str, Any]) -> None:
        fn: Hook | None = getattr(self, name)
        if fn is not None:
            fn(info)
