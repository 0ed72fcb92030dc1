"""DM's ``dm/tests/shardddl3`` optimistic runs not in ``dm_cases.py`` (DM_094..DM_097) as data: the
task stopped, paused, or its master killed while a lock waits for two of four tables.
Written in our words from DM's cases; DM's own code is not used."""
from __future__ import annotations

from ..case import Case

_FOUR = {"s1": ("tb1", "tb2"), "s2": ("tb1", "tb2")}

# every shard first gets a column (each worker then has a checkpoint past the start), the data is
# checked, one row a table is written, and both tb1 tables add new_col1: the lock now waits for the
# two tb2 tables
_HALF_LOCK = (("s1", "alter table tb1 add column col int"), ("s1", "alter table tb2 add column col int"),
              ("s2", "alter table tb1 add column col int"), ("s2", "alter table tb2 add column col int"),
              ("wait_equal",),
              ("s1", "insert into tb1 values(1,1)"), ("s2", "insert into tb1 values(2,2)"),
              ("s2", "insert into tb2 values(3,3)"), ("s1", "insert into tb2 values(4,4)"),
              ("s1", "alter table tb1 add column new_col1 int"), ("s2", "alter table tb1 add column new_col1 int"))
_REST = (("s1", "alter table tb2 add column new_col1 int"), ("s2", "alter table tb2 add column new_col1 int"))

CASES = (
    Case("dm094_stop_and_start_the_task_inside_a_lock", "shardddl3 DM_094_CASE (double-source-optimistic)", _FOUR,
         (*_HALF_LOCK, ("stop_task",), *_REST, ("start_task",), ("wait_equal",))),
    Case("dm095_pause_and_resume_the_task_inside_a_lock", "shardddl3 DM_095_CASE (double-source-optimistic)", _FOUR,
         (*_HALF_LOCK, ("ctl", "pause-task", "{task}"), *_REST, ("ctl", "resume-task", "{task}"),
          ("wait_equal",))),
    # DM's DM_096 is DM_095 with an update-task that DM itself leaves commented out
    Case("dm096_pause_and_resume_without_update", "shardddl3 DM_096_CASE (double-source-optimistic)", _FOUR,
         (*_HALF_LOCK, ("ctl", "pause-task", "{task}"), *_REST, ("ctl", "resume-task", "{task}"),
          ("wait_equal",))),
    # DM kills the master, writes the two tb2 DDLs, starts the master and resumes the task (tolerating a
    # refusal); here the master is killed and started at that point and the DDLs follow.  A restarted
    # master leads only once its old election lease expires, so one row a tb2 table is written after the
    # DDLs and waited for (the lock resolved, hence a leader) before resume-task, which must succeed
    Case("dm097_master_restarted_inside_a_lock", "shardddl3 DM_097_CASE (double-source-optimistic)", _FOUR,
         (*_HALF_LOCK, ("restart", "master"), *_REST,
          ("s1", "insert into tb2 values(5,5,5)"), ("s2", "insert into tb2 values(6,6,6)"), ("count", 6),
          ("ctl", "resume-task", "{task}"), ("wait_equal",), ("running",))),
    # DM_085 / DM_086 run MySQL 8's ALTER INDEX ... VISIBLE / INVISIBLE on source 2's three shards;
    # MariaDB's form is ALTER INDEX ... NOT IGNORED / IGNORED (on a MySQL source the case runs DM's own).  Which indexes the optimizer ignores is
    # not part of the merge (DM's comparer does not see visibility either): the data ends equal
    *(Case(name, f"shardddl3 {dm}_CASE (single-source-optimistic-2, MySQL 8 VISIBLE/INVISIBLE as MariaDB's "
                 "[NOT] IGNORED)", {"s2": ("tb1", "tb2", "tb3")},
           (("s2", f"alter table tb1 alter index a {first}"), ("s2", "insert into tb1 values(1,'aaa')"),
            ("s2", "insert into tb2 values(2,'bbb')"), ("s2", "insert into tb3 values(3,'ccc')"),
            ("s2", f"alter table tb2 alter index a {second}"), ("s2", "insert into tb1 values(4,'ddd')"),
            ("s2", "insert into tb2 values(5,'eee')"), ("s2", "insert into tb3 values(6,'fff')"),
            ("s2", f"alter table tb3 alter index a {first}"), ("s2", "insert into tb1 values(7,'ggg')"),
            ("s2", "insert into tb2 values(8,'hhh')"), ("s2", "insert into tb3 values(9,'iii')"),
            ("count", 9), ("wait_equal",)),
           columns="a INT UNIQUE KEY, b VARCHAR(10)",
           mysql_forms=(("not ignored", "visible"), ("ignored", "invisible")))
      for name, dm, first, second in (("dm085_alter_index_not_ignored_on_every_shard", "DM_085", "not ignored",
                                       "not ignored"),
                                      ("dm086_alter_index_ignored_on_one_shard", "DM_086", "not ignored", "ignored"))),
)

PENDING = ()

NOT_APPLICABLE = {
    "shardddl3 DM_098 and the pessimistic runs of DM_076..DM_097": "pessimistic mode only",
}
