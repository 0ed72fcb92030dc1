"""A table joining a lock starts from the schema its worker checkpointed in the downstream."""
import json

from coordinator.etcdproto import LockKey, Store, TableRef
from coordinator.etcdproto.task import TaskRecord
from coordinator.master.checkpoint_schema import CheckpointSchemaSource
from coordinator.schema.parse import parse_create_table

TASK_YAML = """
name: cps
shard-mode: optimistic
meta-schema: {meta}
target-database: {{host: {host}, port: {port}, user: {user}, password: {password}}}
mysql-instances: [{{source-id: s1}}]
"""


def test_reads_table_info_from_checkpoint_row(etcd_client, etcd_prefix, downstream_db):
    p = downstream_db.params
    store = Store(etcd_client, etcd_prefix)
    fence = store.campaign("m1", "127.0.0.1:1", ttl=10)
    store.put_task(fence, TaskRecord(task="cps", yaml=TASK_YAML.format(meta=downstream_db.name, **p), sources=["s1"]))
    schema = parse_create_table("CREATE TABLE t (id int NOT NULL, c varchar(20) DEFAULT NULL, PRIMARY KEY (id))")
    downstream_db.execute("CREATE TABLE cps_syncer_checkpoint (id VARCHAR(64), cp_schema VARCHAR(128), "
                          "cp_table VARCHAR(128), binlog_name VARCHAR(128), binlog_pos BIGINT, table_info LONGTEXT, "
                          "ddl_intent LONGTEXT)")
    after = parse_create_table("CREATE TABLE t (id int NOT NULL, c varchar(20) DEFAULT NULL, d int, PRIMARY KEY (id))")
    finished = json.dumps({"pos": {"file": "mysql-bin.000002", "pos": 900, "gtid": ""}, "finished": True,
                           "table_info": json.dumps(after.to_json())})
    downstream_db.execute("INSERT INTO cps_syncer_checkpoint VALUES ('s1','db1','t1','mysql-bin.000002',4,%s,NULL), "
                          "('s1','db1','t2','mysql-bin.000002',4,'null',NULL), "
                          "('s1','db1','t3','mysql-bin.000002',4,%s,%s)",
                          (json.dumps(schema.to_json()), json.dumps(schema.to_json()), finished))
    src = CheckpointSchemaSource(store)
    lock = LockKey("cps", "db", "t")
    assert src(lock, TableRef("s1", "db1", "t1")).same_as(schema)
    # a DDL finished (rule 8b) past the checkpoint: the schema after it, also when read in bulk
    assert src(lock, TableRef("s1", "db1", "t3")).same_as(after)
    many = src.many(lock, [TableRef("s1", "db1", f"t{i}") for i in range(1, 9)])     # 8 tables: one query
    assert many[TableRef("s1", "db1", "t3")].same_as(after) and many[TableRef("s1", "db1", "t1")].same_as(schema)
    assert src(lock, TableRef("s1", "db1", "t2")) is None          # JSON null: use the init schema
    assert src(lock, TableRef("s1", "db1", "missing")) is None     # no row
    assert src(LockKey("other-task", "db", "t"), TableRef("s1", "db1", "t1")) is None  # no task config
    src.close()


def test_unreachable_downstream_falls_back(etcd_client, etcd_prefix):
    store = Store(etcd_client, etcd_prefix)
    fence = store.campaign("m1", "127.0.0.1:1", ttl=10)
    store.put_task(fence, TaskRecord(task="cps", yaml=TASK_YAML.format(meta="m", host="127.0.0.1", port=1,
                                                                      user="u", password="p"), sources=["s1"]))
    assert CheckpointSchemaSource(store, connect_timeout=1)(LockKey("cps", "db", "t"), TableRef("s1", "a", "b")) is None
