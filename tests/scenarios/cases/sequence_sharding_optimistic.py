"""DM's ``dm/tests/sequence_sharding_optimistic`` case, the part about the operator's tracked-schema
override: ``binlog-schema update`` with a text that is not a CREATE TABLE is refused with DM's phrase
(our reason after it) and changes nothing.  Written in our words from DM's case; DM's code is not used."""
from __future__ import annotations

from ..case import Case

CASES = (
    Case("binlog_schema_update_refuses_a_statement_that_is_not_create_table",
         "sequence_sharding_optimistic (set an invalid schema; optimistic)",
         {"s1": ("tb1", "tb2"), "s2": ("tb1",)},
         (("s1", "insert into tb1 values(1,1)"), ("s1", "insert into tb2 values(2,2)"), ("s2", "insert into tb1 values(3,3)"),
          ("count", 3),
          ("s1", "alter table tb1 drop column c"), ("s1", "insert into tb1 values(4)"), ("count", 4),
          ("ctl", "pause-task", "-s", "s1", "{task}"), ("expect", "stage", "s1", "Paused"),
          ("file", "invalid.sql", "invalid create table statement"),
          ("file", "alter.sql", "alter table tb1 add column c int"),
          ("ctl_fails", ("is not a valid `CREATE TABLE` statement",),
           "binlog-schema", "update", "{task}", "-s", "s1", "{db:s1}", "tb1", "{tmp}/invalid.sql"),
          ("ctl_fails", ("is not a valid `CREATE TABLE` statement: ",),
           "binlog-schema", "update", "{task}", "-s", "s1", "{db:s1}", "tb1", "{tmp}/alter.sql"),
          # nothing changed: the tracked structure is still the one after the DROP
          ("ctl", "resume-task", "-s", "s1", "{task}"), ("running",),
          ("s1", "insert into tb1 values(5)"), ("s1", "insert into tb2 values(6,6)"),
          ("s2", "insert into tb1 values(7,7)"), ("count", 7), ("running",)),
         columns="id INT PRIMARY KEY, c INT"),
)
