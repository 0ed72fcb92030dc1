"""DM's name patterns: ``*``, ``?`` and ``[...]`` wildcards, or a regular expression after ``~``;
names compare case-insensitively, like DM's default.  A leaf module: routing, block-allow lists
and binlog event filters all match names with it.

>>> match("shop_*", "SHOP_01"), match("~^shop_[0-9]+$", "shop_x"), match("orders_?", "orders_12")
(True, False, False)
"""
from __future__ import annotations

import fnmatch
import re
from functools import lru_cache


@lru_cache(maxsize=4096)
def _compile(pattern: str) -> re.Pattern:
    if pattern.startswith("~"):
        return re.compile(pattern[1:], re.IGNORECASE)
    return re.compile(fnmatch.translate(pattern), re.IGNORECASE)


def match(pattern: str, name: str) -> bool:
    if pattern.startswith("~"):
        return _compile(pattern).search(name) is not None
    return _compile(pattern).match(name) is not None
