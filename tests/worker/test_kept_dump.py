"""The decoder process keeps its dump open between batches (``decode_range(keep=...)``): on a real
MariaDB and a real MySQL 9.7, consecutive ranges read on from the kept dump and hand out exactly
what a new dump gives; a range that starts elsewhere, a stale kept dump, or a dump the server
dropped while it was kept all still read the right transactions."""
from __future__ import annotations

import time

import pytest
import yaml

from coordinator.config import parse_task
from coordinator.routing import TableMapper
from worker.binlog import decode_range, fast_stream, source
from worker.binlog.contract import End
from worker.upstream import master_status


def _mapper(schema: str, down: dict) -> TableMapper:
    task = parse_task(yaml.safe_dump({
        "name": "kept", "task-mode": "incremental", "meta-schema": "m", "target-database": dict(down),
        "routes": {"r": {"schema-pattern": schema, "table-pattern": "*", "target-schema": "d", "target-table": "t"}},
        "block-allow-list": {"b": {"do-dbs": [schema]}},
        "mysql-instances": [{"source-id": "s1", "route-rules": ["r"], "block-allow-list": "b"}]}), "<test>")
    return TableMapper(task.instance("s1"), task.meta_schema)


def _read(db, mapper, start, end, keep=None) -> tuple[list, object]:
    items = list(decode_range(dict(db.params), mapper, start, end, keep=keep))
    assert isinstance(items[-1], End)
    return items, items[-1].pos


def _write(db, first: int, n: int) -> None:
    with db.connect() as c, c.cursor() as cur:
        for i in range(first, first + n):
            cur.execute("INSERT INTO t VALUES (%s, %s)", (i, f"v{i}"))
            cur.execute("UPDATE t SET v = 'u' WHERE id = %s", (i,))
            c.commit()


@pytest.fixture
def dumps(monkeypatch):
    """Every dump opened (FastStream instances), in order."""
    made = []
    init = fast_stream.FastStream.__init__

    def counting(self, *a, **kw):
        made.append(self)
        init(self, *a, **kw)
    monkeypatch.setattr(fast_stream.FastStream, "__init__", counting)
    return made


@pytest.mark.parametrize("server", ["mariadb", "mysql"])
def test_consecutive_ranges_read_on_from_the_kept_dump(server, request, services, dumps, monkeypatch):
    db = request.getfixturevalue("source1_db" if server == "mariadb" else "mysql1_db")
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    mapper = _mapper(db.name, services.mysql["downstream"])
    keep: dict = {}
    start = master_status(db.params)
    _write(db, 0, 20)
    end1 = master_status(db.params)
    first, at1 = _read(db, mapper, start, end1, keep)
    assert "dump" in keep and len(dumps) == 1
    assert sum(len(rs) for item in first if isinstance(item, tuple) for _, _, rs in item[1]) == 40

    # the next range starts where the last one ended: read on from the same dump
    _write(db, 20, 15)
    end2 = master_status(db.params)
    second, at2 = _read(db, mapper, at1, end2, keep)
    assert len(dumps) == 1 and keep["dump"][0] is dumps[0]
    fresh, fresh_at = _read(db, mapper, at1, end2)
    assert second == fresh and at2 == fresh_at and len(dumps) == 2
    assert sum(len(rs) for item in second if isinstance(item, tuple) for _, _, rs in item[1]) == 30

    # a range that starts elsewhere (a rewind): the kept dump is closed, a new one positioned
    rewound, _ = _read(db, mapper, at1, end2, keep)
    assert rewound == fresh and len(dumps) == 3 and keep["dump"][0] is dumps[2]
    assert dumps[0]._stream_connection is None or dumps[0]._stream_connection._closed

    # the server drops the kept dump's connection: the library reconnects at its file/pos
    kept = keep["dump"][0]
    dropped = kept._stream_connection
    with db.connect() as c, c.cursor() as cur:
        cur.execute(f"KILL {kept._stream_connection.thread_id()}")
    time.sleep(0.2)
    _write(db, 35, 10)
    end3 = master_status(db.params)
    n = len(dumps)
    third, at3 = _read(db, mapper, at2, end3, keep)
    assert len(dumps) == n and keep["dump"][0] is kept      # the same dump, reconnected
    assert kept._stream_connection is not dropped
    fresh3, fresh_at3 = _read(db, mapper, at2, end3)
    assert third == fresh3 and at3 == fresh_at3
    assert sum(len(rs) for item in third if isinstance(item, tuple) for _, _, rs in item[1]) == 20

    # a kept dump older than KEEP_SECONDS is not read on
    monkeypatch.setattr(source, "KEEP_SECONDS", 0.0)
    n = len(dumps)
    stale, _ = _read(db, mapper, at3, master_status(db.params), keep)
    assert len(dumps) == n + 1 and not [i for i in stale if isinstance(i, tuple)]
