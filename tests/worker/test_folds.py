"""Checkpoint rule 11's pure parts: the combined statement, the renames a folded statement makes,
and rows written through them (``worker/sync/folds.py``); the store side runs on real services in
``tests/worker_coord/test_syncer_integration.py``."""
from __future__ import annotations

import pytest

from coordinator.schema.errors import SchemaError
from coordinator.schema.parse import parse_create_table
from coordinator.schema.split import combine_ddls
from worker.binlog import RowsTable, Unfinished
from worker.events import DDLEvent, Position
from worker.shardddl.handler import column_renames
from worker.sync.checkpoint import TablePoint
from worker.sync.folds import combined_event, fold_at, folded_after, through_folds


class _Store:
    """Only what the fold rules read of a ``CheckpointStore``: its table points."""

    def __init__(self, tables: dict):
        self.tables = tables
        self.folding = {k for k, tp in tables.items() if tp.folded}


def _at(pos: int) -> dict:
    return Position("bin.000001", pos).to_json()


def _ev(query: str, end: int, **kw) -> DDLEvent:
    return DDLEvent("s1", "db", "t1", "alter_table", query, "down", "t", Position("bin.000001", end - 10),
                    Position("bin.000001", end), **kw)


def test_the_combined_statement_is_the_first_then_the_later_ones_clauses():
    assert combine_ddls("ALTER TABLE t RENAME COLUMN a TO a2;", ["ALTER TABLE `t` RENAME COLUMN b TO b2, ALGORITHM=INPLACE"]) \
        == "ALTER TABLE t RENAME COLUMN a TO a2, RENAME COLUMN b TO b2"
    with pytest.raises(SchemaError, match="only ALTER TABLE"):
        combine_ddls("ALTER TABLE t RENAME COLUMN a TO a2", ["DROP TABLE t"])


def test_a_folded_statement_names_the_column_it_renames_and_nothing_else():
    before = parse_create_table("CREATE TABLE t (id INT, a INT, B INT)")
    assert column_renames(before, parse_create_table("CREATE TABLE t (id INT, a INT, b2 INT)")) == [["B", "b2"]]
    assert column_renames(before, parse_create_table("CREATE TABLE t (id INT, a INT, b INT DEFAULT 3)")) == []
    assert column_renames(before, parse_create_table("CREATE TABLE t (id INT, a INT)")) == []


def test_rows_before_a_folded_statement_are_written_through_its_renames_and_later_ones_are_not():
    folds = [{"at": _at(200), "statement": "ALTER TABLE t RENAME COLUMN b TO b2", "renames": [["b", "b2"]]},
             {"at": _at(300), "statement": "ALTER TABLE t RENAME COLUMN b2 TO b3", "renames": [["b2", "b3"]]}]
    store = _Store({("db", "t1"): TablePoint(Position("bin.000001", 100), folded=folds)})
    # the names the upstream had when each row was written: B (any case), then b2, then b3
    at = {150: RowsTable("db", "t1", "down", "t", ("id", "B"), ("id",)),
          250: RowsTable("db", "t1", "down", "t", ("id", "b2"), ("id",)),
          350: RowsTable("db", "t1", "down", "t", ("id", "b3"), ("id",))}
    other = RowsTable("db", "t2", "down", "t", ("id", "b"), ("id",))
    txns = [(Position("bin.000001", 150), [("insert", at[150], [(1, 1)]), ("insert", other, [(2, 2)])]),
            (Position("bin.000001", 250), Unfinished([("insert", at[250], [(3, 3)])])),
            (Position("bin.000001", 350), [("insert", at[350], [(4, 4)])])]
    out = through_folds(store, txns)
    assert [c[1].cols for _, changes in out for c in changes] == [("id", "b3"), ("id", "b"), ("id", "b3"),
                                                                  ("id", "b3")]
    assert isinstance(out[1][1], Unfinished)
    assert through_folds(_Store({}), txns) is txns


def test_the_stream_passes_a_folded_statement_and_the_list_grows_in_binlog_order():
    first = {"at": _at(300), "statement": "ALTER TABLE t RENAME COLUMN b TO b2", "renames": [["b", "b2"]]}
    store = _Store({("db", "t1"): TablePoint(Position("bin.000001", 100), folded=[first])})
    assert fold_at(store, _ev("ALTER TABLE t RENAME COLUMN b TO b2", 300)) == first
    assert fold_at(store, _ev("ALTER TABLE t RENAME COLUMN b TO b2", 310)) is None
    earlier = {"at": _at(200), "statement": "ALTER TABLE t RENAME COLUMN c TO c2", "renames": [["c", "c2"]]}
    ev = combined_event(_ev("ALTER TABLE t RENAME COLUMN a TO a2", 150), [earlier])
    assert ev.query == "ALTER TABLE t RENAME COLUMN a TO a2, RENAME COLUMN c TO c2" and ev.change is None
    assert folded_after(store, ev) == [earlier, first]
    assert folded_after(store, _ev("ALTER TABLE t ADD COLUMN q INT", 150)) is None
