"""Worker-side shard-DDL coordination on the production path: a DDL executed on the real
upstream, read from its binlog by the real ``Syncer`` and handed to the optimistic handler, with
the test acting as the master (Operations written with the etcdproto helpers)."""
import json

import pytest

from coordinator.etcdproto import Info, Stage
from coordinator.schema.model import TableSchema
from worker.shardddl import CoordinationStopped, StrictConflict
from worker.status import ERROR, PAUSED, RUNNING
from worker.upstream import master_status

from .conftest import SOURCE, TASK, wait_for


def _op(store, info):
    return store.get_operation(info.lock, info.table)


def test_info_published_operation_executed_done_marked(make_env, master, pool, store):
    env = make_env()
    fut = env.run(pool, "alter table orders_01 add column a int, add b varchar(8)  default 'x'")
    info = master.wait_info()
    # split before the lock sees it (dm#613), routed to the downstream name, in canonical text
    # as DM shows it; each change of the ALTER is its own Info, the next sent once the previous
    # one is done (docs/lock-algorithm.md, "One change at a time")
    assert info.ddls == [f"ALTER TABLE `{env.down.name}`.`orders` ADD COLUMN `a` INT"]
    assert (info.source, info.up_schema, info.up_table) == (SOURCE, env.up.name, "orders_01")
    assert (info.down_schema, info.down_table) == (env.down.name, "orders")
    before = TableSchema.from_json(info.before)
    assert [c.name for c in before.columns] == ["id", "v"]
    assert [[c.name for c in TableSchema.from_json(a).columns] for a in info.afters] == [["id", "v", "a"]]
    st = wait_for(lambda: (s := env.status_record()) and "waiting_for" in s.detail and s, what="status")
    assert st.stage == RUNNING and f"info revision {info.revision}" in st.detail["waiting_for"]
    with pytest.raises(AssertionError):         # nothing of the second change before the first is done
        master.wait_info(newer_than=info.revision, timeout=1.0)

    master.answer(info, Stage.NONE)
    second = master.wait_info(newer_than=info.revision)
    assert _op(store, info).done and env.down_columns() == ["id", "v", "a"]
    assert second.ddls == [f"ALTER TABLE `{env.down.name}`.`orders` ADD COLUMN `b` VARCHAR(8) DEFAULT 'x'"]
    assert [c.name for c in TableSchema.from_json(second.before).columns] == ["id", "v", "a"]
    assert [[c.name for c in TableSchema.from_json(a).columns] for a in second.afters] == [["id", "v", "a", "b"]]
    # the checkpoint has not moved past the statement: the finished record of its first change
    # says how far it got, with the schema after it
    tp = env.syncer.store.tables[(env.up.name, "orders_01")]
    assert tp.ddl_intent["finished"] and tp.ddl_intent["change"] == 0
    # ... and a master reading the table's schema from its checkpoint row sees that schema
    from coordinator.master.checkpoint_schema import current_info
    with env.down.connect() as c, c.cursor() as cur:
        cur.execute(f"SELECT table_info, binlog_name, binlog_pos, ddl_intent FROM {env.syncer.store.fq} "
                    "WHERE id=%s AND cp_schema=%s AND cp_table=%s", (SOURCE, env.up.name, "orders_01"))
        row = cur.fetchone()
    assert [c.name for c in TableSchema.from_json(json.loads(current_info(*row))).columns] == ["id", "v", "a"]

    master.answer(second, Stage.NONE)
    fut.result(timeout=60)
    assert env.down_columns() == ["id", "v", "a", "b"]
    tracked = env.tracker.get(env.up.name, "orders_01")
    assert [c.name for c in tracked.columns] == ["id", "v", "a", "b"]
    # the table checkpoint carries the schema after the DDL
    assert TableSchema.from_json(json.loads(
        env.syncer.store.tables[(env.up.name, "orders_01")].table_info)) == tracked
    op = _op(store, second)
    assert op.done and op.info_revision == second.revision
    assert "waiting_for" not in env.status_record().detail
    info = second

    # the second shard makes the same change: the master returns it again; the repeat is absorbed
    fut = env.run(pool, "ALTER TABLE orders_02 ADD COLUMN a INT")
    info2 = master.wait_info(newer_than=info.revision)
    master.answer(info2, Stage.NONE)
    fut.result(timeout=60)
    assert env.down_columns() == ["id", "v", "a", "b"]
    assert _op(store, info2).done


def test_answer_to_an_older_info_is_ignored(make_env, master, pool, store):
    """dm#2282: an Operation left over for an earlier Info of the same table (e.g. written by a
    master before it restarted, never marked done) is not executed for the new DDL."""
    env = make_env()
    old = Info(task=TASK, source=SOURCE, up_schema=env.up.name, up_table="orders_01",
               down_schema=env.down.name, down_table="orders",
               ddls=[f"ALTER TABLE `{env.down.name}`.`orders` DROP COLUMN v"], before={}, afters=[{}])
    store.put_info(old)
    master.answer(old, Stage.NONE)             # pending, not done, answers the OLD Info
    fut = env.run(pool, "ALTER TABLE orders_01 ADD COLUMN a INT")
    info = master.wait_info(newer_than=old.revision)
    with pytest.raises(TimeoutError):
        fut.result(timeout=1.5)
    assert env.down_columns() == ["id", "v"]
    master.answer(info, Stage.NONE)
    fut.result(timeout=60)
    assert env.down_columns() == ["id", "v", "a"]


def test_conflict_pauses_then_unlock_skip_continues(make_env, master, pool, store):
    env = make_env()
    pos = master_status(env.up.params)        # nothing else is written: the DDL starts here
    fut = env.run(pool, "ALTER TABLE orders_01 MODIFY v BIGINT")
    info = master.wait_info()
    master.answer(info, Stage.DETECTED, ddls=[], message="there will be conflicts if DDLs are applied")
    lid = f"{TASK}-`{env.down.name}`.`orders`"
    st = wait_for(lambda: (s := env.status_record()).stage == PAUSED and s, what="Paused status")
    assert st.detail["lock_id"] == lid
    assert st.detail["error"]["position"] == str(pos) and st.detail["error"]["lock_id"] == lid
    assert "conflicts" in st.conflict_msg and "shard-ddl-lock unlock" in st.conflict_msg
    assert st.block_ddl_owner == f"{SOURCE}-`{env.up.name}`.`orders_01`"
    assert not fut.done()

    # the operator unlocks with skip: the master rewrites the Operation for the same Info
    master.answer(info, Stage.UNLOCKED, ddls=[])
    fut.result(timeout=60)
    assert env.down_columns() == ["id", "v"]
    # the tracker follows the upstream even when the downstream skipped the change
    assert env.tracker.get(env.up.name, "orders_01").column("v").type.base == "bigint"
    assert _op(store, info).done
    st = env.status_record()
    assert st.stage == RUNNING and st.conflict_msg == "" and "error" not in st.detail


def test_conflict_then_unlock_exec_runs_the_ddl(make_env, master, pool):
    env = make_env()
    fut = env.run(pool, "ALTER TABLE orders_01 ADD COLUMN c INT NOT NULL")
    info = master.wait_info()
    master.answer(info, Stage.DETECTED, ddls=[], message="add column not null non default")
    wait_for(lambda: env.status_record().stage == PAUSED, what="Paused status")
    master.answer(info, Stage.UNLOCKED)   # exec: the Info's own statements
    fut.result(timeout=60)
    assert env.down_columns() == ["id", "v", "c"]


def test_strict_mode_fails_fast_naming_the_tables(make_env, master, pool):
    env = make_env(strict=True)
    fut = env.run(pool, "ALTER TABLE orders_01 MODIFY v VARCHAR(10)")
    info = master.wait_info()
    master.answer(info, Stage.DETECTED, ddls=[], message="conflict with orders_02")
    with pytest.raises(StrictConflict) as ei:
        fut.result(timeout=60)
    assert f"{SOURCE}-`{env.up.name}`.`orders_01`" in ei.value.tables[0]
    assert ei.value.context["lock_id"] == f"{TASK}-`{env.down.name}`.`orders`"
    st = env.status_record()
    assert st.stage == ERROR and st.detail["error"]["type"] == "StrictConflict"
    assert env.tracker.get(env.up.name, "orders_01").column("v").type.base == "int"   # not committed


def test_vanished_info_is_sent_again(make_env, master, pool, store, etcd_client):
    """dm#628: the master must never wait for an Info the worker believes it sent."""
    env = make_env(recheck=0.3)
    fut = env.run(pool, "ALTER TABLE orders_01 ADD COLUMN a INT")
    info = master.wait_info()
    etcd_client.delete(store.keys.info(info.task, info.down_schema, info.down_table, info.source,
                                       info.up_schema, info.up_table))
    again = master.wait_info(newer_than=info.revision)
    assert again.ddls == info.ddls and again.before == info.before
    master.answer(again, Stage.NONE)
    fut.result(timeout=60)
    assert env.down_columns() == ["id", "v", "a"]


def test_stop_while_waiting_commits_nothing(make_env, master, pool):
    env = make_env()
    fut = env.run(pool, "ALTER TABLE orders_01 ADD COLUMN a INT")
    master.wait_info()
    env.stop.set()
    with pytest.raises(CoordinationStopped):
        fut.result(timeout=60)
    assert env.tracker.get(env.up.name, "orders_01").column("a") is None
    assert env.down_columns() == ["id", "v"]
    # the table checkpoint stays before the DDL: a restart hands the same DDL over again
    tp = env.syncer.store.tables.get((env.up.name, "orders_01"))
    assert tp is None or "\"a\"" not in (tp.table_info or "")


def test_create_and_drop_table_update_source_tables(make_env, store, pool):
    env = make_env()
    st = store.get_source_tables(TASK, SOURCE)
    assert st.members(env.down.name, "orders") == {(env.up.name, "orders_01"), (env.up.name, "orders_02")}

    env.run(pool, "CREATE TABLE orders_03 (id INT PRIMARY KEY, v INT)").result(timeout=60)
    assert (env.up.name, "orders_03") in store.get_source_tables(TASK, SOURCE).members(env.down.name, "orders")
    assert env.tracker.get(env.up.name, "orders_03") is not None
    assert env.down_columns() == ["id", "v"]

    env.run(pool, "DROP TABLE orders_02").result(timeout=60)
    assert env.down_columns() == ["id", "v"]          # the merged table keeps the other shards' rows
    members = store.get_source_tables(TASK, SOURCE).members(env.down.name, "orders")
    assert members == {(env.up.name, "orders_01"), (env.up.name, "orders_03")}
    assert env.tracker.get(env.up.name, "orders_02") is None


def test_an_executable_comment_the_upstream_ran_is_coordinated_and_run_downstream(make_env, master, pool):
    """MariaDB ran the ``/*M! ... */`` part of the ALTER (two columns upstream): the Info, the
    tracked schema and the downstream have both, so the rows after it apply (before, only `q`
    reached the lock and the next row failed on `Unknown column 'sneaky'`)."""
    env = make_env()
    fut = env.run(pool, "ALTER TABLE orders_01 ADD COLUMN q INT /*M! , ADD COLUMN sneaky INT */")
    info = master.wait_info()
    assert [d.split("ADD COLUMN ")[-1] for d in info.ddls] == ["`q` INT"]
    master.answer(info, Stage.NONE)
    info = master.wait_info(newer_than=info.revision)      # the next change of the same ALTER
    assert [d.split("ADD COLUMN ")[-1] for d in info.ddls] == ["`sneaky` INT"]
    master.answer(info, Stage.NONE)
    fut.result(timeout=60)
    assert env.down_columns() == ["id", "v", "q", "sneaky"]
    env.up.execute("INSERT INTO orders_01 VALUES (1, 2, 3, 4)")
    env.run(pool).result(timeout=60)
    assert env.down.execute("SELECT id, v, q, sneaky FROM orders") == [(1, 2, 3, 4)]


def test_a_created_shard_table_has_its_schema_in_the_checkpoint_before_it_joins(make_env, store, pool):
    """A shard table created while a lock is open joins it when SourceTables names it; the master
    then starts it from its checkpoint row's schema.  That row must already hold the CREATE's
    schema at that moment (the finished intent carries it): before, SourceTables came first and
    the master fell back to the lock's first schema, waiting forever for a change the new table
    already had."""
    from coordinator.master.checkpoint_schema import current_info
    env = make_env()
    seen = []
    add = env.handler.source_tables.add

    def add_and_look(schema, table):
        # what the master's CheckpointSchemaSource reads for a joining table, read now
        with env.down.connect() as c, c.cursor() as cur:
            cur.execute(f"SELECT table_info, binlog_name, binlog_pos, ddl_intent FROM {env.syncer.store.fq} "
                        "WHERE id=%s AND cp_schema=%s AND cp_table=%s", (SOURCE, schema, table))
            got = cur.fetchone()
        seen.append(None if got is None else current_info(*got))
        return add(schema, table)

    env.handler.source_tables.add = add_and_look
    env.run(pool, "CREATE TABLE orders_03 (id INT PRIMARY KEY, v INT, c1 INT)").result(timeout=60)
    assert len(seen) == 1 and seen[0] not in (None, "null"), seen
    assert [c.name for c in TableSchema.from_json(json.loads(seen[0])).columns] == ["id", "v", "c1"]
