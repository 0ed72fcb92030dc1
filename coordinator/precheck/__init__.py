"""Prechecks of a task before it starts (``shardctl check-task``, and ``start-task`` unless
``--skip-precheck``): DM's checker items, each ``success`` / ``warn`` / ``fail`` with how to fix
it.  The master runs them (it can reach the sources and the downstream); see docs/precheck.md.
"""
from .result import FAIL, SUCCESS, WARN, CheckItem, CheckReport
from .runner import run_prechecks

__all__ = ["CheckItem", "CheckReport", "run_prechecks", "SUCCESS", "WARN", "FAIL"]
