"""The etcd layout against the real etcd: round trips, fencing, guarded removal, bad records."""
from __future__ import annotations

import threading

import pytest

from coordinator.etcdproto import (Fenced, GarbageRecord, Info, LockKey, Operation, Remnant, SourceTables, Stage,
                                   StaleOperation, Store, TableRef, UnknownVersion, DroppedStage,
                                   OperationWaitTimeout)

LOCK = LockKey("task1", "shop", "orders")
A = TableRef("s1", "shop_01", "orders_0001")
B = TableRef("s2", "shop_02", "orders_0002")
C = TableRef("s1", "shop_01", "orders_0003")


def _info(t: TableRef, ddls=("ALTER TABLE `shop`.`orders` ADD COLUMN c1 INT",)) -> Info:
    return Info(task=LOCK.task, source=t.source, up_schema=t.schema, up_table=t.table,
                down_schema=LOCK.down_schema, down_table=LOCK.down_table, ddls=list(ddls),
                before={"columns": []}, afters=[{"columns": ["c1"]}] * len(ddls))


def _op(info: Info, rev: int, stage=Stage.NONE, ddls=None) -> Operation:
    return Operation(lock_id=LOCK.id, task=info.task, source=info.source, up_schema=info.up_schema,
                     up_table=info.up_table, down_schema=info.down_schema, down_table=info.down_table,
                     info_revision=rev, ddls=list(info.ddls if ddls is None else ddls), stage=stage)


@pytest.fixture
def store(etcd_client, etcd_prefix):
    return Store(etcd_client, etcd_prefix)


@pytest.fixture
def fence(store):
    f = store.campaign("m1", "127.0.0.1:1", ttl=30)
    assert f is not None
    yield f
    store.resign(f)


def test_info_operation_round_trip_worker_ignores_older_answers(store, fence):
    info = _info(A)
    rev1 = store.put_info(info)
    assert store.get_info(LOCK, A).ddls == info.ddls
    # an answer to an older Info of this table must not wake the worker waiting for rev2
    rev2 = store.put_info(_info(A, ["ALTER TABLE `shop`.`orders` ADD COLUMN c2 INT"]))
    assert rev2 > rev1
    stale = _op(info, rev1)
    assert store.put_operation(fence, stale).reason == "newer-info"   # master side refuses too
    got = {}

    def worker():
        got["op"] = store.wait_operation(LOCK, A, rev2, timeout=20)
    t = threading.Thread(target=worker)
    t.start()
    res = store.put_operation(fence, _op(_info(A, ["ALTER TABLE `shop`.`orders` ADD COLUMN c2 INT"]), rev2))
    assert res.put
    t.join(25)
    op = got["op"]
    assert op.info_revision == rev2 and op.ddls == ["ALTER TABLE `shop`.`orders` ADD COLUMN c2 INT"]
    assert op.revision == res.revision
    done_rev = store.mark_done(op)
    stored = store.get_operation(LOCK, A)
    # the done mark is a key of its own: the Operation (the master's answer) is not rewritten
    assert stored.done and stored.revision == op.revision and done_rev > op.revision
    assert store.list_operations(LOCK.task).items[0].done
    assert store.mark_done(op) == done_rev            # marking again: already marked, nothing written
    # rebuild replays the Info: an Operation already done for it is kept (no second execution)
    again = store.put_operation(fence, _op(_info(A, op.ddls), rev2), skip_done=True)
    assert (again.put, again.reason) == (False, "done")
    # a done Operation is history (issue 28 case 7): no answer for the same Info overwrites it,
    # one by one or batched; before, live handling overwrote it and the done mark was lost
    redirect = _op(_info(A, op.ddls), rev2, stage=Stage.RESOLVED, ddls=[])
    assert (lambda r: (r.put, r.reason))(store.put_operation(fence, redirect)) == (False, "done")
    assert [r.put for r in store.put_operations(fence, [redirect])] == [False]
    stored = store.get_operation(LOCK, A)
    assert stored.done and stored.stage is Stage.NONE and stored.revision == op.revision
    # a newer Info of the table is answered as usual
    rev3 = store.put_info(_info(A, ["ALTER TABLE `shop`.`orders` ADD COLUMN c3 INT"]))
    assert [r.put for r in store.put_operations(fence, [_op(_info(A, ["x"]), rev3, ddls=[])])] == [True]
    assert not store.get_operation(LOCK, A).done


def test_info_and_operation_in_one_read_match_the_separate_reads(store, fence):
    """The worker's read before each shard DDL (``LockClient.stored``): the Info and the
    Operation with its done flag, as ``get_info`` / ``get_operation`` give them."""
    assert store.get_info_and_operation(LOCK, C) == (None, None)
    info = _info(C)
    rev = store.put_info(info)
    got_info, got_op = store.get_info_and_operation(LOCK, C)
    assert got_info == store.get_info(LOCK, C) and got_info.revision == rev and got_op is None
    assert store.put_operation(fence, _op(info, rev)).put
    got_info, got_op = store.get_info_and_operation(LOCK, C)
    assert got_op == store.get_operation(LOCK, C) and got_op.info_revision == rev and not got_op.done
    store.mark_done(got_op)
    _, got_op = store.get_info_and_operation(LOCK, C)
    assert got_op.done and got_op == store.get_operation(LOCK, C)


def test_wait_after_own_put_sees_an_answer_written_before_the_wait_began(store, fence):
    """``just_put``: no read before the first watch.  The watch starts right after the Info's
    revision, so an answer the master wrote before the worker began to wait is still seen, and
    an answer to an older Info is not."""
    info = _info(B)
    old = store.put_info(info)
    rev = store.put_info(_info(B, ["ALTER TABLE `shop`.`orders` ADD COLUMN c9 INT"]))
    assert store.put_operation(fence, _op(info, old)).reason == "newer-info"
    res = store.put_operation(fence, _op(_info(B, ["ALTER TABLE `shop`.`orders` ADD COLUMN c9 INT"]), rev))
    assert res.put
    op = store.wait_operation(LOCK, B, rev, timeout=10, just_put=True)
    assert op.info_revision == rev and op.revision == res.revision
    with pytest.raises(OperationWaitTimeout):
        store.wait_operation(LOCK, B, old, timeout=0.5, just_put=True)


def test_done_mark_follows_an_identical_rewrite_and_legacy_in_place_marks_count(store, fence, etcd_client):
    info = _info(A)
    rev = store.put_info(info)
    first = _op(info, rev)
    assert store.put_operation(fence, first).put
    read = store.get_operation(LOCK, A)
    # a master rebuild rewrites the same answer between the worker's read and its done mark
    assert store.put_operation(fence, _op(info, rev)).put
    store.mark_done(read)
    cur = store.get_operation(LOCK, A)
    assert cur.done and cur.revision > read.revision
    # an Operation an older release marked done in place stays done (no second execution)
    key = store.operation_key(LOCK, B)
    ib = _info(B)
    rb = store.put_info(ib)
    etcd_client.put(key, _op(ib, rb).encode(done=True))
    assert store.get_operation(LOCK, B).done
    assert {o.up_table: o.done for o in store.list_operations(LOCK.task).items} == {A.table: True, B.table: True}
    # a done key holding garbage reads as not done, and marking replaces it
    ic = _info(C)
    rc = store.put_info(ic)
    assert store.put_operation(fence, _op(ic, rc)).put
    opc = store.get_operation(LOCK, C)
    etcd_client.put(store.done_key(LOCK, C), b"{garbage")
    assert not store.get_operation(LOCK, C).done
    store.mark_done(opc)
    assert store.get_operation(LOCK, C).done


def test_wait_operation_times_out_and_detected_then_next(store, fence):
    info = _info(A)
    rev = store.put_info(info)
    with pytest.raises(OperationWaitTimeout) as ei:
        store.wait_operation(LOCK, A, rev, timeout=0.5)
    assert ei.value.etcd_key == store.operation_key(LOCK, A)
    assert store.put_operation(fence, _op(info, rev, Stage.DETECTED, [])).put
    det = store.wait_operation(LOCK, A, rev, timeout=5)
    assert det.stage is Stage.DETECTED
    # the next decision for the same Info (unlock) is a newer Operation
    assert store.put_operation(fence, _op(info, rev, Stage.UNLOCKED, [])).put
    nxt = store.wait_operation(LOCK, A, rev, after_revision=det.revision, timeout=5)
    assert nxt.stage is Stage.UNLOCKED and nxt.revision > det.revision
    # marking the replaced `detected` answer done is refused
    with pytest.raises(StaleOperation):
        store.mark_done(det)


def test_fenced_write_by_old_leader_is_rejected(store, etcd_client):
    old = store.campaign("m1", ttl=30)
    assert store.campaign("m2", ttl=30) is None          # someone leads
    info = _info(A)
    rev = store.put_info(info)
    assert store.put_operation(old, _op(info, rev)).put
    # old leader's lease expires (simulated by revoking it); a new master is elected
    old.lease.revoke()
    new = store.campaign("m2", ttl=30)
    assert new is not None and new.revision > old.revision
    before = store.get_operation(LOCK, A)
    for write in (lambda: store.put_operation(old, _op(info, rev, Stage.ERROR, [])),
                  lambda: store.remove_lock(old, LOCK, rev),
                  lambda: store.delete_task(old, LOCK.task),
                  lambda: store.put_dropped_columns(old, LOCK, A, ["c1"])):
        with pytest.raises(Fenced) as ei:
            write()
        assert "m1" in str(ei.value) and ei.value.etcd_key.endswith("leader")
    after = store.get_operation(LOCK, A)
    assert after.revision == before.revision and after.stage is Stage.NONE
    assert store.list_dropped_columns(LOCK).items == []
    assert store.put_operation(new, _op(info, rev, Stage.ERROR, [])).put
    store.resign(new)


def test_lock_removal_refused_when_newer_info_exists(store, fence, etcd_client):
    ia, ib = _info(A), _info(B)
    ra, rb = store.put_info(ia), store.put_info(ib)
    store.put_operation(fence, _op(ia, ra))
    store.put_operation(fence, _op(ib, rb))
    store.put_dropped_columns(fence, LOCK, A, ["c9"])
    store.mark_done(store.get_operation(LOCK, A))
    handled = max(ra, rb)
    # a worker writes a newer Info the lock has not processed
    store.put_info(_info(A, ["ALTER TABLE `shop`.`orders` ADD COLUMN c3 INT"]))
    assert store.remove_lock(fence, LOCK, handled) is False
    assert len(store.list_infos(LOCK.task).items) == 2
    assert len(store.list_operations(LOCK.task).items) == 2
    assert len(store.list_dropped_columns(LOCK).items) == 1
    # once processed, removal deletes everything of the lock in one txn, and nothing else
    other = LockKey(LOCK.task, "shop", "customers")
    other_info = Info(task=other.task, source="s1", up_schema="x", up_table="c", down_schema="shop",
                      down_table="customers", ddls=["x"], before={}, afters=[{}])
    store.put_info(other_info)
    newest = max(i.revision for i in store.list_infos(LOCK.task).items if i.down_table == "orders")
    assert store.remove_lock(fence, LOCK, newest) is True
    left = store.list_infos(LOCK.task).items
    assert [(i.down_table) for i in left] == ["customers"]
    assert store.list_operations(LOCK.task).items == []
    assert store.list_dropped_columns(LOCK).items == []
    assert etcd_client.get_prefix_response(store.keys.lock_prefix("done", LOCK)).kvs == []


def test_an_answer_to_an_info_repeated_with_more_look_ahead_is_written_for_the_repeat(store, fence):
    """A held table's worker puts its Info again with more look-ahead (``extends``) while the
    leader writes an answer to the first one: the answer is written for the repeat (the same
    DDL), so the worker waiting on the new revision gets it and a rebuild finds it; a newer Info
    that does not extend it still makes the answer obsolete."""
    import dataclasses
    first = _info(A)
    r1 = store.put_info(first)
    r2 = store.put_info(dataclasses.replace(first, ahead=["ALTER TABLE `shop`.`orders` ADD COLUMN c2 INT"],
                                            reads_ahead=True, extends=r1))
    res = store.put_operation(fence, _op(first, r1, stage=Stage.SKIP_AND_WAIT, ddls=[]))
    assert res.put
    op = store.get_operation(LOCK, A)
    assert op.info_revision == r2 and op.stage is Stage.SKIP_AND_WAIT
    store.put_info(_info(A, ["ALTER TABLE `shop`.`orders` ADD COLUMN c3 INT"]))
    res = store.put_operation(fence, _op(first, r2, stage=Stage.RESOLVED, ddls=[]))
    assert not res.put and res.reason == "newer-info"


def test_remnants_outlive_their_lock_and_go_with_the_task(store, fence):
    """What a departed table left downstream is kept past the lock's removal (the target's next
    lock starts with it) and deleted with the task (whole, or its source's tables)."""
    ia = _info(A)
    ra = store.put_info(ia)
    store.put_operation(fence, _op(ia, ra))
    schema = {"columns": [{"name": "c2"}]}
    store.put_remnants(fence, LOCK, [Remnant.of(LOCK, B, schema, ["c1"]), Remnant.of(LOCK, C, schema)])
    assert store.remove_lock(fence, LOCK, ra) is True
    assert store.list_infos(LOCK.task).items == []
    rems = store.list_remnants().items
    assert sorted((str(r.lock.id), str(r.table)) for r in rems) == sorted((LOCK.id, str(t)) for t in (B, C))
    assert all(r.schema == schema for r in rems)
    assert {str(r.table): r.dropped for r in rems} == {str(B): ["c1"], str(C): []}
    store.put_remnants(fence, LOCK, {}, [C])                 # C is a member again
    assert [r.table for r in store.list_remnants().items] == [B]
    store.put_remnants(fence, LOCK, [Remnant.of(LOCK, C, schema)])
    store.delete_task(fence, LOCK.task, sources=["s2"])        # B's source
    assert [r.table for r in store.list_remnants().items] == [C]
    store.delete_task(fence, LOCK.task)
    assert store.list_remnants().items == []


def test_garbage_and_unknown_version_name_the_key(store, etcd_client):
    key = store.keys.info(LOCK.task, LOCK.down_schema, LOCK.down_table, *A.__dict__.values())
    etcd_client.put(key, b"{not json")
    with pytest.raises(GarbageRecord) as ei:
        store.get_info(LOCK, A)
    assert ei.value.etcd_key == key and key in str(ei.value)
    assert ei.value.parts["up_table"] == A.table
    etcd_client.put(key, b'{"v": 99, "task": "task1"}')
    with pytest.raises(UnknownVersion) as ei:
        store.get_info(LOCK, A)
    assert ei.value.etcd_key == key and "99" in str(ei.value)
    etcd_client.put(key, b'{"task": "task1"}')
    with pytest.raises(GarbageRecord, match="format version"):
        store.get_info(LOCK, A)
    # listings keep going and report the bad record with its key components
    store.put_info(_info(B))
    listing = store.list_infos()
    assert [i.source for i in listing.items] == ["s2"]
    assert len(listing.bad) == 1 and listing.bad[0].parts["source"] == "s1"
    # a record whose content contradicts its key is garbage too
    wrong = _info(B)
    etcd_client.put(key, wrong.encode())
    with pytest.raises(GarbageRecord, match="its key says"):
        store.get_info(LOCK, A)


def test_dropped_columns_source_tables_and_delete_by_task_sources(store, fence):
    st = SourceTables(LOCK.task, "s1")
    st.add(A.schema, A.table, LOCK.down_schema, LOCK.down_table)
    store.put_source_tables(st)
    st2 = SourceTables(LOCK.task, "s2")
    st2.add(B.schema, B.table, LOCK.down_schema, LOCK.down_table)
    store.put_source_tables(st2)
    assert store.get_source_tables(LOCK.task, "s1").members("shop", "orders") == {(A.schema, A.table)}
    store.put_dropped_columns(fence, LOCK, A, ["c1", "c2"])
    store.put_dropped_columns(fence, LOCK, B, ["c1"], DroppedStage.DONE)
    dcs = {(d.column, d.source): d.stage for d in store.list_dropped_columns(LOCK).items}
    assert dcs == {("c1", "s1"): 0, ("c2", "s1"): 0, ("c1", "s2"): 2}
    store.delete_dropped_column(fence, LOCK, "c1")
    assert {d.column for d in store.list_dropped_columns(LOCK).items} == {"c2"}
    ra, rb = store.put_info(_info(A)), store.put_info(_info(B))
    store.put_operation(fence, _op(_info(A), ra))
    store.put_operation(fence, _op(_info(B), rb))
    store.delete_task(fence, LOCK.task, sources=["s1"])
    assert [i.source for i in store.list_infos(LOCK.task).items] == ["s2"]
    assert [o.source for o in store.list_operations(LOCK.task).items] == ["s2"]
    assert [s.source for s in store.list_source_tables(LOCK.task).items] == ["s2"]
    assert store.list_dropped_columns(LOCK).items == []
    store.delete_task(fence, LOCK.task)
    assert store.list_infos().items == [] and store.list_source_tables().items == []


def test_watch_delivers_decoded_events_and_errors(store, etcd_client):
    import queue
    q = queue.Queue()
    rev = store.list_infos().revision
    wid = store.watch("info", rev + 1, q.put)
    try:
        r = store.put_info(_info(A))
        key = store.keys.info(LOCK.task, LOCK.down_schema, LOCK.down_table, "s2", B.schema, B.table)
        etcd_client.put(key, b"[]")
        etcd_client.delete(store.keys.info(LOCK.task, LOCK.down_schema, LOCK.down_table, "s1", A.schema, A.table))
        evs = [q.get(timeout=10) for _ in range(3)]
    finally:
        etcd_client.cancel_watch(wid)
    assert evs[0].record.revision == r and evs[0].parts["source"] == "s1"
    assert evs[1].error is not None and evs[1].error.etcd_key == key
    assert evs[2].deleted and evs[2].prev.source == "s1"
