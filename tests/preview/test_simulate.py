"""The preview's simulation on the real lock engine (pure: in-memory keeper, no services): what
runs downstream and where the lock resolves for the usual changes, holds and conflicts with
their exits, partially dropped columns, a live lock copied and left untouched, the first problem
of a rollout, and the typed refusals of bad input."""
from __future__ import annotations

import copy

import pytest

from coordinator.etcdproto import LockKey, SourceTables, Stage, TableRef
from coordinator.lock import LockKeeper
from coordinator.preview import BadPlan, BadStatement, PlanStep, Simulation, TableNotInTask
from coordinator.preview.plan import parse_plan
from coordinator.preview.simulate import copy_keeper
from coordinator.preview.target import parse, resolve_target, shards
from coordinator.schema import parse_create_table

BASE = parse_create_table("CREATE TABLE t (id INT NOT NULL, a INT, b INT, v VARCHAR(10), PRIMARY KEY (id))")
KEY = LockKey("task", "down", "t")


def _tables(n: int = 3) -> list[SourceTables]:
    out: dict[str, SourceTables] = {}
    for i in range(n):
        s = f"s{i % 2 + 1}"
        out.setdefault(s, SourceTables("task", s)).add("db", f"t{i}", "down", "t")
    return list(out.values())


def _live(sts) -> LockKeeper:
    k = LockKeeper(schema_source=lambda _k, _t: BASE)
    for st in sts:
        k.update_source_tables(st)
    return k


def _preview(live: LockKeeper, sts, *sqls: str, per_shard: bool = True, cost=None) -> dict:
    stmts = [parse(s) for s in sqls]
    key = resolve_target(stmts[0], "task", sts)
    everyone = shards(key, sts)
    lock = live.find(key)
    schemas = {t: BASE for t in everyone if lock is None or t not in lock.members}
    keeper = copy_keeper(live, key, lambda _k, t: schemas.get(t))
    steps = [PlanStep(s, [t]) for s in stmts for t in everyone] if per_shard else \
        [PlanStep(s, everyone) for s in stmts]
    return Simulation(keeper, key, schemas, cost=cost).run(steps)


def _ran(step: dict) -> list[str]:
    return [d["statement"] for d in step["downstream"]]


def test_add_column_runs_on_every_shard_and_resolves_at_the_last():
    sts = _tables()
    r = _preview(_live(sts), sts, "ALTER TABLE down.t ADD COLUMN c INT")
    assert [_ran(s) for s in r["steps"]] == [["ALTER TABLE `down`.`t` ADD COLUMN `c` INT"]] * 3
    assert [s["lock_state"] for s in r["steps"]] == ["syncing", "syncing", "resolved"]
    assert r["resolves_at"] == 3 and r["problem"] is None
    assert "has not added column `c` yet" in r["steps"][0]["waiting"][0]["waitingFor"]


def test_drop_column_runs_once_when_the_last_shard_drops_it_and_is_partial_before():
    sts = _tables()
    r = _preview(_live(sts), sts, "ALTER TABLE t0 DROP COLUMN a")     # named by a shard table
    assert [_ran(s) for s in r["steps"]] == [[], [], ["ALTER TABLE `down`.`t` DROP COLUMN `a`"]]
    first = r["steps"][0]["partially_dropped"]
    assert first == [{"column": "a", "dropped_by": ["s1-`db`.`t0`"], "still_on": ["s1-`db`.`t2`", "s2-`db`.`t1`"]}]
    assert r["steps"][2]["partially_dropped"] == [] and r["resolves_at"] == 3


def test_rename_holds_every_shard_until_the_last_then_runs_once():
    sts = _tables()
    r = _preview(_live(sts), sts, "ALTER TABLE down.t RENAME COLUMN b TO b2")
    assert [len(s["held"]) for s in r["steps"]] == [1, 2, 0]
    assert "skip-and-wait" in r["steps"][0]["held"][0]["waitingFor"]
    assert sum(len(_ran(s)) for s in r["steps"]) == 1
    assert _ran(r["steps"][2]) == ["ALTER TABLE `down`.`t` RENAME COLUMN `b` TO `b2`"]
    assert r["resolves_at"] == 3 and r["problem"] is None


def test_incompatible_changes_conflict_with_dm_phrase_and_exits_and_pause_the_source():
    sts = _tables()
    plan = [PlanStep(parse("ALTER TABLE down.t MODIFY a BIGINT UNSIGNED"), [TableRef("s1", "db", "t0")]),
            PlanStep(parse("ALTER TABLE down.t MODIFY a VARBINARY(20)"), [TableRef("s2", "db", "t1")]),
            PlanStep(parse("ALTER TABLE down.t ADD COLUMN z INT"), [TableRef("s2", "db", "t1")])]
    live = _live(sts)
    schemas = {t: BASE for t in shards(KEY, sts)}
    r = Simulation(copy_keeper(live, KEY, lambda _k, t: schemas.get(t)), KEY, schemas).run(plan)
    c = r["steps"][1]["conflicts"]
    assert c and c[0]["table"] == "s2-`db`.`t1`" and c[0]["stage"] == "detected", c
    assert "there will be conflicts" in c[0]["message"]
    assert any("--action skip" in e for e in c[0]["exits"]) and any("binlog skip task -s s2" in e for e in c[0]["exits"])
    assert r["steps"][2]["answers"] == []      # s2 is paused: its next DDL is not sent
    assert r["problem"]["step"] == 2 and r["problem"]["kind"] == "conflict"


def test_a_live_lock_is_copied_not_changed_and_its_held_table_is_released_by_the_preview():
    sts = _tables()
    live = _live(sts)
    from coordinator.etcdproto import Info
    t0 = TableRef("s1", "db", "t0")
    after = parse_create_table("CREATE TABLE t (id INT NOT NULL, a INT, b2 INT, v VARCHAR(10), PRIMARY KEY (id))")
    info = Info(task="task", source="s1", up_schema="db", up_table="t0", down_schema="down", down_table="t",
                ddls=["ALTER TABLE `down`.`t` RENAME COLUMN `b` TO `b2`"], before=BASE.to_json(), afters=[after.to_json()])
    info.revision = 10
    out = live.handle_info(info)
    assert out.operation is not None and out.operation.stage is Stage.SKIP_AND_WAIT
    before = copy.deepcopy(live.locks())
    r = _preview(live, sts, "ALTER TABLE down.t RENAME COLUMN b TO b2", per_shard=True)
    assert r["live_lock"] == "conflict"
    # t0 already sent it and is held: its worker skips the table's events until the redirect, so
    # its step sends nothing; the other two complete the rename (run once), t0 replays its held
    # DDL and then meets the statement again on a schema without `b`: its tracker refuses it
    assert r["steps"][0]["answers"] == [] and r["steps"][0]["downstream"] == []
    assert sum(len(_ran(s)) for s in r["steps"]) == 1
    assert any("refuses" in c["message"] and c["table"] == "s1-`db`.`t0`" for c in r["steps"][2]["conflicts"])
    assert live.locks() == before and live.find(KEY).members[t0].answer.stage is Stage.SKIP_AND_WAIT


def test_live_held_rename_completed_by_the_other_shards():
    sts = _tables()
    live = _live(sts)
    from coordinator.etcdproto import Info
    after = parse_create_table("CREATE TABLE t (id INT NOT NULL, a INT, b2 INT, v VARCHAR(10), PRIMARY KEY (id))")
    info = Info(task="task", source="s1", up_schema="db", up_table="t0", down_schema="down", down_table="t",
                ddls=["ALTER TABLE `down`.`t` RENAME COLUMN `b` TO `b2`"], before=BASE.to_json(), afters=[after.to_json()])
    info.revision = 10
    live.handle_info(info)
    stmt = parse("ALTER TABLE down.t RENAME COLUMN b TO b2")
    others = [TableRef("s2", "db", "t1"), TableRef("s1", "db", "t2")]
    schemas = {t: BASE for t in shards(KEY, sts) if t not in live.find(KEY).members}
    r = Simulation(copy_keeper(live, KEY, lambda _k, t: schemas.get(t)), KEY, schemas).run(
        [PlanStep(stmt, [t]) for t in others])
    assert [len(s["held"]) for s in r["steps"]] == [2, 0]
    assert sum(len(_ran(s)) for s in r["steps"]) == 1 and r["resolves_at"] == 2


def test_cost_callback_sees_each_downstream_statement_and_a_copy_is_the_first_problem():
    sts = _tables(2)
    seen = []

    def cost(stmt):
        seen.append(stmt)
        return {"class": "copy" if "MODIFY" in stmt else "instant", "rows": 5, "rows_touched": 5, "reason": "r"}
    r = _preview(_live(sts), sts, "ALTER TABLE down.t ADD COLUMN c INT", "ALTER TABLE down.t MODIFY a BIGINT",
                 per_shard=False, cost=cost)
    assert seen[0] == "ALTER TABLE `down`.`t` ADD COLUMN `c` INT" and "MODIFY COLUMN `a` BIGINT" in seen[-1]
    assert r["problem"]["kind"] == "table-copy" and r["problem"]["step"] == 2


def test_a_rollout_that_stops_half_way_leaves_the_lock_unresolved():
    sts = _tables()
    live = _live(sts)
    stmt = parse("ALTER TABLE down.t ADD COLUMN c INT")
    schemas = {t: BASE for t in shards(KEY, sts)}
    r = Simulation(copy_keeper(live, KEY, lambda _k, t: schemas.get(t)), KEY, schemas).run(
        [PlanStep(stmt, shards(KEY, sts, ["s1"]))])
    assert r["problem"]["kind"] == "unresolved" and r["problem"]["step"] == 1
    assert "s2-`db`.`t1`" in r["problem"]["message"]


def test_bad_input_is_refused_naming_it():
    sts = _tables()
    with pytest.raises(BadStatement, match="does not parse"):
        parse("ALTER TABLE down.t ADDD COLUMN c INT")
    with pytest.raises(BadStatement, match="RENAME TABLE"):
        parse("RENAME TABLE down.t TO down.u")
    with pytest.raises(BadStatement, match="empty"):
        parse("  ; ")
    with pytest.raises(TableNotInTask, match="table nope.t of the statement is not in task task.*down.t"):
        resolve_target(parse("ALTER TABLE nope.t ADD COLUMN c INT"), "task", sts)
    with pytest.raises(TableNotInTask, match="source.*s9"):
        shards(KEY, sts, ["s9"])
    with pytest.raises(TableNotInTask, match="matching --tables 'x.*'"):
        shards(KEY, sts, [], "x.*")
    with pytest.raises(BadPlan, match="step 2 of p.yaml has unknown key"):
        parse_plan("- {sql: 'ALTER TABLE t ADD c INT'}\n- {sql: 'ALTER TABLE t ADD d INT', shard: x}\n", "p.yaml")
    with pytest.raises(BadStatement, match="sql of step 1 of p.yaml"):
        parse_plan("- {sql: 'ALTER TABLE'}", "p.yaml")


def test_plan_file_steps_and_shard_sets():
    steps = parse_plan("steps:\n  - sql: ALTER TABLE down.t ADD COLUMN c INT\n    sources: [s2]\n    tables: 'db.t1'\n"
                       "  - sql: ALTER TABLE down.t ADD COLUMN c INT\n", "p.yaml")
    assert [s.sources for s in steps] == [("s2",), ()] and steps[0].tables == "db.t1"
    assert shards(KEY, _tables(), steps[0].sources, steps[0].tables) == [TableRef("s2", "db", "t1")]


def test_a_lock_created_after_one_resolved_starts_tables_from_their_simulated_schema():
    """Seed 11 of the differential test: after the ADD COLUMN lock resolved, the index lock's
    members must start from the schema each shard reached in the preview, not from the schema
    read before it (which lacks the column and kept the new lock open)."""
    sts = _tables()
    t0, t1, t2 = TableRef("s1", "db", "t0"), TableRef("s2", "db", "t1"), TableRef("s1", "db", "t2")
    seq = [(t1, "ADD COLUMN c1 INT"), (t0, "ADD COLUMN c1 INT"), (t0, "ADD INDEX ix_k (k)"), (t0, "DROP INDEX ix_k"),
           (t2, "ADD COLUMN c1 INT"), (t2, "ADD INDEX ix_k (k)"), (t1, "ADD INDEX ix_k (k)"),
           (t1, "DROP INDEX ix_k"), (t2, "DROP INDEX ix_k")]
    base = parse_create_table("CREATE TABLE t (id INT NOT NULL, a INT, k INT, PRIMARY KEY (id))")
    schemas = {t: base for t in shards(KEY, sts)}
    r = Simulation(copy_keeper(_live(sts), KEY, lambda _k, t: schemas.get(t)), KEY, dict(schemas)).run(
        [PlanStep(parse(f"ALTER TABLE down.t {c}"), [t]) for t, c in seq])
    assert r["steps"][4]["resolved"] and r["steps"][-1]["lock_state"] == "resolved", r["steps"][-1]
    assert r["problem"] is None


def test_table_view_shows_the_steps_and_the_first_problem():
    from coordinator.preview.render import preview_table
    sts = _tables(2)
    r = _preview(_live(sts), sts, "ALTER TABLE down.t RENAME COLUMN b TO b2", "ALTER TABLE down.t DROP COLUMN a",
                 per_shard=False, cost=lambda s: {"class": "instant", "rows": 3, "rows_touched": 0})
    r.update(task="task", target="down.t", shards=["x", "y"], cost_note="measured", unknown_schemas=[],
             schemas_from_upstream=[])
    r["problem"] = {"step": 2, "kind": "conflict", "message": "boom", "exits": ["shardctl binlog skip task -s s1"]}
    text = preview_table({"result": False, "msg": "the preview found a problem: boom", "preview": r})
    assert "step 1 on s1-`db`.`t0`, s2-`db`.`t1`: ALTER TABLE down.t RENAME COLUMN b TO b2" in text, text
    assert "runs downstream [instant] by s2-`db`.`t1`: ALTER TABLE `down`.`t` RENAME COLUMN `b` TO `b2`" in text
    assert "FIRST PROBLEM: step 2 (conflict): boom" in text and "exit: shardctl binlog skip task -s s1" in text
    assert preview_table({"result": False, "msg": "task 'x' is not running"}) == "FAILED: task 'x' is not running"
