"""Origin columns added to a merged table's definition (pure logic): last, string, NOT NULL
DEFAULT '', and appended to the primary key and to every unique key (not to plain indexes)."""
from __future__ import annotations

from coordinator.origin import extend_schema
from coordinator.schema.parse import parse_create_table


def test_extend_schema_adds_columns_last_and_to_unique_keys():
    s = parse_create_table("CREATE TABLE t (id INT NOT NULL, code VARCHAR(8), v INT, PRIMARY KEY (id), "
                           "UNIQUE KEY uc (code), KEY kv (v)) DEFAULT CHARSET=utf8mb4")
    out = extend_schema(s, ["c_table", "c_source"])
    assert [c.name for c in out.columns] == ["id", "code", "v", "c_table", "c_source"]
    c = out.column("c_table")
    assert c is not None and (c.type.base, c.type.length, c.nullable, c.default) == ("varchar", 128, False, "''")
    idx = {i.name: [n for n, _ in i.columns] for i in out.indexes}
    assert idx == {"PRIMARY": ["id", "c_table", "c_source"], "uc": ["code", "c_table", "c_source"], "kv": ["v"]}
    sql = out.to_create_sql(("d", "t"))
    assert "PRIMARY KEY (`id`,`c_table`,`c_source`)" in sql, sql
    assert extend_schema(out, ["c_table", "c_source"]) == out       # idempotent (a target widened again)
    assert extend_schema(s, []) is s
