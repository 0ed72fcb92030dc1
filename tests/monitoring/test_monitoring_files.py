"""deploy/monitoring is checked against the real tools and the real code:

* ``promtool check rules`` accepts alerts.yml, and ``promtool test rules`` runs its unit tests
  (alerts_test.yml: every alert fires on synthetic series and stays silent on the healthy case);
  a rules file with one alert's threshold changed makes those tests fail (they can fail);
* every metric name in the rules' and the dashboard's expressions is exported by the code
  (names read from the prometheus_client registry after importing the metric modules, with the
  series suffixes of each metric type);
* the dashboard is a well-formed Grafana model: a Prometheus datasource variable, unique panel
  ids, grid positions, and targets whose expressions promtool parses.
"""
from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml
from prometheus_client import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
MON = ROOT / "deploy" / "monitoring"
ALERTS = MON / "alerts.yml"
RULE_TESTS = MON / "alerts_test.yml"
DASHBOARD = MON / "grafana-dashboard.json"
METRIC_MODULES = ("coordinator.master.metrics", "worker.process", "worker.sync.syncer", "worker.sync.binlog_skip")
METRIC_NAME = re.compile(r"\bshardmerge_[a-z0-9_]+\b")
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("_sum", "_count", "_created"), "gauge": ("",), "info": ("_info",)}


def promtool(*args: str, cwd: Path = MON) -> subprocess.CompletedProcess:
    exe = shutil.which("promtool")
    assert exe, "promtool is missing: scripts/bootstrap installs it (Debian package prometheus)"
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def exported_series() -> set[str]:
    """Every series name the code can export: family name plus its type's suffixes."""
    for m in METRIC_MODULES:
        importlib.import_module(m)
    names = set()
    for fam in REGISTRY.collect():
        for suffix in SUFFIXES.get(fam.type, ("",)):
            names.add(fam.name + suffix)
    return names


def rules() -> list[dict]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_exprs() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard()["panels"] for t in p.get("targets", [])]


# ----------------------------------------------------------------------------- rules
def test_promtool_check_rules_accepts_the_alerts():
    r = promtool("check", "rules", str(ALERTS))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(rules())} rules found" in r.stdout


def test_promtool_rule_unit_tests_pass():
    r = promtool("test", "rules", RULE_TESTS.name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_rule_unit_tests_fail_when_an_alert_is_weakened(tmp_path):
    """The rule tests can fail: the same tests against a copy of alerts.yml whose Error alert
    needs a stage value no series has."""
    text = ALERTS.read_text()
    assert 'shardmerge_master_subtasks{stage="Error"}) == 1' in text
    (tmp_path / "alerts.yml").write_text(text.replace('shardmerge_master_subtasks{stage="Error"}) == 1',
                                                      'shardmerge_master_subtasks{stage="Error"}) == 2'))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    r = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert r.returncode != 0
    assert "ShardmergeSubtaskError" in r.stdout + r.stderr


def test_every_alert_has_for_severity_and_a_shardctl_hint():
    tested = RULE_TESTS.read_text()
    for r in rules():
        assert r.get("alert", "").startswith("Shardmerge"), r
        assert re.fullmatch(r"\d+[smh]", str(r.get("for", ""))), f"{r['alert']}: needs a for: duration"
        assert r["labels"]["severity"] in ("warning", "critical"), r["alert"]
        assert r["annotations"]["summary"] and "shardctl " in r["annotations"]["description"], r["alert"]
        assert f"alertname: {r['alert']}" in tested, f"{r['alert']} has no promtool unit test"


# ----------------------------------------------------------------------------- metric names
def test_every_metric_in_rules_and_dashboard_is_exported_by_the_code():
    exported = exported_series()
    assert "shardmerge_worker_rows_applied_total" in exported      # the suffix logic works
    assert "shardmerge_master_operation_latency_seconds_bucket" in exported
    used = {}
    for r in rules():
        for name in METRIC_NAME.findall(r["expr"]):
            used.setdefault(name, f"alert {r['alert']}")
    for title, expr in dashboard_exprs():
        names = METRIC_NAME.findall(expr)
        assert names, f"panel {title!r}: expression {expr!r} uses no shardmerge metric"
        for name in names:
            used.setdefault(name, f"panel {title!r}")
    missing = {n: where for n, where in used.items() if n not in exported}
    assert not missing, f"metrics used but not exported by the code: {missing}"


SELECTOR = re.compile(r"\b(shardmerge_[a-z0-9_]+)\{([^}]*)\}")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)\s*\(\s*(?:[a-z_]+\()*(shardmerge_[a-z0-9_]+)")
EXTERNAL = {"instance", "job", "le"}       # added by Prometheus at scrape time / histogram buckets


def label_names() -> dict[str, set[str]]:
    """{series name: the label names the code gives it}."""
    exported_series()
    out: dict[str, set[str]] = {}
    for fam in REGISTRY.collect():
        coll = REGISTRY._names_to_collectors.get(fam.name) or REGISTRY._names_to_collectors.get(fam.name + "_total")
        names = set(getattr(coll, "_labelnames", ()))
        for suffix in SUFFIXES.get(fam.type, ("",)):
            out[fam.name + suffix] = names
    return out


def labels_used(expr: str) -> list[tuple[str, str]]:
    """(metric, label) pairs of ``metric{label=...}`` selectors and ``by (label) (f(metric...``."""
    pairs = []
    for name, body in SELECTOR.findall(expr):
        pairs += [(name, m) for m in re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", body)]
    for labels, name in GROUPING.findall(expr):
        pairs += [(name, x.strip()) for x in labels.split(",") if x.strip()]
    return pairs


def test_every_label_in_rules_and_dashboard_is_a_label_of_its_metric():
    known = label_names()
    exprs = [(f"alert {r['alert']}", r["expr"]) for r in rules()] + [(f"panel {t!r}", e) for t, e in dashboard_exprs()]
    bad = [(where, m, lab) for where, e in exprs for m, lab in labels_used(e)
           if lab not in EXTERNAL and lab not in known.get(m, set())]
    assert not bad, f"labels the metrics do not have: {bad}"


def test_the_label_check_catches_an_unknown_label():
    known = label_names()
    pairs = labels_used('sum by (task, op) (increase(shardmerge_worker_binlog_skips_total{task=~"$task"}[5m]))')
    assert ("shardmerge_worker_binlog_skips_total", "op") in pairs
    assert "op" not in known["shardmerge_worker_binlog_skips_total"]
    assert known["shardmerge_worker_binlog_skips_total"] == {"task", "source"}


def test_the_name_check_catches_an_unknown_metric():
    assert "shardmerge_worker_lag_second" not in exported_series()
    assert METRIC_NAME.findall("max(shardmerge_worker_lag_second{a='b'}) > 1") == ["shardmerge_worker_lag_second"]


# ----------------------------------------------------------------------------- dashboard
def test_dashboard_is_a_grafana_model_with_a_prometheus_datasource_variable():
    d = dashboard()
    assert d["uid"] and d["title"] and isinstance(d["schemaVersion"], int)
    variables = {v["name"]: v for v in d["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    panels = d["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids)
    cells = set()
    for p in panels:
        assert p["type"] in ("timeseries", "stat", "table", "bargauge"), p["title"]
        assert p["title"] and p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        g = p["gridPos"]
        assert set(g) == {"h", "w", "x", "y"} and g["x"] + g["w"] <= 24, p["title"]
        assert (g["x"], g["y"]) not in cells, f"{p['title']}: overlaps another panel"
        cells.add((g["x"], g["y"]))
        assert p["targets"], f"panel {p['title']} has no targets"
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["expr"].strip() and t["datasource"]["uid"] == "${datasource}", p["title"]
    titles = " ".join(p["title"].lower() for p in panels)
    for topic in ("lag", "rows", "latency", "locks by state", "leader"):
        assert topic in titles, f"no panel about {topic}"


def test_dashboard_expressions_parse_with_promtool(tmp_path):
    """Each target as a recording rule (Grafana's variables replaced by values) through
    ``promtool check rules``: a PromQL syntax error fails here, not in Grafana."""
    subst = {"$__rate_interval": "5m", "$__range": "1h", "$task": ".*"}
    recs = []
    for i, (title, expr) in enumerate(dashboard_exprs()):
        for k, v in subst.items():
            expr = expr.replace(k, v)
        assert "$" not in expr, f"panel {title!r}: unknown variable in {expr!r}"
        recs.append({"record": f"dashboard:target_{i}", "expr": expr})
    f = tmp_path / "dashboard-rules.yml"
    f.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recs}]}))
    r = promtool("check", "rules", str(f), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
