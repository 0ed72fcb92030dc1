"""`shardctl check`'s chunk sums on a real MariaDB: a table column named like the bucket alias
(`b`) once made GROUP BY group by that column, so equal data compared unequal."""
from worker.check import _chunk_sums


def test_chunk_sums_count_every_row_whatever_the_column_names(source1_db, downstream_db):
    rows = "(0, 0, NULL, NULL), (101, 12, NULL, NULL), (102, 13, NULL, 13), (104, 15, 15, 15)"
    for db in (source1_db, downstream_db):
        db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT, b INT, c INT)")
        db.execute(f"INSERT INTO t VALUES {rows}")
    up = _chunk_sums(source1_db.connect(), "t", ["id", "v", "b", "c"], ["id"], 1)
    down = _chunk_sums(downstream_db.connect(), "t", ["id", "v", "b", "c"], ["id"], 1)
    assert up[0][0] == 4 and up == down
    downstream_db.execute("UPDATE t SET c = 14 WHERE id = 104")
    assert _chunk_sums(downstream_db.connect(), "t", ["id", "v", "b", "c"], ["id"], 1) != up
