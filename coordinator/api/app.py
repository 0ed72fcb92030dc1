"""``ApiApp``: routes HTTP requests to the endpoint translations and serves the spec and the
page.  It calls the master's own gRPC endpoint, so whatever the gRPC service does (a follower
forwarding a write to the leader, "not leader" answers) the HTTP API does too."""
from __future__ import annotations

import json
import re
import traceback
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

import grpc
from prometheus_client import Counter

from coordinator.access.policy import AccessDenied, AccessPolicy, bearer, http_role
from coordinator.access.tls import TlsFiles
from coordinator.obs import logger
from protos import master_pb2_grpc as pbg

from . import cross_site
from . import endpoints as ep
from .request import ApiError, Request
from .spec import WRITTEN, build_spec

HERE = Path(__file__).resolve().parent
SPEC_PATH = WRITTEN        # the written part of the spec; the served one is build_spec(ROUTES)
PAGE_PATH = HERE / "page.html"
DOCS_PATH = HERE / "docs.html"
GRPC_TIMEOUT = 60.0
JSON = "application/json"

REQUESTS = Counter("shardmerge_master_http_requests_total", "HTTP API requests, by route and status code",
                   ["method", "route", "code"])

Handler = Callable[[Request, ep.Call], tuple[int, dict]]

# (method, path template) -> handler; templates are the spec's paths
ROUTES: dict[tuple[str, str], Handler] = {
    ("GET", "/api/v1/sources"): ep.list_sources,
    ("POST", "/api/v1/sources"): ep.create_source,
    ("GET", "/api/v1/sources/{source-name}"): ep.get_source,
    ("PUT", "/api/v1/sources/{source-name}"): ep.update_source,
    ("DELETE", "/api/v1/sources/{source-name}"): ep.delete_source,
    ("GET", "/api/v1/tasks"): ep.list_tasks,
    ("POST", "/api/v1/tasks"): ep.create_task,
    ("GET", "/api/v1/tasks/{task-name}"): ep.get_task,
    ("DELETE", "/api/v1/tasks/{task-name}"): ep.delete_task,
    ("GET", "/api/v1/tasks/{task-name}/status"): ep.task_status,
    ("POST", "/api/v1/tasks/{task-name}/pause"): ep.pause_task,
    ("POST", "/api/v1/tasks/{task-name}/resume"): ep.resume_task,
    ("POST", "/api/v1/tasks/{task-name}/start"): ep.start_task,
    ("POST", "/api/v1/tasks/{task-name}/stop"): ep.stop_task,
    ("POST", "/api/v1/tasks/{task-name}/ddl-preview"): ep.ddl_preview,
    ("GET", "/api/v1/ddl-locks"): ep.list_locks,
    ("DELETE", "/api/v1/ddl-locks/{lock-id}"): ep.remove_lock,
    ("POST", "/api/v1/ddl-locks/{lock-id}/unlock"): ep.unlock_table,
    ("POST", "/api/v1/ddl-locks/{lock-id}/remove-table"): ep.remove_table,
    ("GET", "/api/v1/cluster/masters"): ep.list_masters,
    ("GET", "/api/v1/cluster/workers"): ep.list_workers,
}


def _pattern(template: str) -> re.Pattern:
    parts = re.split(r"\{([a-z-]+)\}", template)    # literal, name, literal, name, ...
    return re.compile("^" + "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p.replace('-', '_')}>[^/]+)"
                                    for i, p in enumerate(parts)) + "$")


_COMPILED = [(method, template, _pattern(template), h) for (method, template), h in ROUTES.items()]


def _error(status: int, message: str) -> dict:
    """DM's ``ErrorWithMessage`` (plus shardctl's ``result``/``msg``)."""
    return {"error_msg": message, "error_code": status, "result": False, "msg": message}


class ApiApp:
    """The HTTP API and page of one master; ``grpc_addr`` is that master's own gRPC address,
    dialed with ``tls`` (the master's own certificate).  Every ``/api/v1/`` request except the
    spec is identified and authorized by ``policy`` (GET needs the read role, any other method
    operator) before a gRPC call; the caller's token travels on to the gRPC call, whose guard
    checks it again."""

    def __init__(self, grpc_addr: str, member: str = "", tls: TlsFiles | None = None,
                 policy: AccessPolicy | None = None, server_name: str = "",
                 allowed_hosts: frozenset[str] | tuple[str, ...] = ()):
        self.grpc_addr = grpc_addr
        self.allowed_hosts = frozenset(h.strip().lower() for h in allowed_hosts if h.strip())
        self.policy = policy or AccessPolicy()
        self.stub = pbg.MasterStub((tls or TlsFiles()).channel(grpc_addr, server_name, trust_own_cert=True))
        self.log = logger("master.http", member=member)
        self.spec = json.dumps(build_spec(ROUTES), indent=1, ensure_ascii=False).encode()
        self.page = PAGE_PATH.read_bytes()
        self.docs = DOCS_PATH.read_bytes()
        self.page_headers = cross_site.headers(self.page)
        self.docs_headers = cross_site.headers(self.docs)

    def call(self, method: str, request, metadata: tuple = ()):
        try:
            return getattr(self.stub, method)(request, timeout=GRPC_TIMEOUT, metadata=metadata)
        except grpc.RpcError as e:
            code = e.code()
            if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                raise ApiError(401 if code == grpc.StatusCode.UNAUTHENTICATED else 403, e.details()) from None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ApiError(504, f"the master did not answer {method} within {GRPC_TIMEOUT:.0f}s; retry") from None
            raise ApiError(503, f"cannot reach this master's gRPC endpoint {self.grpc_addr} for {method}: "
                                f"{code.name}: {e.details()}") from None

    def handle(self, method: str, target: str, headers, body: bytes,
               peer_cn: str | None = None) -> tuple[int, bytes, str, dict]:
        parts = urlsplit(target)
        path = parts.path.rstrip("/") or "/"
        route = "unmatched"
        try:
            route = "cross-site"            # the label of a refusal here (no route is matched before it)
            cross_site.check_origin(headers, self.allowed_hosts)
            route = "unmatched"
            if path in ("/", "/index.html"):
                route = "/"
                if method != "GET":
                    raise ApiError(405, f"{method} {path} is not supported; the page is GET /")
                return self._done(method, route, 200, self.page, "text/html; charset=utf-8", self.page_headers)
            if path in ("/api/v1/openapi.json", "/api/v1/docs"):
                route = path
                if method != "GET":
                    raise ApiError(405, f"{method} {path} is not supported; use GET")
                if path == "/api/v1/docs":
                    return self._done(method, route, 200, self.docs, "text/html; charset=utf-8", self.docs_headers)
                return self._done(method, route, 200, self.spec, JSON)
            handler, req, allowed = self._match(method, path, parts.query, headers, body)
            if handler is None or req is None:
                if allowed:
                    route = "unmatched-method"
                    raise ApiError(405, f"{method} is not supported on {path}; use {', '.join(allowed)}")
                raise ApiError(404, f"no API endpoint {path}; the endpoints are listed in GET /api/v1/openapi.json")
            route = req.route
            cross_site.check_content_type(method, route, headers, body)
            metadata = self._authorize(method, route, headers, peer_cn)
            status, doc = handler(req, lambda name, request: self.call(name, request, metadata))
        except ApiError as e:
            status, doc = e.status, _error(e.status, str(e))
        except Exception as e:  # noqa: BLE001 — answer, never kill the HTTP thread
            self.log.error("request failed", method=method, route=route, error=f"{type(e).__name__}: {e}",
                           exc=traceback.format_exc())
            status, doc = 500, _error(500, f"internal error in {method} {route}: {type(e).__name__}: {e}")
        out = json.dumps(doc, ensure_ascii=False).encode()
        if method != "GET" or status >= 500 or status in (401, 403):
            self.log.info("api request", method=method, route=route, code=status,
                          error=doc.get("error_msg", "") if status >= 400 else "")
        done = self._done(method, route, status, out, JSON)
        if status == 401:
            done[3]["WWW-Authenticate"] = 'Bearer realm="shardmerge"'
        return done

    def admit(self, method: str, target: str, headers, peer_cn: str | None = None) -> tuple[int, bytes, str, dict] | None:
        """The refusal of a request from its headers (another site's page, no or a wrong
        credential), before its body is read; None to go on (``handle`` checks the rest)."""
        parts = urlsplit(target)
        path = parts.path.rstrip("/") or "/"
        route = "cross-site"
        try:
            cross_site.check_origin(headers, self.allowed_hosts)
            handler, req, _ = self._match(method, path, parts.query, headers, b"")
            if handler is None or req is None:
                return None                    # the page, the spec, a 404 or a 405: handle answers
            route = req.route
            self._authorize(method, route, headers, peer_cn)
            return None
        except ApiError as e:
            return self._refusal(method, route, e)

    def _refusal(self, method: str, route: str, e: ApiError) -> tuple[int, bytes, str, dict]:
        self.log.info("api request", method=method, route=route, code=e.status, error=str(e))
        done = self._done(method, route, e.status, json.dumps(_error(e.status, str(e)), ensure_ascii=False).encode(),
                          JSON)
        if e.status == 401:
            done[3]["WWW-Authenticate"] = 'Bearer realm="shardmerge"'
        return done

    def _authorize(self, method: str, route: str, headers, peer_cn: str | None) -> tuple:
        """The caller may do ``method`` on ``route`` (GET: read, else operator), or ``ApiError``
        401/403; returns the gRPC metadata that carries the caller's token on."""
        if self.policy.open:
            return ()           # no authentication configured (an Authorization header of a proxy in front is ignored)
        try:
            token = bearer(headers.get("Authorization"))
            caller = self.policy.identify(peer_cn, token)
            self.policy.authorize(caller, http_role(method), f"{method} {route}")
        except AccessDenied as e:
            raise ApiError(e.status, str(e)) from None
        return (("authorization", f"Bearer {token}"),) if token else ()

    def _match(self, method: str, path: str, query: str, headers, body: bytes):
        allowed = []
        for m, template, pat, h in _COMPILED:
            found = pat.match(path)
            if found is None:
                continue
            if m != method:
                allowed.append(m)
                continue
            params = {name: found[name.replace("-", "_")] for name in re.findall(r"\{([a-z-]+)\}", template)}
            return h, Request(method, template, params, query, headers.get("Content-Type") or "", body), allowed
        return None, None, allowed

    @staticmethod
    def _done(method, route, status, body, ctype, headers: dict[str, str] | None = None):
        REQUESTS.labels(method, route, str(status)).inc()
        return status, body, ctype, {"Cache-Control": "no-store", **(headers or _PLAIN_HEADERS)}


_PLAIN_HEADERS = cross_site.headers()
