"""Free TCP ports on the loopback for the processes a test starts."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port the kernel just handed out and released: free now, and unlikely to be handed out
    again before the test's process binds it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
