"""A master is not open by accident: without TLS or tokens every caller is an operator (start
and stop tasks, unlock, run DDL downstream), which is fine on loopback and nowhere else.

A listen address that is not loopback (a wildcard, another interface, a name) needs TLS, tokens,
or an explicit ``--insecure``; with ``--insecure`` the master says so at start and every hour, so
the choice stays visible in its log.  On loopback an open master says it once.
"""
from __future__ import annotations

import ipaddress
import threading

from coordinator.errors import ConfigError

REMIND_EVERY = 3600.0


def is_loopback(addr: str) -> bool:
    """``HOST:PORT`` names a loopback interface (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = addr.rsplit(":", 1)[0].strip("[]").lower() if ":" in addr else addr.lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposed(addrs: dict[str, str]) -> dict[str, str]:
    """The flags of ``addrs`` ({flag: HOST:PORT}) that listen beyond loopback."""
    return {flag: a for flag, a in addrs.items() if a and not is_loopback(a)}


def check(addrs: dict[str, str], secured: bool, insecure: bool, origin: str) -> str:
    """Refuse (ConfigError naming the flag) an open master listening beyond loopback without
    ``--insecure``; return the warning to log ("" when secured)."""
    if secured:
        return ""
    out = exposed(addrs)
    if not out:
        return ("no TLS and no tokens: every caller is an operator; fine on loopback only "
                "(see docs/http-api.md, \"Who can reach what\")")
    where = ", ".join(f"{flag} {a}" for flag, a in out.items())
    if not insecure:
        flag = next(iter(out))
        raise ConfigError(f"{where} is not loopback, and without TLS or tokens every caller that can reach it is an "
                          "operator (starts and stops tasks, runs DDL downstream): give --ssl-cert/--ssl-key/"
                          "--ssl-ca with --cert-allowed-cn, or --auth-token-file; or --insecure to run it open on "
                          "purpose (a private network you trust)", file=origin, key=flag)
    return (f"running open on purpose (--insecure): {where} without TLS or tokens; every caller that can reach it "
            "is an operator")


class Reminder:
    """Logs ``message`` as a warning now and every ``every`` seconds until ``stop``."""

    def __init__(self, log, message: str, every: float = REMIND_EVERY):
        self.log, self.message, self.every = log, message, every
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="insecure-reminder", daemon=True)

    def start(self) -> "Reminder":
        self.thread.start()
        return self

    def _run(self) -> None:
        while True:
            self.log.warning(self.message)
            if self._stop.wait(self.every):
                return

    def stop(self) -> None:
        self._stop.set()
