"""``start-task --start-time`` on real sources, master, worker and Spark: each source starts at the
first transaction written at or after the time, so rows written before it never arrive and rows
after it do; the stored task says where each source started; a source with a checkpoint from an
earlier run is refused with the statement that lets it start over; a full-load task is refused."""
from __future__ import annotations

import time
from datetime import datetime, timezone

import yaml

from .conftest import ID_BASE


def _down_ids(sc) -> set[int]:
    try:
        return {r[0] for r in sc.down.execute("SELECT id FROM orders")}
    except Exception:  # noqa: BLE001 — the table is created by the first row or DDL that arrives
        return set()


def test_start_time_starts_each_source_at_the_first_transaction_after_it(scenario):
    sc = scenario(rows=0)
    early = {sid: [ID_BASE[sid] + 1, ID_BASE[sid] + 2] for sid in sc.dbs}
    late = {sid: [ID_BASE[sid] + 11, ID_BASE[sid] + 12] for sid in sc.dbs}
    for sid in sc.dbs:
        sc.insert(sid, "orders_01", early[sid])
    # binlog events carry whole seconds: the start is the first second after every early row
    start = int(time.time()) + 1
    time.sleep(max(0.0, start - time.time()) + 0.05)
    for sid in sc.dbs:
        sc.insert(sid, "orders_01", late[sid])
    when = datetime.fromtimestamp(start, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    # the shard tables were created before the time: as for any incremental start after their
    # CREATE (DM alike), the merged table exists downstream already
    sc.down.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")

    doc = sc.c.ctl_ok("start-task", "--start-time", when, sc.task_file)
    for sid in sc.dbs:
        assert f"source {sid}: --start-time {when}" in doc["msg"] and "starts at " in doc["msg"], doc
    sc.wait_running()
    want = {i for ids in late.values() for i in ids}
    sc.c.wait(lambda: want <= _down_ids(sc), 120, "the rows written after the start time")
    assert not _down_ids(sc) & {i for ids in early.values() for i in ids}, _down_ids(sc)
    # the stored task carries each source's resolved start
    rc, cfg = sc.c.ctl("get-config", "task", sc.name)
    stored = yaml.safe_load(cfg["cfg"])
    metas = {i["source-id"]: i["meta"] for i in stored["mysql-instances"]}
    assert all(m["binlog-name"] and m["binlog-pos"] > 4 for m in metas.values()), metas

    # stopped and started again from a time: refused, the source has a checkpoint now
    sc.c.ctl_ok("stop-task", sc.name)
    rc, doc = sc.c.ctl("start-task", "--start-time", when, sc.task_file)
    assert rc == 1 and "has a checkpoint at " in doc["msg"] and "DELETE FROM " in doc["msg"], doc
    # the statement it gives, run as the operator would, lets it start from the time again
    delete = doc["msg"][doc["msg"].index("DELETE FROM "):].split(" [")[0]
    sc.down.execute(delete)
    # starting over replays the rows after the time: the rows the first run wrote go too (left
    # there, the replay meets them outside safe mode and stops on the key, as it should)
    sc.down.execute("DELETE FROM orders")
    sc.c.ctl_ok("start-task", "--start-time", when, sc.task_file)
    sc.wait_running()
    sc.c.wait(lambda: want <= _down_ids(sc), 120, "the rows after the start time, once more")
    assert not _down_ids(sc) & {i for ids in early.values() for i in ids}, _down_ids(sc)


def test_start_time_is_refused_for_a_full_load_task(scenario):
    sc = scenario(mode="all", rows=1)
    rc, doc = sc.c.ctl("start-task", "--start-time", "2021-10-21 00:01:00", sc.task_file)
    assert rc == 1 and "--start-time applies to task-mode: incremental" in doc["msg"], doc


def test_a_bad_or_purged_start_time_is_refused_naming_it(scenario):
    sc2 = scenario(rows=0)
    rc, doc = sc2.c.ctl("start-task", "--start-time", "yesterday", sc2.task_file)
    assert rc == 1 and "--start-time 'yesterday' is not a time" in doc["msg"], doc
    rc, doc = sc2.c.ctl("start-task", "--start-time", "2000-01-01 00:00:00", sc2.task_file)
    assert rc == 1 and "the events before it were purged" in doc["msg"], doc
    rc, doc = sc2.c.ctl("query-status", sc2.name)
    assert rc == 1, doc                                    # nothing was started
