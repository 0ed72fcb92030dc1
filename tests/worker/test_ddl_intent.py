"""Rule 8 after a restart: a DDL counts as already executed only if what IT changes is in
effect downstream — a merged target changed meanwhile by another source's DDL must not make a
DDL that never ran look done (that would lose the column for every later row)."""
from worker.sync.ddl_intent import ddl_in_effect

BEFORE = "CREATE TABLE `items` (\n  `id` int(11) NOT NULL,\n  `v` int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`)\n)"
ADD_X = "ALTER TABLE `db`.`items` ADD COLUMN x INT"


def with_(extra_cols="", extra_keys=""):
    return ("CREATE TABLE `items` (\n  `id` int(11) NOT NULL,\n  `v` int(11) DEFAULT NULL,\n" + extra_cols
            + "  PRIMARY KEY (`id`)" + extra_keys + "\n)")


def test_unrelated_change_does_not_count_as_executed():
    now = with_(extra_keys=",\n  KEY `iv` (`v`)")          # another source added an index
    assert not ddl_in_effect(BEFORE, now, [ADD_X])


def test_executed_add_column_is_recognised_even_with_other_changes():
    now = with_("  `x` int(11) DEFAULT NULL,\n", ",\n  KEY `iv` (`v`)")
    assert ddl_in_effect(BEFORE, now, [ADD_X])


def test_unnamed_add_index_executed_once():
    now = with_(extra_keys=",\n  KEY `v` (`v`)")
    assert ddl_in_effect(BEFORE, now, ["ALTER TABLE `db`.`items` ADD INDEX (v)"])
    assert not ddl_in_effect(BEFORE, BEFORE, ["ALTER TABLE `db`.`items` ADD INDEX (v)"])


def test_drop_column_not_yet_run():
    before = with_("  `x` int(11) DEFAULT NULL,\n")
    assert not ddl_in_effect(before, with_("  `x` int(11) DEFAULT NULL,\n", ",\n  KEY `iv` (`v`)"),
                             ["ALTER TABLE `db`.`items` DROP COLUMN x"])
    assert ddl_in_effect(before, with_(extra_keys=",\n  KEY `iv` (`v`)"), ["ALTER TABLE `db`.`items` DROP COLUMN x"])


def test_unknown_means_run_again():
    assert not ddl_in_effect(None, BEFORE, [ADD_X])
    assert not ddl_in_effect(BEFORE, "not sql", [ADD_X])


def test_a_rename_another_shard_ran_is_in_effect():
    """The shard still has `v`; the target already has it renamed to `w` (another shard's table
    ran the agreed rename): in effect.  A target with neither, or with `v` still there, is not."""
    rename = ["ALTER TABLE `db`.`items` CHANGE COLUMN `v` `w` INT"]
    renamed = "CREATE TABLE `items` (\n  `id` int(11) NOT NULL,\n  `w` int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`)\n)"
    assert ddl_in_effect(BEFORE, renamed, rename)
    assert not ddl_in_effect(BEFORE, BEFORE, rename)
    neither = "CREATE TABLE `items` (\n  `id` int(11) NOT NULL,\n  PRIMARY KEY (`id`)\n)"
    assert not ddl_in_effect(BEFORE, neither, rename)
