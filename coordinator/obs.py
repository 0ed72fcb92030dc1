"""Observability: structured log lines and an HTTP endpoint for Prometheus metrics and health.

Every process (master, worker, benchmarks) logs one JSON object per line through
``logger(component)`` and serves ``/metrics``, ``/healthz`` and ``/readyz`` through
``ObsServer``; probes and scrapers need nothing else.
"""
from __future__ import annotations

import json
import logging
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Callable, Protocol
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, component, message, then context fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
               + f".{int(record.msecs):03d}Z", "level": record.levelname.lower(),
               "component": record.name, "msg": record.getMessage()}
        for k, v in vars(record).items():
            if k not in _RESERVED and not k.startswith("_"):
                out[k] = v if isinstance(v, (int, float, bool, type(None))) else str(v)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class ContextLogger(logging.LoggerAdapter):
    """``log.info("lock resolved", lock_id=..., source=...)``: keyword context becomes fields."""

    def process(self, msg, kwargs):
        extra = dict(self.extra or {})
        for k in list(kwargs):
            if k not in ("exc_info", "stack_info", "stacklevel", "extra"):
                extra[k] = kwargs.pop(k)
        kwargs["extra"] = extra
        return msg, kwargs

    def bind(self, **ctx) -> "ContextLogger":
        return ContextLogger(self.logger, {**(self.extra or {}), **ctx})

    if TYPE_CHECKING:     # the signatures callers use: any keyword is a context field (see process)
        def debug(self, msg: object, *args: object, **fields: Any) -> None: ...
        def info(self, msg: object, *args: object, **fields: Any) -> None: ...
        def warning(self, msg: object, *args: object, **fields: Any) -> None: ...
        def error(self, msg: object, *args: object, **fields: Any) -> None: ...
        def exception(self, msg: object, *args: object, **fields: Any) -> None: ...


_configured = False


def setup_logging(level: str = "INFO", stream=None) -> None:
    global _configured
    root = logging.getLogger("shardmerge")
    if _configured:
        root.setLevel(level.upper())
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False
    _configured = True


def logger(component: str, **ctx) -> ContextLogger:
    return ContextLogger(logging.getLogger(f"shardmerge.{component}"), ctx)


class HttpApp(Protocol):
    """Extra routes an ``ObsServer`` serves beside its own (the master's HTTP API and page)."""

    def handle(self, method: str, path: str, headers, body: bytes,
               peer_cn: str | None = None) -> tuple[int, bytes, str, dict]:
        """(status, body, content type, extra headers) of one request; ``peer_cn`` is the CN of
        the client's verified TLS certificate (None: plain HTTP or no certificate)."""
        ...

    def admit(self, method: str, path: str, headers, peer_cn: str | None = None) -> tuple[int, bytes, str, dict] | None:
        """The refusal of a request from its headers alone (origin, credentials), or None: a
        caller who may not make it never gets its body read."""
        ...


# A task or source file is a few KB; the master's gRPC messages are at most 4 MB, so a body
# beyond this is refused here with 413 naming the limit, not later with a transport error.
MAX_BODY = 1 << 20
# Connections served at once; beyond it a new one is answered 503 and closed (no thread).
MAX_CONNECTIONS = 64
# Of which one client address may hold this many: one host holding every slot (slow clients,
# held bodies) would shut everyone else out of the port.
MAX_PER_PEER = 16
# A request must arrive whole (line, headers, body) this long after the connection is ready for
# it, or the connection is closed: a client that trickles its request (slowloris) holds a thread
# for no longer than this.  The answer's own time (a slow precheck, a DDL preview) is not counted.
REQUEST_DEADLINE = 30.0


def _peer(client_address) -> str:
    """The client's address without its port (a Unix socket's has none)."""
    return str(client_address[0]) if isinstance(client_address, tuple) and client_address else ""


class _Server(ThreadingHTTPServer):
    """TLS, when configured, is set up in the request's own thread (a client that connects and
    never finishes its handshake must not stall the accept loop).  At most ``MAX_CONNECTIONS``
    are served at once; a request not received whole ``REQUEST_DEADLINE`` after its connection
    was ready for it closes the connection (``arm`` / ``disarm``)."""
    daemon_threads = True
    # the accept queue: the standard library's 5 made the kernel drop connections (a 1 s SYN
    # retry for everyone) whenever more than 5 arrived between two accepts, e.g. a burst of slow
    # clients; accepting is cheap here (over the cap: a 503 and close), so let them queue
    request_queue_size = 128
    ssl_context: ssl.SSLContext | None = None
    max_connections = MAX_CONNECTIONS
    max_per_peer = MAX_PER_PEER
    deadline = REQUEST_DEADLINE

    def server_activate(self):
        super().server_activate()
        self._slots = threading.BoundedSemaphore(self.max_connections)
        self._peers: dict[str, int] = {}          # connections served now, by client address
        self._peers_lock = threading.Lock()
        self._timers: dict[int, threading.Timer] = {}
        self._timers_lock = threading.Lock()

    def arm(self, sock) -> None:
        """Start the deadline of the next request on ``sock``."""
        t = threading.Timer(self.deadline, _cut, (sock,))
        t.daemon = True
        with self._timers_lock:
            old = self._timers.pop(id(sock), None)
            self._timers[id(sock)] = t
        if old is not None:
            old.cancel()
        t.start()

    def disarm(self, sock) -> None:
        """The request on ``sock`` has arrived whole: its answer takes the time it takes."""
        with self._timers_lock:
            t = self._timers.pop(id(sock), None)
        if t is not None:
            t.cancel()

    def _take(self, peer: str) -> bool:
        """A slot for one more connection of ``peer`` (False: the port or the peer is full)."""
        with self._peers_lock:
            if self._peers.get(peer, 0) >= self.max_per_peer:
                return False
            if not self._slots.acquire(blocking=False):
                return False
            self._peers[peer] = self._peers.get(peer, 0) + 1
            return True

    def _give_back(self, peer: str) -> None:
        with self._peers_lock:
            n = self._peers.pop(peer, 1) - 1
            if n > 0:
                self._peers[peer] = n
            self._slots.release()

    def process_request(self, request, client_address):
        if not self._take(_peer(client_address)):
            try:                  # answered here, in the accept loop: a few bytes, no thread
                request.settimeout(1)
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n"
                                b"Retry-After: 5\r\n\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def handle_error(self, request, client_address):
        """A connection cut at its deadline (or dropped by its client) ends its thread with an
        OSError: not worth a traceback on stderr."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def process_request_thread(self, request, client_address):
        self.arm(request)             # the TLS handshake and the first request count
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.disarm(request)
            self._give_back(_peer(client_address))

    def finish_request(self, request, client_address):
        if self.ssl_context is not None:
            request.settimeout(30)
            try:
                tls = self.ssl_context.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                return                  # not TLS, or a failed handshake: nothing to answer
            try:
                super().finish_request(tls, client_address)
            finally:
                tls.close()
            return
        super().finish_request(request, client_address)


def _cut(sock) -> None:
    """The connection's deadline passed: its thread's next read or write fails and it ends."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class ObsServer:
    """Serves /metrics (Prometheus text), /healthz (process alive) and /readyz (``ready()``
    returns (ok, reason)) on a background thread; every other request goes to ``app`` when one
    is given (404 otherwise).  With ``ssl_context`` the port speaks HTTPS only."""

    def __init__(self, host: str, port: int, ready: Callable[[], tuple[bool, str]] | None = None,
                 registry=REGISTRY, app: HttpApp | None = None, ssl_context: ssl.SSLContext | None = None,
                 max_connections: int = MAX_CONNECTIONS, deadline: float = REQUEST_DEADLINE,
                 max_per_peer: int = MAX_PER_PEER):
        self.ready = ready or (lambda: (True, "ok"))
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 30            # a client that stops sending mid-request frees its thread
            protocol_version = "HTTP/1.1"

            def handle_one_request(self):
                self.server.arm(self.request)      # each request on a kept-alive connection anew
                super().handle_one_request()

            def parse_request(self):
                ok = super().parse_request()
                if ok and not self.headers.get("Content-Length") and not self.headers.get("Transfer-Encoding"):
                    self.server.disarm(self.request)   # no body to wait for: the request is here
                return ok

            def do_GET(self):  # noqa: N802 (http.server API)
                path = urlsplit(self.path).path
                if path == "/metrics":
                    self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    self._send(200, b"ok\n")
                elif path == "/readyz":
                    try:
                        ok, reason = outer.ready()
                    except Exception as e:  # a failing check means not ready, never a crash
                        ok, reason = False, f"readiness check failed: {e}"
                    self._send(200 if ok else 503, (reason + "\n").encode())
                else:
                    self._app("GET")

            def do_POST(self):  # noqa: N802
                self._app("POST")

            def do_PUT(self):  # noqa: N802
                self._app("PUT")

            def do_DELETE(self):  # noqa: N802
                self._app("DELETE")

            def do_PATCH(self):  # noqa: N802
                self._app("PATCH")

            def do_HEAD(self):  # noqa: N802 — a HEAD answer carries no body
                self.send_response(405)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_OPTIONS(self):  # noqa: N802
                self._send(405, b"OPTIONS is not supported\n", extra={"Allow": "GET, POST, DELETE"})

            def __getattr__(self, name: str):
                # any other method (BREW, TRACE, ...): 405 like the ones above, not http.server's 501
                if name.startswith("do_"):
                    return lambda: self._send(405, f"{name[3:]} is not supported\n".encode(),
                                              extra={"Allow": "GET, POST, DELETE"})
                raise AttributeError(name)

            def _app(self, method: str) -> None:
                if app is None:
                    self._send(404, b"not found\n")
                    return
                if self.headers.get("Transfer-Encoding"):
                    self.close_connection = True
                    self._send(411, b"send the body with a Content-Length header (no chunked encoding)\n")
                    return
                raw = self.headers.get("Content-Length") or "0"
                try:
                    length = int(raw)
                    if length < 0:
                        raise ValueError(raw)
                except ValueError:
                    self.close_connection = True
                    self._send(400, f"Content-Length {raw!r} is not a byte count\n".encode())
                    return
                refused = app.admit(method, self.path, self.headers, peer_cn=self._peer_cn())
                if refused is not None:
                    self.close_connection = True
                    self._send(*refused)
                    # then the body is read and dropped, never held, for a moment: closing on
                    # unread bytes would reset the connection and could lose the answer on its way
                    try:
                        self.wfile.flush()
                        self.connection.settimeout(2.0)
                        self._drain(min(length, MAX_BODY))
                    except OSError:
                        pass
                    return
                if length > MAX_BODY:
                    self.close_connection = True
                    self._send(413, f"request body of {length} bytes is over the {MAX_BODY}-byte limit (a task "
                                    f"or source file is a few KB)\n".encode())
                    return
                body = self.rfile.read(length) if length else b""
                self.server.disarm(self.request)  # type: ignore[attr-defined]  # always a _Server
                code, out, ctype, extra = app.handle(method, self.path, self.headers, body, peer_cn=self._peer_cn())
                self._send(code, out, ctype, extra)

            def _drain(self, length: int) -> None:
                while length > 0:
                    chunk = self.rfile.read(min(length, 64 << 10))
                    if not chunk:
                        return
                    length -= len(chunk)

            def _peer_cn(self) -> str | None:
                getpeercert = getattr(self.connection, "getpeercert", None)
                cert = getpeercert() if getpeercert else None
                for rdn in (cert or {}).get("subject", ()):
                    for k, v in rdn:
                        if k == "commonName":
                            return v
                return None

            def _send(self, code, body, ctype="text/plain; charset=utf-8", extra=None):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):  # keep probes out of the structured log
                pass

        self.httpd = _Server((host, port), Handler, bind_and_activate=False)
        self.httpd.max_connections, self.httpd.deadline = max_connections, deadline
        self.httpd.max_per_peer = max_per_peer
        try:
            self.httpd.server_bind()
            self.httpd.server_activate()
        except BaseException:
            self.httpd.server_close()
            raise
        self.httpd.ssl_context = ssl_context
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="obs-http", daemon=True)

    def start(self) -> "ObsServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
