"""Checks against a real MariaDB 10.11 (downstream_db fixture).

* Round trip: the server's own ``SHOW CREATE TABLE`` text -> parse ->
  render -> execute -> ``SHOW CREATE TABLE`` gives the same text.
* DDL replay: every DDL case applied by the server gives the schema the
  model computes.
* Diff replay: statements from diff_ddls run on the server reach the target.
"""
from __future__ import annotations


from coordinator.schema import diff_ddls, join

from .corpus import CREATE_TABLES
from .ddl_cases import DDL_CASES
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.parse import parse_create_table


def show_create(cur, table: str) -> str:
    cur.execute(f"SHOW CREATE TABLE `{table}`")
    return cur.fetchone()[1]


def test_round_trip(downstream_db):
    assert len(CREATE_TABLES) >= 30
    failures = []
    with downstream_db.connect() as conn, conn.cursor() as cur:
        for i, tmpl in enumerate(CREATE_TABLES):
            cur.execute(tmpl.format(t=f"`orig{i}`"))
            text = show_create(cur, f"orig{i}")
            schema = parse_create_table(text)
            if schema.to_create_sql(f"orig{i}") != text:
                failures.append((i, "render", text, schema.to_create_sql(f"orig{i}")))
                continue
            cur.execute(schema.to_create_sql(f"copy{i}"))
            back = show_create(cur, f"copy{i}").replace(f"`copy{i}`", f"`orig{i}`", 1)
            if back != text:
                failures.append((i, "server", text, back))
    assert not failures, failures


def test_ddl_cases_match_server(downstream_db):
    mismatches = []
    with downstream_db.connect() as conn, conn.cursor() as cur:
        for name, start, ddl, _expected in DDL_CASES:
            cur.execute("DROP TABLE IF EXISTS t")
            cur.execute(start)
            model = apply_ddl(parse_create_table(show_create(cur, "t")), ddl)
            cur.execute(ddl)
            server = parse_create_table(show_create(cur, "t"))
            if model != server:
                mismatches.append((name, model.to_create_sql("t"), server.to_create_sql("t")))
    assert not mismatches, mismatches


def test_join_and_diff_run_on_server(downstream_db):
    with downstream_db.connect() as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT, a INT, b VARCHAR(10) NOT NULL, "
            "e ENUM('x','y') NOT NULL, PRIMARY KEY (id), KEY kb (b)) DEFAULT CHARSET=utf8mb4")
        a = parse_create_table(show_create(cur, "t"))
    b = apply_ddl(a, "ALTER TABLE t MODIFY a BIGINT, ADD c DECIMAL(8,2) NOT NULL AFTER id, "
                    "MODIFY e ENUM('x','y','z') NOT NULL DEFAULT 'y', MODIFY b VARCHAR(40) NOT NULL FIRST")
    j = join(a, b, a_label="s1.t", b_label="s2.t")
    stmts = diff_ddls(a, j, "t")
    assert stmts
    with downstream_db.connect() as conn, conn.cursor() as cur:
        for s in stmts:
            cur.execute(s)
        assert parse_create_table(show_create(cur, "t")) == j
