"""A shard's CREATE TABLE read from the binlog defines the table at that position, even when the
tracker pre-loaded the table from the upstream's *current* definition at subtask start (a table
without a checkpoint that changed since): found by the e2e ADD INDEX scenario, where the later
``ADD INDEX`` then failed with "duplicate key name" on the tracked schema."""
from worker.coordination import parse_table_ddl


def _ddl(env, sql, pos="mysql-bin.000003:1200"):
    return parse_table_ddl(sql, env.up.name, position=pos, timestamp=1700000000)


def test_create_table_in_the_binlog_wins_over_the_preloaded_current_schema(make_env):
    env = make_env()
    env.up.execute("CREATE TABLE orders_03 (id INT PRIMARY KEY, v INT)")
    env.up.execute("ALTER TABLE orders_03 ADD INDEX idx_v (v), ADD COLUMN c INT")   # upstream moved on
    env.tracker.load_all_upstream([(env.up.name, "orders_03")])                    # as at subtask start
    assert "c" in [c.name for c in env.tracker.get(env.up.name, "orders_03").columns]

    out = env.coord.handle(_ddl(env, "CREATE TABLE orders_03 (id INT PRIMARY KEY, v INT)"))
    tracked = env.tracker.get(env.up.name, "orders_03")
    assert [c.name for c in tracked.columns] == ["id", "v"]
    assert not [i for i in tracked.indexes if i.name == "idx_v"]
    # the binlog's next statement now applies to the tracked schema
    p = env.tracker.preview(env.up.name, "orders_03", ["ALTER TABLE orders_03 ADD INDEX idx_v (v)"])
    assert [i.name for i in p.after.indexes if i.name == "idx_v"] == ["idx_v"]
    assert out.executed[0].startswith("CREATE TABLE IF NOT EXISTS")


def test_create_if_not_exists_of_a_tracked_table_keeps_it(make_env):
    env = make_env()
    env.tracker.load_all_upstream([(env.up.name, "orders_01")])
    before = env.tracker.get(env.up.name, "orders_01")
    env.coord.handle(_ddl(env, "CREATE TABLE IF NOT EXISTS orders_01 (id INT PRIMARY KEY, other INT)"))
    assert env.tracker.get(env.up.name, "orders_01") == before
