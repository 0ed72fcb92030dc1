"""Observability: structured log lines and an HTTP endpoint for Prometheus metrics and health.

Every process (master, worker, benchmarks) logs one JSON object per line through
``logger(component)`` and serves ``/metrics``, ``/healthz`` and ``/readyz`` through
``ObsServer``; probes and scrapers need nothing else.
"""
from __future__ import annotations

import json
import logging
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, component, message, then context fields."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
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


class ObsServer:
    """Serves /metrics (Prometheus text), /healthz (process alive) and /readyz (``ready()``
    returns (ok, reason)) on a background thread."""

    def __init__(self, host: str, port: int, ready: Callable[[], tuple[bool, str]] | None = None,
                 registry=REGISTRY):
        self.ready = ready or (lambda: (True, "ok"))
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server API)
                if self.path.startswith("/metrics"):
                    self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif self.path.startswith("/healthz"):
                    self._send(200, b"ok\n")
                elif self.path.startswith("/readyz"):
                    try:
                        ok, reason = outer.ready()
                    except Exception as e:  # a failing check means not ready, never a crash
                        ok, reason = False, f"readiness check failed: {e}"
                    self._send(200 if ok else 503, (reason + "\n").encode())
                else:
                    self._send(404, b"not found\n")

            def _send(self, code, body, ctype="text/plain; charset=utf-8"):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):  # keep probes out of the structured log
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="obs-http", daemon=True)

    def start(self) -> "ObsServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
