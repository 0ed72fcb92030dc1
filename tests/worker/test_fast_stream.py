"""The dump reader that reads common events from their bytes (worker/binlog/fast_stream.py)
changes nothing the decoder hands out.  On a real MariaDB and a real MySQL 9.7 binlog -- many
one-row transactions on a table the fast path reads and one it leaves to mysql-replication (JSON,
ENUM, BIT), an UPDATE of several rows, an ALTER that adds a column, a table dropped and created
again under the same name with other types -- the same range decodes to identical items (rows,
positions, GTID states) with the fast path and with mysql-replication alone; with the fast path
the library parses each distinct table map once and only the other table's rows events."""
from __future__ import annotations

import pytest
import yaml
from pymysqlreplication.row_event import RowsEvent, TableMapEvent

from coordinator.config import parse_task
from coordinator.routing import TableMapper
from worker.binlog import decode_range, source
from worker.upstream import master_status


def _mapper(schema: str, down: dict) -> TableMapper:
    task = parse_task(yaml.safe_dump({
        "name": "maps", "task-mode": "incremental", "meta-schema": "m", "target-database": dict(down),
        "routes": {"r": {"schema-pattern": schema, "table-pattern": "*", "target-schema": "d", "target-table": "t",
                         "extract-table": {"table-regexp": "(.*)", "target-column": "c_table"}}},
        "block-allow-list": {"b": {"do-dbs": [schema]}},
        "mysql-instances": [{"source-id": "s1", "route-rules": ["r"], "block-allow-list": "b"}]}), "<test>")
    return TableMapper(task.instance("s1"), task.meta_schema)


def _items(db, mapper, start, end) -> list:
    out = []
    for item in decode_range(dict(db.params), mapper, start, end):
        out.append(item if isinstance(item, tuple) else [type(item).__name__, sorted(vars(item).items())])
    return out


@pytest.fixture
def parses(monkeypatch):
    """How often mysql-replication parses a TABLE_MAP event and a rows event."""
    n = {"maps": 0, "rows": 0}
    maps_init, rows_init = TableMapEvent.__init__, RowsEvent.__init__

    def count_maps(self, *a, **kw):
        n["maps"] += 1
        return maps_init(self, *a, **kw)

    def count_rows(self, *a, **kw):
        n["rows"] += 1
        return rows_init(self, *a, **kw)
    monkeypatch.setattr(TableMapEvent, "__init__", count_maps)
    monkeypatch.setattr(RowsEvent, "__init__", count_rows)
    return n


@pytest.mark.parametrize("server", ["mariadb", "mysql"])
def test_fast_events_decode_exactly_as_mysql_replication(server, request, services, parses, monkeypatch):
    db = request.getfixturevalue("source1_db" if server == "mariadb" else "mysql1_db")
    db.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2), ts DATETIME(3))")
    db.execute("CREATE TABLE b (id BIGINT PRIMARY KEY, e ENUM('x','y'), j JSON, bt BIT(3))")
    start = master_status(db.params)
    with db.connect() as c, c.cursor() as cur:
        for i in range(40):      # one-row transactions: a table map before every rows event
            cur.execute("INSERT INTO a VALUES (%s, %s, %s, '2024-01-02 03:04:05.678')", (i, f"v{i}", f"{i}.25"))
            cur.execute("INSERT INTO b VALUES (%s, 'y', '{\"k\": 1}', b'101')", (i,))
            c.commit()
        cur.execute("UPDATE a SET v = 'u' WHERE id < 5")
        c.commit()
        cur.execute("ALTER TABLE a ADD COLUMN extra INT DEFAULT 7")     # new table id and metadata
        for i in range(40, 50):
            cur.execute("INSERT INTO a (id, v, d) VALUES (%s, 'after', 1.5)", (i,))
            cur.execute("DELETE FROM b WHERE id = %s", (i - 40,))
            c.commit()
        cur.execute("DROP TABLE b")
        cur.execute("CREATE TABLE b (id BIGINT PRIMARY KEY, e VARCHAR(5), j INT)")   # same name, other types
        for i in range(10):
            cur.execute("INSERT INTO b VALUES (%s, 'z', %s)", (i, i))
            c.commit()
    end = master_status(db.params)
    mapper = _mapper(db.name, services.mysql["downstream"])

    monkeypatch.setattr(source, "FAST_EVENTS", False)
    plain = _items(db, mapper, start, end)
    plain_parses = dict(parses)
    monkeypatch.setattr(source, "FAST_EVENTS", True)
    fast = _items(db, mapper, start, end)
    fast_parses = {k: parses[k] - plain_parses[k] for k in parses}

    assert fast == plain
    rows = [r for item in fast if isinstance(item, tuple) for _, _, rs in item[1] for r in rs]
    assert len(rows) == 40 + 40 + 5 + 10 + 10 + 10
    assert any(len(r) == 6 and r[4] == 7 for r in rows if not isinstance(r[0], tuple))   # the added column
    assert ("b", "z") in {(r[-1], r[1]) for r in rows if not isinstance(r[0], tuple)}    # the new b
    # the library alone parsed every table map and rows event of the range (111 rows events: the
    # UPDATE is one); with the fast path each distinct map once (a, b, a after the ALTER, b again:
    # at least 4; a few more at most, e.g. a map seen in a rotation) and only the old b's 50 rows
    # events (JSON, ENUM and BIT have no fast reader)
    assert plain_parses["maps"] >= 105 and plain_parses["rows"] >= 111, plain_parses
    assert 4 <= fast_parses["maps"] <= 8 and fast_parses["rows"] == 50, fast_parses
