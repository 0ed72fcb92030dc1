"""worker.gtid: GTID sets of both flavors, parsed and moved as the servers print them.  Examples
pin the forms MySQL and MariaDB print (several UUIDs, newlines in gtid_executed, 8.4+ tags);
hypothesis checks the laws the syncer relies on (advance then contains, canonical idempotent,
contains a partial order, the lag count of one new transaction is 1)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker import gtid

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "4a1c0000-0000-0000-0000-00000000000b"


# ------------------------------------------------------------------ examples
def test_flavor_is_read_off_the_text():
    assert gtid.flavor_of("") is None and gtid.flavor_of("  ") is None
    assert gtid.flavor_of("0-1-57,101-101-9") == gtid.MARIADB
    assert gtid.flavor_of(f"{A}:1-5") == gtid.MYSQL


def test_mysql_intervals_merge_and_sort():
    assert gtid.parse_mysql(f"{A}:7-9:1-5:6,{A}:11") == {A: [(1, 9), (11, 11)]}
    assert gtid.canonical(f"{B}:3,{A.upper()}:1-2:3") == f"{A}:1-3,{B}:3"
    assert gtid.canonical(f"{A}:5-5:1-2:2-4") == f"{A}:1-5"


def test_gtid_executed_with_newlines_parses():
    printed = f"{A}:1-57,\n{B}:1-3:5\n"          # SELECT @@gtid_executed prints ",\n" between UUIDs
    assert gtid.canonical(printed) == f"{A}:1-57,{B}:1-3:5"
    assert gtid.entries(printed) == {A: f"{A}:1-57", B: f"{B}:1-3:5"}


def test_tagged_gtids_are_their_own_stream():
    # MySQL 8.4+ prints a UUID's tagged transactions after its untagged ones, in the same block
    sets = gtid.parse_mysql(f"{A}:1-5:Batch_1:1-3:7:other:2,{B}:tg:4")
    assert sets == {A: [(1, 5)], f"{A}:batch_1": [(1, 3), (7, 7)], f"{A}:other": [(2, 2)], f"{B}:tg": [(4, 4)]}
    text = gtid.canonical(f"{A}:1-5:batch_1:1-3")
    assert text == f"{A}:1-5,{A}:batch_1:1-3" and gtid.canonical(text) == text
    assert gtid.advance(text, f"{A}:batch_1:4") == f"{A}:1-5,{A}:batch_1:1-4"
    assert gtid.follows(text, f"{A}:batch_1:4") and not gtid.follows(text, f"{A}:4")
    assert gtid.follows(text, f"{A}:6")
    assert gtid.subtract_count(f"{A}:1-5,{A}:batch_1:1-9", text) == {A: 0, f"{A}:batch_1": 6}


@pytest.mark.parametrize("bad", [
    f"{A}", f"{A}:", f"{A}:0", f"{A}:5-3", f"{A}:5-", f"{A}:x-1", "zz:1", f"{A}:tag", f"{A}:1:tag",
    f"{A}:t1:t2:3", f"{A}:{'t' * 33}:1", f"{A}:ta-g:1", "0-1", "0-1-x", "0-1-5,7"])
def test_malformed_sets_are_refused_with_the_text(bad):
    with pytest.raises(gtid.GtidError) as ei:
        gtid.canonical(bad, "task meta binlog-gtid")
    assert repr(bad) in str(ei.value) and "task meta binlog-gtid" in str(ei.value)


@pytest.mark.parametrize("bad", ["", "1-2", f"{A}", f"{A}:0", f"{A}:1-3:5", f"{A}:x", "0-1-2-3", "a-b-c"])
def test_malformed_single_gtids_are_refused(bad):
    with pytest.raises(gtid.GtidError):
        gtid.advance("", bad)


def test_mariadb_sets():
    assert gtid.canonical("101-101-9,0-1-57") == "0-1-57,101-101-9"
    assert gtid.advance("0-1-57,101-101-9", "0-2-58") == "0-2-58,101-101-9"     # replaces its domain
    assert gtid.advance("0-1-57", "5-1-1") == "0-1-57,5-1-1"
    assert gtid.follows("0-1-57", "0-2-58") and not gtid.follows("0-1-57", "0-1-59")
    assert not gtid.follows("0-1-57", "1-1-1")          # a domain the state does not name
    assert gtid.contains("0-1-57,1-1-3", "0-1-50") and not gtid.contains("0-1-57", "0-1-58,1-1-1")
    assert gtid.subtract_count("0-1-57,1-1-3", "0-1-50") == {"0": 7, "1": 3}


def test_mysql_contains_and_counts():
    big = f"{A}:1-10:20-30,{B}:1-3"
    assert gtid.contains(big, f"{A}:2-5:21")
    assert not gtid.contains(big, f"{A}:9-21")            # 11-19 missing
    assert not gtid.contains(big, f"{A}:1,{B}:4")
    assert gtid.contains(big, "") and not gtid.contains("", f"{A}:1")
    assert not gtid.contains("0-1-5", f"{A}:1") and not gtid.contains(f"{A}:1", "0-1-5")   # flavors differ
    assert gtid.subtract_count(big, f"{A}:5-25") == {A: 4 + 5, B: 3}
    assert gtid.subtract_mysql(big, f"{A}:5-25") == f"{A}:1-4:26-30,{B}:1-3"
    assert gtid.subtract_mysql(f"{A}:1-5", f"{A}:1-5") == "" and gtid.subtract_mysql(f"{A}:1-5", "") == f"{A}:1-5"


def test_follows_after_a_gap():
    assert gtid.follows(f"{A}:1-5:7-9", f"{A}:10")
    assert not gtid.follows(f"{A}:1-5:7-9", f"{A}:6")     # in the gap: not the next one
    assert not gtid.follows(f"{A}:1-5", f"{B}:1")         # a stream the state does not name


# ------------------------------------------------------------------ laws
UUIDS = st.sampled_from([A, B, "00000000-0000-0000-0000-0000000000c3"])
KEYS = st.one_of(UUIDS, st.builds(lambda u, t: f"{u}:{t}", UUIDS, st.sampled_from(["tg", "batch_1"])))
INTERVAL = st.tuples(st.integers(1, 60), st.integers(0, 8)).map(lambda t: (t[0], t[0] + t[1]))


@st.composite
def mysql_sets(draw) -> str:
    """Text as a server or an operator may write it: unmerged, unsorted, mixed case, newlines."""
    parts = []
    for key in draw(st.lists(KEYS, max_size=4)):
        ivs = draw(st.lists(INTERVAL, min_size=1, max_size=4))
        k = key.upper() if draw(st.booleans()) else key
        parts.append(k + "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in ivs))
    return ",\n".join(parts) if draw(st.booleans()) else ",".join(parts)


@st.composite
def mariadb_sets(draw) -> str:
    doms = draw(st.dictionaries(st.integers(0, 5), st.tuples(st.integers(1, 3), st.integers(1, 100)), max_size=4))
    return ",".join(f"{d}-{s}-{n}" for d, (s, n) in doms.items())


mysql_gtids = st.builds(lambda k, n: f"{k}:{n}", KEYS, st.integers(1, 80))
mariadb_gtids = st.builds(lambda d, s, n: f"{d}-{s}-{n}", st.integers(0, 5), st.integers(1, 3), st.integers(1, 200))


@settings(max_examples=150)
@given(mysql_sets())
def test_mysql_canonical_is_idempotent_and_keeps_the_set(text):
    c = gtid.canonical(text)
    assert gtid.canonical(c) == c
    assert gtid.parse_mysql(c) == gtid.parse_mysql(text)
    if c:
        assert gtid.contains(c, text) and gtid.contains(text, c)


@settings(max_examples=150)
@given(mysql_sets(), mysql_gtids)
def test_mysql_advance_then_contains(text, g):
    after = gtid.advance(text, g)
    assert gtid.contains(after, g) and gtid.contains(after, text)
    assert gtid.canonical(after) == after
    new = not gtid.contains(text, g) if text else True
    if new:
        assert sum(gtid.subtract_count(after, text).values()) == 1
        assert gtid.subtract_mysql(after, text) == gtid.canonical(g)
    else:
        assert after == gtid.canonical(text)


@settings(max_examples=150)
@given(mysql_sets(), mysql_gtids)
def test_mysql_follows_means_the_next_number_of_its_stream(text, g):
    key, n = g.rsplit(":", 1)
    ivs = gtid.parse_mysql(text).get(key)
    assert gtid.follows(text, g) == (bool(ivs) and ivs[-1][1] + 1 == int(n))
    past_the_end = not ivs or int(n) >= ivs[-1][1]       # then the number after g follows the advanced set
    assert gtid.follows(gtid.advance(text, g), f"{key}:{int(n) + 1}") == past_the_end


@settings(max_examples=150)
@given(mysql_sets(), mysql_sets(), mysql_sets())
def test_mysql_contains_is_a_partial_order(a, b, c):
    assert gtid.contains(a, a)
    if gtid.contains(a, b) and gtid.contains(b, c):
        assert gtid.contains(a, c)
    if a and b and gtid.contains(a, b) and gtid.contains(b, a):
        assert gtid.canonical(a) == gtid.canonical(b)


@settings(max_examples=150)
@given(mysql_sets(), mysql_sets())
def test_mysql_subtract_is_what_b_has_past_a(a, b):
    d = gtid.subtract_mysql(b, a)
    assert gtid.contains(b, d)
    assert gtid.subtract_mysql(d, a) == d                       # nothing of a is left in it
    assert (d == "") == gtid.contains(a, b) or not b
    count = sum(hi - lo + 1 for ivs in gtid.parse_mysql(d).values() for lo, hi in ivs)
    assert sum(gtid.subtract_count(b, a).values()) == count if b else True


@settings(max_examples=150)
@given(mariadb_sets(), mariadb_gtids)
def test_mariadb_advance_then_contains_and_follows(text, g):
    after = gtid.advance(text, g)
    assert gtid.contains(after, g)
    assert gtid.canonical(after) == after and gtid.canonical(gtid.canonical(text)) == gtid.canonical(text)
    d, s, n = g.split("-")
    nxt = f"{d}-{s}-{int(n) + 1}"
    assert gtid.follows(after, nxt)
    assert sum(gtid.subtract_count(gtid.advance(after, nxt), after).values()) == 1


@settings(max_examples=150)
@given(mariadb_sets(), mariadb_sets(), mariadb_sets())
def test_mariadb_contains_is_a_partial_order(a, b, c):
    assert gtid.contains(a, a)
    if gtid.contains(a, b) and gtid.contains(b, c):
        assert gtid.contains(a, c)


def _advance_reference(text: str, g: str) -> str:
    """``advance`` as it was before it kept the last set parsed: parse, merge, print."""
    if ":" in g:
        sets = gtid.parse_mysql(text or "")
        k, n = gtid._mysql_gtid(g)
        sets[k] = gtid._merge([*sets.get(k, []), (n, n)])
        return gtid.format_mysql(sets)
    e = gtid._mariadb_entries(text or "", "GTID set")
    e[g.split("-")[0]] = g.strip()
    return ",".join(e[k] for k in sorted(e, key=int))


_UUIDS = ["3e11fa47-71ca-11e1-9e33-c80aa9429562", "4a1c0000-0000-0000-0000-000000000001",
          "00000000-0000-0000-0000-0000000000ff"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_UUIDS + [_UUIDS[0] + ":tag_a"]), st.integers(1, 40),
                          st.booleans()), max_size=60),
       st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(1, 50)), max_size=30))
def test_advance_equals_parse_merge_print(mysql_steps, maria_steps):
    """``advance`` keeps the last set it returned parsed and re-prints only the transaction's
    stream: any sequence (numbers in and out of order, repeats, tags, a set that is not the
    last one returned) gives the text parsing, merging and printing would."""
    mine = ref = ""
    other = _UUIDS[1] + ":1-3"
    for key, n, switch in mysql_steps:
        if switch:        # a set the memo did not return: parsed afresh, then kept
            mine, ref = gtid.advance(other, f"{key}:{n}"), _advance_reference(other, f"{key}:{n}")
        else:
            mine, ref = gtid.advance(mine, f"{key}:{n}"), _advance_reference(ref, f"{key}:{n}")
        assert mine == ref
    mine = ref = "0-1-1"
    for d, server, seq in maria_steps:
        g = f"{d}-{server}-{seq}"
        mine, ref = gtid.advance(mine, g), _advance_reference(ref, g)
        assert mine == ref
