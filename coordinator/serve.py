"""Shared by the commands that run a long-lived process (``shardctl master``, ``shardctl worker``):
the same start-up, failure line and clean stop on a signal, whatever the process is."""
from __future__ import annotations

import argparse
import signal
import sys
from typing import Callable, Protocol


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(value: str) -> str:
    """argparse type of ``--log-level``: a bad level is argparse's one-line usage error."""
    if value.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
    return value.upper()


class Process(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...

    def wait(self) -> None: ...


def serve(command: str, args, build: Callable[[], Process], errors: tuple[type[Exception], ...]) -> int:
    """Logging and etcd TLS from ``args``, then ``build()`` and start the process.  A failure to
    start (one of ``errors``: a bad flag value, an unreachable etcd, a busy port) is one line
    ``shardctl COMMAND: ...`` on stderr and exit 1, not a traceback; SIGTERM/SIGINT stop the
    process cleanly (a pod's shutdown) and the exit code is 0 once it has stopped."""
    # logging, metrics and etcd: for the processes only, not every CLI start-up
    from coordinator.etcd_client import security_from_args, set_default_security
    from coordinator.log_stream import json_stderr
    from coordinator.obs import setup_logging
    setup_logging(args.log_level)
    set_default_security(security_from_args(args))
    try:
        proc = build()
        proc.start()
    except errors as e:
        print(f"shardctl {command}: {e}", file=sys.stderr)
        return 1
    # started: from now on the JVM's lines, warnings and tracebacks join the JSON stream (a failed
    # start above stays one plain line for the operator)
    json_stderr()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: proc.stop())
    proc.wait()
    return 0
