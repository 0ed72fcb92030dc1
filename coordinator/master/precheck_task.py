"""The master's side of the prechecks: the task's sources come from their registered configs
in etcd (the master, like DM's, is what can reach every source), then
``coordinator.precheck.run_prechecks`` runs; start-task refuses on a failed check."""
from __future__ import annotations

import threading

from coordinator.config import SourceConfig, TaskConfig, parse_source
from coordinator.errors import ConfigError
from coordinator.etcdproto import Store
from coordinator.precheck import FAIL, WARN, CheckItem, CheckReport, run_prechecks

from . import metrics
from .errors import RequestError


def registered_sources(store: Store, names: list[str]) -> dict[str, SourceConfig]:
    out = {}
    for name in names:
        rec = store.get_source(name)
        if rec is None:
            raise RequestError(f"source {name!r} is not registered; run `shardctl operate-source create "
                               f"SOURCE.yaml` first", source=name)
        try:
            out[name] = parse_source(rec.yaml, f"<registered source {name}>")
        except ConfigError as e:
            raise RequestError(f"the registered config of source {name!r} is invalid: {e}", source=name) from None
    return out


# Prechecks connect to every source and the downstream; one that hangs (a host that accepts and
# never answers) holds its gRPC thread for the connect timeout.  At most this many run at once,
# so the rest of the master's 8 gRPC threads stay free for query-status and the lock commands; a
# check beyond the limit is answered at once, not queued.
CONCURRENT_PRECHECKS = 2
_SLOTS = threading.BoundedSemaphore(CONCURRENT_PRECHECKS)


def precheck(store: Store, cfg: TaskConfig, sources: list[str]) -> CheckReport:
    if not _SLOTS.acquire(blocking=False):
        raise RequestError(f"{CONCURRENT_PRECHECKS} prechecks are running already (a source or the downstream may be "
                           f"slow to answer); retry in a moment", task=cfg.name)
    try:
        report = run_prechecks(cfg, registered_sources(store, sources), sources)
    finally:
        _SLOTS.release()
    metrics.PRECHECKS.labels("failed" if not report.passed else "warning" if report.count(WARN) else "passed").inc()
    return report


def with_config_warnings(report: CheckReport, cfg: TaskConfig) -> CheckReport:
    """check-task's report with the task file's own warnings as one item (keys with no effect,
    a validator that does not run...): start-task prints them with its answer, so check-task
    must count them too, or it says "0 warning" where start-task warns."""
    if cfg.warnings:
        it = CheckItem("task_config", "check whether every key of the task file has an effect in shardmerge")
        for w in cfg.warnings:
            it.problem(WARN, w, "remove the key, or accept that it does nothing here")
        report.items.append(it)
    return report


def refusal(report: CheckReport, task: str) -> str:
    """start-task's message when a check failed."""
    return "\n".join([f"task {task!r} not started: {report.summary_line()}", *report.problems(FAIL),
                      *(f"(warning) {w}" for w in report.problems(WARN)),
                      "fix the failed checks (`shardctl check-task TASK.yaml` shows them all), or start "
                      "with --skip-precheck to start anyway"])


def warnings(report: CheckReport) -> list[str]:
    return [f"pre-check warning: {w}" for w in report.problems(WARN)]
