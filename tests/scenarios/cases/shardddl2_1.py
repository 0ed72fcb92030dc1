"""DM's ``dm/tests/shardddl2_1`` optimistic runs (DM_046..DM_068) as data: dropping, renaming and
modifying columns on one shard after another (source 1's tb1, then source 2's tb1, then its tb2).
Written in our words from DM's cases; DM's own code is not used."""
from __future__ import annotations

from ..case import Case

_THREE = {"s1": ("tb1",), "s2": ("tb1", "tb2")}
_AB = "a INT PRIMARY KEY, b VARCHAR(10)"
_AB_INT = "a INT PRIMARY KEY, b INT"


def _rounds(alter1: str, alter2: str, alter3: str, rows: tuple, *, held: bool = False) -> tuple:
    """The shape every case of this file shares: ``alter1`` on source 1's tb1, ``alter2`` on source 2's
    tb1, ``alter3`` on its tb2, each followed by one row a table (``rows``: nine (source, table,
    values) in write order).  ``held``: source 1's change waits in the lock for the others, and source
    2's change is only written once the lock holds it (DM waits for its worker's log line there)."""
    wait = (("expect", "locks", 1),) if held else ()
    return (("s1", f"alter table tb1 {alter1}"), *(_ins(r) for r in rows[0:3]), *wait,
            ("s2", f"alter table tb1 {alter2}"), *(_ins(r) for r in rows[3:6]),
            ("s2", f"alter table tb2 {alter3}"), *(_ins(r) for r in rows[6:9]))


def _ins(row: tuple) -> tuple:
    sid, table, values = row
    return (sid, f"insert into {table} {values}")


def _nine(fmt) -> tuple:
    """Rows 1..9 written to s1.tb1, s2.tb1, s2.tb2 in turn; ``fmt(n, table_index)`` gives the VALUES
    part (with its column list if any) for row ``n``."""
    where = (("s1", "tb1"), ("s2", "tb1"), ("s2", "tb2"))
    return tuple((where[(n - 1) % 3][0], where[(n - 1) % 3][1], fmt(n, (n - 1) % 3)) for n in range(1, 10))


_LETTERS = "abcdefghijkl"


def _word(n: int) -> str:
    return _LETTERS[n - 1] * 3


CASES = (
    Case("dm046_drop_a_column_on_every_shard", "shardddl2_1 DM_046_CASE (double-source-optimistic)", _THREE,
         (*_rounds("drop column b", "drop column b", "drop column b",
                   _nine(lambda n, i: f"values({n})" if (n, i) in {(1, 0), (4, 0), (5, 1), (7, 0), (8, 1), (9, 2)}
                         else f"values({n},'{_word(n)}')")),
          ("wait_equal",)), columns=_AB),
    Case("dm047_drop_a_stored_generated_column", "shardddl2_1 DM_047_CASE (double-source-optimistic)", _THREE,
         (*_rounds("drop column c", "drop column c", "drop column c",
                   _nine(lambda n, i: f"values({n},'{_word(n)}')" if (n, i) in {(1, 0), (4, 0), (5, 1), (7, 0),
                                                                                (8, 1), (9, 2)}
                         else f"(a,b) values({n},'{_word(n)}')")),
          ("wait_equal",)), columns="a INT PRIMARY KEY, b VARCHAR(10), c INT AS (a + 1) STORED"),
    Case("dm048_drop_a_virtual_generated_column", "shardddl2_1 DM_048_CASE (double-source-optimistic)", _THREE,
         (*_rounds("drop column c", "drop column c", "drop column c",
                   _nine(lambda n, i: f"values({n},'{_word(n)}')" if (n, i) in {(1, 0), (4, 0), (5, 1), (7, 0),
                                                                                (8, 1), (9, 2)}
                         else f"(a,b) values({n},'{_word(n)}')")),
          ("wait_equal",)), columns="a INT PRIMARY KEY, b VARCHAR(10), c INT AS (a + 1) VIRTUAL"),
    # (DM_049, the same rename on every shard, is the e2e test of renaming a column on every shard)
    # source 1 renames a to c, source 2 renames a to d: the second rename cannot join the first
    Case("dm050_rename_one_column_to_two_names", "shardddl2_1 DM_050_CASE (double-source-optimistic)", _THREE,
         (*_rounds("change a c int", "change a d int", "change a d int",
                   _nine(lambda n, i: f"values({n},'{_word(n)}')"), held=True),
          ("expect", "stage", "s2", "Paused", "CHANGE COLUMN `a` `d` INT", "on s2-`")), columns=_AB),
    # source 1 renames a to c, source 2 renames b to c: two columns would take one name
    Case("dm051_rename_two_columns_to_one_name", "shardddl2_1 DM_051_CASE (double-source-optimistic)", _THREE,
         (*_rounds("change a c int", "change b c int", "change b c int",
                   _nine(lambda n, i: f"values({n},{n})"), held=True),
          ("expect", "stage", "s2", "Paused", "CHANGE COLUMN `b` `c` INT", "on s2-`")), columns=_AB_INT),
    # the same rename with different positions: the order of columns does not block the merge;
    # then source 1 moves its column to the front as well
    Case("dm056_rename_with_different_positions", "shardddl2_1 DM_056_CASE (double-source-optimistic)", _THREE,
         (*_rounds("change a c int after b", "change a c int first", "change a c int first",
                   _nine(lambda n, i: f"values({n},{100 + n})")),
          ("running",),
          ("s1", "alter table tb1 change c c int first"), ("s1", "insert into tb1 values(10,110)"),
          ("s2", "insert into tb1 values(11,111)"), ("s2", "insert into tb2 values(12,112)"),
          ("s1", "insert into tb1 values(13,113)"), ("s2", "insert into tb1 values(14,114)"),
          ("s2", "insert into tb2 values(15,115)"), ("wait_equal",)), columns=_AB_INT),
    # a rename with DEFAULT 1 on source 1 and DEFAULT 2 on source 2
    Case("dm058_rename_with_two_defaults", "shardddl2_1 DM_058_CASE (double-source-optimistic)", _THREE,
         (*_rounds("change id new_col int default 1", "change id new_col int default 2",
                   "change id new_col int default 2", _nine(lambda n, i: f"values({n})"), held=True),
          ("expect", "stage", "s2", "Paused", "CHANGE COLUMN `id` `new_col` INT DEFAULT 2", "on s2-`"))),
    Case("dm059_rename_to_a_datetime_defaulting_to_now",
         "shardddl2_1 DM_059_CASE (run_case ... optimistic; DM passes its pessimistic task file)", _THREE,
         (("s1", "insert into tb1 (id) values(1)"), ("s2", "insert into tb1 (id) values(2)"),
          ("s2", "insert into tb2 (id) values(3)"),
          *_rounds("change a new_col datetime default now()", "change a new_col datetime default now()",
                   "change a new_col datetime default now()",
                   _nine(lambda n, i: f"(id) values({n + 3})")),
          ("wait_equal",)), columns="id INT PRIMARY KEY, a DATETIME"),
    Case("dm062_widen_the_key_to_bigint", "shardddl2_1 DM_062_CASE (double-source-optimistic)", _THREE,
         (*_rounds("modify id bigint", "modify id bigint", "modify id bigint", _nine(lambda n, i: f"values({n})")),
          ("wait_equal",))),
    # source 1 widens to MEDIUMINT, source 2 to BIGINT: DM only counts the rows
    Case("dm063_widen_the_key_to_two_sizes", "shardddl2_1 DM_063_CASE (double-source-optimistic)", _THREE,
         (("s1", "alter table tb1 modify id mediumint"), ("s1", "insert into tb1 values(1)"),
          ("s2", "insert into tb1 values(2)"), ("s2", "insert into tb2 values(3)"),
          ("count", 3),
          ("s2", "alter table tb1 modify id bigint"), ("s1", "insert into tb1 values(4)"),
          ("s2", "insert into tb1 values(5)"), ("s2", "insert into tb2 values(6)"),
          ("s2", "alter table tb2 modify id bigint"), ("s1", "insert into tb1 values(7)"),
          ("s2", "insert into tb1 values(8)"), ("s2", "insert into tb2 values(9)"),
          ("count", 9)), columns="id SMALLINT PRIMARY KEY"),
    Case("dm064_change_the_display_width", "shardddl2_1 DM_064_CASE (double-source-optimistic)", _THREE,
         (*_rounds("modify id int(30)", "modify id int(30)", "modify id int(30)", _nine(lambda n, i: f"values({n})")),
          ("wait_equal",))),
    # the same type change placing the column after b on one source and first on the other
    Case("dm065_modify_with_different_positions", "shardddl2_1 DM_065_CASE (double-source-optimistic)", _THREE,
         (*_rounds("modify a bigint after b", "modify a bigint first", "modify a bigint first",
                   _nine(lambda n, i: f"values({n},{n})")),
          ("count", 9)), columns=_AB_INT),
    Case("dm066_give_the_key_a_default", "shardddl2_1 DM_066_CASE (double-source-optimistic)", _THREE,
         (*_rounds("modify id int default 1", "modify id int default 1", "modify id int default 1",
                   _nine(lambda n, i: f"values({n})")),
          ("wait_equal",))),
    # DEFAULT 1 on source 1, DEFAULT 2 on source 2: two explicit defaults are a conflict
    Case("dm067_modify_with_two_defaults", "shardddl2_1 DM_067_CASE (double-source-optimistic)", _THREE,
         (*_rounds("modify id int default 1", "modify id int default 2", "modify id int default 2",
                   _nine(lambda n, i: f"values({n})"), held=True),
          ("expect", "stage", "s2", "Paused", "MODIFY COLUMN `id` INT DEFAULT 2", "on s2-`"))),
    Case("dm068_datetime_defaulting_to_now", "shardddl2_1 DM_068_CASE (double-source-optimistic)", _THREE,
         (*_rounds("modify id datetime default now()", "modify id datetime default now()",
                   "modify id datetime default now()", _nine(lambda n, i: f"values({n},now())")),
          ("wait_equal",)), columns="a INT PRIMARY KEY, id DATETIME"),
)

PENDING = ()

NOT_APPLICABLE = {
    "shardddl2_1 DM_046..DM_068 pessimistic runs": "pessimistic mode only",
    "shardddl2_1 DM_057 (rename with the same default on every shard)": "DM's optimistic run is commented out in "
                                                                        "DM itself (not supported there)",
}
