"""Batched leader writes (coordinator/master/write_batch.py) on the real etcd.

Issue 13: a master that dies in the middle of a batched write must neither lose nor repeat an
Operation.  The old leader decides a burst of 300 Infos (three transactions of answers) and dies
after the first transaction; some of the answers it did write are already marked done by their
workers.  The new leader rebuilds and the workers finish.  Then, from etcd's own history of the
Operation keys: every Info got exactly one answer (none lost), and no answer was written again,
least of all after its done mark (none repeated); the lock resolves and is removed."""
from __future__ import annotations

import threading

import pytest

from coordinator.etcdproto import DoneMark, Info, Operation, PutResult, Stage

from coordinator.master.locks import Locks
from coordinator.master.optimist import Optimist
from coordinator.obs import logger

from .conftest import wait_for
from .test_locks import BASE, LOCK, publish_tables
from coordinator.etcdproto import TableRef
from coordinator.schema.ddl import apply_ddl

N = 300          # > 2 transactions of MAX_TXN_OPS answers
ADD = "ALTER TABLE `shop`.`orders` ADD COLUMN c INT"


class Crash(Exception):
    pass


def _infos(store) -> list[Info]:
    after = apply_ddl(BASE, ADD)
    tables = [TableRef(f"s{i % 3}", f"shop_{i % 3}", f"orders_{i:04d}") for i in range(N)]
    publish_tables(store, *tables)
    infos = [Info(task=LOCK.task, source=t.source, up_schema=t.schema, up_table=t.table, down_schema="shop",
                  down_table="orders", ddls=[ADD], before=BASE.to_json(), afters=[after.to_json()]) for t in tables]
    store.put_infos(infos)
    return infos


class History:
    """Every put and delete of the task's Operation keys and done marks, in etcd's order (watches
    from the start); a done mark is listed with its table's Operation key."""

    def __init__(self, store):
        self.puts: dict[str, list[Operation]] = {}
        self.deleted: set[str] = set()
        self.store = store
        start = store.revision() + 1
        self.wids = [store.client.add_watch_prefix_callback(store.keys.key(kind, LOCK.task), self._on,
                                                            start_revision=start) for kind in ("operation", "done")]

    def _on(self, resp) -> None:
        if isinstance(resp, Exception):
            return
        for ev in resp.events:
            kind, _ = self.store.keys.parse(ev.key)
            key = ev.key.decode().replace(self.store.keys.key("done"), self.store.keys.key("operation"), 1)
            if not ev.value:
                if kind == "operation":
                    self.deleted.add(key)
                continue
            cls = DoneMark if kind == "done" else Operation
            self.puts.setdefault(key, []).append(self.store._decode(cls, ev.key, ev.value, ev._event.kv))

    def close(self) -> None:
        for w in self.wids:
            self.store.client.cancel_watch(w)


def test_master_dies_mid_batched_write_no_operation_lost_or_repeated(store, monkeypatch):
    hist = History(store)
    infos = _infos(store)
    fence_a = store.campaign("old-leader", ttl=10)
    assert fence_a is not None

    # the old leader: one burst, and the process dies after its first transaction of answers
    real = store.put_operations
    calls = {"n": 0}
    lock = threading.Lock()

    def dying(fence, ops) -> list[PutResult]:
        with lock:
            calls["n"] += 1
            n = calls["n"]
        if n > 1:
            raise Crash("master killed mid-batch")
        return real(fence, ops)

    monkeypatch.setattr(store, "put_operations", dying)
    old = Locks(store, fence_a, logger("test.old-leader"))
    old.begin()
    for info in store.list_infos(LOCK.task).items:
        old.on_info(info)
    old.flush()                   # hands the burst to the flusher thread and returns
    with pytest.raises(Crash):
        old.settle()              # the flush's error reaches the coordinator here
    monkeypatch.setattr(store, "put_operations", real)
    written = store.list_operations(LOCK.task).items
    assert 0 < len(written) < N, len(written)     # the crash left a part written

    # some of its workers already executed their answers and marked them done
    for op in written[:40]:
        store.mark_done(op)
    assert store.resign(fence_a)

    # the new leader rebuilds and answers the rest; the workers finish theirs
    fence_b = store.campaign("new-leader", ttl=10)
    assert fence_b is not None
    opt = Optimist(store, fence_b).start()
    try:
        wait_for(lambda: opt.ready, what="new leader ready")
        wait_for(lambda: len(store.list_operations(LOCK.task).items) == N, timeout=30,
                 what="an answer for every Info")
        for op in store.list_operations(LOCK.task).items:
            if not op.done:
                store.mark_done(op)
        wait_for(lambda: opt.call(lambda: opt.engine.keeper.find(LOCK)) is None, timeout=30,
                 what="lock resolved and removed")
    finally:
        opt.close()
        store.resign(fence_b)

    wait_for(lambda: len(hist.deleted) == N, what="the removal of every Operation seen")   # history complete
    hist.close()
    revs = {(i.source, i.up_schema, i.up_table): i.revision for i in infos}
    assert len(hist.puts) == N
    for key, puts in hist.puts.items():
        answers = [p for p in puts if not p.done]
        dones = [p for p in puts if p.done]
        assert len(answers) == 1, (key, [(p.stage.value, p.done, p.revision) for p in puts])   # not repeated
        assert len(dones) == 1 and dones[0].revision > answers[0].revision, key                # then done, once
        assert dones[0].op_revision == answers[0].revision, key                                 # ... marking it
        a = answers[0]
        assert a.info_revision == revs[(a.source, a.up_schema, a.up_table)] and a.stage is Stage.NONE
    assert store.list_infos(LOCK.task).items == []


def _op(info: Info, **kw) -> Operation:
    d = dict(lock_id=LOCK.id, task=LOCK.task, source=info.source, up_schema=info.up_schema, up_table=info.up_table,
             down_schema="shop", down_table="orders", info_revision=info.revision, ddls=[], stage=Stage.NONE)
    d.update(kw)
    return Operation(**d)


def test_batched_answers_are_guarded_each_on_its_own_info(store):
    """One stale answer in a transaction of 130 does not block the others: the chunk is redone one
    by one and only the stale answer is refused, with put_operation's reason."""
    fence = store.campaign("batch-guard", ttl=10)
    try:
        infos = _infos(store)[:130]
        stale = _op(infos[5])
        store.put_info(infos[5])                      # the worker wrote a newer Info meanwhile
        res = store.put_operations(fence, [_op(i) for i in infos[:5]] + [stale] + [_op(i) for i in infos[6:]])
        assert [r.put for r in res].count(False) == 1 and not res[5].put and res[5].reason == "newer-info"
        stored = {(o.up_schema, o.up_table) for o in store.list_operations(LOCK.task).items}
        assert len(stored) == 129 and (infos[5].up_schema, infos[5].up_table) not in stored
    finally:
        store.resign(fence)


def test_a_burst_keeps_the_last_answer_and_the_order_of_dropped_column_writes(store):
    """Within a burst a table's last answer wins, a column's clear supersedes its earlier records,
    and a record written after the clear survives it (the batch flushes before such a put)."""
    from coordinator.etcdproto import DroppedStage
    from coordinator.master.write_batch import WriteBatch
    fence = store.campaign("batch-order", ttl=10)
    try:
        infos = _infos(store)[:3]
        a, b, c = (i.table for i in infos)
        batch = WriteBatch(store, fence, logger("test.batch"))
        batch.put_operation(_op(infos[0], message="first"))
        batch.put_operation(_op(infos[0], message="second"))
        batch.put_dropped(LOCK, a, ["c1"], DroppedStage.NOT_DONE)
        batch.put_dropped(LOCK, b, ["c1", "c2"], DroppedStage.NOT_DONE)
        batch.delete_dropped(LOCK, "c1")
        batch.put_dropped(LOCK, c, ["c1"], DroppedStage.PARTIAL)
        batch.flush()
        ops = store.list_operations(LOCK.task).items
        assert [(o.up_table, o.message) for o in ops] == [(a.table, "second")]
        got = sorted((d.column, d.up_table, d.stage.value) for d in store.list_dropped_columns(LOCK).items)
        assert got == [("c1", c.table, DroppedStage.PARTIAL.value), ("c2", b.table, DroppedStage.NOT_DONE.value)]
    finally:
        store.resign(fence)


def test_a_big_flush_logs_one_line_per_kind_of_answer(store):
    """A flush of 130 alike answers writes ONE INFO line (count, first tables, Info revisions)
    and each answer at DEBUG; a handful of answers keep a line each (bench/ddl_latency.py and
    operators read those)."""
    import logging

    from coordinator.master.write_batch import WriteBatch
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)
    base = logging.getLogger("shardmerge.test.batchlog")
    handler = Keep()
    base.addHandler(handler)
    fence = store.campaign("batch-log", ttl=10)
    try:
        infos = _infos(store)[:134]
        for level in (logging.INFO, logging.DEBUG):
            base.setLevel(level)
            records.clear()
            batch = WriteBatch(store, fence, logger("test.batchlog"))
            for i in infos[:130]:
                batch.put_operation(_op(i))
            batch.flush()
            info = [r for r in records if r.levelno == logging.INFO]
            assert len(info) == 1 and info[0].getMessage() == "operations written"
            assert info[0].count == 130 and info[0].lock_id == LOCK.id
            assert info[0].tables.endswith("and 125 more") and infos[0].up_table in info[0].tables
            revs = sorted(i.revision for i in infos[:130])
            assert info[0].info_revisions == f"{revs[0]}-{revs[-1]}"
            debug = [r for r in records if r.levelno == logging.DEBUG]
            assert len(debug) == (130 if level == logging.DEBUG else 0)
        records.clear()
        base.setLevel(logging.INFO)
        batch = WriteBatch(store, fence, logger("test.batchlog"))
        for i in infos[130:]:
            batch.put_operation(_op(i))
        batch.flush()
        assert [r.getMessage() for r in records] == ["operation written"] * 4
        assert {r.table for r in records} == {f"{i.up_schema}.{i.up_table}" for i in infos[130:]}
    finally:
        base.removeHandler(handler)
        store.resign(fence)


def test_a_flush_written_behind_the_coordinator_reports_its_failure_and_is_rebuilt(store, monkeypatch):
    """The coordinator decides the next burst while the previous one is written (write_batch.py
    ``InFlight``).  A flush that fails must still reach it: it rebuilds from etcd and answers
    every Info; a flush refused by the fence must close it (``on_fenced``), not go unnoticed."""
    from coordinator.etcdproto import EtcdUnavailable, Fenced
    from coordinator.master import metrics

    fence = store.campaign("leader", ttl=10)
    assert fence is not None
    real = store.put_operations
    failures = {"left": 1}

    def flaky(f, ops):
        if failures["left"]:
            failures["left"] -= 1
            raise EtcdUnavailable("etcd went away for a moment (test)")
        return real(f, ops)

    monkeypatch.setattr(store, "put_operations", flaky)
    rebuilds = metrics.REBUILDS._value.get()
    opt = Optimist(store, fence).start()
    try:
        wait_for(lambda: opt.ready, what="leader ready")
        _infos(store)
        wait_for(lambda: len([o for o in store.list_operations(LOCK.task).items if o.stage is Stage.NONE]) == N,
                 timeout=30, what="an answer for every Info after the failed flush")
        assert failures["left"] == 0 and metrics.REBUILDS._value.get() >= rebuilds + 2   # start + after the failure
    finally:
        opt.close()

    # the fence refuses a flush: the coordinator learns it from the flusher thread and stops
    fenced = threading.Event()
    monkeypatch.setattr(store, "put_operations", lambda f, ops: (_ for _ in ()).throw(
        Fenced("master 'leader' is no longer the leader (test)")))
    opt = Optimist(store, fence, on_fenced=fenced.set).start()
    try:
        wait_for(lambda: opt.ready, what="leader ready again")
        for info in store.list_infos(LOCK.task).items[:5]:
            store.put_info(info)            # new revisions: the leader answers them again
        wait_for(fenced.is_set, timeout=30, what="on_fenced after a fenced flush")
        assert opt.closed
    finally:
        opt.close()
        store.resign(fence)
