"""A partition's changes regrouped into few statements (``worker.sync.apply._regroup``).

Laws (hypothesis, no services): every change is applied once; each row's changes keep their
binlog order; on a target that may not reorder (another unique index, or no key) every change
keeps its order within the target; a group is one statement's worth; regrouping never makes
more statements than cutting at every change of kind.  Then the real downstream: sysbench-like
transactions applied regrouped end in the same rows as applied one change at a time."""
from __future__ import annotations

import random

import pytest

from hypothesis import given, settings, strategies as st

from worker.binlog.contract import RowsTable
from worker.events import DELETE, INSERT, UPDATE, Position
from worker.sync.apply import (AFTER, BEFORE, KIND, META, Partitioner, _group_key, _regroup,
                               apply_changes, resolve_tls)

REORDER = ("up", "a_1", "`d`.`a`", ("id", "v"), ("id",), True)
REORDER_2 = ("up", "a_2", "`d`.`a`", ("id", "v"), ("id",), True)        # another shard, same target
SERIAL = ("up", "u_1", "`d`.`u`", ("id", "v"), ("id",), False)           # another unique index
KEYLESS = ("up", "k_1", "`d`.`k`", ("id", "v"), ("id", "v"), False)
OLD = ("up", "o_1", "`d`.`o`", ("id", "v"), ("id",))                      # no flag: never reordered
MIXED = ("up", "a_3", "`d`.`a`", ("id", "v"), ("id", "v"), False)         # a shard of `a` matched on all columns
METAS = (REORDER, REORDER_2, SERIAL, KEYLESS, OLD, MIXED)


def _pos(i: int) -> Position:
    return Position("mysql-bin.000001", 100 + i)


@st.composite
def partitions(draw):
    n = draw(st.integers(0, 60))
    out = []
    for i in range(n):
        meta = draw(st.sampled_from(METAS))
        kind = draw(st.sampled_from([INSERT, UPDATE, DELETE]))
        key = draw(st.sampled_from([1, 2, 3, "x", "X ", "y", "é", "e"]))
        image = (key, i)
        out.append((kind, meta, image if kind != INSERT else None, image if kind != DELETE else None,
                    _pos(i), draw(st.booleans()) and i % 7 == 0))
    return out


def _row(ch):
    """The rows a collation could make one: strings are never told apart."""
    meta = ch[META]
    image = ch[BEFORE] if ch[KIND] == DELETE else ch[AFTER]
    return meta[2], tuple(None if isinstance(v, str) else v for v in (image[meta[3].index(k)] for k in meta[4]))


def _reorders(meta) -> bool:
    return len(meta) > 5 and bool(meta[5])


@settings(max_examples=400, deadline=None)
@given(partitions(), st.integers(1, 5))
def test_regroup_laws(changes, batch):
    groups = _regroup(changes, batch)
    flat = [ch for g in groups for ch in g]
    assert sorted(map(id, flat)) == sorted(map(id, changes))          # each change once
    at = {id(ch): i for i, ch in enumerate(flat)}
    for i, a in enumerate(changes):
        for b in changes[i + 1:]:
            if a[META][2] != b[META][2]:
                continue                      # other targets: free to trade places
            must = not (_reorders(a[META]) and _reorders(b[META])) or _row(a) == _row(b)
            if must:
                assert at[id(a)] < at[id(b)], (a, b)
    for g in groups:
        assert 1 <= len(g) <= batch and len({_group_key(ch) for ch in g}) == 1
    runs = sum(1 for i, ch in enumerate(changes) if i == 0 or _group_key(ch) != _group_key(changes[i - 1]))
    cuts = sum((len(list(r)) + batch - 1) // batch for r in _runs(changes))
    assert len(groups) <= max(runs, cuts)


def _runs(changes):
    run: list = []
    for ch in changes:
        if run and _group_key(ch) != _group_key(run[-1]):
            yield run
            run = []
        run.append(ch)
    if run:
        yield run


def test_oltp_transactions_become_three_statements():
    """sysbench's oltp_write_only: update k, update c, delete, insert of random rows."""
    keys = random.Random(7).sample(range(10_000), 150)     # distinct rows (a repeated row orders)
    changes = []
    for t in range(50):
        a, b, c = keys[3 * t:3 * t + 3]
        changes += [(UPDATE, REORDER, (a, 0), (a, 1), _pos(t), False),
                    (UPDATE, REORDER_2, (b, 0), (b, 1), _pos(t), False),
                    (DELETE, REORDER, (c, 0), None, _pos(t), False),
                    (INSERT, REORDER, None, (c, 2), _pos(t), False)]
    assert len(_regroup(changes, 1000)) == 3
    # the same rows on a target with another unique index: one statement per change of kind
    serial = [(k, SERIAL, bf, af, p, s) for k, _, bf, af, p, s in changes]
    assert len(_regroup(serial, 1000)) == 150


def test_partitioner_marks_only_targets_matched_by_their_own_key():
    ref = RowsTable("up", "t_1", "d", "t", ("id", "v"), ("id",))
    txns = [(_pos(1), [(INSERT, ref, [(1, 1)])])]
    by_key = Partitioner({"d.t": ["id"]}, 1).split(txns)[0][0][META]
    assert by_key[5] is True
    assert Partitioner({"d.t": ["id"]}, 1, serial={"d.t"}).split(txns)[0][0][META][5] is False
    assert Partitioner({}, 1).split(txns)[0][0][META][5] is False          # upstream key only
    assert Partitioner({"d.t": ["id", "v"]}, 1).split(txns)[0][0][META][5] is False   # keyless


def test_regrouped_oltp_ends_as_applied_change_by_change(downstream_db):
    """Random sysbench-like transactions on two shards of one merged table, applied regrouped in
    small partitions, end in the rows a change-by-change model gives (and the downstream's)."""
    db = downstream_db.name
    downstream_db.execute("CREATE TABLE m (id INT PRIMARY KEY, k INT, c VARCHAR(20))")
    rng = random.Random(11)
    model = {i: (i, 0, "init") for i in range(40)}
    downstream_db.execute("INSERT INTO m VALUES " + ",".join(f"({i}, 0, 'init')" for i in model))
    refs = [RowsTable("up", f"m_{s}", db, "m", ("id", "k", "c"), ("id",)) for s in (1, 2)]
    p = Partitioner({f"{db}.m": ["id"]}, 1)
    kw = dict(db_kwargs=resolve_tls(downstream_db.params), source_id="s1")
    n = 0
    for _chunk in range(6):
        txns = []
        for _ in range(40):
            n += 1
            events = []
            for _ in range(4):
                ref = rng.choice(refs)
                i = rng.randrange(45)
                if i in model and rng.random() < 0.6:
                    old = model[i]
                    new = (i, old[1] + 1, f"c{n}")
                    model[i] = new
                    events.append((UPDATE, ref, [(old, new)]))
                elif i in model:
                    events.append((DELETE, ref, [model.pop(i)]))
                else:
                    model[i] = (i, n, f"n{n}")
                    events.append((INSERT, ref, [model[i]]))
            txns.append((_pos(n), events))
        for part in p.split(txns):
            assert part[0][META][5] is True
            apply_changes(part, batch=rng.choice([3, 50]), **kw)
    assert sorted(downstream_db.execute("SELECT id, k, c FROM m")) == sorted(model.values())


@pytest.mark.parametrize("gone, back", [("é", "e"), ("ß", "ss")])
def test_a_row_a_collation_calls_the_same_keeps_its_order(downstream_db, gone, back):
    """'é' and 'e' ('ß' and 'ss') are one key under the downstream's collation: the insert of
    one after the delete of the other must not move ahead of that delete."""
    db = downstream_db.name
    downstream_db.execute("CREATE TABLE s (sku VARCHAR(8) PRIMARY KEY, v INT) "
                          "CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    downstream_db.execute("INSERT INTO s VALUES (%s, 1)", (gone,))
    ref = RowsTable("up", "s_1", db, "s", ("sku", "v"), ("sku",))
    txns = [(_pos(1), [(INSERT, ref, [("a", 1)])]), (_pos(2), [(DELETE, ref, [(gone, 1)])]),
            (_pos(3), [(INSERT, ref, [(back, 2)])])]
    parts = Partitioner({f"{db}.s": ["sku"]}, 1).split(txns)
    apply_changes(parts[0], db_kwargs=resolve_tls(downstream_db.params), batch=10, source_id="s1")
    assert sorted(downstream_db.execute("SELECT sku, v FROM s")) == [("a", 1), (back, 2)]
