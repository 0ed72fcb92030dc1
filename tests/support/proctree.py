"""Memory and CPU of a process tree, read from /proc (Linux): the benches' RSS and CPU figures
and the soak's memory check.  A worker is a tree (driver, Spark JVM, Python workers, binlog
decoder), so every figure is of the whole tree, found by parent, process group or session."""
from __future__ import annotations

import os
from typing import NamedTuple

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


class Proc(NamedTuple):
    pid: int
    ppid: int
    pgrp: int
    session: int
    cpu_s: float      # user + system
    rss: int          # bytes


def snapshot() -> dict[int, Proc]:
    """Every live process now (ones that exit while read are left out)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                p = f.read().rsplit(")", 1)[1].split()
            out[int(d)] = Proc(int(d), int(p[1]), int(p[2]), int(p[3]), (int(p[11]) + int(p[12])) / TICK,
                               int(p[21]) * PAGE)
        except (OSError, IndexError, ValueError):
            continue
    return out


def tree(root: int, procs: dict[int, Proc] | None = None) -> list[Proc]:
    """``root`` and all its descendants."""
    procs = snapshot() if procs is None else procs
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            out.append(procs[pid])
        todo.extend(children.get(pid, []))
    return out


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and its descendants."""
    return sum(p.rss for p in tree(root))


def group_rss(pgrp: int) -> int:
    """Resident bytes of the processes of process group ``pgrp``."""
    return sum(p.rss for p in snapshot().values() if p.pgrp == pgrp)


def session_cpu(session: int) -> float:
    """CPU seconds used so far by the live processes of session ``session``."""
    return sum(p.cpu_s for p in snapshot().values() if p.session == session)
