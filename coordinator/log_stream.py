"""One JSON log stream per process.

Our own log lines are JSON (``coordinator.obs``); what other code writes to the process's
stderr is not: the JVM Spark starts (log4j lines and its banners), Python's warnings, a thread's
last-chance traceback.  :func:`json_stderr` turns every such line into a JSON line of the same
stream, so a log shipper reads one format: file descriptor 2 becomes a pipe read by a thread
that passes JSON lines through and wraps the others (a Java or Python stack trace stays one
record, its lines in ``msg``).  Python warnings and uncaught exceptions are logged as records
with the traceback in ``exc``.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import re
import select
import sys
import threading
import time

from coordinator.obs import JsonFormatter, logger

# a line that continues the record before it: a stack frame, "Caused by", "... 12 more" (a
# Python traceback's closing "Error: message" line too, below)
_CONTINUES = re.compile(r"^(\s|Caused by:|\.\.\. \d+ more)")
_LEVEL = re.compile(r"\b(ERROR|WARN(?:ING)?|INFO|DEBUG)\b")
_installed = False


def _wrapped(text: str, source: str) -> bytes:
    m = _LEVEL.search(text[:80])
    level = {"WARN": "warning", "WARNING": "warning"}.get(m.group(1), m.group(1).lower()) if m else "info"
    rec = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z",
           "level": level, "component": source, "msg": text}
    return (json.dumps(rec, ensure_ascii=False) + "\n").encode()


def _is_json(line: str) -> bool:
    if not line.startswith("{"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _pump(read_fd: int, out_fd: int, source: str) -> None:
    """Copy ``read_fd`` to ``out_fd`` line by line, wrapping non-JSON lines (never raises: a dead
    pump would leave writers to stderr blocked on a full pipe)."""
    buf, pending = b"", []

    def flush_pending():
        if pending:
            os.write(out_fd, _wrapped("\n".join(pending), source))
            pending.clear()

    while True:
        try:
            ready, _, _ = select.select([read_fd], [], [], 0.2)
            if not ready:
                flush_pending()
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                flush_pending()
                return
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip("\r")
                if not line.strip():
                    continue
                if _is_json(line):
                    flush_pending()
                    os.write(out_fd, (line + "\n").encode())
                elif pending and _CONTINUES.match(line):
                    pending.append(line)
                elif pending and pending[0].startswith("Traceback") and pending[-1].startswith(" "):
                    pending.append(line)          # the exception line that ends a Python traceback
                    flush_pending()
                else:
                    flush_pending()
                    pending.append(line)
        except Exception:  # noqa: BLE001 -- keep draining whatever happens
            try:
                os.write(out_fd, buf + b"\n")
            except OSError:
                pass
            buf, pending = b"", []


def json_stderr(source: str = "stderr") -> None:
    """Make everything written to this process's stderr (and its children's: the Spark JVM) a
    JSON line; log Python warnings and uncaught exceptions as records.  Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True
    log = logger("process")
    logging.captureWarnings(True)
    warn_log = logging.getLogger("py.warnings")
    if not warn_log.handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(JsonFormatter())
        warn_log.addHandler(h)
        warn_log.propagate = False

    def excepthook(kind, value, tb):
        log.error(f"uncaught exception: {kind.__name__}: {value}", exc_info=(kind, value, tb))

    def thread_hook(args):
        if args.exc_type is SystemExit:
            return
        log.error(f"uncaught exception in thread {args.thread.name if args.thread else '?'}: "
                  f"{args.exc_type.__name__}: {args.exc_value}",
                  exc_info=(args.exc_type, args.exc_value, args.exc_traceback))

    sys.excepthook = excepthook
    threading.excepthook = thread_hook
    try:
        sys.stderr.flush()
        real = os.dup(2)
        r, w = os.pipe()
        os.dup2(w, 2)
        os.close(w)
    except OSError:
        return                      # no fd 2 to take over (embedded use): records stay JSON anyway
    pump = threading.Thread(target=_pump, args=(r, real, source), name="json-stderr", daemon=True)
    pump.start()

    def drain():
        try:
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        time.sleep(0.3)             # the pump's last lines (it flushes within 0.2 s)

    atexit.register(drain)
