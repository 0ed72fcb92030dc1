"""The web page over HTTPS on a master that requires a token, in a real browser (Debian's
chromium via selenium): the page loads, the API answers 401 so the page shows its token field;
a typed read token is sent on every refresh and the tables render.  The master serves a
certificate of a test CA the browser does not know, hence --ignore-certificate-errors (the
certificate checks themselves are tested with real clients in test_control_plane_tls.py)."""
from __future__ import annotations

import signal
import ssl
import uuid

from tests.api.test_http_cluster import _browser
from tests.master.conftest import MasterProc, wait_for
from tests.security.test_control_plane_auth import READ_TOKEN
from tests.security.test_control_plane_tls import https_ready
from tests.support.certs import CA


def test_page_asks_for_a_token_and_renders_with_it(services, tmp_path, etcd_client):
    ca = CA(tmp_path / "pki")
    pair = ca.issue("sm-master")
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f"{READ_TOKEN},dash,read\n")
    tokens.chmod(0o600)
    prefix = f"/shardmerge-test/page-{uuid.uuid4().hex[:8]}/"
    m = MasterProc(services.etcd, prefix, ttl=3, name="page-m1", log_dir=tmp_path)
    m.args += ["--ssl-cert", pair.cert, "--ssl-key", pair.key, "--auth-token-file", str(tokens)]
    m.start()
    drv = None
    try:
        wait_for(lambda: https_ready(m, ca.cert), 40, what="HTTPS /readyz")
        from selenium.webdriver.common.by import By
        drv = _browser(tmp_path, extra=["--ignore-certificate-errors"])
        drv.get(f"https://127.0.0.1:{m.mport}/?refresh=1")
        status = drv.find_element(By.ID, "status")
        wait_for(lambda: "authentication required" in status.text, 30, what="the page to report the 401")
        form = drv.find_element(By.ID, "auth")
        assert form.is_displayed()
        drv.find_element(By.ID, "token").send_keys(READ_TOKEN)
        form.find_element(By.TAG_NAME, "button").click()
        wait_for(lambda: status.text.startswith("updated"), 30, what="the page to refresh with the token")
        assert not form.is_displayed()
        drv.save_screenshot(str(tmp_path / "page-with-token.png"))
        # the HTTPS API itself: the same token works for curl-like clients, none is refused
        import json
        import urllib.error
        import urllib.request
        ctx = ssl.create_default_context(cafile=ca.cert)
        req = urllib.request.Request(f"https://127.0.0.1:{m.mport}/api/v1/tasks",
                                     headers={"Authorization": f"Bearer {READ_TOKEN}"})
        with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
            assert r.status == 200 and json.loads(r.read())["total"] == 0
        try:
            urllib.request.urlopen(f"https://127.0.0.1:{m.mport}/api/v1/tasks", timeout=30, context=ctx)
            raise AssertionError("a request without a token was answered")
        except urllib.error.HTTPError as e:
            assert e.code == 401
    finally:
        if drv is not None:
            drv.quit()
        m.kill(signal.SIGTERM)
        etcd_client.delete_prefix(prefix)
