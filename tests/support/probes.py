"""How the process-level tests look at running shardmerge processes: the ``shardctl`` CLI run
in-process against one master, an HTTP GET that answers instead of raising, and a poll until a
condition holds.  One copy for the chaos harness, the recovery tests and the security tests."""
from __future__ import annotations

import contextlib
import io
import json
import time
import urllib.error
import urllib.request
from typing import Callable


def shardctl(addr: str, *argv: str, fmt: str | None = None) -> tuple[int, str, str]:
    """``shardctl --master-addr ADDR argv...`` through the CLI's own entry point, in-process (no
    interpreter start per call); (exit code, stdout, stderr).  argparse errors count as exit codes."""
    from coordinator.cli import main   # late: only the tests that call shardctl pay for the CLI and grpc imports
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(["--master-addr", addr, *(["--format", fmt] if fmt else []), *argv])
        except SystemExit as e:
            rc = int(e.code or 0)
    return rc, out.getvalue(), err.getvalue()


def shardctl_doc(addr: str, *argv: str, fmt: str | None = None) -> tuple[int, dict | str]:
    """``shardctl`` as above; (exit code, the JSON it printed, or all its text when it printed none)."""
    rc, out, err = shardctl(addr, *argv, fmt=fmt)
    try:
        return rc, json.loads(out)
    except ValueError:
        return rc, out + err


def http_get(addr: str, path: str, timeout: float = 2) -> tuple[int, str]:
    """(status, body) of ``http://ADDR PATH``; an error status is an answer too, and (0, the error)
    when nothing answers, so a poll can keep asking a process that is down or starting."""
    try:
        with urllib.request.urlopen(f"http://{addr}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return 0, str(e)


def wait_for(cond: Callable, timeout: float = 15.0, what: str = "condition", diag: Callable[[], str] = lambda: "", *,
             interval: float = 1.0, each: Callable[[], object] | None = None,
             error: type[Exception] = AssertionError):
    """Call ``cond`` every ``interval`` s until it returns something truthy, and return that.  An
    exception from ``cond`` counts as "not yet" (servers are being killed on purpose).  ``each``
    runs before every try (e.g. a check that no process died).  On timeout raises ``error`` naming
    ``what``, the last result or exception, and ``diag()`` (e.g. the processes' log tails)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if each is not None:
            each()
        try:
            last = cond()
        except Exception as e:  # noqa: BLE001 — keep polling
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise error(f"timed out after {timeout}s waiting for {what}; last: {last!r}\n{diag()}")
