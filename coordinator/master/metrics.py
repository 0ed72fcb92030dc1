"""Prometheus metrics of the master (served by ``coordinator.obs.ObsServer`` at /metrics)."""
from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

IS_LEADER = Gauge("shardmerge_master_is_leader", "1 while this master is the leader, else 0")
LEADER_CHANGES = Counter("shardmerge_master_leader_elected_total", "Times this master became leader")
LOCKS = Gauge("shardmerge_master_locks", "Shard DDL locks held by the leader, by state", ["state"])
INFOS = Counter("shardmerge_master_infos_handled_total",
                "Infos handled by the leader, by the stage of the Operation written", ["stage"])
OPERATION_LATENCY = Histogram("shardmerge_master_operation_latency_seconds",
                              "Time from receiving an Info event to writing its Operation",
                              buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
WRITE_BATCH = Histogram("shardmerge_master_write_batch_operations",
                        "Operations written per flush of a burst of lock events (1 = no batching)",
                        buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500))
REBUILDS = Counter("shardmerge_master_rebuilds_total", "Full lock rebuilds from etcd (election, lost watch)")
BAD_RECORDS = Counter("shardmerge_master_bad_records_total", "Undecodable etcd records seen by the leader")
BINDINGS = Gauge("shardmerge_master_bound_sources", "Sources bound to a live worker")
UNBOUND = Gauge("shardmerge_master_unbound_sources", "Sources with no live worker")

LOCK_AGE = Gauge("shardmerge_master_lock_age_seconds",
                 "Seconds since this leader first saw the shard DDL lock unresolved (reset by a leader change)",
                 ["task", "lock_id"])
LOCK_UNSYNCED = Gauge("shardmerge_master_lock_unsynced_tables",
                      "Shard tables the lock still waits for (not yet at the joined schema)", ["task", "lock_id"])
OLDEST_LOCK_AGE = Gauge("shardmerge_master_oldest_lock_age_seconds",
                        "Age of the oldest unresolved shard DDL lock, 0 when there is none")
SUBTASKS = Gauge("shardmerge_master_subtasks",
                 "Subtasks by the stage their worker last reported (1 per task and source, leader only)",
                 ["task", "source", "stage"])
TRANSFERS = Counter("shardmerge_master_source_transfers_total", "transfer-source requests applied")

LOCK_STATES = ("syncing", "conflict", "resolved", "error")
PRECHECKS = Counter("shardmerge_master_prechecks_total",
                    "Task prechecks run (check-task, start-task), by outcome: passed, warning, failed", ["outcome"])
