"""Gauges the alert rules need, derived by the leader from state it already holds.

* Lock gauges (``LockGauges``): counts by state, and per lock its age and the tables it still
  waits for, so "a lock waits for more than N minutes" is alertable.  The age counts from when
  *this* leader first saw the lock (a leader change restarts it: the lock's first Info carries no
  wall-clock time), which errs on the side of alerting later, never falsely.
* Subtask gauges (``SubtaskGauges``): one series per task and source, labelled with the stage
  its worker last wrote to etcd (the records query-status reads), so "a subtask is in Error" is
  alertable even when the worker that wrote it is gone.

Only the leader sets them; ``clear`` drops every series when leadership ends, so a follower never
exports stale values.
"""
from __future__ import annotations

import time
from collections.abc import Iterable

from . import metrics


class LockGauges:
    def __init__(self) -> None:
        self._first_seen: dict[tuple[str, str], float] = {}

    def update(self, views: Iterable, now: float | None = None) -> None:
        """``views``: the keeper's ``LockSummary``s (ID, task, state, unsynced: a count)."""
        now = time.time() if now is None else now
        counts = dict.fromkeys(metrics.LOCK_STATES, 0)
        seen = set()
        for v in views:
            counts[v.state] = counts.get(v.state, 0) + 1
            key = (v.task, v.ID)
            seen.add(key)
            first = self._first_seen.setdefault(key, now)
            metrics.LOCK_AGE.labels(*key).set(round(now - first, 1))
            metrics.LOCK_UNSYNCED.labels(*key).set(v.unsynced)
        for s, n in counts.items():
            metrics.LOCKS.labels(state=s).set(n)
        for key in set(self._first_seen) - seen:
            self._forget(key)
        metrics.OLDEST_LOCK_AGE.set(round(now - min(self._first_seen.values()), 1) if self._first_seen else 0)

    def _forget(self, key: tuple[str, str]) -> None:
        del self._first_seen[key]
        for g in (metrics.LOCK_AGE, metrics.LOCK_UNSYNCED):
            try:
                g.remove(*key)
            except KeyError:
                pass

    def clear(self) -> None:
        for key in list(self._first_seen):
            self._forget(key)
        for s in metrics.LOCK_STATES:
            metrics.LOCKS.labels(state=s).set(0)
        metrics.OLDEST_LOCK_AGE.set(0)


class SubtaskGauges:
    def __init__(self) -> None:
        self._series: set[tuple[str, str, str]] = set()

    def update(self, tasks: Iterable, statuses: Iterable) -> None:
        """``tasks``: TaskRecords (which subtasks exist); ``statuses``: SubtaskStatus records.
        A subtask without a status yet counts as ``New`` (as query-status shows it)."""
        stage = {(s.task, s.source): s.stage or "New" for s in statuses}
        want = {(t.task, src, stage.get((t.task, src), "New")) for t in tasks for src in t.sources}
        for key in self._series - want:
            metrics.SUBTASKS.remove(*key)
        for key in want:
            metrics.SUBTASKS.labels(*key).set(1)
        self._series = want

    def clear(self) -> None:
        self.update((), ())
