"""Pure logic of the HTTP layer: the exit commands shown for each lock stage and stopped subtask,
and the request checks that refuse bad input before anything reaches the master.  (The same
paths run against real masters in test_http_masters.py / test_http_cluster.py.)"""
from __future__ import annotations

import shlex

import pytest

from coordinator.api import exits
from coordinator.api.request import ApiError, Request, check_object
from coordinator.etcdproto.keys import TableRef

LOCK = "t1-`shop`.`orders`"


@pytest.mark.parametrize("ref", [TableRef("s1", "shop_01", "orders_0"), TableRef("my-src", "a`b", "c.d"),
                                 TableRef("s-`x", "db", "t")])
def test_lock_member_text_parses_back(ref):
    assert exits.parse_table(str(ref)) == (ref.source, ref.schema, ref.table)


def test_exits_by_stage_are_runnable_command_lines():
    t = str(TableRef("s2", "shop_02", "orders_1"))
    conflict = exits.table_exits(LOCK, "t1", t, "conflict: its DDL [...] ...")
    assert conflict == [
        "shardctl shard-ddl-lock unlock 't1-`shop`.`orders`' -s s2 -d shop_02 -t orders_1 --action skip",
        "shardctl shard-ddl-lock unlock 't1-`shop`.`orders`' -s s2 -d shop_02 -t orders_1 --action exec",
        "shardctl binlog skip t1 -s s2"]
    assert shlex.split(conflict[0])[3] == LOCK          # the shell gives the master the exact lock ID
    assert exits.table_exits(LOCK, "t1", t, "skip-and-wait: its DDL ...") == conflict
    assert exits.table_exits(LOCK, "t1", t, "error: its DDL ... was refused") == conflict
    assert exits.table_exits(LOCK, "t1", t, "has not added column `c` yet (other tables have it)") == [
        exits.NOT_YET, "shardctl shard-ddl-lock remove-table 't1-`shop`.`orders`' -s s2 -d shop_02 -t orders_1"]
    assert exits.table_exits(LOCK, "t1", t, "waiting for the worker to execute its Operation and mark it done") == []
    held = "the tables' schemas cannot be joined (a conflict is pending)"
    assert exits.table_stage(held) == "waiting" and exits.table_exits(LOCK, "t1", t, held) == []
    assert exits.table_stage("redirected: waiting for the worker to replay its skipped DDL") == "redirected"
    assert exits.table_exits(LOCK, "t1", "not a member text", "conflict: x") == ["shardctl shard-ddl-lock t1"]
    assert exits.lock_exits(LOCK) == ["shardctl shard-ddl-lock unlock 't1-`shop`.`orders`' --force-remove"]


def test_subtask_exits():
    assert exits.subtask_exits("t1", "s1", "Running", "", "", "") == []
    assert exits.subtask_exits("t1", "s1", "Paused", "", "paused by pause-task; resume-task ...", "") == \
        ["shardctl resume-task -s s1 t1"]
    assert exits.subtask_exits("t1", "s1", "Paused", "conflict ...", "", LOCK) == \
        ["shardctl shard-ddl-lock t1", "shardctl binlog skip t1 -s s1"]
    assert exits.subtask_exits("t1", "s1", "Error", "partition ALTER ...; `shardctl binlog skip t1 -s s1`", "", "") == \
        ["shardctl binlog skip t1 -s s1", "shardctl resume-task -s s1 t1"]
    assert exits.subtask_exits("t1", "s1", "Error", "cannot connect", "", "") == ["shardctl resume-task -s s1 t1"]
    # rows that no longer fit the downstream (after a skipped DDL): resume alone cannot help, say so
    unknown = "OperationalError: (1054, \"Unknown column 'c' in 'field list'\") [table=shop.orders]"
    assert exits.subtask_exits("t1", "s1", "Error", unknown, "", "") == [exits.MISFIT, "shardctl resume-task -s s1 t1"]


def test_advice_lines_are_comments_a_shell_ignores():
    import subprocess
    for line in (exits.NOT_YET, exits.MISFIT):
        assert line.startswith("# ") and "\n" not in line
        r = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=10)
        assert r.returncode == 0 and r.stdout == r.stderr == ""


def _req(body: bytes, ctype: str = "application/json", query: str = "") -> Request:
    return Request("POST", "/api/v1/x", {"task-name": "a%2Fb", "bad": "%FF", "nul": "a%00b"}, query, ctype, body)


@pytest.mark.parametrize("body,ctype,words", [
    (b"", "application/json", ["is empty", "task"]),
    (b"[1]", "application/json", ["must be a JSON object", "list"]),
    (b"{x", "application/json", ["not valid JSON"]),
    (b'{"task": "ok", "extra": 1}', "application/json", ["unknown field(s) 'extra'", "known: task, n"]),
    (b'{"task": "ok", "n": true}', "application/json", ["field n", "integer"]),
    (b'{"task": "\\ud800"}', "application/json", ["field task", "UTF-8"]),
    (b'{"task": "a\\u0000b"}', "application/json", ["field task", "control characters"]),
    (b'{"task": "ok"}', "text/plain", ["Content-Type 'text/plain'"]),
])
def test_body_checks_name_the_input(body, ctype, words):
    with pytest.raises(ApiError) as e:
        _req(body, ctype).json({"task": "str", "n": "int"}, ("task",))
    assert e.value.status in (400, 415)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_path_and_query_checks():
    r = _req(b"", query="with_status=true&source_name_list=s1&source_name_list=s2,s3")
    assert r.path("task-name") == "a/b"
    assert r.query_bool("with_status", ("with_status", "source_name_list")) is True
    assert r.query_list("source_name_list", ("with_status", "source_name_list")) == ["s1", "s2", "s3"]
    with pytest.raises(ApiError, match="path parameter bad is not percent-encoded UTF-8"):
        r.path("bad")
    with pytest.raises(ApiError, match="path parameter nul contains control characters"):
        r.path("nul")
    with pytest.raises(ApiError, match="unknown query parameter"):
        _req(b"", query="x=1").query(("with_status",))
    with pytest.raises(ApiError, match="field source_name_list of body must be an array of strings"):
        check_object({"source_name_list": "s1"}, {"source_name_list": "[name]"}, (), "body")
