"""Failure injection into the syncer (tests): stop it at an exact point, like a killed process."""
from __future__ import annotations

from dataclasses import dataclass


class SimulatedCrash(Exception):
    """Raised by test hooks to stop the syncer at an exact point, like a killed process."""


@dataclass
class Hooks:
    """Failure-injection points (tests): each is called with a small dict and may raise."""
    after_apply: callable = None        # DML of a segment committed, checkpoint not yet advanced
    after_ddl_execute: callable = None  # DDL executed downstream, checkpoint not yet advanced
    after_flush: callable = None        # a checkpoint flush completed

    def fire(self, name: str, info: dict) -> None:
        fn = getattr(self, name)
        if fn is not None:
            fn(info)
