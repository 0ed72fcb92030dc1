"""The worker's decisions by statement kind agree with the kind's row (``coordinator.schema.kinds.KIND_ROWS``):
the shard path (``route_kind``) and what a DDL runs when no lock coordinates it (``direct_decision``),
for a sharded and a one-table target.  A new kind's row is checked here before any code reads it."""
import pytest

from coordinator.routing import Target
from coordinator.errors import ShardMergeError
from coordinator.schema.kinds import KIND_ROWS, Direct, Route, StatementKind, parse_ddl
from tests.schema.test_kinds import SAMPLES
from worker.events import DDLEvent, Position
from worker.shardddl.decision import route_kind
from worker.sync.ddl_handler import DDLContext, direct_decision


class _Mapper:
    """Every upstream table routes to ``tgt``.``merged``."""
    def target(self, schema, table):
        return Target("tgt", "merged")


def _event(kind: StatementKind) -> DDLEvent:
    sql = SAMPLES[kind]
    parsed = parse_ddl(sql, "db")
    table = parsed.tables[0].table if parsed.tables else None
    return DDLEvent("s1", "db", table, kind.value, sql, "tgt", "merged" if table else None,
                    Position("bin.000001", 4), Position("bin.000001", 90))


def _direct(kind: StatementKind, sharded: bool) -> Direct:
    """The ``Direct`` that names what ``direct_decision`` decides for the kind's sample statement."""
    ctx = DDLContext("task", "s1", _Mapper(), lambda: None, lambda: None, lambda s, t: sharded)  # type: ignore[arg-type]
    try:
        d = direct_decision(_event(kind), ctx)
    except ShardMergeError as e:      # UnreplicableDDL: the operator must act
        assert "RENAME TABLE" in str(e), e
        return Direct.REFUSE
    if d.skip:
        return {"not a replicated statement": Direct.NOT_REPLICATED,
                "database-level statement not propagated": Direct.DATABASE_SKIPPED}.get(d.note, Direct.SHARD_SKIPPED)
    if d.execute == ["CREATE DATABASE IF NOT EXISTS `tgt`"]:
        return Direct.CREATE_DATABASE
    if d.execute == ["DROP TABLE IF EXISTS `tgt`.`merged`"]:
        return Direct.DROP_TARGET
    assert len(d.execute) == 1 and "`tgt`.`merged`" in d.execute[0], d
    return Direct.REWRITE


@pytest.mark.parametrize("kind", list(StatementKind))
def test_direct_decision_follows_the_row(kind):
    row = KIND_ROWS[kind]
    assert _direct(kind, sharded=False) is row.direct
    assert _direct(kind, sharded=True) is row.direct_sharded


@pytest.mark.parametrize("kind", [k for k in StatementKind if k.on_table])
def test_route_kind_follows_the_row(kind):
    assert route_kind(kind, SAMPLES[kind]) is KIND_ROWS[kind].route is not Route.NONE
