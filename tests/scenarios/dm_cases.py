"""The first DM optimistic cases translated (shardddl1, shardddl1_1, shardddl3, shardddl4_1), as data.

The step language is in ``case.py``; more cases live one DM test directory a file in ``cases/``;
``registry.py`` gathers them all.  Written in our words from DM's cases; DM's own code is not used.
"""
from __future__ import annotations

from .case import Case, three_steps

_COLUMNS = ("select column_name from information_schema.columns where table_schema = database() "
            "and table_name = 'orders' order by ordinal_position")

CASES = (
    Case("add_column_two_tables_one_source", "shardddl1 DM_013_CASE (single-source-optimistic)",
         {"s1": ("tb1", "tb2")},
         (("s1", "alter table tb1 add column new_col1 int"), ("s1", "insert into tb1 values (1,1)"),
          ("s1", "alter table tb1 add column new_col2 int"), ("s1", "insert into tb1 values (2,2,2)"),
          ("s1", "alter table tb2 add column new_col1 int"), ("s1", "insert into tb2 values (3,3)"),
          ("s1", "alter table tb2 add column new_col2 int"), ("s1", "insert into tb2 values (4,4,4)"),
          ("wait_equal",))),
    Case("add_columns_in_different_order", "shardddl1 DM_014_CASE (single-source-optimistic)",
         {"s1": ("tb1", "tb2")},
         (("s1", "alter table tb1 add column new_col1 int"), ("s1", "insert into tb1 values (1,1)"),
          ("s1", "alter table tb1 add column new_col2 int"), ("s1", "insert into tb1 values (2,2,2)"),
          ("s1", "alter table tb2 add column new_col2 int"), ("s1", "insert into tb2 values (3,3)"),
          ("s1", "alter table tb2 add column new_col1 int"), ("s1", "insert into tb2 values (4,4,4)"),
          ("count", 4))),
    Case("truncate_a_shard", "shardddl1 DM_019_CASE (single-source-optimistic)",
         {"s1": ("tb1",)},
         (("s1", "insert into tb1 values (1)"), ("s1", "truncate table tb1"), ("s1", "insert into tb1 values (2)"),
          ("expect", "stage", "s1", "Running"), ("count", 2))),
    Case("add_column_on_two_sources_with_writes_between", "shardddl1 DM_030_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1",)},
         (("s1", "alter table tb1 add new_col1 int"), ("s1", "insert into tb1 values(1,1)"),
          ("s2", "insert into tb1 values(2)"), ("s2", "alter table tb1 add new_col1 int"),
          ("s1", "insert into tb1 values(3,3)"), ("s2", "insert into tb1 values(4,4)"),
          ("wait_equal",))),
    Case("add_same_column_with_different_types", "shardddl1 DM_031_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1",)},
         # source 1's ADD must reach the lock first (DM's case relies on timing; CI once ran s2's first)
         (("s1", "alter table tb1 add new_col1 int"), ("s1", "insert into tb1 values(1,1)"),
          ("s2", "insert into tb1 values(2)"), ("count", 2), ("s2", "alter table tb1 add new_col1 varchar(10)"),
          ("s1", "insert into tb1 values(3,3)"), ("s2", "insert into tb1 values(4,'dkfj')"),
          ("expect", "stage", "s2", "Paused", "because schema conflict detected",
           "ADD COLUMN `new_col1` VARCHAR(10)"))),
    Case("add_drop_add_then_other_tables_follow", "shardddl1 DM_032_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", "alter table tb1 add new_col1 int"), ("s1", "insert into tb1 values(1,1)"),
          ("s1", "alter table tb1 drop column new_col1"), ("s1", "insert into tb1 values(2)"),
          ("s1", "alter table tb1 add new_col2 float"), ("s1", "insert into tb1 values(3,3.0)"),
          ("s2", "alter table tb1 add new_col2 float"), ("s1", "insert into tb1 values(4,4.0)"),
          ("s2", "insert into tb1 values(5,5.0)"), ("s2", "insert into tb2 values(6)"),
          ("s2", "alter table tb2 add new_col2 float"), ("s1", "insert into tb1 values(7,7.0)"),
          ("s2", "insert into tb1 values(8,8.0)"), ("s2", "insert into tb2 values(9,9.0)"),
          ("wait_equal",))),
    Case("unique_auto_increment_added_is_held", "shardddl1 DM_034_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", "alter table tb1 add new_col1 int unique auto_increment"), ("s1", "insert into tb1 values(1,0)"),
          ("s2", "insert into tb1 values(2)"), ("s2", "alter table tb1 add new_col1 int unique auto_increment"),
          ("s1", "insert into tb1 values(3,0)"), ("s2", "insert into tb1 values(4,0)"),
          ("s2", "insert into tb2 values(5)"), ("s2", "alter table tb2 add new_col1 int unique auto_increment"),
          # DM (TiDB) refuses the DDL itself; with MariaDB downstream the merge is what breaks: held
          ("expect", "stage", "s1", "Paused", "there will be conflicts if DDLs", "AUTO_INCREMENT"),
          ("expect", "stage", "s2", "Paused", "there will be conflicts if DDLs", "AUTO_INCREMENT"))),
    Case("two_columns_added_in_different_orders", "shardddl1 DM_035_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", "alter table tb1 add new_col1 int"), ("s1", "alter table tb1 add new_col2 int"),
          ("s1", "insert into tb1 values(1,1,1)"), ("s2", "insert into tb1 values(2)"), ("s2", "insert into tb2 values(3)"),
          ("s2", "alter table tb1 add new_col2 int"), ("s2", "alter table tb1 add new_col1 int"),
          ("s1", "insert into tb1 values(4,4,4)"), ("s2", "insert into tb1 values(5,5,5)"), ("s2", "insert into tb2 values(6)"),
          ("s2", "alter table tb2 add new_col2 int"), ("s2", "alter table tb2 add new_col1 int"),
          ("s1", "insert into tb1 values(7,7,7)"), ("s2", "insert into tb1 values(8,8,8)"),
          ("s2", "insert into tb2 values(9,9,9)"), ("count", 9))),
    # DM_035 with source 2's worker ahead: source 1 commits its two ADDs a minute before source 2
    # (SET TIMESTAMP gives the binlog events that time) but its worker is down until source 2's
    # ADD of new_col2 ran downstream.  DM's result still holds: (id, new_col1, new_col2), the
    # upstream commit order (docs/lock-algorithm.md, "Column order")
    Case("two_columns_added_in_different_orders_follow_upstream_commit_order",
         "shardddl1 DM_035_CASE (double-source-optimistic), source 1's Infos arriving last",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("kill", "worker", "s1"),
          ("s1", ("SET TIMESTAMP = UNIX_TIMESTAMP() - 60", "alter table tb1 add new_col1 int",
                  "alter table tb1 add new_col2 int", "insert into tb1 values(1,1,1)")),
          ("s2", "insert into tb1 values(2)"), ("s2", "insert into tb2 values(3)"),
          ("s2", "alter table tb1 add new_col2 int"),
          ("down_rows", _COLUMNS, [("id",), ("new_col2",)]),
          ("revive", "worker", "s1"),
          # source 1's ADD new_col1, decided after new_col2 ran downstream, is placed before it
          ("down_rows", _COLUMNS, [("id",), ("new_col1",), ("new_col2",)]),
          ("s2", "alter table tb1 add new_col1 int"),
          ("s1", "insert into tb1 values(4,4,4)"), ("s2", "insert into tb1 values(5,5,5)"), ("s2", "insert into tb2 values(6)"),
          ("s2", "alter table tb2 add new_col2 int"), ("s2", "alter table tb2 add new_col1 int"),
          ("s1", "insert into tb1 values(7,7,7)"), ("s2", "insert into tb1 values(8,8,8)"),
          ("s2", "insert into tb2 values(9,9,9)"), ("count", 9),
          ("down_rows", _COLUMNS, [("id",), ("new_col1",), ("new_col2",)]), ("wait_equal",))),
    Case("generated_vs_plain_column_is_a_conflict", "issue 12 §2.2 (DM's schema join: generated is part of a column)",
         {"s1": ("tb1",), "s2": ("tb1",)},
         (("s1", "alter table tb1 add column c int as (id + 1) stored"), ("s1", "insert into tb1 (id) values (1)"),
          ("s2", "alter table tb1 add column c int"), ("s2", "insert into tb1 values (2, 2)"),
          # whichever source's DDL reaches the lock second is the conflicting one
          ("expect", "stage", "any", "Paused", "because schema conflict detected", "no generation expression",
           "generation expression `id` + 1"))),
    Case("add_primary_key_to_a_table_with_a_unique_key", "shardddl3 DM_076_CASE (single-source-optimistic)",
         {"s1": ("tb1",)},
         (("s1", "alter table tb1 add primary key(id)"), ("s1", "insert into tb1 values(1,1)"), ("wait_equal",)),
         columns="a INT UNIQUE, id INT"),
    Case("add_primary_key_after_rows", "shardddl3 DM_078_CASE (single-source-optimistic)",
         {"s1": ("tb1",)},
         (("s1", "insert into tb1 values (1, 1, 'wer'), (2, 2, NULL)"), ("s1", "alter table tb1 add primary key(a)"),
          ("s1", "insert into tb1 values (3, 3, 'wer'), (4, 4, NULL)"), ("wait_equal",)),
         columns="id INT UNIQUE, a INT, b VARCHAR(10)"),
    Case("add_column_on_one_source_first", "shardddl1 DM_004_CASE shape, double source (optimistic)",
         {"s1": ("tb1", "tb2"), "s2": ("tb1",)},
         (("s1", "alter table tb1 add column new_col1 int"), ("s1", "insert into tb1 values (1,1)"),
          ("s1", "alter table tb2 add column new_col1 int"), ("s1", "insert into tb2 values (2,2)"),
          ("s2", "insert into tb1 values (3)"), ("s2", "alter table tb1 add column new_col1 int"),
          ("s2", "insert into tb1 values (4,4)"), ("wait_equal",))),
)

_IB = ("select distinct index_name from information_schema.statistics where table_schema = database() "
       "and table_name = 'orders' and index_name = 'ib'")

CASES = CASES + (
    three_steps("expand_primary_key", "shardddl4_1 DM_132_CASE (double-source-optimistic)",
                 "a INT PRIMARY KEY, b INT", "drop primary key, add primary key(a, b)", 2),
    three_steps("shrink_primary_key", "shardddl4_1 DM_133_CASE (double-source-optimistic)",
                 "a INT, b INT, PRIMARY KEY (a, b)", "drop primary key, add primary key(a)", 2),
    three_steps("change_primary_key", "shardddl4_1 DM_134_CASE (double-source-optimistic)",
                 "a INT, b INT, PRIMARY KEY (a)", "drop primary key, add primary key(b)", 2),
    three_steps("expand_unique_key", "shardddl4_1 DM_136_CASE (double-source-optimistic)",
                 "id INT PRIMARY KEY, a INT, b INT, UNIQUE KEY uk(a)", "drop index uk, add unique key uk(a, b)", 3),
    three_steps("shrink_unique_key", "shardddl4_1 DM_137_CASE (double-source-optimistic)",
                 "id INT PRIMARY KEY, a INT, b INT, UNIQUE KEY uk(a, b)", "drop index uk, add unique key uk(a)", 3),
    three_steps("add_unique_key", "shardddl4_1 DM_138_CASE (double-source-optimistic)",
                 "id INT PRIMARY KEY, a INT", "add unique key uk(a)", 2),
    three_steps("drop_unique_key", "shardddl4_1 DM_139_CASE (double-source-optimistic)",
                 "id INT PRIMARY KEY, a INT, UNIQUE KEY uk(a)", "drop index uk", 2),
)

_PART = "id INT PRIMARY KEY"
_IXF = ("select distinct index_name from information_schema.statistics where table_schema = database() "
        "and table_name = 'orders' and index_name like 'ix\\_f%'")
_F_DEFAULT = ("select column_default from information_schema.columns where table_schema = database() "
              "and table_name = 'orders' and column_name = 'f'")
_V_TYPE = ("select data_type from information_schema.columns where table_schema = database() "
           "and table_name = 'orders' and column_name = 'v'")
_RANGE2 = "PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200))"
_SIX = {"s1": "(10),(11),(12),(13),(14),(15)", "s2": "(20),(21),(22),(23),(24),(25)"}

CASES = CASES + (
    Case("add_partitioning_stops_for_binlog_skip", "shardddl4_1 DM_140_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", f"insert into tb1 values{_SIX['s1']}"), ("s2", f"insert into tb1 values{_SIX['s2']}"),
          ("s1", "alter table tb1 partition by range(id)(partition p0 values less than (106))"),
          ("expect", "stage", "s1", "Error", "PARTITION BY", "binlog skip"),
          ("ctl", "binlog", "skip", "{task}", "-s", "s1"), ("expect", "stage", "s1", "Running"),
          ("s1", "insert into tb1 values (16)"), ("wait_equal",)), columns=_PART),
    Case("remove_partitioning_stops_for_binlog_skip", "shardddl4_1 DM_141_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", f"insert into tb1 values{_SIX['s1']}"), ("s1", "alter table tb1 remove partitioning"),
          ("expect", "stage", "s1", "Error", "REMOVE PARTITIONING", "binlog skip")),
         columns=_PART, table_options=_RANGE2),
    Case("reorganize_partition_stops_for_binlog_skip", "shardddl4_1 DM_144_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", "insert into tb1 values(10),(110)"),
          ("s1", "alter table tb1 reorganize partition p0,p1 into (partition p0 values less than (200))"),
          ("expect", "stage", "s1", "Error", "REORGANIZE PARTITION", "binlog skip")),
         columns=_PART, table_options=_RANGE2),
    Case("engine_rebuild_on_every_shard", "shardddl4_1 DM_145_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", "insert into tb1 values(100),(101)"), ("s2", "insert into tb1 values(200),(201)"),
          ("s2", "insert into tb2 values(300),(301)"), ("s1", "alter table tb1 engine=innodb"),
          ("s2", "alter table tb1 engine=innodb"), ("s2", "alter table tb2 engine=innodb"),
          ("s1", "insert into tb1 values(400)"), ("s2", "insert into tb1 values(500)"), ("s2", "insert into tb2 values(600)"),
          ("wait_equal",)), columns=_PART),
    Case("row_format_change", "shardddl4_1 DM_146_CASE shape (TiDB refuses it; MariaDB accepts: replicated)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", "insert into tb1 values(100)"), ("s1", "alter table tb1 ROW_FORMAT=COMPACT"),
          ("s1", "insert into tb1 values(101)"), ("s2", "insert into tb2 values(300)"), ("wait_equal",)),
         columns=_PART),
    Case("add_and_drop_several_columns_then_roll_back", "shardddl4_1 DM_147_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", "insert into tb1 values(1,1)"), ("s2", "insert into tb1 values(2,2)"), ("s2", "insert into tb2 values(3,3)"),
          ("s1", "alter table tb1 add column b int, drop column c"),
          ("s1", "insert into tb1 values(4,4)"), ("s2", "insert into tb1 values(5,5)"), ("s2", "insert into tb2 values(6,6)"),
          ("s1", "alter table tb1 add column c int, drop column b"),
          ("s1", "insert into tb1 values(7,7)"), ("s2", "insert into tb1 values(8,8)"), ("s2", "insert into tb2 values(9,9)"),
          ("expect", "stage", "s1", "Paused", "because schema conflict detected",
           "add column c that wasn't fully dropped in downstream"),
          # DM fixes the schema (binlog-schema update) and replaces the DDL; here `binlog skip` does both
          ("ctl", "binlog", "skip", "{task}"), ("expect", "stage", "s1", "Running"),
          ("down", "update orders set c = null where id = 1"), ("wait_equal",)),
         columns="id INT PRIMARY KEY, c INT"),
    Case("add_several_columns_in_a_given_order", "shardddl4_1 DM_148_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", "insert into tb1 values(1,1)"), ("s2", "insert into tb1 values(2,2)"), ("s2", "insert into tb2 values(3,3)"),
          ("s1", "alter table tb1 add column b int after id, add column c int after b"),
          ("s1", "insert into tb1 values(4,4,4,4)"), ("s2", "insert into tb1 values(5,5)"), ("s2", "insert into tb2 values(6,6)"),
          ("s2", "alter table tb1 add column b int after id, add column c int after b"),
          ("s1", "insert into tb1 values(7,7,7,7)"), ("s2", "insert into tb1 values(8,8,8,8)"),
          ("s2", "insert into tb2 values(9,9)"),
          ("s2", "alter table tb2 add column b int after id, add column c int after b"),
          ("s1", "insert into tb1 values(10,10,10,10)"), ("s2", "insert into tb1 values(11,11,11,11)"),
          ("s2", "insert into tb2 values(12,12,12,12)"), ("wait_equal",)),
         columns="id INT PRIMARY KEY, a INT"),
)

# DM cases that do not run in optimistic mode or need what this project does not target.
NOT_APPLICABLE = {
    "shardddl1 DM_006..DM_012, DM_015..DM_018, DM_021, DM_026..DM_028": "pessimistic or no-sharding mode only",
    "shardddl1 DM_020, DM_022": "no routes: not a shard merge",
    "shardddl3 DM_077, DM_079 (drop primary key)": "TiDB's 'Unsupported drop primary key' is a TiDB downstream "
                                                  "limit; MariaDB accepts it",
    "shardddl3 DM_071, DM_073, DM_080..DM_082 optimistic runs": "commented out in DM itself (not supported in optimistic "
                                                                "mode there)",
    "handle_error DM_4202..DM_4213": "TiDB's 'Unsupported modify column' errors: a TiDB downstream limit",
}

CASES = CASES + (
    Case("binlog_replace_resolves_a_conflict",
         "handle_error replace shape; docs design S16 (intrusive fix of a conflict with binlog replace)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", "alter table tb1 add column c1 text"), ("s1", "insert into tb1 values (1, 'a')"), ("count", 1),
          ("s2", "alter table tb1 add column c1 datetime"),
          ("expect", "stage", "s2", "Paused", "because schema conflict detected", "ADD COLUMN `c1` DATETIME"),
          ("ctl", "binlog", "replace", "{task}", "-s", "s2", "alter table tb1 add column c1 text"),
          ("running",), ("s2", "insert into tb1 values (2, NULL)"),
          ("s2", "alter table tb2 add column c1 text"), ("s2", "insert into tb2 values (3, 'c')"),
          ("s1", "insert into tb1 values (4, 'd')"), ("count", 4),
          ("down_rows", "select id, c1 from orders order by id", [(1, "a"), (2, None), (3, "c"), (4, "d")]))),
    Case("binlog_replace_held_on_its_lock_then_replayed",
         "handle_error replace shape, optimistic (the replacement waits on its lock, the table replays it)",
         {"s1": ("tb1",), "s2": ("tb1", "tb2")},
         (("s1", "insert into tb1 values (1, 1)"), ("s2", "insert into tb1 values (2, 2)"),
          ("s2", "insert into tb2 values (3, 3)"), ("count", 3),
          # a rename and PARTITION BY in one statement: the schema tracker cannot apply it
          ("s1", "alter table tb1 change a c int partition by hash(id) partitions 2"),
          ("expect", "stage", "s1", "Error", "binlog skip"),
          # the rename alone is held (skip-and-wait) until the other shards rename too
          ("ctl", "binlog", "replace", "{task}", "-s", "s1", "alter table tb1 change a c int"),
          ("running",), ("s1", "insert into tb1 values (4, 4)"),
          ("expect", "locks", 1, "CHANGE COLUMN"),
          ("s2", "alter table tb1 change a c int"), ("s2", "insert into tb1 values (5, 5)"),
          ("s2", "alter table tb2 change a c int"), ("s2", "insert into tb2 values (6, 6)"),
          ("s1", "insert into tb1 values (7, 7)"), ("wait_equal",),
          ("down_rows", "select column_name from information_schema.columns where table_schema = database() "
                        "and table_name = 'orders' order by ordinal_position", [("id",), ("c",)])),
         columns="id INT PRIMARY KEY, a INT"),
    # the worker reads a shard's CREATE TABLE ... LIKE after the new shard and its model changed
    # upstream (its worker was down): the new shard starts as the model was tracked at that binlog
    # position (DM's tracker copies it), not as the upstream tables look now
    Case("create_table_like_read_after_the_tables_changed",
         "shardddl_optimistic CREATE_DROP_TABLE shape with CREATE TABLE ... LIKE (DM's tracker copies the model)",
         {"s1": ("tb1",), "s2": ("tb1",)},
         (("s1", "insert into tb1 values(1)"), ("s2", "insert into tb1 values(2)"), ("count", 2),
          ("kill", "worker", "s1"),
          ("s1", "create table tb2 like tb1"), ("s1", "insert into tb2 values(3)"),
          ("s1", "alter table tb2 add column c int"), ("s1", "insert into tb2 values(4,4)"),
          ("s1", "alter table tb1 add column c int"), ("s1", "insert into tb1 values(5,5)"),
          ("revive", "worker", "s1"),
          ("s2", "alter table tb1 add column c int"), ("s2", "insert into tb1 values(6,6)"),
          ("count", 6), ("wait_equal",))),
    # a table rename inside an ALTER is refused like RENAME TABLE (DM refuses both in optimistic
    # mode); `binlog skip` lets the source go on, and the renamed shard still matches the route
    Case("alter_table_rename_of_a_shard_is_refused", "shardddl optimistic RENAME TABLE rule, ALTER TABLE ... RENAME "
         "form (DM: not supported in optimistic mode)",
         {"s1": ("tb1", "tb2"), "s2": ("tb1",)},
         (("s1", "insert into tb2 values(1)"), ("count", 1),
          ("s1", "alter table tb2 rename to orders_44"),
          ("expect", "stage", "s1", "Error", "`ALTER TABLE ... RENAME` statement not supported in optimistic mode",
           "binlog skip"),
          ("ctl", "binlog", "skip", "{task}", "-s", "s1"), ("running",),
          ("s1", "insert into orders_44 values(2)"), ("s2", "insert into tb1 values(3)"),
          ("count", 3), ("wait_equal",))),
    # MariaDB's CREATE INDEX IF NOT EXISTS / DROP INDEX IF EXISTS on every shard (DM's index cases,
    # in the forms a MariaDB user writes): the index appears downstream once and goes once all drop it
    Case("index_if_not_exists_forms_on_every_shard", "shardddl3 index cases (add/drop index) in MariaDB's "
         "IF [NOT] EXISTS forms",
         {"s1": ("tb1",), "s2": ("tb1",)},
         (("s1", "create index if not exists ib on tb1 (b)"), ("s1", "insert into tb1 values(1,1)"),
          ("s2", "create index if not exists ib on tb1 (b)"), ("s2", "insert into tb1 values(2,2)"),
          ("s2", "create index if not exists ib on tb1 (b)"), ("count", 2),
          ("down_rows", _IB, [("ib",)]),
          ("s1", "drop index if exists ib on tb1"), ("s1", "insert into tb1 values(3,3)"),
          ("s2", "drop index if exists ib on tb1"), ("s2", "drop index if exists ib on tb1"),
          ("s2", "insert into tb1 values(4,4)"), ("count", 4),
          ("down_rows", _IB, []), ("wait_equal",)),
         columns="id INT PRIMARY KEY, b INT",
         mariadb_only="CREATE INDEX IF NOT EXISTS / DROP INDEX IF EXISTS are MariaDB syntax"),
    # an index rename touches no row: no shard waits for it; the downstream keeps the indexes
    # every shard has (the first rename drops `ix_f`, the last adds `ix_f2`); a column retype
    # racing it is a conflict of its own; a new default reaches the downstream once all set it
    Case("index_rename_and_default_hold_nobody", "RENAME INDEX / SET DEFAULT on every shard (no DM case: "
         "DM treats a rename of an index as a conflict)",
         {"s1": ("tb1",), "s2": ("tb1",)},
         (("s1", "alter table tb1 rename index ix_f to ix_f2"), ("s1", "insert into tb1 values(1,'1',1)"),
          ("count", 1), ("down_rows", _IXF, []),
          ("s2", "alter table tb1 modify column v int"), ("s2", "insert into tb1 values(2,2,2)"),
          ("s1", "alter table tb1 modify column v int"), ("s1", "insert into tb1 values(3,3,3)"),
          ("count", 3), ("down_rows", _IXF, []),
          ("s2", "alter table tb1 rename index ix_f to ix_f2"), ("down_rows", _IXF, [("ix_f2",)]),
          ("s2", "alter table tb1 alter column f set default 7"), ("s2", "insert into tb1 (id) values(4)"),
          ("s1", "alter table tb1 alter column f set default 7"), ("s1", "insert into tb1 (id) values(5)"),
          ("count", 5), ("down_rows", _F_DEFAULT, [("7",)]), ("wait_equal",)),
         columns="id INT PRIMARY KEY, v VARCHAR(10), f INT, KEY ix_f (f)"),
    # a default change in the other order than a rename of a column one shard adds late: the
    # default touches no value, so it holds nobody (the downstream keeps DEFAULT 1 until every
    # shard set 5); the rename is agreed as usual.  Before, the default held tb1 on s1, s2's
    # rename was `detected` against it, and the exit wrote `z1_rn` into a downstream without it
    Case("default_against_rename_in_the_other_order_holds_nobody", "SET DEFAULT and RENAME COLUMN in opposite "
         "orders, a shard adding the renamed column late (no DM case: DM holds the default change, "
         "then detects the rename)",
         {"s1": ("tb1", "tb2"), "s2": ("tb1",)},
         (("s1", "alter table tb1 alter column f set default 5, add column z1 int"),
          ("s1", "insert into tb1 (id, z1) values(1,1)"),
          ("s2", "alter table tb1 add column z1 int"), ("s2", "insert into tb1 (id, z1) values(2,2)"),
          ("s2", "alter table tb1 rename column z1 to z1_rn"), ("s2", "insert into tb1 (id, z1_rn) values(3,3)"),
          ("s1", "alter table tb1 rename column z1 to z1_rn"), ("s1", "insert into tb1 (id, z1_rn) values(4,4)"),
          ("s1", "alter table tb2 add column z1 int, alter column f set default 5"),
          ("s1", "insert into tb2 (id, z1) values(5,5)"),
          ("s1", "alter table tb2 rename column z1 to z1_rn"), ("s1", "insert into tb2 (id, z1_rn) values(6,6)"),
          ("count", 6), ("down_rows", _F_DEFAULT, [("1",)]),
          ("s2", "alter table tb1 alter column f set default 5"), ("s2", "insert into tb1 (id) values(7)"),
          ("count", 7), ("down_rows", _F_DEFAULT, [("5",)]),
          ("down_rows", "select id, z1_rn, f from orders order by id",
           [(1, 1, 5), (2, 2, 1), (3, 3, 1), (4, 4, 5), (5, 5, 5), (6, 6, 5), (7, None, 5)]),
          ("running",), ("wait_equal",)),
         columns="id INT PRIMARY KEY, f INT DEFAULT 1"),
    # a retype in the other order than a rename: VARCHAR(10) and INT join to VARCHAR(20) (an
    # integer's text), so the first retype widens the downstream to it and holds nobody; the last
    # one narrows it to INT.  Before, the retype held s2, the renames held s1's tables, and one
    # side was `detected` (an exit then lost a column's rows or truncated INT into VARCHAR(10))
    Case("retype_against_rename_in_the_other_order_holds_nobody", "MODIFY VARCHAR -> INT and RENAME COLUMN "
         "in opposite orders (no DM case: DM holds the retype, then detects the rename)",
         {"s1": ("tb1", "tb2"), "s2": ("tb1",)},
         (("s1", "alter table tb1 rename column a to a2"), ("s1", "insert into tb1 values(1,1,'1')"),
          ("s1", "alter table tb1 modify column v int"), ("s1", "insert into tb1 values(2,2,22)"),
          ("s1", "alter table tb2 rename column a to a2"), ("s1", "insert into tb2 values(3,3,'3')"),
          ("s1", "alter table tb2 modify column v int"), ("s1", "insert into tb2 values(4,4,44)"),
          ("s2", "alter table tb1 modify column v int"), ("s2", "insert into tb1 values(5,5,-2147483648)"),
          ("s2", "alter table tb1 rename column a to a2"), ("s2", "insert into tb1 values(6,6,66)"),
          ("count", 6), ("down_rows", _V_TYPE, [("int",)]),
          ("down_rows", "select id, a2, v from orders order by id",
           [(1, 1, 1), (2, 2, 22), (3, 3, 3), (4, 4, 44), (5, 5, -2147483648), (6, 6, 66)]),
          ("running",), ("wait_equal",)),
         columns="id INT PRIMARY KEY, a INT, v VARCHAR(10)"),
    # each table held on its first rename reads past it; once every table is held the lock asks
    # them to run both renames as one ALTER; the rows between reach the downstream under the new
    # names; a worker restart in the middle keeps what it folded in
    Case("renames_in_opposite_orders_across_statements_with_rows_between", "two renames in opposite orders, "
         "one per statement, rows between (no DM case: DM detects the second rename, and an exit loses one "
         "column's values)",
         {"s1": ("tb1", "tb2"), "s2": ("tb1",)},
         (("s1", "alter table tb1 rename column a to a2"), ("s1", "insert into tb1 values(1,1,1)"),
          ("s1", "alter table tb1 rename column b to b2"), ("s1", "insert into tb1 values(2,2,2)"),
          ("s2", "alter table tb1 rename column b to b2"), ("s2", "insert into tb1 values(3,3,3)"),
          ("s2", "alter table tb1 rename column a to a2"), ("s2", "insert into tb1 values(4,4,4)"),
          ("restart", "worker", "s1"),
          ("s1", "alter table tb2 rename column b to b2"), ("s1", "insert into tb2 values(5,5,5)"),
          ("s1", "alter table tb2 rename column a to a2"), ("s1", "insert into tb2 values(6,6,6)"),
          ("count", 6), ("down_rows", "select id, a2, b2 from orders where id in (1, 3, 5) order by id",
                         [(1, 1, 1), (3, 3, 3), (5, 5, 5)]),
          ("running",), ("wait_equal",)),
         columns="id INT PRIMARY KEY, a INT, b INT"),
    # s1.tb2 renames `a` first and adds `z` only later, then renames it; the others rename `z`
    # and `a` in opposite orders.  s1.tb2 takes no side in the `z` rename (its look-ahead adds the
    # column, then renames it): the others' renames are combined and run once, and s1.tb2's ADD is
    # folded into its rename, so its rows between reach `z2`.  Before, the second rename was
    # `detected` and its exit lost a column's values
    Case("a_shard_adding_a_column_late_takes_no_side_in_its_rename", "ADD then RENAME of a column on a "
         "lagging shard while the others rename it against a second rename in the other order (no DM case: "
         "DM detects the second rename)",
         {"s1": ("tb1", "tb2"), "s2": ("tb1",)},
         (("s1", "alter table tb1 add column z int"), ("s1", "insert into tb1 values(1,1,10)"),
          ("s1", "alter table tb1 rename column a to a2"), ("s1", "insert into tb1 values(2,2,20)"),
          ("s1", "alter table tb1 rename column z to z2"), ("s1", "insert into tb1 values(3,3,30)"),
          ("s1", "alter table tb2 rename column a to a2"), ("s1", "insert into tb2 values(7,7)"),
          ("s1", "alter table tb2 add column z int"), ("s1", "insert into tb2 values(8,8,80)"),
          ("s1", "alter table tb2 rename column z to z2"), ("s1", "insert into tb2 values(9,9,90)"),
          ("s2", "alter table tb1 add column z int"), ("s2", "insert into tb1 values(4,4,40)"),
          ("s2", "alter table tb1 rename column z to z2"), ("s2", "insert into tb1 values(5,5,50)"),
          ("s2", "alter table tb1 rename column a to a2"), ("s2", "insert into tb1 values(6,6,60)"),
          ("count", 9), ("down_rows", "select id, a2, z2 from orders order by id",
                         [(1, 1, 10), (2, 2, 20), (3, 3, 30), (4, 4, 40), (5, 5, 50), (6, 6, 60),
                          (7, 7, None), (8, 8, 80), (9, 9, 90)]),
          ("running",), ("wait_equal",)),
         columns="id INT PRIMARY KEY, a INT"),
)
