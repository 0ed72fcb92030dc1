"""GTID sets of both server flavors, as text in and text out.

A position's GTID state is kept as the server prints it, so checkpoints, ``meta`` and
``query-status`` show what an operator can paste into the server:

- **MariaDB**: one ``domain-server-seq`` per replication domain, joined by commas
  (``0-1-57,101-101-9``); a transaction's GTID is one such triple and replaces its domain's entry.
- **MySQL**: per server UUID, the intervals of transaction numbers executed
  (``3e11fa47-...:1-5:7-9,4a1c...:1-3``; ``gtid_executed``/``gtid_purged`` form); a
  transaction's GTID is ``uuid:n`` and is added to its UUID's intervals.  MySQL 8.4+ tagged
  GTIDs (``uuid:tag:n``) keep the tag as part of the key.

The flavor is read off the text (MySQL's has colons), so code that only moves positions around
never needs to be told which server it talks to.  The *key* of an entry (a MariaDB domain, a
MySQL UUID with its tag) is what "one stream of transactions" means for both flavors.
"""
from __future__ import annotations

import threading

from coordinator.errors import ShardMergeError

MARIADB, MYSQL = "mariadb", "mysql"


class GtidError(ShardMergeError):
    """A GTID or GTID set is malformed; names the text and where it came from."""


def flavor_of(text: str) -> str | None:
    """``mysql``, ``mariadb``, or None for an empty set."""
    text = (text or "").strip()
    if not text:
        return None
    return MYSQL if ":" in text else MARIADB


# ------------------------------------------------------------------ MariaDB
def _mariadb_entries(text: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.replace("\n", "").split(","):
        part = part.strip()
        if not part:
            continue
        bits = part.split("-")
        if len(bits) != 3 or not all(b.isdigit() for b in bits):
            raise GtidError(f"{what} {text!r} is not a GTID set: expected MariaDB's domain-server-seq[,...] "
                            "(e.g. 0-1-57) or MySQL's uuid:1-5[:7-9][,...]")
        out[bits[0]] = part
    return out


# ------------------------------------------------------------------ MySQL
Intervals = list[tuple[int, int]]     # sorted, disjoint, inclusive


def _merge(iv: Intervals) -> Intervals:
    out: Intervals = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


_TAG_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")


def _uuid(text: str, what: str, whole: str) -> str:
    uuid = text.strip().lower()
    if len(uuid.replace("-", "")) != 32 or any(c not in "0123456789abcdef-" for c in uuid):
        raise GtidError(f"{what} {whole!r}: {text!r} is not a server UUID (MySQL GTIDs are uuid:1-5[:7-9])")
    return uuid


def _tag(text: str, what: str, whole: str) -> str:
    """MySQL 8.4+ tags: a letter or underscore, then up to 31 letters, digits or underscores
    (case-insensitive; the server prints them in lower case)."""
    tag = text.lower()
    if len(tag) > 32 or tag[0].isdigit() or not set(tag) <= _TAG_CHARS:
        raise GtidError(f"{what} {whole!r}: {text!r} is neither an interval nor a GTID tag "
                        "(a tag is a letter or _ then up to 31 letters, digits or _)")
    return tag


def parse_mysql(text: str, what: str = "GTID set") -> dict[str, Intervals]:
    """``uuid:1-5:7,uuid2:3`` -> {uuid: [(1, 5), (7, 7)], uuid2: [(3, 3)]} (merged).  A tag
    (8.4+) switches the key for the intervals after it, as the server prints a UUID's tagged
    transactions after its untagged ones: ``uuid:1-5:tag:1-3`` -> {uuid: ..., uuid:tag: ...}."""
    out: dict[str, Intervals] = {}
    for part in text.replace("\n", "").split(","):
        part = part.strip()
        if not part:
            continue
        bits = [b.strip() for b in part.split(":")]
        uuid = _uuid(bits[0], what, text)
        key, empty = uuid, True
        for r in bits[1:]:
            if r and not r[0].isdigit():
                if key != uuid:       # the tag before this one had no interval
                    _need_interval(key, empty, what, text)
                key, empty = f"{uuid}:{_tag(r, what, text)}", True
                continue
            a, sep, b = r.partition("-")
            if not a.isdigit() or (sep and not b.isdigit()) or int(a) < 1 or (b and int(b) < int(a)):
                raise GtidError(f"{what} {text!r}: {r!r} is not an interval of transaction numbers "
                                "(expected n or n-m with 1 <= n <= m)")
            out.setdefault(key, []).append((int(a), int(b or a)))
            empty = False
        _need_interval(key, empty, what, text)
    return {k: _merge(v) for k, v in out.items()}


def _need_interval(key: str, empty: bool, what: str, text: str) -> None:
    if empty:
        raise GtidError(f"{what} {text!r}: {key!r} has no interval of transaction numbers (expected {key}:1-5)")


def format_mysql(sets: dict[str, Intervals]) -> str:
    return ",".join(k + "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in iv)
                    for k, iv in sorted(sets.items()) if iv)


_KEYS: dict[str, str] = {}       # a GTID's ``uuid[:tag]`` as written -> its key, checked once


def _mysql_gtid(gtid: str) -> tuple[str, int]:
    """``uuid[:tag]:n`` -> (key, n): one transaction."""
    key, _, n = gtid.strip().rpartition(":")
    if not key or not n.isdigit() or int(n) < 1:
        raise GtidError(f"GTID {gtid!r} is not a MySQL GTID (uuid:n or uuid:tag:n)")
    k = _KEYS.get(key)
    if k is None:
        (k,) = parse_mysql(f"{key}:1", "GTID")
        if key.count(":") != k.count(":"):          # e.g. uuid:1-3:5
            raise GtidError(f"GTID {gtid!r} is not a MySQL GTID (uuid:n or uuid:tag:n)")
        if len(_KEYS) < 10_000:
            _KEYS[key] = k
    return k, int(n)


# ------------------------------------------------------------------ both
def entries(text: str, what: str = "GTID set") -> dict[str, str]:
    """Set text -> {stream key: that stream's part of the text} (MariaDB domain or MySQL UUID)."""
    text = text or ""
    if flavor_of(text) == MYSQL:
        return {k: format_mysql({k: iv}) for k, iv in parse_mysql(text, what).items()}
    return _mariadb_entries(text, what)


def canonical(text: str, what: str = "GTID set") -> str:
    """The set in one normal form (sorted keys, merged intervals), for comparing and storing."""
    if flavor_of(text) == MYSQL:
        return format_mysql(parse_mysql(text, what))
    e = _mariadb_entries(text or "", what)
    return ",".join(e[k] for k in sorted(e, key=int))


# The decoder threads one set through every transaction it reads, so the set an advance is given
# is nearly always the one the last advance returned: that result is kept parsed (per thread),
# and the next advance re-reads and re-prints only the transaction's own stream.  Re-parsing
# a MySQL set of 20 server UUIDs cost about 340 us a transaction, more than decoding its rows.
_last = threading.local()


def advance(text: str, gtid: str) -> str:
    """The set after the transaction ``gtid`` (MariaDB: replaces its domain's entry; MySQL:
    adds the number to its UUID's intervals)."""
    text = text or ""
    mysql = ":" in gtid
    memo = getattr(_last, "set", None)
    if memo is not None and memo[0] == text and memo[3] == mysql:
        streams, printed = memo[1], memo[2]
    elif mysql:
        streams = parse_mysql(text)
        printed = {k: format_mysql({k: iv}) for k, iv in streams.items()}
    else:
        streams = printed = _mariadb_entries(text, "GTID set")
    if mysql:
        k, n = _mysql_gtid(gtid)
        iv = streams.get(k) or []
        if iv and iv[-1][1] + 1 == n:
            iv = iv[:-1] + [(iv[-1][0], n)]        # the usual case: the next number of its stream
        elif not (iv and iv[-1][0] <= n <= iv[-1][1]):
            iv = _merge([*iv, (n, n)])
        streams[k] = iv
        printed[k] = format_mysql({k: iv})
        out = ",".join(p for _, p in sorted(printed.items()) if p)
    else:
        d, _, _ = _mariadb_gtid(gtid)
        printed[d] = gtid.strip()
        out = ",".join(printed[k] for k in sorted(printed, key=int))
    _last.set = (out, streams, printed, mysql)
    return out


def _mariadb_gtid(gtid: str) -> tuple[str, str, int]:
    """``domain-server-seq`` -> (domain, server, seq): one transaction."""
    bits = gtid.strip().split("-")
    if len(bits) != 3 or not all(b.isdigit() for b in bits):
        raise GtidError(f"GTID {gtid!r} is not a MariaDB GTID (domain-server-seq) nor a MySQL one (uuid:n)")
    return bits[0], bits[1], int(bits[2])


def follows(state: str, gtid: str) -> bool:
    """``gtid`` is the next transaction of its stream after ``state``: MariaDB, the domain's
    sequence number plus one; MySQL, the number after the UUID's last interval (and not in the
    set).  A stream the state does not name never follows (position by GTID instead)."""
    if ":" in gtid:
        k, n = _mysql_gtid(gtid)
        iv = parse_mysql(state or "").get(k) or []
        return bool(iv) and iv[-1][1] + 1 == n
    d, _, seq = _mariadb_gtid(gtid)
    last = _mariadb_entries(state or "", "GTID set").get(d)
    return last is not None and int(last.rsplit("-", 1)[1]) + 1 == seq


def contains(big: str, small: str) -> bool:
    """Every transaction of ``small`` is in ``big`` (MariaDB: per domain, ``big``'s sequence
    number is at least ``small``'s — MariaDB sets say only how far each domain got)."""
    if flavor_of(small) is None:
        return True
    if flavor_of(big) != flavor_of(small):
        return False
    if flavor_of(small) == MYSQL:
        b = parse_mysql(big)
        for k, ivs in parse_mysql(small).items():
            have = b.get(k, [])
            if not all(any(x <= lo and hi <= y for x, y in have) for lo, hi in ivs):
                return False
        return True
    b2, s2 = _mariadb_entries(big, "GTID set"), _mariadb_entries(small, "GTID set")
    return all(d in b2 and int(b2[d].rsplit("-", 1)[1]) >= int(e.rsplit("-", 1)[1]) for d, e in s2.items())


def subtract_count(big: str, small: str) -> dict[str, int]:
    """Per stream, how many transactions ``big`` has past ``small`` (the worker's lag figure).
    MariaDB counts by sequence numbers (a domain's numbers may skip when servers change)."""
    if flavor_of(big) == MYSQL:
        b, s = parse_mysql(big), parse_mysql(small or "") if flavor_of(small) == MYSQL else {}
        out = {}
        for k, ivs in b.items():
            have = s.get(k, [])
            n = sum(y - x + 1 for x, y in ivs)
            n -= sum(max(0, min(y, hi) - max(x, lo) + 1) for x, y in ivs for lo, hi in have)
            out[k] = n
        return out
    b2 = _mariadb_entries(big or "", "GTID set")
    s2 = _mariadb_entries(small or "", "GTID set") if flavor_of(small) == MARIADB else {}
    return {d: max(0, int(e.rsplit("-", 1)[1]) - (int(s2[d].rsplit("-", 1)[1]) if d in s2 else 0))
            for d, e in b2.items()}


def subtract_mysql(big: str, small: str) -> str:
    """The MySQL GTID set of transactions in ``big`` and not in ``small`` (e.g. what a start
    position lacks of ``@@gtid_purged``)."""
    b, s = parse_mysql(big or ""), parse_mysql(small or "") if flavor_of(small) == MYSQL else {}
    out: dict[str, Intervals] = {}
    for k, ivs in b.items():
        rest = ivs
        for lo, hi in s.get(k, []):
            rest = [piece for x, y in rest for piece in ((x, min(y, lo - 1)), (max(x, hi + 1), y)) if piece[0] <= piece[1]]
        out[k] = rest
    return format_mysql(out)
