"""Shard DDL locks through a running master process: Info in -> Operation out, restart
recovery, show-ddl-locks / unlock-ddl-lock end to end.  The test acts as the workers, writing
Infos / SourceTables and marking Operations done through the etcdproto Store."""
from __future__ import annotations


from coordinator.etcdproto import Info, LockKey, SourceTables, Stage, TableRef
from coordinator.schema import TableSchema

from .conftest import run_cli, wait_for
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.parse import parse_create_table

LOCK = LockKey("t1", "shop", "orders")
LOCK_ID = "t1-`shop`.`orders`"
A = TableRef("s1", "shop_01", "orders_01")
B = TableRef("s2", "shop_02", "orders_01")
BASE = parse_create_table("CREATE TABLE `orders` (`id` int(11) NOT NULL, `v` int(11) DEFAULT NULL, PRIMARY KEY (`id`)) "
    "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")


def publish_tables(store, *tables: TableRef):
    by_source: dict[str, SourceTables] = {}
    for t in tables:
        by_source.setdefault(t.source, SourceTables(LOCK.task, t.source)).add(t.schema, t.table, "shop", "orders")
    for st in by_source.values():
        store.put_source_tables(st)


def send(store, t: TableRef, ddl: str, before: TableSchema = BASE) -> tuple[Info, int]:
    """Act as t's worker: put the Info for ``ddl`` (routed to shop.orders)."""
    after = apply_ddl(before, ddl)
    info = Info(task=LOCK.task, source=t.source, up_schema=t.schema, up_table=t.table, down_schema="shop",
                down_table="orders", ddls=[ddl], before=before.to_json(), afters=[after.to_json()])
    return info, store.put_info(info)


def answer(store, t: TableRef, rev: int, after_revision: int = 0):
    return store.wait_operation(LOCK, t, rev, after_revision=after_revision, timeout=15)


def show(capsys, m, *args):
    rc, doc, err = run_cli(capsys, m, "show-ddl-locks", *args)
    assert isinstance(doc, dict), (doc, err)
    return rc, doc


ADD_C = "ALTER TABLE `shop`.`orders` ADD COLUMN `c` INT"


def test_info_in_operation_out_until_resolved(leader, store, capsys):
    publish_tables(store, A, B)
    _, ra = send(store, A, ADD_C)
    op = answer(store, A, ra)
    assert op.stage is Stage.NONE and op.ddls == [ADD_C] and op.lock_id == LOCK_ID and op.info_revision == ra

    rc, doc = show(capsys, leader)
    assert rc == 0 and doc["result"] is True
    (lk,) = doc["locks"]
    assert lk["ID"] == LOCK_ID and lk["task"] == "t1" and lk["mode"] == "optimistic"
    assert lk["owner"] == "" and lk["DDLs"] == []
    assert lk["synced"] == ["s1-`shop_01`.`orders_01`"] and lk["unsynced"] == ["s2-`shop_02`.`orders_01`"]
    waits = {w["table"]: w["waitingFor"] for w in lk["waiting"]}
    assert "has not added column `c`" in waits["s2-`shop_02`.`orders_01`"]
    assert "mark it done" in waits["s1-`shop_01`.`orders_01`"]

    store.mark_done(op)
    _, rb = send(store, B, ADD_C)
    opb = answer(store, B, rb)
    assert opb.stage is Stage.NONE and opb.info_revision == rb
    store.mark_done(opb)
    # resolved: the lock and all its records disappear
    wait_for(lambda: not store.list_infos("t1").items and not store.list_operations("t1").items,
             what="lock records removed")
    rc, doc = show(capsys, leader)
    assert doc["locks"] == [] and doc["msg"] == "no DDL lock exists"
    rc, out, _ = run_cli(capsys, leader, "shard-ddl-lock", fmt="table")
    assert "no DDL lock exists" in out
    # a task that does not exist is "not found" (exit 1), not "no DDL lock exists"
    rc, doc, _ = run_cli(capsys, leader, "shard-ddl-lock", "nosuchtask")
    assert rc == 1 and doc["msg"].startswith("task 'nosuchtask' not found"), doc
    assert 'shardmerge_master_infos_handled_total{stage="none"} 2.0' in leader.metrics()


def test_master_killed_mid_lock_restarts_with_same_state_and_no_duplicate(masters, store, capsys):
    m = masters(name="m1")
    m.wait_ready()
    publish_tables(store, A, B)
    _, ra = send(store, A, ADD_C)
    op = answer(store, A, ra)
    _, before = show(capsys, m)

    m.kill()    # SIGKILL mid-lock: A's Operation written, not done yet
    m2 = masters(name="m2", ttl=2)
    wait_for(lambda: m2.leader_info().is_leader, timeout=20, what="m2 elected")
    m2.wait_ready()
    _, after = show(capsys, m2)
    assert after["locks"] == before["locks"]
    again = store.get_operation(LOCK, A)
    assert again.revision == op.revision                          # not re-written: no duplicate
    # the worker finishes; the new leader continues the same lock
    store.mark_done(op)
    _, rb = send(store, B, ADD_C)
    opb = answer(store, B, rb)
    assert opb.stage is Stage.NONE
    store.mark_done(opb)
    wait_for(lambda: not store.list_infos("t1").items, what="lock resolved by the new leader")


def test_done_operation_is_not_reissued_after_restart(masters, store, capsys):
    m = masters(name="m1")
    m.wait_ready()
    publish_tables(store, A, B)
    _, ra = send(store, A, ADD_C)
    op = answer(store, A, ra)
    done_rev = store.mark_done(op)
    wait_for(lambda: "mark it done" not in str(show(capsys, m)[1]), what="done mark seen")
    m.kill()
    m2 = masters(name="m2")
    wait_for(lambda: m2.leader_info().is_leader, timeout=20, what="m2 elected")
    m2.wait_ready()
    cur = store.get_operation(LOCK, A)
    # neither the answer nor its done mark was written again
    assert cur.done and cur.revision == op.revision
    assert store.client.get_response(store.done_key(LOCK, A)).kvs[0].mod_revision == done_rev
    lk = show(capsys, m2)[1]["locks"][0]
    assert lk["synced"] == ["s1-`shop_01`.`orders_01`"]


CONFLICT_B = "ALTER TABLE `shop`.`orders` ADD COLUMN `c` VARCHAR(10)"


def _conflict(store):
    publish_tables(store, A, B)
    _, ra = send(store, A, ADD_C)
    store.mark_done(answer(store, A, ra))
    _, rb = send(store, B, CONFLICT_B)
    opb = answer(store, B, rb)
    assert opb.stage is Stage.DETECTED, opb
    return rb, opb


def test_unlock_exec_and_skip_end_to_end(leader, store, capsys):
    rb, opb = _conflict(store)
    rc, doc = show(capsys, leader, "t1")
    (lk,) = doc["locks"]
    assert lk["owner"] == "s2-`shop_02`.`orders_01`" and lk["DDLs"] == [CONFLICT_B] and lk["state"] == "conflict"
    assert any("shard-ddl-lock unlock" in w["waitingFor"] for w in lk["waiting"])
    # filter by source
    assert show(capsys, leader, "-s", "s9")[1]["locks"] == []

    # error texts
    rc, doc, _ = run_cli(capsys, leader, "unlock-ddl-lock", "t1-`shop`.`nope`", "-s", "s2", "-d", "shop_02",
                         "-t", "orders_01", "--action", "skip")
    assert rc == 1 and doc["msg"].startswith("lock with ID t1-`shop`.`nope` not found")
    rc, doc, _ = run_cli(capsys, leader, "unlock-ddl-lock", LOCK_ID, "-s", "s1", "-d", "shop_01", "-t", "orders_01")
    assert rc == 1 and "is not blocked" in doc["msg"] and "s1-`shop_01`.`orders_01`" in doc["msg"]
    rc, doc, _ = run_cli(capsys, leader, "unlock-ddl-lock", LOCK_ID, "-s", "s2", "-d", "shop_02", "-t", "wrong")
    assert rc == 1 and "is not a member of lock" in doc["msg"]
    rc, out, err = run_cli(capsys, leader, "unlock-ddl-lock", LOCK_ID, "-s", "s2", "-d", "shop_02", "-t",
                           "orders_01", "--action", "maybe")
    assert rc == 1 and "only exec/skip are acceptable" in err

    # skip: the worker executes nothing and continues
    rc, doc, _ = run_cli(capsys, leader, "shard-ddl-lock", "unlock", LOCK_ID, "-s", "s2", "-d", "shop_02",
                         "-t", "orders_01", "--action", "skip")
    assert rc == 0 and doc["result"] is True, doc
    op = answer(store, B, rb, after_revision=opb.revision)
    assert op.stage is Stage.UNLOCKED and op.ddls == [] and op.info_revision == rb

    # exec: a second conflict on the same table, now executed (as a worker does: the unlocked
    # Operation is marked done before the table's next DDL is described; the other order raced
    # the master's answer to the new Info, which replaces the Operation being marked)
    store.mark_done(op)
    _, rb2 = send(store, B, "ALTER TABLE `shop`.`orders` ADD COLUMN `d` INT",
                  before=apply_ddl(BASE, ADD_C))
    op2 = answer(store, B, rb2)
    _, ra2 = send(store, A, "ALTER TABLE `shop`.`orders` ADD COLUMN `d` VARCHAR(3)", before=apply_ddl(BASE, ADD_C))
    opa = answer(store, A, ra2)
    assert opa.stage is Stage.DETECTED
    rc, doc, _ = run_cli(capsys, leader, "unlock-ddl-lock", LOCK_ID, "-s", "s1", "-d", "shop_01", "-t",
                         "orders_01", "-a", "exec")
    assert rc == 0, doc
    opa2 = answer(store, A, ra2, after_revision=opa.revision)
    assert opa2.stage is Stage.UNLOCKED and opa2.ddls == ["ALTER TABLE `shop`.`orders` ADD COLUMN `d` VARCHAR(3)"]
    assert op2.stage is Stage.NONE


def test_manual_exits_remove_table_force_remove_and_stop_task(leader, store, capsys, tmp_path):
    rb, opb = _conflict(store)
    # remove the conflicting table from the lock: its records go, the lock can resolve
    rc, doc, _ = run_cli(capsys, leader, "shard-ddl-lock", "remove-table", LOCK_ID, "-s", "s2", "-d", "shop_02",
                         "-t", "orders_01")
    assert rc == 0, doc
    # (the removal may be deferred while the leader reads its own writes: waited for, not asserted at once)
    wait_for(lambda: store.get_info(LOCK, B) is None and not store.list_infos("t1").items,
             what="lock resolved after remove-table")
    # what B left downstream outlives the lock: the target's next lock starts with it
    assert [r.table for r in store.list_remnants().items] == [B]

    # a new lock, force-removed as a whole
    _, rc2 = send(store, A, "ALTER TABLE `shop`.`orders` ADD COLUMN `e` INT")
    answer(store, A, rc2)
    # task t1 was never started: its downstream is unknown, so the schema check refuses
    rc, doc, _ = run_cli(capsys, leader, "shard-ddl-lock", "unlock", LOCK_ID, "--force-remove")
    assert rc == 1 and "has no config in etcd" in doc["msg"] and "--no-check" in doc["msg"], doc
    assert store.list_infos("t1").items
    rc, doc, _ = run_cli(capsys, leader, "shard-ddl-lock", "unlock", LOCK_ID, "--force-remove", "--no-check")
    assert rc == 0 and "removed" in doc["msg"] and "schema check skipped" in doc["msg"], doc
    assert store.list_infos("t1").items == [] and store.list_operations("t1").items == []
    assert show(capsys, leader)[1]["locks"] == []

    # an orphan lock of a task that is not running: stop-task clears it (dm#1543)
    _, r3 = send(store, A, "ALTER TABLE `shop`.`orders` ADD COLUMN `f` INT")
    answer(store, A, r3)
    rc, doc, _ = run_cli(capsys, leader, "stop-task", "t1")
    assert rc == 0 and "leftover shard DDL metadata (1 lock(s))" in doc["msg"], doc
    assert store.list_infos("t1").items == [] and store.list_source_tables("t1").items == []
    assert store.list_remnants().items == []


def test_bad_record_marks_lock_error_and_master_stays_up(masters, store, etcd_client, capsys):
    publish_tables(store, A, B)
    _, ra = send(store, A, ADD_C)
    key = store.keys.info("t1", "shop", "orders", "s2", "shop_02", "orders_01")
    etcd_client.put(key, b"{not json")                     # garbage Info of table B
    m = masters(name="m1")
    m.wait_ready()
    (lk,) = show(capsys, m)[1]["locks"]
    assert lk["state"] == "error" and "not JSON" in lk["error"] and key in lk["error"]
    # the good table of the same lock was still answered
    assert answer(store, A, ra).stage is Stage.NONE
    # the operator's exit: remove the bad table
    rc, doc, _ = run_cli(capsys, m, "shard-ddl-lock", "remove-table", LOCK_ID, "-s", "s2", "-d", "shop_02",
                         "-t", "orders_01")
    assert rc == 0, doc
    # the garbage is gone: the table's Info is now the departed one (the schema it left with)
    left = Info.decode(key, etcd_client.get(key)[0])
    assert left.departed and left.ddls == [] and left.before is not None
    assert m.proc.poll() is None


def test_lock_command_usage_errors(capsys):
    from .conftest import free_port
    addr = f"127.0.0.1:{free_port()}"
    rc, _, err = run_cli(capsys, addr, "shard-ddl-lock", "t1", "t2")
    assert rc == 1 and "at most one TASK" in err
    rc, _, err = run_cli(capsys, addr, "shard-ddl-lock", "unlock", LOCK_ID, "-d", "db", "-t", "t")
    assert rc == 1 and "exactly one -s SOURCE" in err
    rc, _, err = run_cli(capsys, addr, "show-ddl-locks", "-d", "db")
    assert rc == 1 and "only apply to `shard-ddl-lock unlock`" in err


def test_lost_watch_rebuilds_and_keeps_answering(store):
    """A broken watch (etcd restart, compaction) makes the leader re-read everything and go on."""
    from coordinator.master import metrics
    from coordinator.master.optimist import Optimist
    fence = store.campaign("inproc", "127.0.0.1:1", ttl=10)
    opt = Optimist(store, fence).start()
    try:
        wait_for(lambda: opt.ready, what="optimist ready")
        publish_tables(store, A, B)
        _, ra = send(store, A, ADD_C)
        store.mark_done(answer(store, A, ra))
        before = metrics.REBUILDS._value.get()
        opt._q.put((opt._gen, ConnectionError("watch stream reset")))    # what a lost watch delivers
        wait_for(lambda: metrics.REBUILDS._value.get() == before + 1, what="rebuild after lost watch")
        _, rb = send(store, B, ADD_C)
        opb = answer(store, B, rb)
        assert opb.stage is Stage.NONE
        store.mark_done(opb)
        wait_for(lambda: not store.list_infos("t1").items, what="lock resolved after the rebuild")
    finally:
        opt.close()
        store.resign(fence)


def test_show_ddl_locks_lists_every_owner_with_its_ddls_and_state(leader, store, capsys):
    """dmctl's owner/DDLs name the conflicting table; ``owners`` lists every table that sent the
    lock a DDL: A executing its ADD COLUMN, then done; B held at its conflicting one."""
    publish_tables(store, A, B)
    _, ra = send(store, A, ADD_C)
    op = answer(store, A, ra)
    lk = show(capsys, leader, "t1")[1]["locks"][0]
    assert lk["owner"] == "" and lk["DDLs"] == []
    (oa,) = lk["owners"]
    assert (oa["owner"], oa["DDLs"], oa["state"]) == ("s1-`shop_01`.`orders_01`", [ADD_C], "executing")
    assert "mark it done" in oa["waitingFor"]

    store.mark_done(op)
    _, rb = send(store, B, CONFLICT_B)
    assert answer(store, B, rb).stage is Stage.DETECTED
    lk = show(capsys, leader, "t1")[1]["locks"][0]
    assert lk["owner"] == "s2-`shop_02`.`orders_01`" and lk["DDLs"] == [CONFLICT_B]      # dmctl's fields kept
    got = {o["owner"]: (o["DDLs"], o["state"]) for o in lk["owners"]}
    assert got == {"s1-`shop_01`.`orders_01`": ([ADD_C], "done"),
                   "s2-`shop_02`.`orders_01`": ([CONFLICT_B], "conflict")}
    assert "shard-ddl-lock unlock" in next(o["waitingFor"] for o in lk["owners"] if o["state"] == "conflict")
    rc, out, _ = run_cli(capsys, leader, "shard-ddl-lock", "t1", fmt="table")
    assert rc == 0 and "owners:" in out
    assert any("s2-`shop_02`.`orders_01`" in line and "conflict" in line and "VARCHAR(10)" in line
               for line in out.split("owners:")[1].splitlines())
