"""DM's shardddl1 optimistic cases (pingcap/tiflow dm/tests/shardddl1/run.sh) not already in
``dm_cases.py``: rounds of multi-column add/drop with and without indexes, and a master restart
while one source's conflicting ADD COLUMN is held.  Source 1 has tb1, source 2 tb1 and tb2."""
from __future__ import annotations

from ..case import Case

_INIT = {"s1": ("tb1",), "s2": ("tb1", "tb2")}


def _rounds(name: str, dm: str, columns: str, rounds: list, second: str | None = None) -> Case:
    """Each round: source 1's tb1, then source 2's tb1, then its tb2 run the ALTER, with a row
    into each table between (as wide as that table is at that moment), then the data equal.
    ``rounds``: (alter, width before, width after); ``second``: the value of column 2 (DM writes
    ``now()`` into a DATETIME there), else the row's id."""
    def row(i: int, w: int) -> str:
        vals = [str(i)] + [second if (k == 1 and second) else str(i) for k in range(1, w)]
        return "(" + ",".join(vals) + ")"
    steps: list = []
    for r, (alter, before, after) in enumerate(rounds):
        b = 10 * r
        w1 = {"s1": before, "s2.tb1": before, "s2.tb2": before}

        def ins(n0: int, w: dict) -> list:
            return [("s1", f"insert into tb1 values{row(n0, w['s1'])}"),
                    ("s2", f"insert into tb1 values{row(n0 + 1, w['s2.tb1'])}"),
                    ("s2", f"insert into tb2 values{row(n0 + 2, w['s2.tb2'])}")]
        steps.append(("s1", f"alter table tb1 {alter}"))
        w1["s1"] = after
        steps += ins(b + 1, w1)
        steps.append(("s2", f"alter table tb1 {alter}"))
        w1["s2.tb1"] = after
        steps += ins(b + 4, w1)
        steps.append(("s2", f"alter table tb2 {alter}"))
        w1["s2.tb2"] = after
        steps += ins(b + 7, w1)
        steps.append(("wait_equal",))
    return Case(name, dm, _INIT, tuple(steps), columns=columns)


CASES = (
    _rounds("dm_add_drop_columns_in_rounds", "shardddl1 DM_ADD_DROP_COLUMNS_CASE (double-source-optimistic)",
            "a INT PRIMARY KEY, id DATETIME",
            [("add column col1 int, add column col2 int, add column col3 int", 2, 5),
             ("drop column col1, drop column col2", 5, 3),
             ("add column col4 int, drop column col3", 3, 3),
             ("drop column col4, add column col5 int", 3, 3)], second="now()"),
    _rounds("dm_column_and_index_changes_in_rounds", "shardddl1 DM_COLUMN_INDEX_CASE (double-source-optimistic)",
            "a INT PRIMARY KEY, col1 INT, col2 INT",
            [("add column col3 int, add index idx_col1(col1)", 3, 4),
             ("drop column col2, drop index idx_col1", 4, 3),
             ("drop column col1, add index idx_col3(col3)", 3, 2),
             ("add column col4 int, drop index idx_col3", 2, 3)]),
    Case("dm_restart_master_with_a_held_conflicting_add", "shardddl1 DM_RestartMaster_CASE (double-source-optimistic)",
         {"s1": ("tb1",), "s2": ("tb1",)},
         (("s1", "insert into tb1 values(1,'aaa')"), ("s2", "insert into tb1 values(2,'bbb')"), ("wait_equal",),
          ("s1", "alter table tb1 add column c double"), ("s1", "insert into tb1 values(3,'ccc',3)"), ("count", 3),
          ("s2", "alter table tb1 add column c text"),
          ("expect", "stage", "s2", "Paused", "ADD COLUMN `c` TEXT", "orders_01`"),
          ("expect", "locks", 1, "ADD COLUMN `c` TEXT", "s1-", "s2-"),
          ("restart", "master"),
          # the rebuilt lock holds the same conflict; the subtask stays paused on it
          ("expect", "stage", "s2", "Paused", "ADD COLUMN `c` TEXT"),
          ("expect", "locks", 1, "ADD COLUMN `c` TEXT", "s1-", "s2-")),
         columns="id INT PRIMARY KEY, b VARCHAR(10)"),
)

# DM's second database's tb1 is our tb3 (the same target): each source has tb1 and tb3
_BA = {"s1": ("tb1", "tb3"), "s2": ("tb1", "tb3")}

CASES = CASES + (
    # a held conflict shows DM's phrase; the operator leaves the second database's tables (our tb3)
    # out of the task and starts it again: no lock is left, and the two tb1 converge
    Case("dm_update_ba_rule_conflict_is_held_with_dms_phrase",
         "shardddl1 DM_UpdateBARule_CASE (double-source-optimistic)", _BA,
         (("s1", "insert into tb1 values(1)"), ("s1", "insert into tb3 values(2)"),
          ("s2", "insert into tb1 values(3)"), ("s2", "insert into tb3 values(4)"),
          ("s1", "alter table tb1 add column new_col1 int"), ("s1", "alter table tb3 add column new_col1 int"),
          ("s2", "alter table tb1 add column new_col1 int"), ("s2", "alter table tb3 add column new_col1 int"),
          ("s1", "insert into tb1 values(5,5)"), ("s1", "insert into tb3 values(6,6)"),
          ("s2", "insert into tb1 values(7,7)"), ("s2", "insert into tb3 values(8,8)"),
          ("s1", "alter table tb3 add column new_col2 int"), ("s1", "insert into tb3 values(9,9,9)"),
          ("s1", "alter table tb3 drop column new_col2"), ("s1", "insert into tb3 values(10,10)"),
          ("s1", "alter table tb1 add column new_col3 int"), ("s1", "insert into tb1 values(11,11,11)"),
          ("s2", "alter table tb1 drop column new_col1"), ("s2", "insert into tb1 values(12)"),
          ("count", 12),
          # a rename on one shard is held (skip-and-wait), the source keeps running
          ("s2", "alter table tb3 change id new_id int"), ("running",),
          ("s1", "alter table tb3 add column new_col4 int not null"),
          ("expect", "stage", "s1", "Paused", "fail to try sync the optimistic shard ddl lock",
           "ADD COLUMN `new_col4` INT NOT NULL"),
          ("stop_task",), ("ignore_tables", "tb3"), ("start_task",), ("expect", "locks", 0),
          ("s1", "insert into tb1 values(13,13,13)"), ("s2", "insert into tb1 values(14)"), ("count", 14),
          ("restart", "master"), ("expect", "locks", 0),
          ("s1", "alter table tb1 drop column new_col1"), ("s2", "alter table tb1 add column new_col3 int"),
          ("s1", "insert into tb1 values(15,15)"), ("s2", "insert into tb1 values(16,16)"), ("count", 16),
          ("running",), ("expect", "locks", 0),
          ("down_rows", "select column_name from information_schema.columns where table_schema = database() "
                        "and table_name = 'orders' order by ordinal_position", [("id",), ("new_col3",)]))),
)

PENDING = ()

NOT_APPLICABLE = {
    "shardddl1 DM_ADD_DROP_COLUMNS, DM_COLUMN_INDEX, DM_RestartMaster pessimistic runs": "pessimistic mode only",
}
