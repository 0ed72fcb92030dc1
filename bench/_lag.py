"""Replication lag from GTID progress samples (``bench/vs_native.py --steady``).

Both sides are measured the same way, so neither needs a marker row: every ``interval`` the
bench reads each source's ``@@gtid_binlog_pos`` (what is committed upstream) and the side's
applied GTID state (the native replica's ``@@gtid_slave_pos``, shardmerge's global checkpoints:
written in the same downstream transaction as the rows, so they say what is visible).  At a
sample, a domain whose applied sequence number ``a`` is behind the upstream has waited since
the first sample at which the upstream had reached ``a + 1``: the oldest transaction not yet
applied.  The sample's lag is the largest over the domains, 0 when every domain is caught up.
The resolution is the sampling interval (a commit is seen at the next sample, on both sides).
"""
from __future__ import annotations

import bisect

Sample = tuple[float, dict[int, int], dict[int, int]]     # (time, upstream {domain: seq}, applied)


def lags(samples: list[Sample]) -> list[float]:
    """The lag at each sample, in seconds."""
    seen: dict[int, tuple[list[int], list[float]]] = {}   # domain -> (upstream seqs, first time seen)
    out = []
    for t, up, applied in samples:
        worst = 0.0
        for d, seq in up.items():
            seqs, times = seen.setdefault(d, ([], []))
            if not seqs or seq > seqs[-1]:
                seqs.append(seq)
                times.append(t)
            a = applied.get(d, -1)
            if a >= seq:
                continue
            i = bisect.bisect_left(seqs, a + 1)      # the first sample whose upstream had a + 1
            worst = max(worst, t - times[min(i, len(times) - 1)])
        out.append(worst)
    return out


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank); 0 for no samples."""
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]
