"""``shardctl ddl-preview``, ``POST /api/v1/tasks/{name}/ddl-preview`` and the page's form on a
real cluster (master + a worker per source, real MariaDB): the preview of a statement against the
live lock and the tracked schemas, its cost measured on the downstream, nothing written (no lock,
no Info, the downstream table unchanged), the typed refusals of bad input, and the short form of
the differential test against reality."""
from __future__ import annotations

import pytest

from tests.api.conftest import Http
from tests.api.test_http_cluster import _browser
from tests.preview.differential import Differential, make_sequence


def _preview(cluster, *argv) -> tuple[int, dict]:
    rc, doc = cluster.ctl("ddl-preview", *argv)
    assert isinstance(doc, dict), doc
    return rc, doc


def test_preview_over_cli_http_and_page_writes_nothing(cluster, scenario, tmp_path):
    sc = scenario(shards=("orders_01", "orders_02"), mode="all")
    sc.start()
    down = sc.down.name
    sc.wait_equal(columns=["id", "v"])
    created = sc.show_create()
    rc, doc = _preview(cluster, sc.name, f"ALTER TABLE {down}.orders ADD COLUMN note VARCHAR(20)")
    assert rc == 0, doc
    p = doc["preview"]
    assert p["target"] == f"{down}.orders" and len(p["shards"]) == 4 and p["unknown_schemas"] == [], p
    assert [len(s["downstream"]) for s in p["steps"]] == [1, 1, 1, 1]
    first = p["steps"][0]["downstream"][0]
    assert first["statement"] == f"ALTER TABLE `{down}`.`orders` ADD COLUMN `note` VARCHAR(20)", first
    assert first["cost"]["class"] == "instant" and first["cost"]["rows"] == 40 and first["cost"]["rows_touched"] == 0
    assert p["resolves_at"] == 4 and p["problem"] is None and p["final_state"] == "none"
    # a column type change: table copy, the first problem of the rollout
    rc, doc = _preview(cluster, sc.name, "-s", "s2", "--tables", "orders_01",
                       f"ALTER TABLE {down}.orders MODIFY v BIGINT")
    assert rc == 1 and doc["preview"]["problem"]["kind"] == "table-copy", doc
    assert doc["preview"]["steps"][0]["shards"] == [f"s2-`{sc.dbs['s2'].name}`.`orders_01`"]
    # HTTP and the page's form
    h = Http(f"http://127.0.0.1:{cluster.mmetrics}")
    plan = {"steps": [{"sql": f"ALTER TABLE {down}.orders ADD COLUMN z INT", "sources": ["s1"]},
                      {"sql": f"ALTER TABLE {down}.orders ADD COLUMN z BIGINT", "sources": ["s2"]}]}
    st, body = h.post(f"/api/v1/tasks/{sc.name}/ddl-preview", {"plan": plan, "no_cost": True})
    assert st == 200 and body["preview"]["problem"]["step"] == 2, body
    assert body["preview"]["problem"]["kind"] == "conflict", body
    drv = _browser(tmp_path)
    try:
        drv.get(f"http://127.0.0.1:{cluster.mmetrics}/?refresh=30")
        drv.find_element("id", "preview-task").send_keys(sc.name)
        drv.find_element("id", "preview-sql").send_keys(f"ALTER TABLE {down}.orders DROP COLUMN v")
        drv.find_element("css selector", "#preview button").click()
        rows = cluster.wait(lambda: drv.execute_script(
            "return [...document.querySelectorAll('#preview-steps tbody tr')].map(tr => "
            "[...tr.querySelectorAll('td')].map(td => td.innerText))") or None, 30, "the preview's rows on the page")
        assert len(rows) == 4 and "partially dropped" in rows[0][5] and rows[0][3] == "", rows
        assert rows[3][3] == f"ALTER TABLE `{down}`.`orders` DROP COLUMN `v`" and rows[3][4] == "instant", rows
        assert "resolves" in rows[3][2] and "syncing" in rows[2][2], rows
        assert "lock resolves at step 4" in drv.find_element("id", "preview-summary").text
        drv.find_element("id", "preview-sql").clear()
        drv.find_element("id", "preview-sql").send_keys(f"ALTER TABLE {down}.orders ADDD v3 INT")
        drv.find_element("css selector", "#preview button").click()
        cluster.wait(lambda: "does not parse" in drv.find_element("id", "preview-summary").text, 30,
                     "the page to show the refusal")
        drv.save_screenshot(str(tmp_path / "shardmerge-page-preview.png"))
    finally:
        drv.quit()
    # a live held rename on one shard: the preview continues from it (copied, not changed)
    sc.dbs["s1"].execute("ALTER TABLE orders_01 RENAME COLUMN v TO v2")
    cluster.wait(lambda: (r := cluster.ctl("show-ddl-locks", sc.name)[1]) and isinstance(r, dict)
                 and r.get("locks") and r["locks"][0]["state"] == "conflict", 60, "the rename held")
    locks_before = cluster.ctl("show-ddl-locks", sc.name)[1]["locks"]
    rc, doc = _preview(cluster, "--format", "json", sc.name, "--tables", "orders_02",
                       f"ALTER TABLE {down}.orders RENAME COLUMN v TO v2")
    p = doc["preview"]
    assert p["live_lock"] == "conflict" and [len(s["held"]) for s in p["steps"]] == [2, 3], p
    assert p["problem"]["kind"] == "unresolved" and f"s2-`{sc.dbs['s2'].name}`.`orders_01`" in p["problem"]["message"]
    plan = tmp_path / "rollout.yaml"
    plan.write_text(f"- {{sql: 'ALTER TABLE {down}.orders RENAME COLUMN v TO v2', sources: [s1], tables: orders_02}}\n"
                    f"- {{sql: 'ALTER TABLE {down}.orders RENAME COLUMN v TO v2', sources: [s2]}}\n")
    rc, doc = _preview(cluster, sc.name, "--plan", str(plan))
    p = doc["preview"]
    assert rc == 0 and p["resolves_at"] == 2 and p["problem"] is None, p
    assert [len(s["held"]) for s in p["steps"]] == [2, 0] and len(p["steps"][1]["shards"]) == 2, p
    ran = [d for s in p["steps"] for d in s["downstream"]]
    assert [d["statement"] for d in ran] == [f"ALTER TABLE `{down}`.`orders` RENAME COLUMN `v` TO `v2`"], ran
    rc, text = cluster.ctl("ddl-preview", sc.name, "--plan", str(plan), fmt="table")
    assert rc == 0 and "lock resolves at step 2" in text and "[instant] by s2-" in text, text
    st, body = h.post(f"/api/v1/tasks/{sc.name}/ddl-preview", {"plan": plan.read_text()})
    assert st == 200 and body["preview"]["resolves_at"] == 2, body
    assert cluster.ctl("show-ddl-locks", sc.name)[1]["locks"] == locks_before
    assert sc.show_create() == created
    sc.stop()


def test_bad_input_each_refused_naming_it(cluster, scenario):
    sc = scenario(shards=("orders_01",))
    sc.start()
    down = sc.down.name
    rc, doc = _preview(cluster, sc.name, f"ALTER TABLE {down}.orders ADD COLUMN")
    assert rc == 1 and "does not parse" in doc["msg"] and "ADD COLUMN" in doc["msg"], doc
    rc, doc = _preview(cluster, sc.name, "ALTER TABLE nowhere.orders ADD COLUMN c INT")
    assert rc == 1 and "table nowhere.orders of the statement is not in task" in doc["msg"], doc
    assert f"{down}.orders" in doc["msg"], doc
    rc, doc = _preview(cluster, "no_such_task", f"ALTER TABLE {down}.orders ADD COLUMN c INT")
    assert rc == 1 and "task 'no_such_task' is not running" in doc["msg"], doc
    cluster.ctl_ok("pause-task", sc.name)
    rc, doc = _preview(cluster, sc.name, f"ALTER TABLE {down}.orders ADD COLUMN c INT")
    assert rc == 1 and "is paused on every source" in doc["msg"], doc
    h = Http(f"http://127.0.0.1:{cluster.mmetrics}")
    st, body = h.post(f"/api/v1/tasks/{sc.name}/ddl-preview", {"sql": "ALTER TABLE x.y ADD COLUMN c INT"})
    assert st == 400 and "paused" in body["error_msg"], body
    cluster.ctl_ok("resume-task", sc.name)
    st, body = h.post(f"/api/v1/tasks/{sc.name}/ddl-preview", {"sql": "ALTER TABLE x.y ADD COLUMN c INT"})
    assert st == 400 and "table x.y of the statement is not in task" in body["error_msg"], body
    st, body = h.post(f"/api/v1/tasks/{sc.name}/ddl-preview", {"sql": "", "plan": ""})
    assert st == 400 and "needs exactly one of sql" in body["error_msg"], body
    sc.stop()


# The short form of the differential test (``python -m tests.preview --sequences 200`` is the long
# one, tests/preview/differential.py): generated DDL sequences previewed as a rollout, then run for
# real on a running task; after every step the preview must agree with reality (downstream
# structure, statements in the downstream's general log, held and conflicting tables, worker errors,
# lock open or resolved).  Seed 12: a rename
# on two shards meets DROP + ADD on the third (both report the conflict at step 4); seed 9: drops
# and a VARCHAR widened before its drop.
@pytest.mark.parametrize("seed", (12, 9))
def test_preview_agrees_with_reality_short_form(cluster, services, tmp_path, seed):
    d = Differential(cluster, services, tmp_path)
    try:
        out = d.run(make_sequence(seed))
    finally:
        d.close()
    assert out.ok and out.steps > 0 and out.statements > 0, f"{out.ended}: {out.detail}\n" + "\n".join(out.log)
