"""What a web page on another site can make a browser send to the master, refused before any
handler runs.

* **Host**: a page whose domain name an attacker points at this machine (DNS rebinding) reaches
  the API with its own name in ``Host``.  Names are accepted only when listed
  (``--http-allowed-hosts``, plus ``localhost``); IP literals always (a rebinding needs a name).
* **Origin**: a browser names the page that made a request; one from another origin is refused
  (scheme and port included; ``null``, a sandboxed or file page, too).
* **Content-Type**: a cross-site form or ``fetch(no-cors)`` can only send ``text/plain``, form
  encodings or nothing; every other type needs a CORS preflight this server never grants.  So
  every POST must say ``application/json`` (``POST /api/v1/tasks`` also takes the task file as
  YAML), even with an empty body; so must any other request that carries a body.

``headers`` adds what keeps the page out of frames and stops type sniffing, and a
Content-Security-Policy that allows the page's own inline script and style by their hashes only.
"""
from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
from urllib.parse import urlsplit

from .request import ApiError

JSON = "application/json"
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
_YAML_ROUTES = {("POST", "/api/v1/tasks")}
_SAFE = ("GET", "HEAD")


def host_allowed(host: str, allowed: frozenset[str]) -> bool:
    """``host`` (a Host header: name or IP, optional port) is one this master answers to."""
    name = _hostname(host)
    if not name:
        return False
    if name == "localhost" or name in allowed:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):                      # [::1]:8262
        return host[1:host.find("]")] if "]" in host else ""
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def check_origin(headers, allowed_hosts: frozenset[str]) -> None:
    """Refuse (``ApiError``) a request for a name this master does not know, or from another
    site's page: any method, any path of the API and the page."""
    host = headers.get("Host") or ""
    if not host_allowed(host, allowed_hosts):
        raise ApiError(403, f"Host {host!r} is not a name this master answers to: reach it by IP address or "
                            "localhost, or list the name with `shardctl master --http-allowed-hosts NAME` (a name "
                            "it does not know is how a rebound DNS name from another site would arrive)")
    origin = headers.get("Origin")
    if origin is not None:
        o = urlsplit(origin)
        if origin == "null" or o.netloc.lower() != host.strip().lower():
            raise ApiError(403, f"Origin {origin!r} is not this master ({host}): requests from other sites' pages "
                                "are refused; use shardctl, curl or the page served here")


def check_content_type(method: str, route: str, headers, body: bytes) -> None:
    """Refuse (``ApiError`` 415) a changing request whose type a cross-site form could send.
    POST is the method a form or ``fetch(no-cors)`` can use, so it always needs the type; PUT,
    PATCH and DELETE always need a preflight, so only a body they carry must be JSON."""
    if method in _SAFE or (method != "POST" and not body.strip()):
        return
    ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    ok = (JSON,) + (YAML_TYPES if (method, route) in _YAML_ROUTES else ())
    if ctype not in ok:
        got = f"Content-Type {ctype!r}" if ctype else "no Content-Type"
        raise ApiError(415, f"{method} {route} with {got}: send Content-Type: application/json (also with an empty "
                            "body); a request without it is what a form on another site sends")


def _hashes(html: bytes, tag: str) -> list[str]:
    out = []
    for m in re.finditer(rb"<" + tag.encode() + rb"[^>]*>(.*?)</" + tag.encode() + rb">", html, re.S):
        digest = base64.b64encode(hashlib.sha256(m.group(1)).digest()).decode()
        out.append(f"'sha256-{digest}'")
    return out


def headers(html: bytes | None = None) -> dict[str, str]:
    """Response headers for every answer; for a page, its CSP allows exactly its own inline
    script and style."""
    out = {"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}
    if html is None:
        out["Content-Security-Policy"] = "default-src 'none'; frame-ancestors 'none'"
    else:
        scripts = " ".join(_hashes(html, "script")) or "'none'"
        styles = " ".join(_hashes(html, "style")) or "'none'"
        out["Content-Security-Policy"] = (f"default-src 'none'; script-src {scripts}; style-src {styles}; "
                                          "connect-src 'self'; img-src 'self' data:; form-action 'self'; "
                                          "base-uri 'none'; frame-ancestors 'none'")
    return out
