"""Every DM-derived scenario in one list: ``dm_cases.py`` plus each module of ``cases/``."""
from __future__ import annotations

import importlib
import pkgutil

from . import cases, dm_cases
from .case import Case


def _modules() -> list:
    return [dm_cases] + [importlib.import_module(f"{cases.__name__}.{m.name}")
                         for m in sorted(pkgutil.iter_modules(cases.__path__), key=lambda m: m.name)]


CASES: tuple[Case, ...] = tuple(c for m in _modules() for c in m.CASES)
PENDING: tuple[Case, ...] = tuple(c for m in _modules() for c in getattr(m, "PENDING", ()))   # not run, not counted
NOT_APPLICABLE: dict[str, str] = {k: v for m in _modules() for k, v in getattr(m, "NOT_APPLICABLE", {}).items()}

_all = CASES + PENDING
_dupes = sorted({c.name for c in _all if sum(d.name == c.name for d in _all) > 1})
if _dupes:
    raise ValueError(f"tests/scenarios: scenario names used twice: {_dupes} (each case needs its own name)")
