"""Bad-input corpus, part 2: inputs met at run time — etcd records, DDLs, unlocks, hosts and
passwords, routes that merge differently shaped tables.  Each must raise a typed error that
names the input; nothing crashes."""
import json

import pymysql
import pytest

from coordinator.errors import ShardMergeError
from coordinator.etcdproto import Keys, RecordError, Store
from coordinator.lock import LockKeeper
from coordinator.lock.errors import LockNotFound
from coordinator.retry import is_transient
from coordinator.schema import SchemaConflict, SchemaError, join, split_ddl
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.parse import parse_create_table

# ------------------------------------------------------------------ etcd records
GARBAGE = [
    ("not json", b"{not json"),
    ("json list", b"[1, 2]"),
    ("no version", json.dumps({"task": "t"}).encode()),
    ("newer version", json.dumps({"v": 99, "task": "t"}).encode()),
    ("wrong field type", json.dumps({"v": 1, "task": 5, "source": [], "tables": "x"}).encode()),
    ("empty value", b""),
]


@pytest.mark.parametrize("name,value", GARBAGE, ids=[g[0] for g in GARBAGE])
def test_garbage_source_tables_record_is_reported_with_its_key(etcd_client, etcd_prefix, name, value):
    store = Store(etcd_client, etcd_prefix)
    key = Keys(etcd_prefix).key("source-tables", "task1", "s1")
    etcd_client.put(key, value)
    listing = store.list_source_tables()
    assert listing.items == []
    assert len(listing.bad) == 1
    err = listing.bad[0]
    assert isinstance(err, RecordError) and err.etcd_key == key
    assert key in str(err)


# ------------------------------------------------------------------ DDLs
BAD_DDL = [
    ("not sql", "ALTER TABLE t FROBNICATE everything"),
    ("foreign key", "ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES p (id)"),
    ("partition", "ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (9))"),
    ("drop missing column", "ALTER TABLE t DROP COLUMN nope"),
    ("modify missing column", "ALTER TABLE t MODIFY COLUMN nope INT"),
    ("create like", "CREATE TABLE t2 LIKE t"),
]
BASE = parse_create_table("CREATE TABLE t (id int NOT NULL, a int DEFAULT NULL, PRIMARY KEY (id))")


@pytest.mark.parametrize("name,sql", BAD_DDL, ids=[b[0] for b in BAD_DDL])
def test_ddl_the_engine_cannot_apply_names_the_statement(name, sql):
    with pytest.raises(SchemaError) as e:
        apply_ddl(BASE, sql)
    text = str(e.value)
    assert sql.split()[0].lower() in text.lower() or (e.value.statement or "") or e.value.clause


def test_truncated_ddl_is_typed_when_applied_after_split():
    parts = split_ddl("ALTER TABLE t ADD COLUMN")
    with pytest.raises(SchemaError) as e:
        for p in parts:
            apply_ddl(BASE, p)
    assert "ADD COLUMN" in str(e.value)


def test_ddl_on_a_table_missing_from_the_tracker_is_typed():
    from worker.schema_tracker import SchemaTracker
    tracker = SchemaTracker("s1")   # no upstream connection: it cannot look the table up
    with pytest.raises(ShardMergeError) as e:
        tracker.apply("db1", "ghost", ["ALTER TABLE ghost ADD COLUMN x INT"], position="mysql-bin.000001:4")
    assert "ghost" in str(e.value)


# ------------------------------------------------------------------ routes merging different shapes
def test_route_merging_differently_shaped_tables_is_a_named_conflict():
    a = parse_create_table("CREATE TABLE t (id int NOT NULL, c int DEFAULT NULL, PRIMARY KEY (id))")
    b = parse_create_table("CREATE TABLE t (id int NOT NULL, c date DEFAULT NULL, PRIMARY KEY (id))")
    with pytest.raises(SchemaConflict) as e:
        join(a, b, a_label="s1.shop_01.orders", b_label="s2.shop_02.orders")
    assert "`c`" in str(e.value) and "s1.shop_01.orders" in str(e.value) and "s2.shop_02.orders" in str(e.value)


# ------------------------------------------------------------------ unlocks
@pytest.mark.parametrize("lock_id", ["task-`db`.`nope`", "not-a-lock-id"])
def test_unlock_of_a_lock_that_does_not_exist(lock_id):
    with pytest.raises(ShardMergeError) as e:
        LockKeeper().unlock(lock_id, "s1", "db1", "t1", action="skip")
    assert isinstance(e.value, (LockNotFound, ShardMergeError))
    assert "not found" in str(e.value) or "lock ID" in str(e.value) or lock_id in str(e.value)


# ------------------------------------------------------------------ hosts and passwords
def test_unreachable_downstream_for_checkpoints_names_task_and_source():
    from worker.sync.checkpoint import CheckpointError, CheckpointStore
    store = CheckpointStore({"host": "127.0.0.1", "port": 1, "user": "u", "password": "p"}, "meta", "t1", "s1")
    with pytest.raises(CheckpointError) as e:
        store.ensure_table()
    assert e.value.context["task"] == "t1" and e.value.context["source"] == "s1"
    assert "p" != "" and "password" not in str(e.value).lower()


def test_wrong_password_is_final_and_not_retried(services):
    p = dict(services.mysql["downstream"], password="wrong-" + "pw")
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(**p, connect_timeout=5)
    assert e.value.args[0] == 1045 and not is_transient(e.value)
    assert "wrong-pw" not in str(e.value)
