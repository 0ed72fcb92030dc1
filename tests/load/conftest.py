"""Helpers for the full-load tests: a task-mode ``all`` task over the per-test databases
(shard tables ``orders_*`` of each source merge into ``<down>.orders``), shard tables with rows,
and a background writer that keeps changing the shards while the dump runs."""
from __future__ import annotations

import yaml

from coordinator.config import parse_task
from tests.support.writer import BackgroundWriter
from tests.worker.conftest import make_task


def make_load_task(down, sources: dict, *, rows_per_chunk: int = 50, on_duplicate: str | None = None,
                   pool_size: int | None = None):
    """(task, source configs, yaml text) with task-mode all and DM-style mydumper/loader sections."""
    _, srcs, text = make_task(down, sources)
    d = yaml.safe_load(text)
    d["task-mode"] = "all"
    d["mydumpers"] = {"global": {"rows": rows_per_chunk}}
    loader = {}
    if on_duplicate:
        loader["on-duplicate-logical"] = on_duplicate
    if pool_size:
        loader["pool-size"] = pool_size
    d["loaders"] = {"global": loader}
    for inst in d["mysql-instances"]:
        inst["mydumper-config-name"] = "global"
        inst["loader-config-name"] = "global"
    text = yaml.safe_dump(d)
    return parse_task(text, "<task>"), srcs, text


def create_shards(db, base: int, n: int = 4, rows: int = 200):
    for k in range(1, n + 1):
        db.execute(f"CREATE TABLE orders_{k:02d} (id BIGINT PRIMARY KEY, item VARCHAR(40), qty INT, "
                   f"price DECIMAL(12,2), note TEXT NULL, created DATETIME(3), raw VARBINARY(8))")
        vals = ", ".join(f"({base + k * 10_000 + i}, 'item{i}', {i}, {i}.25, IF({i} % 7 = 0, NULL, 'n{i}'), "
                         f"'2024-01-02 03:04:05.{i % 1000:03d}', x'00ff{i % 256:02x}')" for i in range(rows))
        db.execute(f"INSERT INTO orders_{k:02d} VALUES {vals}")


class Writer(BackgroundWriter):
    """Inserts, updates (incl. key changes) and deletes on the shards until stopped; no statement
    may fail (the first error is raised when the ``with`` block ends)."""

    def __init__(self, db, base: int, n: int = 4, seed: int = 1):
        super().__init__("load-writer", db.connect, seed, pause=(0.01, 0.01), fail_fast=True)
        self.db, self.base, self.n = db, base, n
        self.next_id = base + 9_000

    @property
    def ops(self) -> int:
        return self.writes

    def step(self, conn) -> None:
        k = self.rng.randint(1, self.n)
        t = f"orders_{k:02d}"
        lo = self.base + k * 10_000
        op = self.rng.random()
        with conn.cursor() as cur:
            if op < 0.35:
                self.next_id += 1
                cur.execute(f"INSERT INTO {t} VALUES (%s, 'w', 1, 9.99, 'live', NOW(3), x'01')",
                            (lo + 5_000 + self.next_id % 4_000,))
            elif op < 0.7:
                cur.execute(f"UPDATE {t} SET qty = qty + 1, note = 'upd' WHERE id = %s",
                            (lo + self.rng.randint(0, 199),))
            elif op < 0.85:
                cur.execute(f"DELETE FROM {t} WHERE id = %s", (lo + self.rng.randint(0, 199),))
            else:   # key change: moves a row to another chunk's range
                cur.execute(f"UPDATE IGNORE {t} SET id = id + 4000 WHERE id = %s",
                            (lo + self.rng.randint(0, 199),))
