"""What another site's page can make a browser send to a master, tried with a real Chromium
against a real master: an auto-submitting HTML form that pauses a task, and ``fetch(no-cors)``
calls that would start a task (its downstream a host of the sender's choosing) or pause one with
an empty body.  Each is refused (the master's request counter shows the answer) and nothing
changes in etcd.  Also: a Host name the master does not know (DNS rebinding) is refused, the
page and the API answer with CSP / frame / nosniff headers, and a master beyond loopback without
TLS or tokens does not start unless told ``--insecure``."""
from __future__ import annotations

import http.server
import re
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

from coordinator.etcdproto import Store
from tests.master.conftest import SHARDCTL, free_port, source_yaml, task_yaml
from tests.support.probes import shardctl

from .conftest import http_of
from .test_http_cluster import _browser

EVIL = "evil_task"


def _attacker_page(target: str, task: str) -> str:
    create = ('{"task": "name: ' + EVIL + '\\ntask-mode: incremental\\ntarget-database: {host: attacker.example, '
              'port: 3306, user: x, password: y}\\nmysql-instances: [{source-id: s1}]\\n"}')
    return f"""<!doctype html><html><body>
<form id="f" method="POST" action="{target}/api/v1/tasks/{task}/pause"></form>
<iframe name="sink"></iframe>
<script>
const t = "{target}";
fetch(t + "/api/v1/tasks", {{method: "POST", mode: "no-cors", body: {create!r}}}).catch(() => {{}});
fetch(t + "/api/v1/tasks", {{method: "POST", mode: "no-cors", body: new Blob([{create!r}])}}).catch(() => {{}});
fetch(t + "/api/v1/tasks/{task}/pause", {{method: "POST", mode: "no-cors"}}).catch(() => {{}});
fetch(t + "/api/v1/tasks/{task}/pause", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
      body: "{{}}"}}).catch(() => {{}});
document.getElementById("f").target = "sink";
setTimeout(() => {{ document.getElementById("f").submit(); document.title = "sent"; }}, 300);
</script></body></html>"""


def _serve(html: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    body = html.encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/"


def _refused(metrics: str) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for m in re.finditer(r'shardmerge_master_http_requests_total\{code="(\d+)",method="POST",route="([^"]+)"\} '
                         r'([\d.]+)', metrics):
        out[(m[2], m[1])] = int(float(m[3]))
    return out


def test_cross_site_form_and_no_cors_fetch_are_refused_and_change_nothing(lone_masters, etcd_client, tmp_path):
    (m,) = lone_masters(1, tmp_path)
    store = Store(etcd_client, m.args[m.args.index("--prefix") + 1])
    task = "victim"
    (tmp_path / "s1.yaml").write_text(source_yaml("s1"))
    (tmp_path / "t.yaml").write_text(task_yaml(task, sources=("s1",)))
    rc, out, err = shardctl(m.addr, "operate-source", "create", str(tmp_path / "s1.yaml"))
    assert rc == 0, (out, err)
    rc, out, err = shardctl(m.addr, "start-task", "--skip-precheck", str(tmp_path / "t.yaml"))
    assert rc == 0, (out, err)
    before = store.get_task(task)
    target = f"http://127.0.0.1:{m.mport}"
    srv, url = _serve(_attacker_page(target, task))
    drv = _browser(tmp_path)
    try:
        drv.get(url)
        deadline = time.monotonic() + 20
        while drv.title != "sent" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert drv.title == "sent"
        # the five requests reached the master and were refused (403, counted as "cross-site")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            got = _refused(m.metrics())
            if got.get(("cross-site", "403"), 0) >= 5:
                break
            time.sleep(0.3)
        assert got.get(("cross-site", "403"), 0) >= 5, got
        assert not any(code.startswith("2") for (_, code) in got), got
    finally:
        drv.quit()
        srv.shutdown()
    # nothing changed: no task from the other site, the victim still running at the same revision
    assert store.get_task(EVIL) is None
    after = store.get_task(task)
    assert after.stage == before.stage and after.revision == before.revision, (before, after)


def test_a_host_name_it_does_not_know_is_refused_and_answers_carry_the_browser_headers(lone_masters, tmp_path):
    (m,) = lone_masters(1, tmp_path, extra=["--http-allowed-hosts", "shardmerge.internal"])
    base = f"http://127.0.0.1:{m.mport}"

    def get(path: str, host: str | None = None):
        req = urllib.request.Request(base + path)
        if host:
            req.add_header("Host", host)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode()

    st, _, body = get("/api/v1/tasks", host="attacker.example")
    assert st == 403 and "Host 'attacker.example' is not a name this master answers to" in body, body
    st, _, body = get("/", host=f"attacker.example:{m.mport}")
    assert st == 403, body
    for host in (f"localhost:{m.mport}", f"shardmerge.internal:{m.mport}", f"127.0.0.1:{m.mport}"):
        assert get("/api/v1/tasks", host=host)[0] == 200, host
    st, headers, page = get("/")
    assert st == 200 and headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"
    csp = headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "'unsafe-inline'" not in csp and "script-src 'sha256-" in csp, csp
    st, headers, _ = get("/api/v1/tasks")
    assert headers["Content-Security-Policy"].startswith("default-src 'none'") and headers["X-Frame-Options"] == "DENY"
    # an empty POST without Content-Type (what a form sends) is refused before anything runs
    h = http_of(m)
    st, doc = h.request("POST", "/api/v1/tasks/victim/pause", raw=b"", content_type="text/plain")
    assert st == 415 and "send Content-Type: application/json" in doc["error_msg"], doc


def test_an_open_master_beyond_loopback_starts_only_with_insecure(services, tmp_path):
    port, mport = free_port(), free_port()
    base = [SHARDCTL, "master", "--etcd", services.etcd, "--listen", f"0.0.0.0:{port}", "--prefix",
            f"/shardmerge-test/open-{port}/", "--metrics-addr", f"127.0.0.1:{mport}"]
    r = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r
    assert "--listen 0.0.0.0:" in r.stderr and "is not loopback" in r.stderr and "--insecure" in r.stderr, r.stderr
    log = Path(tmp_path / "open.log")
    with open(log, "w") as out:
        p = subprocess.Popen(base + ["--insecure"], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while "running open on purpose" not in log.read_text() and time.monotonic() < deadline:
            assert p.poll() is None, log.read_text()
            time.sleep(0.2)
        text = log.read_text()
        assert "running open on purpose (--insecure)" in text and '"level": "warning"' in text, text
    finally:
        p.terminate()
        p.wait(30)
