"""The master's alerting gauges (pure logic on the real prometheus_client registry): lock age and
unsynced tables per lock, removed when the lock goes; one subtask series per task and source,
labelled with its stage, moved when the stage changes and removed with the task."""
from __future__ import annotations

from types import SimpleNamespace as NS

from prometheus_client import REGISTRY

from coordinator.etcdproto import SubtaskStatus, TaskRecord
from coordinator.master.gauges import LockGauges, SubtaskGauges


def value(name: str, **labels) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def lock(task: str, lid: str, state: str = "syncing", unsynced=("t2",)):
    return NS(task=task, ID=lid, state=state, unsynced=len(unsynced))


def test_lock_age_counts_from_first_sight_and_series_go_with_the_lock():
    g = LockGauges()
    g.update([lock("gt", "gt-a")], now=1000.0)
    g.update([lock("gt", "gt-a"), lock("gt", "gt-b", "conflict", ("x", "y"))], now=1300.0)
    assert value("shardmerge_master_lock_age_seconds", task="gt", lock_id="gt-a") == 300.0
    assert value("shardmerge_master_lock_age_seconds", task="gt", lock_id="gt-b") == 0.0
    assert value("shardmerge_master_lock_unsynced_tables", task="gt", lock_id="gt-b") == 2.0
    assert value("shardmerge_master_oldest_lock_age_seconds") == 300.0
    assert value("shardmerge_master_locks", state="conflict") == 1.0
    g.update([lock("gt", "gt-b", "conflict")], now=1400.0)        # gt-a resolved
    assert value("shardmerge_master_lock_age_seconds", task="gt", lock_id="gt-a") is None
    assert value("shardmerge_master_oldest_lock_age_seconds") == 100.0
    g.clear()                                                       # leadership lost
    assert value("shardmerge_master_lock_age_seconds", task="gt", lock_id="gt-b") is None
    assert value("shardmerge_master_oldest_lock_age_seconds") == 0.0
    assert value("shardmerge_master_locks", state="conflict") == 0.0


def test_subtask_series_follow_the_reported_stage():
    g = SubtaskGauges()
    task = TaskRecord("gs", "name: gs", ["s1", "s2"])
    g.update([task], [SubtaskStatus("gs", "s1", "Running")])
    assert value("shardmerge_master_subtasks", task="gs", source="s1", stage="Running") == 1.0
    assert value("shardmerge_master_subtasks", task="gs", source="s2", stage="New") == 1.0   # no status yet
    g.update([task], [SubtaskStatus("gs", "s1", "Error"), SubtaskStatus("gs", "s2", "Running")])
    assert value("shardmerge_master_subtasks", task="gs", source="s1", stage="Error") == 1.0
    assert value("shardmerge_master_subtasks", task="gs", source="s1", stage="Running") is None
    g.update([], [SubtaskStatus("gs", "s1", "Error")])             # task stopped (a stale status left)
    assert value("shardmerge_master_subtasks", task="gs", source="s1", stage="Error") is None
