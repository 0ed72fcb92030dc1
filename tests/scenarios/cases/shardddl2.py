"""DM's shardddl2 optimistic cases (pingcap/tiflow dm/tests/shardddl2/run.sh): columns added at
other positions, conflicting defaults, defaults evaluated per server, charsets, generated columns,
a master restart between two add/drop rounds.  DM's ``init_table 111 211 212``: source 1 has tb1,
source 2 has tb1 and tb2, each ``(id int primary key)``."""
from __future__ import annotations

from ..case import Case

_INIT = {"s1": ("tb1",), "s2": ("tb1", "tb2")}


def _col_case(name: str, dm: str, ddl1: str, ddl2: str, end: tuple, vals=("'aaa'", "'bbb'", "'ccc'", "'ddd'",
              "'eee'", "'fff'")) -> Case:
    """Source 1 adds a column, then source 2's tb1, then its tb2, with rows between (DM_039..DM_043)."""
    v = vals
    return Case(name, dm, _INIT, (
        ("s1", f"alter table tb1 {ddl1}"), ("s1", f"insert into tb1 values(1,{v[0]})"),
        ("s2", "insert into tb1 (id) values(2)"), ("s2", "insert into tb2 (id) values(3)"), ("count", 3),
        ("s2", f"alter table tb1 {ddl2}"), ("s1", f"insert into tb1 values(4,{v[1]})"),
        ("s2", f"insert into tb1 values(5,{v[2]})"), ("s2", "insert into tb2 (id) values(6)"),
        ("s2", f"alter table tb2 {ddl2}"), ("s1", f"insert into tb1 values(7,{v[3]})"),
        ("s2", f"insert into tb1 values(8,{v[4]})"), ("s2", f"insert into tb2 values(9,{v[5]})"), *end))


_GEN = ("default", "default", "default", "default", "default", "default")

CASES = (
    Case("dm036_add_column_first_and_after", "shardddl2 DM_036_CASE (double-source-optimistic)", _INIT,
         (("s1", "alter table tb1 add column new_col1 int first"), ("s1", "insert into tb1 values(1,1,'aaa')"),
          ("s2", "insert into tb1 values(2,'bbb')"), ("s2", "insert into tb2 values(3,'ccc')"),
          ("s2", "alter table tb1 add column new_col1 int after a"), ("s1", "insert into tb1 values(4,4,'ddd')"),
          ("s2", "insert into tb1 values(5,5,'eee')"), ("s2", "insert into tb2 values(6,'fff')"),
          ("s2", "alter table tb2 add column new_col1 int after b"), ("s1", "insert into tb1 values(7,7,'ggg')"),
          ("s2", "insert into tb1 values(8,8,'hhh')"), ("s2", "insert into tb2 values(9,'iii',9)"),
          ("count", 9), ("wait_equal",)),
         columns="a INT PRIMARY KEY, b VARCHAR(10)"),
    Case("dm037_different_defaults_held", "shardddl2 DM_037_CASE (double-source-optimistic)", _INIT,
         (("s1", "alter table tb1 add new_col1 int default 0"), ("s1", "insert into tb1 values(1,1)"),
          ("s2", "insert into tb1 values(2)"), ("count", 2),
          ("s2", "alter table tb1 add new_col1 int default -1"), ("s1", "insert into tb1 values(3,3)"),
          ("s1", "insert into tb1 values(4,4)"), ("s2", "alter table tb2 add new_col1 int default -1"),
          ("s1", "insert into tb1 values(5,5)"), ("s1", "insert into tb1 values(6,6)"),
          ("s2", "insert into tb2 values(7,7)"),
          ("expect", "stage", "s2", "Paused", "because schema conflict detected",
           "ADD COLUMN `new_col1` INT DEFAULT", "orders_01`"))),
    # rows that existed before each shard's ALTER get the time of that server's ALTER, the merged
    # target's the time of the one downstream ALTER: not equal (as DM; "do sleep" spaces the ALTERs)
    Case("dm038_default_now_differs_per_server", "shardddl2 DM_038_CASE (double-source-optimistic)", _INIT,
         (("s1", "insert into tb1 values(1)"), ("s2", "insert into tb1 values(2)"), ("s2", "insert into tb2 values(3)"),
          ("count", 3), ("down", "do sleep(1.1)"),
          ("s1", "alter table tb1 add column col1 datetime default now()"), ("s1", "insert into tb1 (id) values (4)"),
          ("down", "do sleep(1.1)"),
          ("s2", "alter table tb1 add column col1 datetime default now()"), ("s2", "insert into tb1 (id) values (5)"),
          ("down", "do sleep(1.1)"),
          ("s2", "alter table tb2 add column col1 datetime default now()"), ("s2", "insert into tb2 (id) values (6)"),
          ("count", 6), ("expect", "different"))),
    _col_case("dm039_same_charset_and_collation", "shardddl2 DM_039_CASE (double-source-optimistic)",
              "add column col1 varchar(10) character set utf8 collate utf8_bin",
              "add column col1 varchar(10) character set utf8 collate utf8_bin", (("wait_equal",),)),
    # DM tolerates another charset on one shard; here charsets never conflict (docs/schema-lattice.md)
    _col_case("dm040_different_charsets_tolerated", "shardddl2 DM_040_CASE (double-source-optimistic)",
              "add column col1 varchar(10) character set utf8 collate utf8_bin",
              "add column col1 varchar(10) character set utf8mb4 collate utf8mb4_bin", (("running",), ("wait_equal",))),
    _col_case("dm041_same_generated_column", "shardddl2 DM_041_CASE (double-source-optimistic)",
              "add column new_col1 int as (id+1)", "add column new_col1 int as (id+1)", (("wait_equal",),), _GEN),
    # DM greps the held DDL in its form (issue 34): GENERATED ALWAYS AS, names quoted, VIRTUAL named
    _col_case("dm043_different_generated_expressions_held", "shardddl2 DM_043_CASE (double-source-optimistic)",
              "add column new_col1 int as (id+1)", "add column new_col1 int as (id+2)",
              (("expect", "stage", "s2", "Paused", "because schema conflict detected",
                "fail to try sync the optimistic shard ddl lock",
                "ADD COLUMN `new_col1` INT GENERATED ALWAYS AS (`id`+2) VIRTUAL"),),
              _GEN),
    Case("dm_init_schema_add_drop_then_master_restart", "shardddl2 DM_INIT_SCHEMA_CASE (double-source-optimistic)",
         _INIT,
         (("s1", "insert into tb1 values(1)"), ("s2", "insert into tb1 values(2)"), ("s2", "insert into tb2 values(3)"),
          ("s1", "alter table tb1 add new_col1 int"), ("s1", "insert into tb1 values(4,4)"),
          ("s2", "insert into tb1 values(5)"), ("s2", "insert into tb2 values(6)"),
          ("s1", "alter table tb1 drop new_col1"), ("s1", "insert into tb1 values(7)"),
          ("s2", "insert into tb1 values(8)"), ("s2", "insert into tb2 values(9)"), ("count", 9),
          ("restart", "master"),
          ("s1", "alter table tb1 add new_col1 int"), ("s1", "insert into tb1 values(10,10)"),
          ("s2", "insert into tb1 values(11)"), ("s2", "insert into tb2 values(12)"),
          ("s1", "alter table tb1 drop new_col1"), ("s1", "insert into tb1 values(13)"),
          ("s2", "insert into tb1 values(14)"), ("s2", "insert into tb2 values(15)"), ("wait_equal",))),
)

_PARTITIONS = "PARTITION BY RANGE (a) (PARTITION p0 VALUES LESS THAN (100))"
_PART_COUNT = ("select count(1) from information_schema.partitions where table_schema = database() "
               "and table_name = 'orders' and partition_name is not null")

CASES = CASES + (
    # ADD / DROP PARTITION of one shard run on the merged table as written (DM passes them through)
    Case("dm_add_drop_partitions", "shardddl2 DM_ADD_DROP_PARTITIONS_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1",)},
         (("s1", "insert into tb1 values(1)"), ("s2", "insert into tb1 values(2)"),
          ("s1", "alter table tb1 add column new_col1 int"), ("s1", "insert into tb1 values(3,3)"),
          ("s2", "insert into tb1 values(4)"), ("count", 4), ("down_rows", _PART_COUNT, [(1,)]),
          ("s1", "ALTER TABLE tb1 ADD PARTITION (partition p1 VALUES LESS THAN (10000))"),
          ("down_rows", _PART_COUNT, [(2,)]),
          ("s1", "ALTER TABLE tb1 DROP PARTITION p1"),
          ("down_rows", _PART_COUNT, [(1,)]), ("running",)),
         columns="a INT", table_options=_PARTITIONS),
    # every shard adds the same partition (DM_142's optimistic shape): it runs once, the repeats are
    # "already in effect" downstream; rows of the new range from both sources land in it
    Case("add_partition_on_every_shard_runs_once", "shardddl4_1 DM_142_CASE shape (optimistic; DM comments it out)",
         {"s1": ("tb1",), "s2": ("tb1",)},
         (("s1", "insert into tb1 values(1)"), ("s2", "insert into tb1 values(2)"), ("count", 2),
          ("s1", "alter table tb1 add partition (partition p1 values less than (10000))"),
          ("down_rows", _PART_COUNT, [(2,)]),
          ("s2", "alter table tb1 add partition (partition p1 values less than (10000))"),
          ("s1", "insert into tb1 values(5001)"), ("s2", "insert into tb1 values(5002)"), ("count", 4),
          ("down_rows", "select count(*) from orders partition (p1)", [(2,)]), ("running",),
          ("s1", "alter table tb1 drop partition p1"), ("s2", "alter table tb1 drop partition p1"),
          ("s1", "insert into tb1 values(3)"), ("count", 3), ("down_rows", _PART_COUNT, [(1,)]), ("running",)),
         columns="a INT", table_options=_PARTITIONS),
)

PENDING = ()

NOT_APPLICABLE = {
    "shardddl2 DM_036..DM_043 pessimistic runs": "pessimistic mode only",
}
