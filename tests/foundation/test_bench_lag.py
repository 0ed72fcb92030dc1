"""The lag arithmetic of ``bench/vs_native.py --steady`` (``bench/_lag.py``)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _lag import lags, pct  # noqa: E402


def test_caught_up_is_zero_and_a_waiting_transaction_ages():
    s = [(0.0, {1: 10}, {1: 10}),      # caught up
         (0.1, {1: 12}, {1: 10}),      # 11 and 12 committed, not applied: waited since 0.1
         (0.2, {1: 15}, {1: 11}),      # 12 is the oldest waiting: committed by 0.1
         (0.3, {1: 15}, {1: 14}),      # 15 first seen at 0.2
         (0.4, {1: 15}, {1: 15})]
    assert [round(x, 3) for x in lags(s)] == [0.0, 0.0, 0.1, 0.1, 0.0]


def test_the_worst_domain_counts_and_an_applied_read_ahead_of_upstream_is_zero():
    s = [(0.0, {1: 5, 2: 7}, {1: 5, 2: 7}),
         (0.5, {1: 6, 2: 9}, {1: 6, 2: 7}),
         (1.0, {1: 8, 2: 9}, {1: 9, 2: 8}),     # domain 1 read after the upstream: ahead, no lag
         (1.5, {1: 8, 2: 9}, {1: 8})]           # domain 2 not in the applied state: all of it waits
    assert lags(s) == [0.0, 0.0, 0.5, 1.5]
    assert pct([3.0, 1.0, 2.0, 4.0], 0.5) == 3.0 and pct([], 0.99) == 0.0
