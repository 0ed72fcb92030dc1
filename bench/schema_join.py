"""Micro-benchmark: joins/s of 100-column tables, reported as ratios against
baselines measured in the same run (machines are noisy; absolute numbers
mean little).  Run: .venv/bin/python bench/schema_join.py"""
from __future__ import annotations

import time

from coordinator.schema import TableSchema, compare, join
from coordinator.schema.parse import parse_create_table

TYPES = ["INT", "BIGINT UNSIGNED", "VARCHAR(40)", "DECIMAL(10,2)", "DATETIME(3)",
         "ENUM('a','b','c')", "TEXT", "TINYINT NOT NULL DEFAULT 0", "DOUBLE", "CHAR(8)"]
WIDER = ["BIGINT", "BIGINT UNSIGNED", "VARCHAR(80)", "DECIMAL(12,4)", "DATETIME(6)",
         "ENUM('a','b','c','d')", "MEDIUMTEXT", "SMALLINT NOT NULL DEFAULT 0", "DOUBLE", "CHAR(8)"]


def make(types, n=100) -> str:
    cols = ", ".join(f"c{i} {types[i % len(types)]}" for i in range(n))
    return f"CREATE TABLE t (id INT NOT NULL, {cols}, PRIMARY KEY (id), KEY k1 (c2), KEY k2 (c3, c4))"


def rate(fn, min_time=0.5) -> float:
    """Calls per second, measured for at least min_time seconds."""
    n, start = 0, time.perf_counter()
    while True:
        for _ in range(20):
            fn()
        n += 20
        el = time.perf_counter() - start
        if el >= min_time:
            return n / el


def main() -> None:
    sql_a, sql_b = make(TYPES), make(WIDER)
    a, b = parse_create_table(sql_a), parse_create_table(sql_b)
    a2 = TableSchema.from_json(a.to_json())          # equal, but shares no objects
    eq = rate(lambda: a == a2)
    parse = rate(lambda: parse_create_table(sql_a))
    j_diff = rate(lambda: join(a, b))
    j_same = rate(lambda: join(a, a2))
    j_lat = rate(lambda: join(a, b).same_as(b))
    cmp = rate(lambda: compare(a, b))
    print(f"100-column tables ({len(a.columns)} columns, {len(a.indexes)} indexes)")
    print(f"baseline  TableSchema ==        {eq:12.0f} /s")
    print(f"baseline  parse_create_table    {parse:12.0f} /s")
    print(f"join (every column widened)     {j_diff:12.0f} /s  = {j_diff / eq:.4f} x equality, "
          f"{j_diff / parse:.1f} x parse")
    print(f"join (equal schemas)            {j_same:12.0f} /s  = {j_same / eq:.4f} x equality, "
          f"{j_same / parse:.1f} x parse")
    print(f"compare (every column widened)  {cmp:12.0f} /s  = {cmp / eq:.4f} x equality, "
          f"{cmp / parse:.1f} x parse")
    print(f"join + same_as                  {j_lat:12.0f} /s  = {j_lat / parse:.1f} x parse")


if __name__ == "__main__":
    main()
