"""CI form of the soak run (``python -m tests.chaos.soak --minutes 1 --fault-every 25``): steady
load of about 1,000 row changes/s, shard DDLs, an etcd restart at 25 s and a downstream restart at 50 s; the figures it prints
(RSS after warm-up and at the end, lag p50/p99) are asserted to exist, correctness exactly.
The 30-minute figures are in docs/reliability.md."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1200)
def test_soak_short(tmp_path):
    out = tmp_path / "soak.json"
    r = subprocess.run([sys.executable, "-m", "tests.chaos.soak", "--minutes", "1", "--fault-every", "25", "--json-out", str(out),
                        "--work-dir", str(tmp_path / "work"), "--stop-services"],
                       cwd=ROOT, capture_output=True, text=True, timeout=1100)
    tail = r.stdout[-3000:] + "\n" + r.stderr[-5000:]
    assert out.exists(), f"soak run produced no figures (exit {r.returncode}):\n{tail}"
    doc = json.loads(out.read_text())
    res, fig = doc["chaos"], doc["soak"]
    line = next((x for x in r.stdout.splitlines() if x.startswith("SOAK ")), "")
    print(line)
    assert res["faults"] == 2 and fig["samples"] >= 5, line
    assert fig["rows_per_s"] > 500, line                  # the load was really applied
    assert fig["rss_workers_mb_end"] > 0 and fig["rss_masters_mb_end"] > 0 and fig["lag_p99_s"] >= 0, line
    assert (res["rows_lost"], res["rows_stale"], res["rows_duplicated"], res["check"], res["caught_up"]) == \
        (0, 0, 0, "equal", True), f"{line}\n{tail}"
    assert r.returncode == 0, tail
