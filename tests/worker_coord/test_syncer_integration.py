"""The optimistic DDL handler inside the real syncer (Spark, binlog, downstream checkpoints),
with a background thread in the master's role.  2 sources x 2 shard tables -> 1 target;
``worker.check`` is the oracle."""
import threading
import time

import pytest

from coordinator.etcdproto import Stage
from worker.check import check_task
from worker.shardddl import OptimisticDDLHandler
from worker.schema_tracker import SchemaTracker
from worker.status import PAUSED, RUNNING, StatusReporter
from worker.sync.hooks import Hooks, SimulatedCrash
from worker.sync.syncer import Syncer

from ..worker.conftest import make_task, positions  # noqa: F401 (fixture)
from .conftest import AutoMaster, wait_for


def _build(spark, store, task, src, down, hooks=None):
    import pymysql
    up_kw = src.db.pymysql_kwargs()
    inst = task.instance(src.source_id)
    from coordinator.routing import TableMapper
    mapper = TableMapper(inst, task.meta_schema)
    status = StatusReporter(store, task.name, src.source_id, "w-test", min_interval=0)
    stop = threading.Event()
    handler = OptimisticDDLHandler(store, task.name, src.source_id, mapper,
                                   SchemaTracker(src.source_id, connect=lambda: pymysql.connect(**up_kw)),
                                   status, stop=stop)
    return Syncer(spark, task, src, handler, **({"hooks": hooks} if hooks is not None else {})), status, stop


def _status(store, task, source):
    return store._get("status", store.keys.key("status", task, source))[0]


def _down_columns(down) -> list[str]:
    return [r[0] for r in down.execute(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME='orders' "
        "ORDER BY ORDINAL_POSITION", (down.name,))]


def _restart(spark, store, task, src, down, syncers, hooks=None):
    """Stop the last syncer of ``syncers`` and start a new one from the checkpoints."""
    syncer, stop = syncers[-1]
    stop.set()
    syncer.close()
    syncer, _, stop = _build(spark, store, task, src, down, hooks)
    syncers.append((syncer, stop))
    return syncer


def _unlock_exec_modify(store, task, master, syncer) -> None:
    """``shard-ddl-lock unlock --action exec`` of the held MODIFY, then the held table's replay."""
    info = next(i for i in store.list_infos(task.name).items if "MODIFY" in " ".join(i.ddls))
    master.acting.answer(info, Stage.UNLOCKED, info.ddls)
    wait_for(lambda: syncer._rewind.is_set(), what="rewind requested by the redirect waiter")
    syncer.sync_until_caught_up()


def test_staggered_add_column_conflict_unlock_skip_then_restart(spark, store, source1_db, source2_db,
                                                                downstream_db, positions):
    p1, p2 = positions(source1_db, source2_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db, "s2": source2_db}, start={"s1": p1, "s2": p2})
    for db, base in ((source1_db, 0), (source2_db, 100_000)):
        for n, t in enumerate(("orders_01", "orders_02")):
            db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
            db.execute(f"INSERT INTO {t} VALUES " + ", ".join(
                f"({base + n * 10_000 + i}, {i})" for i in range(20)))

    blocked = {"modify": True}

    def policy(info):
        text = " ".join(info.ddls).upper()
        if "MODIFY" in text:   # a conflicting change: detected until the operator unlocks
            return (Stage.DETECTED, []) if blocked["modify"] else None
        return Stage.NONE, info.ddls

    master = AutoMaster(store, policy)
    try:
        syncers = {sid: _build(spark, store, task, srcs[sid], downstream_db) for sid in ("s1", "s2")}
        for s, _, _ in syncers.values():
            s.sync_until_caught_up()
        assert check_task(task, srcs).equal

        # staggered ADD COLUMN with writes between
        source1_db.execute("ALTER TABLE orders_01 ADD COLUMN c INT DEFAULT 7")
        source1_db.execute("INSERT INTO orders_01 VALUES (500, 1, 5)")
        source2_db.execute("INSERT INTO orders_01 VALUES (100500, 1)")
        for s, _, _ in syncers.values():
            s.sync_until_caught_up()
        down_cols = [r[0] for r in downstream_db.execute("SHOW COLUMNS FROM orders")]
        assert down_cols == ["id", "v", "c"]
        for db, t in ((source1_db, "orders_02"), (source2_db, "orders_01"), (source2_db, "orders_02")):
            db.execute(f"ALTER TABLE {t} ADD COLUMN c INT DEFAULT 7")
            db.execute(f"UPDATE {t} SET c = 9 WHERE v < 3")
        for s, _, _ in syncers.values():
            s.sync_until_caught_up()
        rep = check_task(task, srcs)
        assert rep.equal, rep.to_json()
        assert len([a for a in master.answered if "ADD COLUMN" in " ".join(a[0].ddls)]) == 4

        # conflict on s1: the syncer blocks, status Paused with the lock ID; unlock skip -> continues
        source1_db.execute("ALTER TABLE orders_02 MODIFY v BIGINT")
        source1_db.execute("INSERT INTO orders_02 VALUES (600, 6, 6)")
        s1, st1, _ = syncers["s1"]
        runner = threading.Thread(target=s1.sync_until_caught_up, daemon=True)
        runner.start()
        st = wait_for(lambda: (x := _status(store, task.name, "s1")) and x.stage == PAUSED and x,
                      what="Paused status", timeout=60)
        assert st.detail["lock_id"] == f"{task.name}-`{downstream_db.name}`.`orders`"
        assert st.detail["error"]["position"]
        info = next(i for i in store.list_infos(task.name).items if "MODIFY" in " ".join(i.ddls))
        master.acting.answer(info, Stage.UNLOCKED, [])      # shard-ddl-lock unlock --action skip
        runner.join(60)
        assert not runner.is_alive()
        assert _status(store, task.name, "s1").stage == RUNNING
        # writes after the skipped DDL keep flowing (tiflow#9588: nothing skipped after resume)
        source1_db.execute("INSERT INTO orders_02 VALUES (601, 7, 7)")
        source1_db.execute("UPDATE orders_01 SET v = v + 1000")
        s1.sync_until_caught_up()
        rep = check_task(task, srcs)
        assert rep.equal, rep.to_json()

        # restart both syncers from their checkpoints (fresh handler/tracker), more writes
        source1_db.execute("INSERT INTO orders_02 VALUES (602, 8, 8)")
        source2_db.execute("DELETE FROM orders_02 WHERE v > 15")
        syncers = {sid: _build(spark, store, task, srcs[sid], downstream_db) for sid in ("s1", "s2")}
        for s, _, _ in syncers.values():
            s.sync_until_caught_up()
        rep = check_task(task, srcs)
        assert rep.equal, rep.to_json()
        assert downstream_db.execute("SELECT COUNT(*) FROM orders WHERE id IN (600, 601, 602)") == [(3,)]
    finally:
        master.close()


def test_skip_and_wait_holds_only_that_table_until_unlock(spark, store, source1_db, downstream_db, positions):
    """A skip-and-wait answer holds the shard table (its rows wait) while the other shards of the
    same source keep replicating; an unlock (exec) makes the syncer replay the held table from
    its DDL, executing the operator's answer without asking the lock again."""
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    for n, t in enumerate(("orders_01", "orders_02")):
        source1_db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
        source1_db.execute(f"INSERT INTO {t} VALUES ({n * 100 + 1}, 1), ({n * 100 + 2}, 2)")
    master = AutoMaster(store, lambda info: ((Stage.SKIP_AND_WAIT, []) if "MODIFY" in " ".join(info.ddls)
                                             else (Stage.NONE, info.ddls)))
    try:
        syncer, status, _ = _build(spark, store, task, srcs["s1"], downstream_db)
        syncer.sync_until_caught_up()
        source1_db.execute("ALTER TABLE orders_01 MODIFY v BIGINT")
        source1_db.execute("INSERT INTO orders_01 VALUES (3, 5000000000)")
        source1_db.execute("INSERT INTO orders_02 VALUES (103, 3)")
        syncer.sync_until_caught_up()
        ids = {r[0] for r in downstream_db.execute("SELECT id FROM orders")}
        assert 103 in ids and 3 not in ids                      # only the held table waits
        assert (source1_db.name, "orders_01") in syncer.held
        st = _status(store, task.name, "s1")
        assert "redirect" in st.detail["waiting_for"] and st.detail["lock_id"].startswith(task.name)

        info = next(i for i in store.list_infos(task.name).items if "MODIFY" in " ".join(i.ddls))
        master.acting.answer(info, Stage.UNLOCKED, info.ddls)   # shard-ddl-lock unlock --action exec
        wait_for(lambda: syncer._rewind.is_set(), what="rewind requested by the redirect waiter")
        syncer.sync_until_caught_up()
        assert downstream_db.execute("SELECT v FROM orders WHERE id = 3") == [(5000000000,)]
        assert not syncer.held
        op = store.get_operation(info.lock, info.table)
        assert op.done and op.stage is Stage.UNLOCKED
        # the lock was not asked again for the replayed DDL: one MODIFY answer only
        assert len([a for a in master.answered if "MODIFY" in " ".join(a[0].ddls)]) == 1
        rep = check_task(task, srcs)
        assert rep.equal, rep.to_json()
    finally:
        master.close()


def test_a_multi_change_alter_is_coordinated_change_by_change_through_a_hold_and_a_restart(
        spark, store, source1_db, downstream_db, positions):
    """``ALTER ... ADD a, MODIFY v BIGINT, ADD c``: each change is its own Info, sent once the one
    before is done.  The lock holds the MODIFY: ``a`` is already downstream, ``c`` not yet, the
    other shard keeps replicating.  A worker restart while held does not coordinate ``ADD a``
    again (the finished record of change 0 says so) and waits on the MODIFY's own Info; the
    operator's unlock (exec) then runs the MODIFY, and only then is ``ADD c`` sent.  Each change
    ran once, each was answered once, and the merged table equals the shards."""
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    for n, t in enumerate(("orders_01", "orders_02")):
        source1_db.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
        source1_db.execute(f"INSERT INTO {t} VALUES ({n * 100 + 1}, 1), ({n * 100 + 2}, 2)")
    master = AutoMaster(store, lambda info: ((Stage.SKIP_AND_WAIT, []) if "MODIFY" in " ".join(info.ddls)
                                             else (Stage.NONE, info.ddls)))
    syncers = []
    try:
        syncer, _, stop = _build(spark, store, task, srcs["s1"], downstream_db)
        syncers.append((syncer, stop))
        syncer.sync_until_caught_up()
        source1_db.execute("ALTER TABLE orders_01 ADD COLUMN a INT, MODIFY v BIGINT, ADD COLUMN c INT")
        source1_db.execute("INSERT INTO orders_01 VALUES (3, 5000000000, 7, 8)")
        source1_db.execute("INSERT INTO orders_02 VALUES (103, 3)")
        syncer.sync_until_caught_up()
        cols = _down_columns(downstream_db)
        assert cols == ["id", "v", "a"]                       # change 0 ran; change 2 not yet sent
        ids = {r[0] for r in downstream_db.execute("SELECT id FROM orders")}
        assert 103 in ids and 3 not in ids
        assert (source1_db.name, "orders_01") in syncer.held
        sent = [" ".join(a[0].ddls) for a in master.answered]
        assert len(sent) == 2 and "ADD COLUMN `a`" in sent[0] and "MODIFY" in sent[1]

        # a restart while held: the replay meets change 0 finished and waits on the MODIFY's Info
        syncer = _restart(spark, store, task, srcs["s1"], downstream_db, syncers)
        syncer.sync_until_caught_up()
        assert (source1_db.name, "orders_01") in syncer.held
        assert len(master.answered) == 2, [a[0].ddls for a in master.answered]

        _unlock_exec_modify(store, task, master, syncer)
        assert not syncer.held
        sent = [" ".join(a[0].ddls) for a in master.answered]
        assert len(sent) == 3 and "ADD COLUMN `c`" in sent[2], sent
        assert downstream_db.execute("SELECT id, v, a, c FROM orders WHERE id = 3") == [(3, 5000000000, 7, 8)]
        rep = check_task(task, srcs)
        assert rep.equal, rep.to_json()
    finally:
        master.close()
        for s, st in syncers:
            st.set()
            s.close()


def test_a_later_change_the_lock_asks_for_first_runs_first_and_a_restart_keeps_that_order(
        spark, store, source1_db, downstream_db, positions):
    """``ALTER ... RENAME a TO a2, MODIFY v BIGINT, RENAME b TO b2``: the lock answers the first
    change with ``first`` = the RENAME of ``b`` (other tables are held on it).  The worker sends
    that change next (its Info names the others as ``rest``), then ``RENAME a`` again, then the
    MODIFY, which is held.  A restart while held does not coordinate either rename again: the
    intent row says which changes are finished, in whatever order they ran, and the replay sends
    the MODIFY's Info from the schema after both.  Each change runs once downstream."""
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    # one shard table: this stand-in master answers "run" without a lock's agreement
    source1_db.execute("CREATE TABLE orders_01 (id INT PRIMARY KEY, v INT, a INT, b INT)")
    source1_db.execute("INSERT INTO orders_01 VALUES (1, 1, 1, 1), (2, 2, 2, 2)")

    def policy(info):
        text = " ".join(info.ddls)
        if "RENAME COLUMN `a`" in text and len(info.rest) == 2:
            return Stage.SKIP_AND_WAIT, [], next(r for r in info.rest if "RENAME COLUMN `b`" in r)
        if "MODIFY" in text:
            return Stage.SKIP_AND_WAIT, []
        return Stage.NONE, info.ddls
    master = AutoMaster(store, policy)
    syncers = []
    try:
        syncer, _, stop = _build(spark, store, task, srcs["s1"], downstream_db)
        syncers.append((syncer, stop))
        syncer.sync_until_caught_up()
        source1_db.execute("ALTER TABLE orders_01 RENAME COLUMN a TO a2, MODIFY v BIGINT, RENAME COLUMN b TO b2")
        source1_db.execute("INSERT INTO orders_01 VALUES (3, 5000000000, 7, 8)")
        syncer.sync_until_caught_up()
        assert (source1_db.name, "orders_01") in syncer.held
        sent = [(" ".join(a[0].ddls), len(a[0].rest)) for a in master.answered]
        assert [(("RENAME COLUMN `a`" in d) + 2 * ("RENAME COLUMN `b`" in d) + 4 * ("MODIFY" in d), n)
                for d, n in sent] == [(1, 2), (2, 2), (1, 1), (4, 0)], sent
        cols = _down_columns(downstream_db)
        assert cols == ["id", "v", "a2", "b2"]                   # both renames ran, the MODIFY waits

        # a restart while held: both renames finished (in the lock's order), the MODIFY's Info again
        syncer = _restart(spark, store, task, srcs["s1"], downstream_db, syncers)
        syncer.sync_until_caught_up()
        assert (source1_db.name, "orders_01") in syncer.held
        assert len(master.answered) == 4, [a[0].ddls for a in master.answered]

        _unlock_exec_modify(store, task, master, syncer)
        assert not syncer.held
        assert len(master.answered) == 4
        assert downstream_db.execute("SELECT id, v, a2, b2 FROM orders WHERE id = 3") == [(3, 5000000000, 7, 8)]
        rep = check_task(task, srcs)
        assert rep.equal, rep.to_json()
    finally:
        master.close()
        for s, st in syncers:
            st.set()
            s.close()


def test_a_held_rename_runs_with_a_later_one_folded_in_and_restarts_keep_the_fold(
        spark, store, source1_db, downstream_db, positions):
    """``RENAME a TO a2``, a row, ``ADD c``, a row, ``RENAME b TO b2``, a row.  The lock holds the
    first rename; the held table's stream reads past it and sends the later statements as
    look-ahead (``Info.ahead``, one put each); the lock then asks for ``RENAME b`` to be folded
    in (``Operation.combine``).  The replay runs both renames as one ALTER, the ``ADD c`` in
    its place, and passes over ``RENAME b``; the rows between are written as ``b2``.  The worker
    is killed after each of the two DDLs runs: the restarts neither run them again nor lose the
    fold (checkpoint rule 11)."""
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE orders_01 (id INT PRIMARY KEY, v INT, a INT, b INT)")
    source1_db.execute("INSERT INTO orders_01 VALUES (1, 1, 1, 1)")

    def policy(info):
        text = " ".join(info.ddls)
        if "RENAME COLUMN `a`" in text and "RENAME COLUMN `b`" not in text:
            k = next((i for i, s in enumerate(info.ahead) if "RENAME COLUMN `b`" in s), None)
            return (Stage.SKIP_AND_WAIT, []) if k is None else (Stage.SKIP_AND_WAIT, [], "", [k])
        return Stage.NONE, info.ddls
    crashes = ["RENAME", "ADD"]

    def crash(i):
        if crashes and crashes[0] in i["event"].query.upper() and i["executed"]:
            raise SimulatedCrash(f"killed after {crashes.pop(0)} ran")
    master = AutoMaster(store, policy)
    syncers = []
    try:
        syncer, _, stop = _build(spark, store, task, srcs["s1"], downstream_db, Hooks(after_ddl_execute=crash))
        syncers.append((syncer, stop))
        syncer.sync_until_caught_up()
        for sql in ("ALTER TABLE orders_01 RENAME COLUMN a TO a2", "INSERT INTO orders_01 VALUES (2, 2, 20, 21)",
                    "ALTER TABLE orders_01 ADD COLUMN c INT", "INSERT INTO orders_01 VALUES (3, 3, 30, 31, 32)",
                    "ALTER TABLE orders_01 RENAME COLUMN b TO b2", "INSERT INTO orders_01 VALUES (4, 4, 40, 41, 42)"):
            source1_db.execute(sql)
        syncer.sync_until_caught_up()
        assert (source1_db.name, "orders_01") in syncer.held
        wait_for(lambda: syncer._rewind.is_set(), what="rewind asked for by the combine answer")
        # the held Info put again as the stream read on (the stand-in master may see only the last)
        held = [a[0] for a in master.answered]
        assert len(held[0].ahead) == 0 and len(held[-1].ahead) == 2 and held[-1].extends == held[0].revision, held
        for _ in range(2):
            with pytest.raises(SimulatedCrash):
                syncer.sync_until_caught_up()
            syncer = _restart(spark, store, task, srcs["s1"], downstream_db, syncers, Hooks(after_ddl_execute=crash))
        syncer.sync_until_caught_up()
        assert not syncer.held
        ran = [" ".join(a[0].ddls) for a in master.answered if a[1] is Stage.NONE]
        assert len(ran) == 2 and "RENAME COLUMN `b` TO `b2`" in ran[0] and "ADD COLUMN" in ran[1], ran
        assert _down_columns(downstream_db) == ["id", "v", "a2", "b2", "c"]
        assert downstream_db.execute("SELECT id, a2, b2, c FROM orders ORDER BY id") == [
            (1, 1, 1, None), (2, 20, 21, None), (3, 30, 31, 32), (4, 40, 41, 42)]
        assert not syncer.store.tables[(source1_db.name, "orders_01")].folded
        rep = check_task(task, srcs)
        assert rep.equal, rep.to_json()
    finally:
        master.close()
        for s, st in syncers:
            st.set()
            s.close()


def test_a_redirect_met_while_waiting_on_a_stored_info_with_look_ahead_is_answered_afresh(
        spark, store, source1_db, downstream_db, positions):
    """A restart meets a held table's DDL again and waits on its stored Info, which carries
    look-ahead (``extends``).  When the redirect (``resolved``) arrives the DDL is sent again:
    as a fresh Info, not as that repeat, because the lock keeps a repeat's answer and would
    redirect it again, for ever (seen in the chaos run: 120,000 Infos in four minutes)."""
    (p1,) = positions(source1_db)
    task, srcs, _ = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    source1_db.execute("CREATE TABLE orders_01 (id INT PRIMARY KEY, v INT, a INT)")
    source1_db.execute("INSERT INTO orders_01 VALUES (1, 1, 1)")

    def policy(info):
        if "a2" not in " ".join(info.ddls):
            return Stage.NONE, info.ddls
        if info.extends:                 # as the lock: a repeat keeps the answer of what it repeats
            if not redirected:
                return None              # unanswered: the restart waits on it
            if info.revision > held_until[0]:
                repeats.append(info.revision)     # put again after the redirect (the stored one is not)
            return (Stage.RESOLVED, []) if len(repeats) < 30 else (Stage.NONE, info.ddls)
        return (Stage.SKIP_AND_WAIT, []) if not info.revision > held_until[0] else (Stage.NONE, info.ddls)
    redirected: list = []
    repeats: list = []
    held_until = [1 << 62]
    master = AutoMaster(store, policy)
    syncers = []
    try:
        syncer, _, stop = _build(spark, store, task, srcs["s1"], downstream_db)
        syncers.append((syncer, stop))
        syncer.sync_until_caught_up()
        source1_db.execute("ALTER TABLE orders_01 RENAME COLUMN a TO a2")
        source1_db.execute("ALTER TABLE orders_01 ADD COLUMN c INT")
        source1_db.execute("INSERT INTO orders_01 VALUES (2, 2, 2, 2)")
        syncer.sync_until_caught_up()
        assert (source1_db.name, "orders_01") in syncer.held
        wait_for(lambda: (i := store.list_infos(task.name).items) and i[0].extends, what="the look-ahead repeat put")
        syncer = _restart(spark, store, task, srcs["s1"], downstream_db, syncers)
        (stored,) = store.list_infos(task.name).items
        held_until[0] = stored.revision                  # a fresh Info after this one runs

        def redirect_later():
            time.sleep(2)                                # while the restart waits on the stored Info
            redirected.append(True)
            master.acting.answer(stored, Stage.RESOLVED, [])
        threading.Thread(target=redirect_later, daemon=True).start()
        syncer.sync_until_caught_up()
        assert not syncer.held
        assert len(repeats) == 0, f"the repeat was sent again {len(repeats)} times"
        sent = [a[0] for a in master.answered]
        assert sent[-1].extends == 0 and not sent[-1].ahead
        assert _down_columns(downstream_db) == ["id", "v", "a2", "c"]
        assert downstream_db.execute("SELECT id, a2, c FROM orders ORDER BY id") == [(1, 1, None), (2, 2, 2)]
    finally:
        master.close()
        for s, st in syncers:
            st.set()
            s.close()
