"""Failpoints for fault tests (DM's tests use the same idea): named places in the code where a
test can make a process pause, through the environment of the process it starts:

    SHARDMERGE_FAILPOINTS="apply-before-commit=sleep:6"

Unset (always, outside tests) a failpoint costs one dict lookup.  Spark's Python workers inherit
the environment of the worker process that starts them.
"""
from __future__ import annotations

import os
import time

from coordinator.errors import ConfigError

ENV = "SHARDMERGE_FAILPOINTS"


def _parse(text: str) -> dict[str, float]:
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, _, action = item.partition("=")
        kind, _, arg = action.partition(":")
        if kind != "sleep":
            raise ConfigError(f"{ENV}: failpoint {item!r}: only `name=sleep:SECONDS` is supported", key=ENV)
        try:
            out[name.strip()] = float(arg)
        except ValueError:
            raise ConfigError(f"{ENV}: failpoint {item!r}: {arg!r} is not a number of seconds", key=ENV) from None
    return out


_ACTIVE = _parse(os.environ.get(ENV, ""))


def failpoint(name: str) -> None:
    """Pause here if the environment armed ``name``."""
    secs = _ACTIVE.get(name)
    if secs:
        time.sleep(secs)
