"""`shard-ddl-lock unlock --force-remove` compares the lock's schema with the real downstream
table first (DM pain #5), and operator commands report what was really written (DM pain #25).

Force-remove runs end to end: CLI -> master process -> real etcd + the real downstream MariaDB
(the task's target).  The unlock-not-written cases drive the ``Locks`` object / the optimist
thread in-process against real etcd, so a newer Info lands exactly between the engine's decision
and the write."""
from __future__ import annotations

import pytest

from coordinator.etcdproto import Info, LockKey, SourceTables, Stage, TableRef
from coordinator.obs import logger
from coordinator.schema import TableSchema

from .conftest import free_port, run_cli, source_yaml, wait_for, write
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.parse import parse_create_table

A = TableRef("s1", "shop_01", "orders_01")
B = TableRef("s2", "shop_02", "orders_01")
BASE_SQL = ("CREATE TABLE `orders` (`id` int(11) NOT NULL, `v` int(11) DEFAULT NULL, PRIMARY KEY (`id`)) "
            "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
BASE = parse_create_table(BASE_SQL)
ADD_E = "ALTER TABLE `orders` ADD COLUMN `e` INT"


class Shards:
    """Acts as the workers of task t1 whose tables A and B route to ``<db>.orders``."""

    def __init__(self, store, db: str):
        self.store, self.db = store, db
        self.lock = LockKey("t1", db, "orders")
        self.lock_id = self.lock.id

    def publish(self, *tables: TableRef) -> None:
        by: dict[str, SourceTables] = {}
        for t in tables:
            by.setdefault(t.source, SourceTables("t1", t.source)).add(t.schema, t.table, self.db, "orders")
        for st in by.values():
            self.store.put_source_tables(st)

    def info(self, t: TableRef, ddl: str, before: TableSchema = BASE) -> Info:
        return Info(task="t1", source=t.source, up_schema=t.schema, up_table=t.table, down_schema=self.db,
                    down_table="orders", ddls=[ddl], before=before.to_json(),
                    afters=[apply_ddl(before, ddl).to_json()])

    def send(self, t: TableRef, ddl: str, before: TableSchema = BASE):
        info = self.info(t, ddl, before)
        info.revision = self.store.put_info(info)
        return info, self.store.wait_operation(self.lock, t, info.revision, timeout=15)


def _start_task(capsys, m, tmp_path, db: str, port: int, *flags: str) -> None:
    files = [write(tmp_path, f"{s}.yaml", source_yaml(s)) for s in ("s1", "s2")]
    assert run_cli(capsys, m, "operate-source", "create", *files)[0] == 0
    task = f"""name: t1
task-mode: incremental
shard-mode: optimistic
target-database:
  host: 127.0.0.1
  port: {port}
  user: shardmerge
  password: shardmerge
routes:
  r1:
    schema-pattern: "shop_*"
    table-pattern: "orders_*"
    target-schema: {db}
    target-table: orders
mysql-instances:
  - source-id: s1
    route-rules: [r1]
  - source-id: s2
    route-rules: [r1]
"""
    rc, doc, err = run_cli(capsys, m, "start-task", *flags, write(tmp_path, "t1.yaml", task))
    assert rc == 0, (doc, err)


def _force(capsys, m, lock_id: str, *extra):
    rc, doc, err = run_cli(capsys, m, "shard-ddl-lock", "unlock", lock_id, "--force-remove", *extra)
    assert isinstance(doc, dict), (doc, err)
    return rc, doc


def _locks(capsys, m) -> list:
    return run_cli(capsys, m, "shard-ddl-lock")[1]["locks"]


def test_force_remove_refused_when_downstream_differs_then_no_check(leader, store, capsys, tmp_path,
                                                                      downstream_db, services):
    db = downstream_db.name
    _start_task(capsys, leader, tmp_path, db, services.mysql["downstream"]["port"])
    sh = Shards(store, db)
    sh.publish(A, B)
    _, op = sh.send(A, ADD_E)
    assert op.stage is Stage.NONE
    store.mark_done(op)
    # the downstream never got `e`, and someone added `z` by hand
    downstream_db.execute("CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, v INT, z VARCHAR(5))")
    rc, doc = _force(capsys, leader, sh.lock_id)
    assert rc == 1 and doc["result"] is False, doc
    msg = doc["msg"]
    assert "refused" in msg and f"127.0.0.1:{services.mysql['downstream']['port']}" in msg
    assert f"ALTER TABLE `{db}`.`orders` ADD COLUMN `e` int(11) DEFAULT NULL AFTER `v`" in msg
    assert "column `e` only in the lock" in msg
    assert f"ALTER TABLE `{db}`.`orders` DROP COLUMN `z`" in msg and "column `z` only downstream" in msg
    assert "--no-check" in msg
    assert [lk["ID"] for lk in _locks(capsys, leader)] == [sh.lock_id]        # nothing removed
    assert store.list_infos("t1").items

    rc, doc = _force(capsys, leader, sh.lock_id, "--no-check")
    assert rc == 0 and "removed" in doc["msg"] and "schema check skipped (--no-check)" in doc["msg"], doc
    assert _locks(capsys, leader) == [] and store.list_infos("t1").items == []


def test_force_remove_when_schemas_agree_and_pending_ddls_are_not_differences(leader, store, capsys, tmp_path,
                                                                               downstream_db, services):
    db = downstream_db.name
    _start_task(capsys, leader, tmp_path, db, services.mysql["downstream"]["port"])
    sh = Shards(store, db)
    sh.publish(A, B)
    _, op = sh.send(A, ADD_E)
    store.mark_done(op)
    # B renames a column: a conflicting DDL that waits for A (skip-and-wait), never run downstream
    _, opb = sh.send(B, "ALTER TABLE `orders` RENAME COLUMN `v` TO `w`")
    assert opb.stage is Stage.SKIP_AND_WAIT, opb
    # what the downstream has now: `e` (A's done ADD), `v` (the rename is pending); widths and
    # column order differ cosmetically from the shards' schema
    downstream_db.execute("CREATE TABLE orders (id INT(10) NOT NULL, e INT, v INT, PRIMARY KEY (id))")
    rc, doc = _force(capsys, leader, sh.lock_id)
    assert rc == 0, doc
    msg = doc["msg"]
    assert "removed" in msg and "schemas agree" in msg
    assert "pending DDLs, never applied downstream" in msg and "RENAME COLUMN `v` TO `w`" in msg
    assert "s2-`shop_02`.`orders_01` (skip-and-wait)" in msg
    assert _locks(capsys, leader) == []


def test_force_remove_with_an_operation_not_yet_done_accepts_both_states(leader, store, capsys, tmp_path,
                                                                         downstream_db, services):
    db = downstream_db.name
    _start_task(capsys, leader, tmp_path, db, services.mysql["downstream"]["port"])
    sh = Shards(store, db)
    sh.publish(A, B)
    sh.send(A, ADD_E)            # issued, not marked done: the worker may or may not have run it
    downstream_db.execute("CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, v INT, e INT)")
    rc, doc = _force(capsys, leader, sh.lock_id)
    assert rc == 0 and "schemas agree" in doc["msg"], doc
    assert "not yet marked done" in doc["msg"] and "s1-`shop_01`.`orders_01` (none)" in doc["msg"]


def test_force_remove_refused_when_downstream_unreachable_or_unknown(leader, store, capsys, tmp_path):
    port = free_port()          # nothing listens there
    sh = Shards(store, "shop")
    sh.publish(A, B)
    sh.send(A, ADD_E)
    # no task config at all: the downstream is unknown
    rc, doc = _force(capsys, leader, sh.lock_id)
    assert rc == 1 and "has no config in etcd" in doc["msg"] and "stop-task t1" in doc["msg"], doc
    assert "--no-check" in doc["msg"]
    # a task whose downstream does not answer (went away after the start: the precheck, which
    # would refuse the task, is skipped)
    _start_task(capsys, leader, tmp_path, "shop", port, "--skip-precheck")
    rc, doc = _force(capsys, leader, sh.lock_id)
    assert rc == 1 and f"127.0.0.1:{port}" in doc["msg"] and "--no-check" in doc["msg"], doc
    assert "Can't connect" in doc["msg"] or "connect" in doc["msg"].lower()
    assert [lk["ID"] for lk in _locks(capsys, leader)] == [sh.lock_id]
    rc, doc = _force(capsys, leader, sh.lock_id, "--no-check")
    assert rc == 0 and "removed" in doc["msg"], doc
    assert _locks(capsys, leader) == []


def test_force_remove_refused_when_downstream_table_missing(leader, store, capsys, tmp_path, downstream_db,
                                                            services):
    db = downstream_db.name
    _start_task(capsys, leader, tmp_path, db, services.mysql["downstream"]["port"])
    sh = Shards(store, db)
    sh.publish(A, B)
    sh.send(A, ADD_E)
    rc, doc = _force(capsys, leader, sh.lock_id)
    assert rc == 1 and "does not exist" in doc["msg"] and f"CREATE TABLE `{db}`.`orders`" in doc["msg"], doc


def test_no_check_only_with_force_remove(capsys):
    addr = f"127.0.0.1:{free_port()}"
    rc, _, err = run_cli(capsys, addr, "shard-ddl-lock", "unlock", "t1-`a`.`b`", "-s", "s1", "-d", "d", "-t", "t",
                         "--no-check")
    assert rc == 1 and "--no-check only applies" in err
    rc, _, err = run_cli(capsys, addr, "shard-ddl-lock", "--no-check")
    assert rc == 1 and "only apply to `shard-ddl-lock unlock`" in err


# ---------------------------------------------------------------------------- #25: real results
@pytest.fixture
def fence(store):
    f = store.campaign("inproc-test", "127.0.0.1:1", ttl=10)
    assert f is not None
    yield f
    store.resign(f)


def _detected_b(store, locks, sh: Shards):
    """A adds `c` INT, B adds `c` VARCHAR: B is `detected`; the Locks object is fed by hand."""
    sh.publish(A, B)
    for t, ddl in ((A, "ALTER TABLE `orders` ADD COLUMN `c` INT"),
                   (B, "ALTER TABLE `orders` ADD COLUMN `c` VARCHAR(10)")):
        info = sh.info(t, ddl)
        info.revision = store.put_info(info)
        locks.on_info(info)
    opb = store.get_operation(sh.lock, B)
    assert opb.stage is Stage.DETECTED
    return opb


def test_unlock_reports_failure_when_a_newer_info_arrived(store, fence):
    from coordinator.master.errors import RequestError
    from coordinator.master.locks import Locks
    sh = Shards(store, "shop")
    locks = Locks(store, fence, logger("test.locks"))
    opb = _detected_b(store, locks, sh)
    # B's worker sends a newer DDL; the master has not seen it yet when the operator unlocks
    newer = sh.info(B, "ALTER TABLE `orders` ADD COLUMN `d` INT")
    newer.revision = store.put_info(newer)
    with pytest.raises(RequestError) as ei:
        locks.unlock(sh.lock, sh.lock_id, B, "skip")
    msg = str(ei.value)
    assert "was NOT applied" in msg and "a newer DDL from that table arrived" in msg
    assert "shard-ddl-lock t1" in msg
    cur = store.get_operation(sh.lock, B)
    assert cur.revision == opb.revision and cur.stage is Stage.DETECTED       # nothing written
    # the newer Info is then answered normally
    locks.on_info(newer)
    assert store.get_operation(sh.lock, B).info_revision == newer.revision



def test_unlock_reports_failure_when_the_info_is_gone(store, fence):
    from coordinator.master.errors import RequestError
    from coordinator.master.locks import Locks
    sh = Shards(store, "shop")
    locks = Locks(store, fence, logger("test.locks"))
    opb = _detected_b(store, locks, sh)
    store.client.delete(store.keys.info("t1", "shop", "orders", B.source, B.schema, B.table))
    with pytest.raises(RequestError) as ei:
        locks.unlock(sh.lock, sh.lock_id, B, "exec")
    assert "was NOT applied" in str(ei.value) and "Info is gone" in str(ei.value)
    assert store.get_operation(sh.lock, B).revision == opb.revision


def test_unlock_through_the_optimist_thread_reports_failure_and_answers_the_newer_info(store, fence):
    """The race as it happens in a master: the newer Info is written while the optimist thread
    is deciding the unlock; the request fails and the watch then delivers the newer Info."""
    from protos import master_pb2 as pb
    from coordinator.master.errors import RequestError
    from coordinator.master.optimist import Optimist
    sh = Shards(store, "shop")
    opt = Optimist(store, fence).start()
    try:
        wait_for(lambda: opt.ready, what="optimist ready")
        sh.publish(A, B)
        ia, opa = sh.send(A, "ALTER TABLE `orders` ADD COLUMN `c` INT")
        store.mark_done(opa)
        ib, opb = sh.send(B, "ALTER TABLE `orders` ADD COLUMN `c` VARCHAR(10)")
        assert opb.stage is Stage.DETECTED
        keeper = opt.engine.keeper
        real_unlock = keeper.unlock
        newer = sh.info(B, "ALTER TABLE `orders` ADD COLUMN `d` INT")

        def racing_unlock(*a, **kw):
            out = real_unlock(*a, **kw)
            newer.revision = store.put_info(newer)       # lands between decision and write
            return out
        keeper.unlock = racing_unlock
        req = pb.UnlockDDLLockRequest(ID=sh.lock_id, action="skip", source=B.source, database=B.schema,
                                      table=B.table)
        with pytest.raises(RequestError) as ei:
            opt.unlock(fence, req)
        assert "was NOT applied" in str(ei.value) and "newer DDL" in str(ei.value)
        keeper.unlock = real_unlock
        op = store.wait_operation(sh.lock, B, newer.revision, timeout=15)
        assert op.info_revision == newer.revision and op.stage is not Stage.UNLOCKED
    finally:
        opt.close()


def test_concurrent_task_stage_changes_both_land(store, fence, tmp_path):
    """pause-task -s s1 and pause-task -s s2 at the same time: both report success, so both
    must be in the record (a read-modify-write race would silently undo one)."""
    import threading

    from coordinator.etcdproto import SourceRecord
    from coordinator.master.cluster import Cluster

    from .conftest import task_yaml
    cluster = Cluster(store)
    for s in ("s1", "s2", "s3"):
        store.put_source(fence, SourceRecord(s, source_yaml(s)))
    cluster.start_task(fence, task_yaml("t1"), "t1.yaml", [])
    both_read = threading.Event()
    reads = []
    real_get = store.get_task

    def slow_get(name):          # hold the first reader until a second one reads too (max 1 s)
        rec = real_get(name)
        reads.append(1)
        if len(reads) >= 2:
            both_read.set()
        both_read.wait(1.0)
        return rec
    store.get_task = slow_get
    try:
        results = []
        threads = [threading.Thread(target=lambda s=s: results.append(cluster.pause_task(fence, "t1", [s])))
                   for s in ("s1", "s2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    finally:
        del store.get_task
    assert [r.ok for r in results] == [True, True]
    rec = store.get_task("t1")
    assert (rec.stage_of("s1"), rec.stage_of("s2")) == ("paused", "paused")
    # start-task on one more source reports that source only (the others were running already)
    out = cluster.start_task(fence, task_yaml("t1", sources=("s1", "s2", "s3")), "t1.yaml", ["s3"])
    assert out.ok and [s for s, _, _ in out.per_source] == ["s3"]
    assert store.get_task("t1").sources == ["s1", "s2", "s3"]


def test_expectation_of_a_lock_in_error_cannot_be_checked():
    """Pure logic: a lock with an unreadable record has no reliable schema; the check refuses
    and says why instead of listing nonsense DDLs."""
    from coordinator.lock import LockKeeper
    from coordinator.master.schema_check import check
    k = LockKeeper()
    sh = Shards(None, "shop")
    info = sh.info(A, ADD_E)
    info.revision = 5
    k.handle_info(info, target_tables=[A, B])
    exp = k.expectation(sh.lock)
    assert exp.error == "" and exp.now.column("e") is None and exp.issued.column("e") is not None
    assert check(exp, BASE, "h:1").agree and check(exp, apply_ddl(BASE, ADD_E), "h:1").agree
    k.mark_error(sh.lock, "unreadable record /x: not JSON", B)
    res = check(k.expectation(sh.lock), BASE, "h:1")
    assert not res.agree and "state error" in res.text and "not JSON" in res.text
