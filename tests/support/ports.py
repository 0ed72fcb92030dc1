"""Free TCP ports on the loopback for the processes a test starts."""
from __future__ import annotations

import socket

_given: set[int] = set()     # ports this process handed out already


def free_port() -> int:
    """A port the kernel just handed out and released, and that this process never handed out
    before: the kernel may give a released port again at once, and two ports asked for before
    either process binds (a master's --listen and a worker's --metrics-addr) once came out equal
    ("Address already in use" in a CI rehearsal)."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given:
            _given.add(port)
            return port
    raise RuntimeError("no loopback port left that this test run did not hand out already")
