"""Issue 16 part 6: the downstream refuses writes for a while (``read_only``, a full table): the
subtask shows why and retries with backoff, nothing is skipped, and it continues by itself once
the downstream accepts writes again; real master/worker processes and MariaDB servers.

The task writes as a user without READ_ONLY ADMIN (``shardmerge`` has ALL PRIVILEGES, which
``read_only`` does not stop)."""
from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import yaml

from coordinator.retry import refusal_code

ONE = {"s1": ("orders_01",), "s2": ("orders_01",)}


def test_refusal_codes_are_found_in_causes_and_in_text():
    import pymysql
    try:
        try:
            raise pymysql.err.OperationalError(1290, "The MariaDB server is running with the --read-only option")
        except pymysql.MySQLError as e:
            raise RuntimeError("applying changes failed") from e
    except RuntimeError as outer:
        assert refusal_code(outer) == 1290
    assert refusal_code(RuntimeError("applying changes failed: OperationalError: (1114, \"The table 'orders' "
                                     "is full\")")) == 1114
    assert refusal_code(RuntimeError("(1062, 'Duplicate entry')")) is None


def _writer_user(down) -> tuple[str, str]:
    user, pw = f"sm_rw_{uuid.uuid4().hex[:8]}", "refused-test"
    for q in (f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{pw}'",
              f"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX ON *.* TO '{user}'@'127.0.0.1'"):
        down.execute(q)
    return user, pw


def _stage_says(sc, sid: str, *words: str):
    st = sc.subtasks().get(sid, {})
    text = f"{st.get('error', '')} {st.get('waitingFor', '')}"
    return st if all(w in text for w in words) else None


def test_read_only_and_a_full_table_are_waited_out(scenario):
    sc = scenario(shards=ONE, rows=50)
    down = sc.down
    user, pw = _writer_user(down)
    doc = yaml.safe_load(Path(sc.task_file).read_text())
    doc["target-database"].update(user=user, password=pw)
    Path(sc.task_file).write_text(yaml.safe_dump(doc))
    try:
        sc.start()
        sc.wait_equal(timeout=120)
        # 1. read_only: rows and a shard DDL arrive while the downstream refuses writes
        down.execute("SET GLOBAL read_only = 1")
        try:
            sc.insert("s1", "orders_01", range(700_000, 700_050))
            sc.dbs["s1"].execute("ALTER TABLE orders_01 ADD COLUMN note VARCHAR(20) DEFAULT 'x'")
            sc.insert("s1", "orders_01", range(700_050, 700_060), cols="id, v, note")
            seen = sc.c.wait(lambda: _stage_says(sc, "s1", "refuses writes", "1290"), 120,
                             "s1 showing that the downstream refuses writes (read-only)")
            assert seen["stage"] == "Running", seen          # waiting, not stopped
        finally:
            down.execute("SET GLOBAL read_only = 0")
        sc.dbs["s2"].execute("ALTER TABLE orders_01 ADD COLUMN note VARCHAR(20) DEFAULT 'x'")
        sc.wait_equal(timeout=120, columns=["id", "v", "note"])
        # 2. the target is a MEMORY table with a small size limit: "table is full" (1114)
        with contextlib.closing(down.connect()) as c, c.cursor() as cur:
            cur.execute("SET SESSION max_heap_table_size = 65536   # about 600 rows")
            cur.execute("ALTER TABLE orders ENGINE = MEMORY")
        sc.insert("s2", "orders_01", range(10_800_000, 10_802_000))
        sc.c.wait(lambda: _stage_says(sc, "s2", "refuses writes", "1114"), 120,
                  "s2 showing that the downstream refuses writes (table full)")
        with contextlib.closing(down.connect()) as c, c.cursor() as cur:
            cur.execute("SET SESSION max_heap_table_size = 67108864")
            cur.execute("ALTER TABLE orders ENGINE = MEMORY")     # rebuilt with the larger limit
        sc.wait_equal(timeout=120, columns=["id", "v", "note"])
        sc.c.wait(lambda: all(s["stage"] == "Running" and not s["error"] for s in sc.subtasks().values()), 60,
                  "both subtasks Running without error")
        sc.stop()
    finally:
        down.execute("SET GLOBAL read_only = 0")
        down.execute(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")
