"""Batches are cut at DDL; non-sharded tables replicate 1:1 with their DDL; a syncer killed
between DML apply and checkpoint flush (or between DDL and checkpoint) restarts from the
downstream checkpoints with no loss, no duplicate and no DDL run twice."""
from __future__ import annotations

import pytest

from tests.worker.conftest import make_task
from worker.check import check_task
from worker.sync.ddl_handler import DDLDecision, DirectDDLHandler
from worker.sync.hooks import Hooks, SimulatedCrash
from worker.sync.syncer import Syncer
from worker.upstream import master_status


class RecordingHandler(DirectDDLHandler):
    """Direct handler that records the downstream row count of the target when asked."""

    def __init__(self, down):
        super().__init__()
        self.down, self.seen = down, []

    def handle_ddl(self, event, ctx):
        if event.target_table and event.kind == "alter_table":
            n = self.down.execute(f"SELECT COUNT(*) FROM `{event.target_table}`")[0][0]
            self.seen.append((event.query, n))
        return super().handle_ddl(event, ctx)


def test_non_sharded_table_with_ddl_cut_in_one_batch(spark, source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    db = source1_db
    db.execute("CREATE TABLE items (id INT PRIMARY KEY, title VARCHAR(30))")
    db.execute("INSERT INTO items VALUES " + ", ".join(f"({i}, 't{i}')" for i in range(50)))
    db.execute("UPDATE items SET title = 'u' WHERE id < 10")
    db.execute("ALTER TABLE items ADD COLUMN color VARCHAR(10) NOT NULL DEFAULT 'none'")
    db.execute("INSERT INTO items VALUES " + ", ".join(f"({i}, 'n{i}', 'red')" for i in range(50, 60)))
    db.execute("UPDATE items SET color = 'blue' WHERE id < 5")
    db.execute("CREATE INDEX ix_title ON items (title)")
    db.execute("DELETE FROM items WHERE id BETWEEN 20 AND 29")
    handler = RecordingHandler(downstream_db)
    syncer = Syncer(spark, task, srcs["s1"], handler)
    results = syncer.sync_until_caught_up()
    # one read range (a batch is only re-cut after CREATE TABLE, which changes target keys);
    # the ALTER saw exactly the 50 earlier rows downstream, the later rows use the new column
    assert len([r for r in results if not r.idle]) <= 2
    assert handler.seen[0][1] == 50 and "ADD COLUMN color" in handler.seen[0][0]
    assert downstream_db.execute("SELECT color, COUNT(*) FROM items GROUP BY color ORDER BY color") == \
        [("blue", 5), ("none", 35), ("red", 10)]
    assert any(r[2] == "ix_title" for r in downstream_db.execute("SHOW INDEX FROM items"))
    assert check_task(task, srcs).equal
    # checkpoints: one row per table with its schema, the global row at the stream end
    rows = dict(downstream_db.execute(
        f"SELECT CONCAT(cp_schema, '.', cp_table), binlog_pos FROM `{task.name}_syncer_checkpoint`"))
    assert f"{source1_db.name}.items" in rows and "." in rows


class SkipShardDrop(DirectDDLHandler):
    """Stands in for coordination: a column dropped on one shard stays downstream."""

    def handle_ddl(self, event, ctx):
        if ctx.is_sharded(event.schema, event.table) and "DROP COLUMN" in event.query.upper():
            self._track(event)
            return DDLDecision(skip=True, note="partial drop")
        return super().handle_ddl(event, ctx)


def test_rows_of_a_shard_without_a_column_are_written_without_it(spark, source1_db, source2_db,
                                                                  downstream_db, positions):
    p1, p2 = positions(source1_db, source2_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db, "s2": source2_db}, start={"s1": p1, "s2": p2})
    for db, base in ((source1_db, 0), (source2_db, 10_000)):
        db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, qty INT, note VARCHAR(20) DEFAULT 'd')")
        db.execute(f"INSERT INTO orders_1 VALUES ({base + 1}, 1, 'a'), ({base + 2}, 2, 'b')")
    source1_db.execute("ALTER TABLE orders_1 DROP COLUMN note")
    source1_db.execute("INSERT INTO orders_1 VALUES (3, 3)")
    source1_db.execute("UPDATE orders_1 SET qty = 10 WHERE id = 1")
    source2_db.execute("INSERT INTO orders_1 VALUES (10003, 3, 'c')")
    for sid in ("s1", "s2"):
        Syncer(spark, task, srcs[sid], SkipShardDrop()).sync_until_caught_up()
    got = dict(downstream_db.execute("SELECT id, note FROM orders"))
    assert got == {1: "a", 2: "b", 3: "d", 10001: "a", 10002: "b", 10003: "c"}
    assert downstream_db.execute("SELECT qty FROM orders WHERE id = 1") == [(10,)]
    rep = check_task(task, srcs)
    assert rep.equal and "note" not in rep.tables[0].columns, rep.to_json()


def test_a_new_shard_of_an_existing_target_runs_nothing_downstream(spark, source1_db, downstream_db, positions):
    """The routed CREATE TABLE IF NOT EXISTS of a second shard would change nothing: it is not run
    (no intent record, no statement), yet the shard is checkpointed at its CREATE and its rows
    arrive; a shard whose target is missing still creates it."""
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE orders_1 (id INT PRIMARY KEY, qty INT)")
    source1_db.execute("INSERT INTO orders_1 VALUES (1, 1)")
    source1_db.execute("CREATE TABLE orders_2 (id INT PRIMARY KEY, qty INT)")
    source1_db.execute("INSERT INTO orders_2 VALUES (2, 2)")
    seen = []
    s = Syncer(spark, task, srcs["s1"], hooks=Hooks(
        after_ddl_execute=lambda i: seen.append((i["event"].table, i["executed"]))))
    s.sync_until_caught_up()
    assert seen == [("orders_1", True), ("orders_2", False)]
    assert sorted(downstream_db.execute("SELECT id, qty FROM orders")) == [(1, 1), (2, 2)]
    tp = s.store.tables[(source1_db.name, "orders_2")]
    assert tp.pos > p1 and not tp.ddl_intent
    assert check_task(task, srcs).equal


def _workload(db):
    db.execute("CREATE TABLE orders_a (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
    db.execute("CREATE TABLE orders_b (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
    db.execute("INSERT INTO orders_a VALUES " + ", ".join(f"({i}, {i}, 'a')" for i in range(200)))
    db.execute("INSERT INTO orders_b VALUES " + ", ".join(f"({1000 + i}, {i}, 'b')" for i in range(200)))
    db.execute("UPDATE orders_a SET v = v * 2 WHERE id % 2 = 0")
    db.execute("UPDATE orders_b SET id = id + 5000 WHERE id % 9 = 0")
    db.execute("DELETE FROM orders_a WHERE id % 10 = 1")


def _crash_once(name):
    state = {"fired": 0}

    def hook(info):
        if not state["fired"]:
            state["fired"] += 1
            raise SimulatedCrash(f"killed at {name}: {info}")
    return hook, state


def test_crash_between_apply_and_checkpoint_flush_then_resume(spark, source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    _workload(source1_db)
    hook, state = _crash_once("after_apply")
    first = Syncer(spark, task, srcs["s1"], hooks=Hooks(after_apply=hook))
    with pytest.raises(SimulatedCrash):
        first.sync_until_caught_up()
    # the rows are downstream, the checkpoint did not move past them
    applied = downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0]
    assert applied > 0
    cp = f"`{task.name}_syncer_checkpoint`"
    # only the CREATE TABLE points were stored: every stored point is before the applied DML
    (stored_max,) = downstream_db.execute(f"SELECT MAX(binlog_pos) FROM {cp}")[0]
    up_end = master_status(source1_db.params)
    assert state["fired"] == 1 and stored_max < up_end.pos

    # more upstream changes while "down", then a fresh process resumes from the checkpoints
    source1_db.execute("UPDATE orders_a SET s = 'after' WHERE id < 50")
    source1_db.execute("INSERT INTO orders_b VALUES (99999, 1, 'new')")
    second = Syncer(spark, task, srcs["s1"])
    second.sync_until_caught_up()
    assert second.status()["safe_until"], "restart must replay the unflushed batch in safe mode"
    rep = check_task(task, srcs)
    assert rep.equal, rep.to_json()
    # table points exist now and never lower than the global start
    pts = downstream_db.execute(f"SELECT cp_table, binlog_pos FROM {cp} WHERE cp_table <> ''")
    assert {t for t, _ in pts} == {"orders_a", "orders_b"}


def test_crash_after_ddl_execute_does_not_run_it_twice(spark, source1_db, downstream_db, positions):
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    db = source1_db
    db.execute("CREATE TABLE items (id INT PRIMARY KEY, title VARCHAR(30))")
    db.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    # an unnamed index: executing it twice would silently create a second one (title_2)
    db.execute("ALTER TABLE items ADD INDEX (title)")
    db.execute("INSERT INTO items VALUES (3, 'c')")

    def crash_on_alter(info):
        if info["event"].kind == "alter_table":
            raise SimulatedCrash("killed after DDL execute")
    first = Syncer(spark, task, srcs["s1"], hooks=Hooks(after_ddl_execute=crash_on_alter))
    with pytest.raises(SimulatedCrash):
        first.sync_until_caught_up()
    assert len({r[2] for r in downstream_db.execute("SHOW INDEX FROM items")}) == 2  # PRIMARY + title

    second = Syncer(spark, task, srcs["s1"])
    second.sync_until_caught_up()
    assert sorted({r[2] for r in downstream_db.execute("SHOW INDEX FROM items")}) == ["PRIMARY", "title"]
    assert check_task(task, srcs).equal
    assert downstream_db.execute("SELECT COUNT(*) FROM items")[0][0] == 3
