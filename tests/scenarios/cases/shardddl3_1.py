"""DM's ``dm/tests/shardddl3_1`` optimistic runs (DM_100..DM_118) as data: a worker restarted in the
middle of a lock, several DDLs in a row, indexes, NOT NULL columns, one column added with different
types, multi-column add/drop.  Written in our words from DM's cases; DM's own code is not used."""
from __future__ import annotations

from ..case import Case

_THREE = {"s1": ("tb1",), "s2": ("tb1", "tb2")}
_FOUR = {"s1": ("tb1", "tb2"), "s2": ("tb1", "tb2")}

# DM's restart cases first give every shard a column (so that each worker has saved a checkpoint
# past the start), check, and write one row a table
_WARM_UP = (("s1", "alter table tb1 add column col int"), ("s1", "alter table tb2 add column col int"),
            ("s2", "alter table tb1 add column col int"), ("s2", "alter table tb2 add column col int"),
            ("wait_equal",),
            ("s1", "insert into tb1 values(1,1)"), ("s2", "insert into tb1 values(2,2)"),
            ("s2", "insert into tb2 values(3,3)"), ("s1", "insert into tb2 values(4,4)"))
_ADD_NEW = "add column new_col1 int"


def _index_rounds(action: str, idx1: str, idx2: str) -> tuple:
    """Two indexes changed in one order on source 1's tb1 and in the other on source 2's tb1, then
    both on its tb2, with rows between (DM's add/drop index helper)."""
    return (("s1", f"alter table tb1 {action} index new_idx1{idx1}"), ("s1", "insert into tb1 values(1,1,1)"),
            ("s1", f"alter table tb1 {action} index new_idx2{idx2}"), ("s1", "insert into tb1 values(2,2,2)"),
            ("s2", "insert into tb1 values(3,3,3)"), ("s2", "insert into tb2 values(4,4,4)"),
            ("s2", f"alter table tb1 {action} index new_idx2{idx2}"), ("s2", "insert into tb1 values(5,5,5)"),
            ("s2", f"alter table tb1 {action} index new_idx1{idx1}"), ("s2", "insert into tb1 values(6,6,6)"),
            ("s2", f"alter table tb2 {action} index new_idx1{idx1}"),
            ("s2", f"alter table tb2 {action} index new_idx2{idx2}"),
            ("s1", "insert into tb1 values(7,7,7)"), ("s1", "insert into tb1 values(8,8,8)"),
            ("s2", "insert into tb2 values(9,9,9)"), ("count", 9))


def _two_types_first(type1: str, val1: str, type2: str, val2: str) -> tuple:
    """DM's field-flag helper, first half: column ``col1`` added as ``type1`` on source 1's tb1 and as
    ``type2`` on source 2's tb1, one row before and one after each."""
    return (("s1", "insert into tb1 values(1)"), ("s1", f"alter table tb1 add column col1 {type1}"),
            ("s1", f"insert into tb1 values(2,{val1})"),
            ("s2", "insert into tb1 values(3)"), ("s2", f"alter table tb1 add column col1 {type2}"),
            ("s2", f"insert into tb1 values(4,{val2})"))


def _two_types_then(type3: str, val3: str) -> tuple:
    """... second half: source 2's tb2 adds it as ``type3`` (DM then checks that the data differ: the
    step language has no "not equal" step, and which rows are held depends on which source was held)."""
    return (("s2", "insert into tb2 values(5)"), ("s2", f"alter table tb2 add column col1 {type3}"),
            ("s2", f"insert into tb2 values(6,{val3})"))


CASES = (
    # worker 1 is killed right after source 1's tb1 joined the lock (DM writes the next two DDLs while it
    # is down, then starts it); the lock must still resolve
    Case("dm100_worker1_restarted_inside_a_lock", "shardddl3_1 DM_100_CASE (double-source-optimistic)", _FOUR,
         (*_WARM_UP, ("s1", f"alter table tb1 {_ADD_NEW}"), ("restart", "worker", "s1"),
          ("s2", f"alter table tb1 {_ADD_NEW}"), ("s1", f"alter table tb2 {_ADD_NEW}"),
          ("s2", f"alter table tb2 {_ADD_NEW}"), ("wait_equal",))),
    # the same with worker 2, killed after both tb1 tables joined
    Case("dm101_worker2_restarted_inside_a_lock", "shardddl3_1 DM_101_CASE (double-source-optimistic)", _FOUR,
         (*_WARM_UP, ("s1", f"alter table tb1 {_ADD_NEW}"), ("s2", f"alter table tb1 {_ADD_NEW}"),
          ("restart", "worker", "s2"), ("s1", f"alter table tb2 {_ADD_NEW}"),
          ("s2", f"alter table tb2 {_ADD_NEW}"), ("wait_equal",))),
    # add a DOUBLE, drop b, widen the key with a default: interleaved over the three tables
    Case("dm103_add_drop_and_change_interleaved", "shardddl3_1 DM_103_CASE (double-source-optimistic)", _THREE,
         (("s1", "insert into tb1 values(1,'aaa')"), ("s2", "insert into tb1 values(2,'bbb')"),
          ("s2", "insert into tb2 values(3,'ccc')"),
          ("s1", "alter table tb1 add column c double"), ("s1", "alter table tb1 drop column b"),
          ("s2", "alter table tb1 add column c double"), ("s2", "alter table tb2 add column c double"),
          ("s1", "alter table tb1 change a a bigint default 10"), ("s2", "alter table tb1 drop column b"),
          ("s2", "alter table tb1 change a a bigint default 10"), ("s2", "alter table tb2 drop column b"),
          ("s2", "alter table tb2 change a a bigint default 10"), ("wait_equal",)),
         columns="a INT PRIMARY KEY, b VARCHAR(10)"),
    # two NOT NULL columns with defaults, added in opposite orders on the two sources
    Case("dm104_not_null_columns_in_opposite_orders", "shardddl3_1 DM_104_CASE (double-source-optimistic)", _THREE,
         (("s1", "alter table tb1 add new_col1 int not null default 10"), ("s1", "insert into tb1 (id) values(1)"),
          ("s1", "alter table tb1 add new_col2 int not null default 20"), ("s1", "insert into tb1 (id) values(2)"),
          ("s2", "insert into tb1 values(3)"), ("s2", "insert into tb2 values(4)"),
          ("s2", "alter table tb1 add new_col2 int not null default 20"), ("s2", "insert into tb1 (id) values(5)"),
          ("s2", "alter table tb1 add new_col1 int not null default 10"), ("s2", "insert into tb1 (id) values(6)"),
          ("s2", "alter table tb2 add new_col1 int not null default 10"),
          ("s2", "alter table tb2 add new_col2 int not null default 20"),
          ("s1", "insert into tb1 (id) values(7)"), ("s1", "insert into tb1 (id) values(8)"),
          ("s2", "insert into tb2 (id) values(9)"), ("count", 9))),
    Case("dm105_add_two_indexes_in_opposite_orders", "shardddl3_1 DM_105_CASE (double-source-optimistic)", _THREE,
         (*_index_rounds("add", "(b)", "(c)"),
          ("down_rows", "select count(b), count(c) from orders", [(9, 9)])),
         columns="a INT PRIMARY KEY, b INT, c INT"),
    Case("dm106_drop_two_indexes_in_opposite_orders", "shardddl3_1 DM_106_CASE (double-source-optimistic)", _THREE,
         _index_rounds("drop", "", ""),
         columns="a INT PRIMARY KEY, b INT, c INT, INDEX new_idx1(b), INDEX new_idx2(c)"),
    # a NOT NULL column without a default, on one shard first: the task keeps running
    Case("dm107_not_null_column_without_default", "shardddl3_1 DM_107_CASE (double-source-optimistic)", _THREE,
         (("s1", "insert into tb1 values(1)"), ("s1", "alter table tb1 add column col1 int not null"),
          ("s1", "insert into tb1 values (2,2)"), ("running",),
          ("s2", "insert into tb1 values(3)"), ("s2", "alter table tb1 add column col1 int not null"),
          ("s2", "insert into tb1 values (4,4)"),
          ("s2", "insert into tb2 values(5)"), ("s2", "alter table tb2 add column col1 int not null"),
          ("s2", "insert into tb2 values (6,6)"),
          ("s1", "insert into tb1 values(7,7)"), ("s2", "insert into tb1 values(8,8)"),
          ("s2", "insert into tb2 values(9,9)"), ("wait_equal",))),
    # several columns in one statement: added, dropped, added and dropped again, added with one dropped
    Case("dm113_add_two_columns_in_one_statement", "shardddl3_1 DM_113_CASE (double-source-optimistic)", _THREE,
         (("s1", "insert into tb1 values(1)"), ("s2", "insert into tb1 values(2)"), ("s2", "insert into tb2 values(3)"),
          ("s1", "alter table tb1 add column (b int, c int)"), ("s1", "insert into tb1 values(4,4,4)"),
          ("s2", "insert into tb1 values(5)"), ("s2", "insert into tb2 values(6)"),
          ("s2", "alter table tb1 add column (b int, c int)"), ("s1", "insert into tb1 values(7,7,7)"),
          ("s2", "insert into tb1 values(8,8,8)"), ("s2", "insert into tb2 values(9)"),
          ("s2", "alter table tb2 add column (b int, c int)"), ("s1", "insert into tb1 values(10,10,10)"),
          ("s2", "insert into tb1 values(11,11,11)"), ("s2", "insert into tb2 values(12,12,12)"),
          ("wait_equal",))),
    Case("dm114_drop_two_columns_in_one_statement", "shardddl3_1 DM_114_CASE (double-source-optimistic)", _THREE,
         (("s1", "insert into tb1 values(1,1,1)"), ("s2", "insert into tb1 values(2,2,2)"),
          ("s2", "insert into tb2 values(3,3,3)"),
          ("s1", "alter table tb1 drop column b, drop column c"), ("s1", "insert into tb1 values(4)"),
          ("s2", "insert into tb1 values(5,5,5)"), ("s2", "insert into tb2 values(6,6,6)"),
          ("s2", "alter table tb1 drop column b, drop column c"), ("s1", "insert into tb1 values(7)"),
          ("s2", "insert into tb1 values(8)"), ("s2", "insert into tb2 values(9,9,9)"),
          ("s2", "alter table tb2 drop column b, drop column c"), ("s1", "insert into tb1 values(10)"),
          ("s2", "insert into tb1 values(11)"), ("s2", "insert into tb2 values(12)"),
          ("wait_equal",)), columns="a INT PRIMARY KEY, b INT, c INT"),
    # two columns added on both tb1 tables (source 2's tb2 never adds them), then dropped again
    # (source 2 first): DM waits for both workers to have handled the add; here: all rows arrived
    Case("dm115_add_two_columns_then_roll_back", "shardddl3_1 DM_115_CASE (double-source-optimistic)", _THREE,
         (("s1", "insert into tb1 values(1)"), ("s2", "insert into tb1 values(2)"), ("s2", "insert into tb2 values(3)"),
          ("s1", "alter table tb1 add column (b int, c int)"), ("s1", "insert into tb1 values(4,4,4)"),
          ("s2", "insert into tb1 values(5)"), ("s2", "insert into tb2 values(6)"),
          ("s2", "alter table tb1 add column (b int, c int)"), ("s1", "insert into tb1 values(7,7,7)"),
          ("s2", "insert into tb1 values(8,8,8)"), ("s2", "insert into tb2 values(9)"),
          ("count", 9),
          ("s2", "alter table tb1 drop column b, drop column c"), ("s1", "insert into tb1 values(10,10,10)"),
          ("s2", "insert into tb1 values(11)"), ("s2", "insert into tb2 values(12)"),
          ("s1", "alter table tb1 drop column b, drop column c"), ("s1", "insert into tb1 values(13)"),
          ("s2", "insert into tb1 values(14)"), ("s2", "insert into tb2 values(15)"),
          ("wait_equal",))),
    Case("dm116_add_one_column_drop_another_in_one_statement", "shardddl3_1 DM_116_CASE (double-source-optimistic)",
         _THREE,
         (("s1", "insert into tb1 values(1,1)"), ("s2", "insert into tb1 values(2,2)"), ("s2", "insert into tb2 values(3,3)"),
          ("s1", "alter table tb1 add column b int, drop column c"), ("s1", "insert into tb1 values(4,4)"),
          ("s2", "insert into tb1 values(5,5)"), ("s2", "insert into tb2 values(6,6)"),
          ("s2", "alter table tb1 add column b int, drop column c"), ("s1", "insert into tb1 values(7,7)"),
          ("s2", "insert into tb1 values(8,8)"), ("s2", "insert into tb2 values(9,9)"),
          ("s2", "alter table tb2 add column b int, drop column c"), ("s1", "insert into tb1 values(10,10)"),
          ("s2", "insert into tb1 values(11,11)"), ("s2", "insert into tb2 values(12,12)"),
          ("wait_equal",)), columns="a INT PRIMARY KEY, c INT"),
    # source 1 drops two columns and adds them back while the others still have them: held with DM's
    # phrases; DM fixes source 1's schema (binlog-schema update) and skips, here `binlog skip` does both
    Case("dm117_drop_two_columns_then_add_them_back", "shardddl3_1 DM_117_CASE (double-source-optimistic)", _THREE,
         (("s1", "insert into tb1 values(1,1,1)"), ("s2", "insert into tb1 values(2,2,2)"),
          ("s2", "insert into tb2 values(3,3,3)"),
          ("s1", "alter table tb1 drop column b, drop column c"), ("s1", "insert into tb1 values(4)"),
          ("s2", "insert into tb1 values(5,5,5)"), ("s2", "insert into tb2 values(6,6,6)"),
          ("s1", "alter table tb1 add column (b int, c int)"), ("s1", "insert into tb1 values(7,7,7)"),
          ("s2", "insert into tb1 values(8,8,8)"), ("s2", "insert into tb2 values(9,9,9)"),
          ("expect", "stage", "s1", "Paused", "because schema conflict detected",
           "add column b that wasn't fully dropped in downstream"),
          ("ctl", "binlog", "skip", "{task}"), ("running",),
          ("s1", "insert into tb1 values(10,10,10)"), ("s2", "insert into tb1 values(11,11,11)"),
          ("s2", "insert into tb2 values(12,12,12)"),
          ("down", "update orders set b = null, c = null where a = 1"), ("wait_equal",)),
         columns="a INT PRIMARY KEY, b INT, c INT",
         table_options="ENGINE=InnoDB DEFAULT CHARSET=latin1 COLLATE=latin1_bin"),
    Case("dm118_reorder_the_columns_of_an_index", "shardddl3_1 DM_118_CASE (double-source-optimistic)", _THREE,
         (("s1", "insert into tb1 values(1,1,1,1)"), ("s2", "insert into tb1 values(2,2,2,2)"),
          ("s2", "insert into tb2 values(3,3,3,3)"),
          ("s1", "alter table tb1 drop index idx, add index idx(c3,c1,c2)"), ("s1", "insert into tb1 values(4,4,4,4)"),
          ("s2", "insert into tb1 values(5,5,5,5)"), ("s2", "insert into tb2 values(6,6,6,6)"),
          ("s2", "alter table tb1 drop index idx, add index idx(c3,c1,c2)"), ("s1", "insert into tb1 values(7,7,7,7)"),
          ("s2", "insert into tb1 values(8,8,8,8)"), ("s2", "insert into tb2 values(9,9,9,9)"),
          ("s2", "alter table tb2 drop index idx, add index idx(c3,c1,c2)"),
          ("s1", "insert into tb1 values(10,10,10,10)"), ("s2", "insert into tb1 values(11,11,11,11)"),
          ("s2", "insert into tb2 values(12,12,12,12)"), ("wait_equal",)),
         columns="a INT PRIMARY KEY, c1 INT, c2 INT, c3 INT, INDEX idx(c1, c2, c3)"),
)

# one column added with a different type on each source (DM's field-flag helper); which source's DDL
# reaches the lock second is not fixed, so "any" source may be the held one.  DM greps the conflict
# phrase where two lengths of one type meet (DM_109, DM_110), and only the DDL and the held table where
# the types themselves differ (DM_108, DM_111, DM_112: "there will be conflicts" in DM)
_REFUSED = ("expect", "stage", "any", "Paused", "because schema conflict detected", "ADD COLUMN `col1`")
_HELD = ("expect", "stage", "any", "Paused", "ADD COLUMN `col1`")
_IN_LOCK = ("expect", "locks", 1, '`.`orders_01`"')

CASES = CASES + (
    # DM's join of two DECIMALs fails; ours widens them (docs/schema-lattice.md) and then refuses the
    # second ADD because its type differs from the column already added: held either way
    Case("dm108_add_a_decimal_with_three_precisions",
         "shardddl3_1 DM_108_CASE (double-source-optimistic; DECIMALs join here, docs/schema-lattice.md)", _THREE,
         (*_two_types_first("decimal(5,2)", "2", "decimal(7,4)", "4"), _HELD, _IN_LOCK,
          *_two_types_then("decimal(9,6)", "6"))),
    Case("dm109_add_a_varchar_growing_longer", "shardddl3_1 DM_109_CASE (double-source-optimistic)", _THREE,
         (*_two_types_first("varchar(3)", "'222'", "varchar(4)", "'4444'"), _REFUSED,
          *_two_types_then("varchar(5)", "'66666'"))),
    Case("dm110_add_a_varchar_growing_shorter", "shardddl3_1 DM_110_CASE (double-source-optimistic)", _THREE,
         (*_two_types_first("varchar(5)", "'22222'", "varchar(4)", "'4444'"), _REFUSED,
          *_two_types_then("varchar(3)", "'666'"))),
    Case("dm111_add_an_int_with_and_without_zerofill", "shardddl3_1 DM_111_CASE (double-source-optimistic)", _THREE,
         (*_two_types_first("int(11) zerofill", "2", "int(11)", "4"), _HELD, _IN_LOCK,
          *_two_types_then("int(11) zerofill", "'66666'"))),
    # as DM_108: DM's join of signed and unsigned fails; ours widens to BIGINT and then refuses the second
    # ADD with another type
    Case("dm112_add_an_int_signed_and_unsigned",
         "shardddl3_1 DM_112_CASE (double-source-optimistic; mixed signedness joins here, docs/schema-lattice.md)",
         _THREE,
         (*_two_types_first("int(11) unsigned", "2", "int(11)", "4"), _HELD, _IN_LOCK,
          *_two_types_then("int(11) unsigned", "'66666'"))),
)

PENDING = ()

NOT_APPLICABLE = {
    "shardddl3_1 DM_099, DM_102 and the pessimistic runs of DM_103..DM_118": "pessimistic mode only",
}
