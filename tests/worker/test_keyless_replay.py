"""Checkpoint rule 10: a table without any key is replayed exactly after a crash between the
apply and the checkpoint flush, even with legitimately identical rows (real MariaDB, real Spark
for the bulk path).  The control run without the rule shows the duplicates it prevents."""
from __future__ import annotations

from collections import Counter

import pytest

import worker.sync.apply as apply_mod
from tests.worker.conftest import make_task
from worker.sync.hooks import Hooks, SimulatedCrash
from worker.sync.syncer import Syncer


def _rows(db, table: str) -> Counter:
    return Counter(db.execute(f"SELECT id, v FROM {table}"))


def _run_with_crash(spark, task, src, *, restart: bool, driver: bool) -> None:
    """``driver``: every chunk applied in the driver (else every chunk as a Spark job)."""
    local = 10**9 if driver else 0
    fired = []

    def crash_once(info):
        if not fired and info["rows"]:
            fired.append(info)
            raise SimulatedCrash("apply committed, checkpoint not flushed")
    syncer = Syncer(spark, task, src, hooks=Hooks(after_apply=crash_once), apply_rows=100, local_apply_rows=local)
    try:
        with pytest.raises(SimulatedCrash):
            syncer.sync_until_caught_up()
        if restart:                 # a new process: everything rebuilt from the checkpoint rows
            syncer.close()
            syncer = Syncer(spark, task, src, apply_rows=100, local_apply_rows=local)
        syncer.sync_until_caught_up()
    finally:
        syncer.close()


def _write(db) -> None:
    db.execute("CREATE TABLE orders_1 (id INT, v INT)")          # no key at all
    for k in range(5):     # every transaction holds identical rows, and repeats rows of earlier ones
        db.execute("INSERT INTO orders_1 VALUES " + ", ".join(f"({i % 50}, {k % 2})" for i in range(60)))
    db.execute("DELETE FROM orders_1 WHERE id = 3 LIMIT 1")
    db.execute("UPDATE orders_1 SET v = 9 WHERE id = 4 LIMIT 2")


@pytest.mark.parametrize("driver,restart", [(True, True), (True, False), (False, True)],
                         ids=["driver-apply-restart", "driver-apply-same-syncer", "spark-apply-restart"])
def test_a_keyless_table_is_replayed_exactly(spark, source1_db, downstream_db, positions, driver, restart):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    _write(source1_db)
    _run_with_crash(spark, task, srcs["s1"], restart=restart, driver=driver)
    assert _rows(downstream_db, "orders") == _rows(source1_db, "orders_1")


def test_without_rule_10_the_replay_duplicates_rows(spark, source1_db, downstream_db, positions, monkeypatch):
    """The control: the same crash with the point not moved in the apply transaction (driver
    apply: the monkeypatch does not reach Spark's Python workers)."""
    monkeypatch.setattr(apply_mod, "_save_points", lambda *a, **k: None)
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    _write(source1_db)
    _run_with_crash(spark, task, srcs["s1"], restart=True, driver=True)
    down, up = _rows(downstream_db, "orders"), _rows(source1_db, "orders_1")
    assert sum(down.values()) > sum(up.values())              # the first batch landed twice
