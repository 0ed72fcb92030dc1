"""DM's shardddl_optimistic cases (pingcap/tiflow dm/tests/shardddl_optimistic/run.sh) not covered
elsewhere: shard tables created and dropped while locks are open (issue 12 §2.6).  DM's second
database ``shardddl2`` is our ``tb3``."""
from __future__ import annotations

from ..case import Case

_NCOLS = ("select count(*) from information_schema.columns where table_schema = database() "
          "and table_name = 'orders'")

CASES = (
    # DM's init_table 111 121 211 221: each source has shardddl1.tb1 (tb1) and shardddl2.tb1 (tb3);
    # each then creates shardddl1.tb2 (tb2) from the initial schema and drops tb1 mid-lock
    Case("dm_create_drop_table_while_locks_are_open", "shardddl_optimistic DM_CREATE_DROP_TABLE_CASE "
         "(double-source-optimistic)", {"s1": ("tb1", "tb3"), "s2": ("tb1", "tb3")},
         (("s1", "insert into tb1 values(1)"), ("s1", "insert into tb3 values(2)"),
          ("s2", "insert into tb1 values(3)"), ("s2", "insert into tb3 values(4)"),
          ("s1", "create table tb2 (id int primary key)"), ("s1", "insert into tb2 values(5)"),
          ("s1", "drop table tb1"),
          ("s1", "alter table tb2 add column new_col1 int"), ("s1", "alter table tb3 add column new_col1 int"),
          ("s2", "alter table tb1 add column new_col1 int"), ("s2", "alter table tb3 add column new_col1 int"),
          ("s1", "insert into tb3 values(6,6)"), ("s2", "insert into tb1 values(7,7)"),
          ("s2", "insert into tb3 values(8,8)"), ("s1", "insert into tb2 values(9,9)"),
          # source 2 adds its tb2 with the smaller (initial) schema and drops tb1
          ("s2", "create table tb2 (id int primary key)"), ("s2", "insert into tb2 values(10)"),
          ("s2", "drop table tb1"), ("s2", "alter table tb3 drop column new_col1"),
          ("s1", "insert into tb2 values(11,11)"), ("s1", "insert into tb3 values(12,12)"),
          ("s2", "insert into tb2 values(13)"), ("s2", "insert into tb2 values(14)"),
          ("s1", "drop table tb3"),
          # now no table has new_col1
          ("s1", "alter table tb2 drop column new_col1"),
          ("s1", "insert into tb2 values(15)"), ("s2", "insert into tb2 values(16)"), ("s2", "insert into tb3 values(17)"),
          ("count", 17),
          ("s1", "alter table tb2 add column new_col2 int"), ("s2", "alter table tb2 add column new_col2 int"),
          ("s2", "alter table tb3 add column new_col2 int"),
          ("s1", "insert into tb2 values(18,18)"), ("s2", "insert into tb2 values(19,19)"),
          ("s2", "insert into tb3 values(20,20)"), ("count", 20), ("running",),
          ("down_rows", _NCOLS, [(2,)]), ("expect", "locks", 0))),
)

PENDING = ()

NOT_APPLICABLE = {}
