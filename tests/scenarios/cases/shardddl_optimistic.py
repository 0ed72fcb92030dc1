"""DM's ``dm/tests/shardddl_optimistic`` cases as data: shards that start with different schemas,
then converge through add/drop column DDLs, with and without restarts.
Written in our words from DM's cases; DM's own code is not used."""
from __future__ import annotations

from ..case import Case

_FOUR = {"s1": ("tb1", "tb2"), "s2": ("tb1", "tb2")}

# every shard starts as (a) and gets its own extra columns before the task starts:
# s1.tb1 (a), s1.tb2 (a,b), s2.tb1 (a,c), s2.tb2 (a,b,c); the target is created by hand as (a,b,c)
_SETUP = (
    ("s1", "alter table tb2 add column b varchar(10)"),
    ("s2", "alter table tb1 add column c text"),
    ("s2", "alter table tb2 add column b varchar(10), add column c text"),
    ("s1", "insert into tb1 values(1)"),
    ("s1", "insert into tb2 values(2,'22')"),
    ("s2", "insert into tb1 values(3,'333')"),
    ("s2", "insert into tb2 values(4,'44','444')"),
    ("down", "create table orders (a int primary key, b varchar(10), c text)"),
)


def _four(rows: tuple) -> tuple:
    """One row into each of s1.tb1, s1.tb2, s2.tb1, s2.tb2 (VALUES parts in that order)."""
    where = (("s1", "tb1"), ("s1", "tb2"), ("s2", "tb1"), ("s2", "tb2"))
    return tuple((sid, f"insert into {t} values{v}") for (sid, t), v in zip(where, rows))


def _converge(pause: tuple = ((), (), (), ())) -> tuple:
    """The DDLs that bring every shard to (a,c), with four rows after each; ``pause[i]`` runs after
    the i-th DDL (e.g. a restart)."""
    return (
        *_four(("(5)", "(6,'6')", "(7,'77')", "(8,'8','88')")),
        ("s1", "alter table tb1 add column c text"), *pause[0],
        *_four(("(9,'999')", "(10,'1010')", "(11,'111111')", "(12,'1212','121212')")),
        ("s2", "alter table tb2 drop column b"), *pause[1],
        *_four(("(13,'131313')", "(14,'1414')", "(15,'151515')", "(16,'161616')")),
        ("s1", "alter table tb2 drop column b"), *pause[2],
        *_four(("(17,'171717')", "(18)", "(19,'191919')", "(20,'202020')")),
        ("s1", "alter table tb2 add column c text"), *pause[3],
        *_four(("(21,'212121')", "(22,'222222')", "(23,'232323')", "(24,'242424')")),
    )


CASES = (
    Case("dm_different_schema_full", "shardddl_optimistic DM_DIFFERENT_SCHEMA_FULL_CASE (optimistic)", _FOUR,
         (*_SETUP, ("start",), *_converge(), ("count", 24), ("wait_equal",)),
         columns="a INT PRIMARY KEY", mode="all"),
    # DM restarts the master or a worker at random after each DDL is handled; we restart each in turn
    Case("dm_restart_task_master_worker", "shardddl_optimistic DM_RESTART_TASK_MASTER_WORKER_CASE (optimistic)",
         _FOUR,
         (*_SETUP, ("start",),
          *_converge(((("restart", "master"),), (("restart", "worker", "s1"),), (("restart", "worker", "s2"),),
                      (("stop_task",), ("start_task",)))),
          ("count", 24), ("wait_equal",)),
         columns="a INT PRIMARY KEY", mode="all"),
    # shards are created and dropped while add/drop column DDLs are under way: a new shard joins with
    # the smaller schema, a dropped shard leaves the lock; DM's second database's tb1 is our tb3
    Case("dm_create_drop_table", "shardddl_optimistic DM_CREATE_DROP_TABLE_CASE (optimistic)",
         {"s1": ("tb1", "tb3"), "s2": ("tb1", "tb3")},
         (("s1", "insert into tb1 values(1)"), ("s1", "insert into tb3 values(2)"),
          ("s2", "insert into tb1 values(3)"), ("s2", "insert into tb3 values(4)"),
          ("s1", "create table tb2 (id int primary key)"), ("s1", "insert into tb2 values(5)"),
          ("s1", "drop table tb1"),
          ("s1", "alter table tb2 add column new_col1 int"), ("s1", "alter table tb3 add column new_col1 int"),
          ("s2", "alter table tb1 add column new_col1 int"), ("s2", "alter table tb3 add column new_col1 int"),
          ("s1", "insert into tb3 values(6,6)"), ("s2", "insert into tb1 values(7,7)"),
          ("s2", "insert into tb3 values(8,8)"), ("s1", "insert into tb2 values(9,9)"),
          ("s2", "create table tb2 (id int primary key)"), ("s2", "insert into tb2 values(10)"),
          ("s2", "drop table tb1"),
          ("s2", "alter table tb3 drop column new_col1"),
          ("s1", "insert into tb2 values(11,11)"), ("s1", "insert into tb3 values(12,12)"),
          ("s2", "insert into tb2 values(13)"), ("s2", "insert into tb2 values(14)"),
          ("s1", "drop table tb3"),
          ("s1", "alter table tb2 drop column new_col1"),
          ("s1", "insert into tb2 values(15)"), ("s2", "insert into tb2 values(16)"),
          ("s2", "insert into tb3 values(17)"),
          ("count", 17),
          ("s1", "alter table tb2 add column new_col2 int"), ("s2", "alter table tb2 add column new_col2 int"),
          ("s2", "alter table tb3 add column new_col2 int"),
          ("s1", "insert into tb2 values(18,18)"), ("s2", "insert into tb2 values(19,19)"),
          ("s2", "insert into tb3 values(20,20)"),
          ("count", 20),
          ("down_rows", "select count(*) from information_schema.columns where table_schema = database() "
                        "and table_name = 'orders'", [(2,)]),
          ("expect", "locks", 0)),
         columns="id INT PRIMARY KEY"),
    # three of four shards switch to utf8mb4; the fourth lagging behind must not hold rows back, and
    # the target ends up utf8mb4
    Case("dm_change_utf_charset", "shardddl_optimistic DM_CHANGE_UTF_CHARSET_CASE (optimistic)", _FOUR,
         (("s1", "alter table tb1 character set utf8mb4 collate utf8mb4_bin"), ("s1", "insert into tb1 values(1, 'a')"),
          ("s1", "alter table tb2 character set utf8mb4 collate utf8mb4_bin"), ("s1", "insert into tb2 values(2, 'b')"),
          ("s2", "alter table tb1 character set utf8mb4 collate utf8mb4_bin"), ("s2", "insert into tb1 values(3, 'c')"),
          ("count", 3),
          ("down_rows", "select c.character_set_name from information_schema.tables t join "
                        "information_schema.collation_character_set_applicability c on c.collation_name = "
                        "t.table_collation where t.table_schema = database() and t.table_name = 'orders'",
           [("utf8mb4",)])),
         columns="id INT PRIMARY KEY, name VARCHAR(10)",
         table_options="DEFAULT CHARACTER SET utf8mb3 COLLATE utf8mb3_bin"),
)

_STOP_ONE_SOURCE = Case(
    "dm_stop_task_for_a_source", "shardddl_optimistic DM_STOP_TASK_FOR_A_SOURCE_CASE (optimistic)", _FOUR,
    (*_four(("(1)", "(2)", "(3)", "(4)")),
     ("s1", "alter table tb1 add column b varchar(10)"), ("s1", "alter table tb2 add column b varchar(10)"),
     ("s2", "alter table tb1 add column b varchar(10)"), ("s2", "alter table tb2 add column b varchar(10)"),
     *_four(("(5,'aaa')", "(6,'bbb')", "(7,'ccc')", "(8,'ddd')")),
     ("s1", "alter table tb1 add column c text"), ("s1", "insert into tb1 values(9,'eee','eee')"),
     ("s1", "alter table tb2 drop column b"), ("s1", "insert into tb2 values(10)"),
     ("s2", "alter table tb1 add column c text"), ("s2", "insert into tb1 values(11,'fff','fff')"),
     ("s2", "alter table tb2 drop column b"), ("s2", "insert into tb2 values(12)"),
     ("count", 12),
     # source 2 leaves the task: its shards no longer hold back source 1's drop of b
     ("ctl", "stop-task", "-s", "s2", "{task}"),
     ("s1", "alter table tb1 drop column b"), ("s1", "insert into tb1 values(13,'ggg')"),
     ("s1", "alter table tb2 add column c text"), ("s1", "insert into tb2 values(14,'hhh')"),
     ("count", 14),
     ("down_rows", "select count(*) from information_schema.columns where table_schema = database() "
                   "and table_name = 'orders'", [(2,)]),
     ("ctl", "start-task", "-s", "s2", "{task_file}"),
     ("s1", "insert into tb1 values(15,'iii')"), ("s1", "insert into tb1 values(16,'jjj')"),
     ("s2", "alter table tb1 drop column b"), ("s2", "insert into tb1 values(17,'kkk')"),
     ("s2", "alter table tb2 add column c text"), ("s2", "insert into tb2 values(18,'lll')"),
     ("wait_equal",)),
    columns="id INT PRIMARY KEY")

CASES = CASES + (_STOP_ONE_SOURCE,)

PENDING = ()

NOT_APPLICABLE = {
    "shardddl_optimistic DM_DIFFERENT_SCHEMA_INCREMENTAL (restart from a binlog position, then set each "
    "table's schema)": "needs operate-schema / binlog-schema set to give the replayed tables their schemas",
}
