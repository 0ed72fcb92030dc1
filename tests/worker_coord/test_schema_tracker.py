"""The schema tracker follows a real upstream: SHOW CREATE TABLE, then ALTERs applied through
coordinator.schema give the same schema the upstream reports after running them."""
import pytest

from coordinator.schema.split import split_ddl
from worker.schema_tracker import SchemaTracker, SchemaTrackError, schema_from_json, schema_to_json
from coordinator.schema.parse import parse_create_table


def _upstream(db, table):
    sql = db.execute(f"SHOW CREATE TABLE `{table}`")[0][1]
    return parse_create_table(sql)


def test_tracker_follows_alters_of_a_real_upstream(source1_db):
    db = source1_db
    db.execute("CREATE TABLE orders_01 (id BIGINT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, "
               "note VARCHAR(20)) DEFAULT CHARSET=utf8mb4")
    tr = SchemaTracker("s1", connect=lambda: db.connect(None))
    first = tr.ensure(db.name, "orders_01")
    assert [c.name for c in first.columns] == ["id", "amount", "note"]
    assert first.same_as(_upstream(db, "orders_01"))

    ddls = ["ALTER TABLE orders_01 ADD COLUMN city VARCHAR(32) DEFAULT 'x', ADD INDEX ix_city (city), "
            "DROP COLUMN note",
            "ALTER TABLE orders_01 MODIFY amount DECIMAL(12,2) NOT NULL",
            "CREATE INDEX ix_amount ON orders_01 (amount)"]
    for ddl in ddls:
        stmts = split_ddl(ddl)
        p = tr.preview(db.name, "orders_01", stmts, position="mysql-bin.000001:4")
        assert len(p.afters) == len(stmts)
        assert tr.get(db.name, "orders_01") is p.before          # preview changes nothing
        tr.commit(p)
        db.execute(ddl)
        assert tr.get(db.name, "orders_01").same_as(_upstream(db, "orders_01")), ddl
    cols = [c.name for c in tr.get(db.name, "orders_01").columns]
    assert cols == ["id", "amount", "city"]


def test_preview_gives_schema_after_each_split_statement(source1_db):
    db = source1_db
    db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    tr = SchemaTracker("s1", connect=lambda: db.connect(None))
    p = tr.preview(db.name, "t", split_ddl("ALTER TABLE t ADD COLUMN a INT, ADD COLUMN b INT"))
    assert [[c.name for c in a.columns] for a in p.afters] == [["id", "a"], ["id", "a", "b"]]
    assert [c.name for c in p.before.columns] == ["id"]


def test_unknown_table_and_bad_ddl_are_reported(source1_db):
    db = source1_db
    tr = SchemaTracker("s1", connect=lambda: db.connect(None))
    assert tr.ensure(db.name, "nope") is None
    db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(SchemaTrackError) as ei:
        tr.preview(db.name, "t", ["ALTER TABLE t DROP COLUMN missing"], position="bin.000002:99")
    assert ei.value.context["position"] == "bin.000002:99"
    assert ei.value.context["table"] == f"{db.name}.t"
    assert "missing" in str(ei.value)
    # a tracker without an upstream connection says so instead of guessing
    with pytest.raises(SchemaTrackError, match="no upstream connection"):
        SchemaTracker("s1").load_upstream(db.name, "t")


def test_create_and_drop_table_and_checkpoint_json_round_trip(source1_db):
    db = source1_db
    tr = SchemaTracker("s1", connect=lambda: db.connect(None))
    p = tr.apply(db.name, "n1", ["CREATE TABLE n1 (id INT PRIMARY KEY, v JSON)"])
    assert p.before is None and p.after is not None
    text = schema_to_json(tr.get(db.name, "n1"))
    assert schema_from_json(text) == tr.get(db.name, "n1")
    assert schema_from_json("null") is None and schema_from_json(None) is None
    with pytest.raises(SchemaTrackError, match="not JSON"):
        schema_from_json("{broken")
    # a fresh tracker rebuilt from checkpoints alone agrees (restart path)
    tr2 = SchemaTracker("s1")
    tr2.load_checkpoint(db.name, "n1", text)
    assert tr2.get(db.name, "n1") == tr.get(db.name, "n1")
    assert SchemaTracker.from_json(tr.to_json()).get(db.name, "n1") == tr.get(db.name, "n1")
    p = tr.apply(db.name, "n1", ["DROP TABLE n1"])
    assert p.after is None and tr.get(db.name, "n1") is None


def test_create_table_like_copies_the_tracked_model_not_the_upstreams_current_tables(source1_db):
    """The worker may read ``CREATE TABLE t LIKE m`` long after it ran: by then the upstream's
    ``m`` and ``t`` may carry later DDLs, or ``t`` may be gone.  The tracker copies its ``m`` as
    tracked at that binlog position (DM's tracker does the same)."""
    db = source1_db
    db.execute("CREATE TABLE orders_01 (id BIGINT PRIMARY KEY, note VARCHAR(20))")
    tr = SchemaTracker("s1", connect=lambda: db.connect(None))
    tracked = tr.ensure(db.name, "orders_01")
    # what happened upstream after the CREATE ... LIKE the worker is about to read
    db.execute("CREATE TABLE orders_03 LIKE orders_01")
    db.execute("ALTER TABLE orders_01 ADD COLUMN later INT")
    db.execute("ALTER TABLE orders_03 ADD COLUMN later INT")
    for sql in ("CREATE TABLE orders_03 LIKE orders_01", f"CREATE TABLE IF NOT EXISTS `{db.name}`.orders_03 "
                f"(LIKE `{db.name}`.`orders_01`)"):
        p = tr.preview(db.name, "orders_03", [sql], position="mysql-bin.000001:4")
        assert p.before is None and p.after.name == "orders_03"
        assert [c.name for c in p.after.columns] == ["id", "note"], sql
        assert p.after.same_as(tracked)
    db.execute("DROP TABLE orders_03")
    tr.apply(db.name, "orders_03", ["CREATE TABLE orders_03 LIKE orders_01"])
    assert [c.name for c in tr.get(db.name, "orders_03").columns] == ["id", "note"]
    # a model never tracked: its upstream definition is the best source left; a missing one is an error
    p = tr.preview(db.name, "orders_04", ["CREATE TABLE orders_04 LIKE orders_01"])
    assert [c.name for c in p.after.columns] == ["id", "note"]          # tracked: still the tracked one
    tr2 = SchemaTracker("s1", connect=lambda: db.connect(None))
    assert [c.name for c in tr2.preview(db.name, "orders_04", ["CREATE TABLE orders_04 LIKE orders_01"])
            .after.columns] == ["id", "note", "later"]
    with pytest.raises(SchemaTrackError):
        tr2.preview(db.name, "orders_05", ["CREATE TABLE orders_05 LIKE no_such_table"])


def test_schemas_read_at_start_are_stored_before_the_first_row(make_env, source1_db):
    """A worker stopped before any row of a table arrived, while the upstream ALTERed it:
    the next start must track the table as the first start read it, not read it again
    (the replayed ALTER would then meet its own column already there)."""
    first = make_env()
    first.close()
    source1_db.execute("ALTER TABLE orders_01 ADD COLUMN c INT")
    again = make_env()
    cols = [c.name for c in again.tracker.get(source1_db.name, "orders_01").columns]
    assert cols == ["id", "v"]
    stored = schema_from_json(again.syncer.store.tables[(source1_db.name, "orders_01")].table_info)
    assert [c.name for c in stored.columns] == ["id", "v"]
