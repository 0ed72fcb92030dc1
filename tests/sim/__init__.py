"""Deterministic simulation of the shard-DDL protocol (docs/lock-algorithm.md, "Invariants").

The real lock engine (``coordinator.lock``) and the real worker decision (``worker.shardddl.
decision``) run against an in-memory etcd with revisions and the guards of the real ``Store``
(``store.SimStore``), a model of the downstream table's schema, and workers that follow the real
handler's steps (put Info, wait, hold, replay, execute, mark done, advance the checkpoint).  A
seeded scheduler interleaves shard DDLs with master crashes (rebuild from etcd), worker kills,
broken watches, duplicated deliveries and operator exits; the invariants are checked after every
step.  ``python -m tests.sim --seeds N`` runs long; ``tests/sim/test_sim.py`` runs a bounded
budget in CI.
"""
