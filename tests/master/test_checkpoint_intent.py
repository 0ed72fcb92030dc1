"""``current_info``: the schema a table joining a lock starts from, when its worker has finished a
shard DDL (rule 8b's intent carries the schema after it) but not yet moved its checkpoint past it."""
import json

from coordinator.master.checkpoint_schema import current_info

BEFORE, AFTER = '{"columns": ["a"]}', '{"columns": ["a", "b"]}'


def _intent(file="mysql-bin.000002", pos=500, finished=True, info=AFTER):
    return json.dumps({"pos": {"file": file, "pos": pos, "gtid": ""}, "finished": finished, "table_info": info})


def test_finished_ddl_past_the_checkpoint_gives_its_schema():
    assert current_info(BEFORE, "mysql-bin.000002", 100, _intent()) == AFTER
    assert current_info(BEFORE, "mysql-bin.000001", 900, _intent()) == AFTER     # an older file


def test_checkpoint_at_or_past_the_ddl_keeps_its_own_schema():
    assert current_info(BEFORE, "mysql-bin.000002", 500, _intent()) == BEFORE
    assert current_info(BEFORE, "mysql-bin.000010", 4, _intent()) == BEFORE      # file 10 > file 2


def test_an_intent_not_finished_unreadable_or_without_schema_is_ignored():
    assert current_info(BEFORE, "mysql-bin.000002", 100, _intent(finished=False)) == BEFORE
    assert current_info(BEFORE, "mysql-bin.000002", 100, _intent(info=None)) == BEFORE
    assert current_info(BEFORE, "mysql-bin.000002", 100, "{not json") == BEFORE
    assert current_info(BEFORE, "mysql-bin.000002", 100, None) == BEFORE
