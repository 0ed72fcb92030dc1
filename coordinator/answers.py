"""The master's answers that mean "there is no ready leader right now" (or "not me: ask the
leader").

``NO_LEADER`` and ``REBUILDING`` are given *before* any handler runs, so the request had no
effect and a client may simply send it again once a leader is ready: the CLI waits them out
(``--leader-wait``).  ``LOST_LEADERSHIP`` comes from inside a handler whose fenced write was
refused; it is reported, not retried.  The HTTP API maps all three to 503.  Both read the
wording from here instead of matching their own copies of it.
"""
from __future__ import annotations

NO_LEADER = "not leader, and no leader is elected yet; retry in a few seconds"
REBUILDING = "this master was just elected and is still rebuilding locks; retry in a moment"
LOST_LEADERSHIP = "this master lost leadership while handling the request; nothing was written"
_NOT_LEADER = "not leader"    # NO_LEADER starts with it too: no leader at all is a "not leader"


def not_leader(leader: str, why: str = "") -> str:
    """A follower's answer naming the leader (it could not forward the request, or was told not to)."""
    return f"{_NOT_LEADER}, leader is {leader}" + (f" ({why})" if why else "")


def is_not_leader(msg: str) -> bool:
    """The answer of a master that is not the leader: send the request to the leader instead."""
    return msg.startswith(_NOT_LEADER)


def retry_safe(msg: str) -> bool:
    """A refusal given before handling because no leader is ready: sending it again is safe."""
    return msg.startswith((NO_LEADER, REBUILDING))


def leaderless(msg: str) -> bool:
    """Any refusal caused by the leadership changing (HTTP 503)."""
    return retry_safe(msg) or msg.startswith(LOST_LEADERSHIP) or is_not_leader(msg)
