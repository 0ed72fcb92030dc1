"""Columns that shards add in different orders land downstream in upstream commit order (issue 34,
DM_035): an Info carries its DDL's binlog time, and an ADD committed before columns that other
shards' faster workers already added is placed before them."""
from __future__ import annotations

import dataclasses

from .harness import Harness

ID = "CREATE TABLE t (id INT PRIMARY KEY)"


def _send(h: Harness, name: str, ddl: str, ts: int):
    return h.send(name, info=dataclasses.replace(h.make_info(name, ddl), timestamp=ts))


def _ddls(out) -> list[str]:
    return out.operation.ddls


def test_an_add_committed_earlier_but_decided_later_goes_before_the_later_column():
    h = Harness(ID)
    # B committed c2 at 200 and c1 at 201, A c1 at 100 and c2 at 101; B's worker is faster
    assert _ddls(_send(h, "B", "ALTER TABLE t ADD COLUMN c2 INT", 200)) == ["ALTER TABLE t ADD COLUMN c2 INT"]
    assert _ddls(_send(h, "A", "ALTER TABLE t ADD COLUMN c1 INT", 100)) == \
        ["ALTER TABLE t ADD COLUMN c1 INT AFTER `id`"]
    # the columns already downstream: returned as they are (the downstream ignores the repeat)
    assert _ddls(_send(h, "A", "ALTER TABLE t ADD COLUMN c2 INT", 101)) == ["ALTER TABLE t ADD COLUMN c2 INT"]
    assert _ddls(_send(h, "B", "ALTER TABLE t ADD COLUMN c1 INT", 201)) == ["ALTER TABLE t ADD COLUMN c1 INT"]
    assert h.synced()


def test_the_predecessor_in_the_shards_own_table_is_the_anchor():
    h = Harness("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    _send(h, "B", "ALTER TABLE t ADD COLUMN late INT", 300)
    assert _ddls(_send(h, "A", "ALTER TABLE t ADD COLUMN early INT", 100)) == \
        ["ALTER TABLE t ADD COLUMN early INT AFTER `a`"]


def test_same_second_unknown_time_and_a_named_position_keep_the_statement():
    for ts_a, ts_b in ((100, 100), (0, 200), (100, 0)):
        h = Harness(ID)
        _send(h, "B", "ALTER TABLE t ADD COLUMN c2 INT", ts_b)
        assert _ddls(_send(h, "A", "ALTER TABLE t ADD COLUMN c1 INT", ts_a)) == ["ALTER TABLE t ADD COLUMN c1 INT"], \
            (ts_a, ts_b)
    h = Harness(ID)
    _send(h, "B", "ALTER TABLE t ADD COLUMN c2 INT", 200)
    assert _ddls(_send(h, "A", "ALTER TABLE t ADD COLUMN c1 INT FIRST", 100)) == \
        ["ALTER TABLE t ADD COLUMN c1 INT FIRST"]


def test_a_column_added_again_after_its_drop_takes_its_new_time():
    h = Harness(ID)
    _send(h, "A", "ALTER TABLE t ADD COLUMN c INT", 100)
    _send(h, "B", "ALTER TABLE t ADD COLUMN c INT", 100)
    _send(h, "A", "ALTER TABLE t DROP COLUMN c", 150)
    _send(h, "B", "ALTER TABLE t DROP COLUMN c", 150)
    _send(h, "B", "ALTER TABLE t ADD COLUMN c INT", 300)       # c is back downstream, committed at 300
    assert _ddls(_send(h, "A", "ALTER TABLE t ADD COLUMN d INT", 200)) == ["ALTER TABLE t ADD COLUMN d INT AFTER `id`"]
