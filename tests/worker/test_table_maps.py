"""The TABLE_MAP cache (worker/binlog/table_maps.py) changes nothing the decoder hands out: the same
real MariaDB binlog range -- many one-row transactions on two tables of mixed column types, an
ALTER that adds a column between them, a table dropped and created again under the same name with
other types -- decodes to identical items with the cache and with mysql-replication's own parse,
and with the cache each distinct table map is parsed once."""
from __future__ import annotations

import pytest
import yaml

from coordinator.config import parse_task
from coordinator.routing import TableMapper
from worker.binlog import table_maps
from worker.binlog import decode_range
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
    """Count mysql-replication's own TABLE_MAP parses (the cache's misses)."""
    n = [0]
    original = table_maps._original_init

    def counting(*a, **kw):
        n[0] += 1
        return original(*a, **kw)
    monkeypatch.setattr(table_maps, "_original_init", counting)
    yield n
    table_maps.install()


def test_cached_table_maps_decode_exactly_as_mysql_replication(source1_db, services, parses, monkeypatch):
    db = source1_db
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

    install = table_maps.install
    monkeypatch.setattr(table_maps, "install", lambda: None)    # the decoder installs it at every dump
    table_maps.uninstall()
    before = parses[0]
    plain = _items(db, mapper, start, end)
    plain_parses = parses[0] - before
    monkeypatch.setattr(table_maps, "install", install)
    before = parses[0]
    cached = _items(db, mapper, start, end)
    cached_parses = parses[0] - before

    assert cached == plain
    rows = [r for item in cached if isinstance(item, tuple) for _, _, rs in item[1] for r in rs]
    assert len(rows) == 40 + 40 + 5 + 10 + 10 + 10
    assert any(len(r) == 6 and r[4] == 7 for r in rows if not isinstance(r[0], tuple))   # the added column
    assert ("b", "z") in {(r[-1], r[1]) for r in rows if not isinstance(r[0], tuple)}    # the new b, by the cache
    # mysql-replication's parse ran for every table map without the cache, for each distinct one with it
    # (a, b, a after the ALTER, b again: at least 4; at most a few more, e.g. a map seen in a rotation)
    assert plain_parses >= 105 and 4 <= cached_parses <= 8, (plain_parses, cached_parses)
