"""The pure half of the worker's shard-DDL path: what each Operation stage means, and which
path each statement kind takes (no I/O: the etcd and syncer halves are tested on real services
in test_coordination.py)."""
import pytest

from coordinator.etcdproto import Operation, Stage
from coordinator.schema.kinds import StatementKind
from worker.shardddl.decision import Execute, Fail, Hold, Pause, Replay, Route, on_operation, redirected, route_kind


def _op(stage, ddls=("ALTER TABLE `d`.`t` ADD COLUMN c INT",), message=""):
    return Operation(lock_id="t-`d`.`t`", task="t", source="s1", up_schema="u", up_table="t_1",
                     down_schema="d", down_table="t", info_revision=7, ddls=list(ddls), stage=stage,
                     message=message)


@pytest.mark.parametrize("stage", [Stage.NONE, Stage.UNLOCKED])
@pytest.mark.parametrize("strict", [False, True])
def test_answers_that_execute_return_the_operation_statements(stage, strict):
    assert on_operation(_op(stage), strict=strict) == Execute(("ALTER TABLE `d`.`t` ADD COLUMN c INT",))
    assert on_operation(_op(stage, ddls=()), strict=strict) == Execute(())


def test_conflicts_hold_or_pause_and_strict_mode_fails():
    assert on_operation(_op(Stage.SKIP_AND_WAIT, message="m"), strict=False) == Hold("m")
    # a redirect as the first answer to an Info: send the DDL again, never "execute nothing"
    # (the lock cannot count a done mark on a redirect: issue 28 case 6)
    assert on_operation(_op(Stage.RESOLVED, message="m"), strict=False) == Replay("m")
    assert on_operation(_op(Stage.RESOLVED, message="m"), strict=True) == Replay("m")
    assert on_operation(_op(Stage.DETECTED, message="m"), strict=False) == Pause("m")
    assert on_operation(_op(Stage.ERROR, message="bad"), strict=False) == Pause("bad")
    assert on_operation(_op(Stage.DETECTED, message="m"), strict=True) == Fail("m")
    assert on_operation(_op(Stage.SKIP_AND_WAIT), strict=True) == Fail("skip-and-wait")
    assert on_operation(_op(Stage.ERROR, message="bad"), strict=True) == Pause("bad")


def test_only_a_rewrite_that_lets_the_table_replay_is_a_redirect():
    assert [s for s in Stage if redirected(_op(s))] == [Stage.NONE, Stage.RESOLVED, Stage.UNLOCKED]


def test_every_table_kind_has_a_route():
    assert route_kind(StatementKind.ALTER_TABLE) is Route.COORDINATE
    assert route_kind(StatementKind.CREATE_INDEX) is Route.COORDINATE
    assert route_kind(StatementKind.DROP_INDEX) is Route.COORDINATE
    assert route_kind(StatementKind.CREATE_TABLE) is Route.CREATE
    assert route_kind(StatementKind.DROP_TABLE) is Route.DROP
    assert route_kind(StatementKind.TRUNCATE_TABLE) is Route.IGNORE
    assert route_kind(StatementKind.RENAME_TABLE) is Route.REFUSE


def test_add_and_drop_partition_pass_through_other_partition_statements_do_not():
    """DM runs a shard's ADD / DROP PARTITION on the merged table (DM_ADD_DROP_PARTITIONS); the
    other partition statements take the lock path, which stops them for the operator."""
    alter = StatementKind.ALTER_TABLE
    for sql in ("ALTER TABLE t ADD PARTITION (PARTITION p1 VALUES LESS THAN (10000))",
                "alter table `db`.`t` drop partition p1, p2", "ALTER ONLINE TABLE db.t ADD PARTITION PARTITIONS 2",
                "  alter table if exists t drop partition if exists p1"):
        assert route_kind(alter, sql) is Route.PASS_THROUGH, sql
    for sql in ("ALTER TABLE t REORGANIZE PARTITION p0 INTO (PARTITION p0 VALUES LESS THAN (5))",
                "ALTER TABLE t COALESCE PARTITION 2", "ALTER TABLE t TRUNCATE PARTITION p0",
                "ALTER TABLE t PARTITION BY HASH(id) PARTITIONS 2", "ALTER TABLE t REMOVE PARTITIONING",
                "ALTER TABLE t ADD COLUMN partition_no INT", "ALTER TABLE t ADD COLUMN c INT"):
        assert route_kind(alter, sql) is Route.COORDINATE, sql
    assert route_kind(StatementKind.CREATE_TABLE, "ALTER TABLE t ADD PARTITION (PARTITION p1)") is Route.CREATE
