"""CI form of the chaos test: 5 faults (worker SIGKILL, leader-master SIGKILL, etcd restart,
downstream restart, leader SIGKILL while a lock has held or executing tables) during 80 s of writes and shard DDLs, on the private service
set; and 3 faults in 60 s on keyless shard tables.  Runs ``python -m tests.chaos.run`` as a subprocess (its services need their own
environment) and asserts on the figures it writes; see tests/chaos/run.py for how each is
measured."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chaos.run import FAULTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("keyless,faults,duration", [(False, 5, 80), (True, 3, 60)], ids=["keyed", "keyless"])
def test_chaos_short(tmp_path, keyless, faults, duration):
    """``keyless``: the same workload on shard tables without a primary/unique key (checkpoint
    rule 10 must make every replay exact: 0 duplicated rows)."""
    out = tmp_path / "chaos.json"
    work = tmp_path / "work"
    r = subprocess.run([sys.executable, "-m", "tests.chaos.run", "--seed", "7", "--faults", str(faults),
                        "--duration", str(duration), "--catchup-timeout", "240", "--json-out", str(out),
                        "--work-dir", str(work), "--stop-services", *(["--keyless"] if keyless else [])],
                       cwd=ROOT, capture_output=True, text=True, timeout=1400)
    tail = (r.stdout[-3000:] + "\n" + r.stderr[-6000:])
    assert out.exists(), f"chaos run produced no figures (exit {r.returncode}):\n{tail}"
    res = json.loads(out.read_text())
    summary = next((line for line in r.stdout.splitlines() if line.startswith("CHAOS ")), "")
    print(summary)
    assert res["faults"] == faults and len(res["fault_kinds"]) == min(faults, len(FAULTS)), res["fault_kinds"]
    assert res["keyless"] == keyless
    assert res["rows_written"] > 1000, summary          # the writers really wrote during the faults
    assert res["ddl_rounds"] >= 1 and res["ddls_applied"] >= 4, summary
    problems = {k: res[k] for k in ("rows_lost", "rows_stale", "rows_duplicated", "ddls_applied_twice",
                                    "ddls_missing", "locks_left", "unexpected_exits") if res[k] != 0}
    if not res["caught_up"] or res["check"] != "equal" or not res["schema_ok"] or res["fault_errors"]:
        problems.update(caught_up=res["caught_up"], check=res["check"], schema=res["schema"],
                        fault_errors=res["fault_errors"])
    assert not problems, (f"{summary}\nproblems: {problems}\ndetail: "
                          + json.dumps({k: res.get(k) for k in ("check_detail", "ddls_twice_detail",
                                                                "ddls_missing_detail", "examples",
                                                                "unexpected_detail")}, default=str)[:4000]
                          + f"\nlogs: {work}\n{tail}")
    assert r.returncode == 0, tail
