"""A shard's CREATE TABLE read from the binlog defines the table at that position, even when the
tracker pre-loaded the table from the upstream's *current* definition at subtask start (a table
without a checkpoint that changed since): found by the e2e ADD INDEX scenario, where the later
``ADD INDEX`` then failed with "duplicate key name" on the tracked schema.  Production path: the
real syncer replays the binlog from before the CREATE."""
import pytest

from coordinator.etcdproto import Stage
from worker.upstream import master_status

from .conftest import AutoMaster


@pytest.mark.parametrize("create", ["CREATE TABLE", "CREATE TABLE IF NOT EXISTS"])
def test_create_table_in_the_binlog_wins_over_the_preloaded_current_schema(make_env, store, pool, source1_db,
                                                                          create):
    """MariaDB logs ``CREATE TABLE IF NOT EXISTS`` only when it created the table, so the
    binlog's definition wins for it too."""
    start = master_status(source1_db.params)
    source1_db.execute(f"{create} orders_03 (id INT PRIMARY KEY, v INT)")
    source1_db.execute("ALTER TABLE orders_03 ADD INDEX idx_v (v), ADD COLUMN c INT")   # upstream moved on
    env = make_env(start=start)
    # the subtask starts from before the CREATE: orders_03 was pre-loaded as it is *now*
    assert "c" in [c.name for c in env.tracker.get(env.up.name, "orders_03").columns]
    master = AutoMaster(store, lambda info: (Stage.NONE, info.ddls))
    try:
        env.run(pool).result(timeout=90)
    finally:
        master.close()
    # CREATE reset the tracked schema to the binlog's definition, so the ALTER that followed
    # applied without "duplicate key name" and was coordinated like any shard DDL
    tracked = env.tracker.get(env.up.name, "orders_03")
    assert [c.name for c in tracked.columns] == ["id", "v", "c"]
    assert [i.name for i in tracked.indexes if i.name == "idx_v"] == ["idx_v"]
    assert [" ".join(i.ddls) for i, _, _ in master.answered] == [     # one change per Info
        f"ALTER TABLE `{env.down.name}`.`orders` ADD INDEX `idx_v`(`v`)",
        f"ALTER TABLE `{env.down.name}`.`orders` ADD COLUMN `c` INT"]
    assert env.down_columns() == ["id", "v", "c"]
