"""The downstream trial on the real MariaDB downstream: each statement's class as the server
decides it on an empty copy of the table (instant, in-place, copy; a repeat the worker ignores is
a no-op), the row count it would touch, later statements judged on the structure the earlier
ones leave, and the copy dropped at the end without touching the real table."""
from __future__ import annotations

from coordinator.preview.cost import SCRATCH_SCHEMA, DownstreamTrial


def test_classes_rows_and_cleanup_on_the_real_downstream(downstream_db):
    db = downstream_db
    db.execute("CREATE TABLE orders (id INT PRIMARY KEY, a INT, v VARCHAR(10), k INT)")
    db.execute("INSERT INTO orders VALUES " + ", ".join(f"({i}, {i}, 'x', {i})" for i in range(37)))
    before = db.execute("SHOW CREATE TABLE orders")[0][1]
    conn = db.connect()
    trial = DownstreamTrial(conn, db.name, "orders")
    q = lambda s: trial(s.replace("{t}", f"`{db.name}`.`orders`"))  # noqa: E731
    add = q("ALTER TABLE {t} ADD COLUMN `c` INT")
    assert (add["class"], add["rows_touched"], add["rows"], add["rows_exact"]) == ("instant", 0, 37, True), add
    retype = q("ALTER TABLE {t} MODIFY COLUMN `k` BIGINT")
    assert retype["class"] == "copy" and retype["rows_touched"] == 37, retype
    assert "INSTANT" in retype["reason"] and "INPLACE" in retype["reason"]
    idx = q("ALTER TABLE {t} ADD INDEX `ix_k` (`k`)")
    assert idx["class"] == "in-place" and idx["rows_touched"] == 37, idx
    again = q("ALTER TABLE {t} ADD COLUMN `c` INT")            # the copy already has it (step by step)
    assert again["class"] == "no-op" and "Duplicate column" in again["reason"], again
    bad = q("ALTER TABLE {t} DROP COLUMN `nope`")
    assert bad["class"] == "no-op", bad
    trial.close()
    assert db.execute("SHOW CREATE TABLE orders")[0][1] == before
    left = db.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_NAME LIKE %s",
                      (SCRATCH_SCHEMA, "orders\\_%"))
    assert all(not r[0].endswith(trial.scratch[1][-12:]) for r in left), left
    conn.close()


def test_missing_downstream_table_says_so(downstream_db):
    conn = downstream_db.connect()
    trial = DownstreamTrial(conn, downstream_db.name, "nothere")
    doc = trial(f"ALTER TABLE `{downstream_db.name}`.`nothere` ADD COLUMN c INT")
    assert doc["class"] == "unknown" and "does not exist yet" in doc["reason"], doc
    trial.close()
    conn.close()
