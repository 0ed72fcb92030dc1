"""``binlog-schema update --sync``: an ignore-conflict Info without DDL gives the lock a table's
structure set by the operator; the lock takes it as that table's schema and re-joins (pure lock
logic; the e2e test sends it through real etcd, master and worker)."""
from __future__ import annotations

from coordinator.etcdproto import Stage
from coordinator.schema.ddl import apply_ddl

from .harness import LOCK, Harness

ID = "CREATE TABLE t (id INT PRIMARY KEY, v INT)"


def _sync_info(h: Harness, name: str, schema):
    info = h.make_info(name)
    info.before, info.afters, info.ddls, info.ignore_conflict = schema.to_json(), [schema.to_json()], [], True
    return info


def test_synced_structure_lets_a_waiting_lock_resolve():
    h = Harness(ID)
    out = h.send("A", "ALTER TABLE t ADD COLUMN c INT")
    assert out.operation.stage is Stage.NONE and out.operation.ddls == ["ALTER TABLE t ADD COLUMN c INT"]
    assert not h.synced()                       # B has not added c: the lock waits for it
    # B's table got c outside the binlog; the operator fixes its tracked structure with --sync
    with_c = apply_ddl(h.init, "ALTER TABLE t ADD COLUMN c INT")
    out = h.send("B", info=_sync_info(h, "B", with_c))
    assert out.operation is None                # nothing to run downstream, nothing to answer
    member = h.lock.members[h.refs["B"]]
    assert member.schema.column("c") is not None and "binlog-schema update --sync" in member.note
    assert h.synced() and h.lock.is_resolved()


def test_synced_structure_is_joined_like_a_ddl():
    h = Harness(ID, tables=("A", "B", "C"))
    assert h.send("C", "ALTER TABLE t ADD INDEX iv (v)").operation.stage is Stage.NONE    # the lock exists
    wider = apply_ddl(h.init, "ALTER TABLE t ADD COLUMN d INT")
    h.send("A", info=_sync_info(h, "A", wider))
    joined = h.k.find(LOCK).joined()
    assert joined is not None and joined.column("d") is not None
    assert h.lock.members[h.refs["B"]].schema.column("d") is None     # the others keep theirs

