"""Batching of the apply path: key partitioning keeps each key's history in one partition and
in binlog order; multi-row statements over mixed insert/update/delete of the same keys give the
same end state as applying change by change; literals are written exactly as PyMySQL would."""
from __future__ import annotations

import datetime as dt
import decimal
import threading
import time

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.errors import KeyCollision
from worker.sync import apply as apply_mod
from worker.sync.apply import Literals, Partitioner, _statements, apply_changes, resolve_tls
from worker.binlog.contract import RowsTable
from worker.events import DELETE, INSERT, UPDATE, Position

REF = RowsTable("up", "orders_1", "down", "orders", ("id", "v"), ("id",))


def _pos(i: int) -> Position:
    return Position("mysql-bin.000001", 1000 + i)


# a history of one table: ops on keys 0..5; an update may move a row to another key
ops = st.lists(st.tuples(st.sampled_from([INSERT, UPDATE, DELETE]), st.integers(0, 5), st.integers(0, 5),
                         st.integers(0, 99)), min_size=1, max_size=60)


def _history(seq):
    """Turn random ops into a valid binlog history (model state) grouped in transactions of 3."""
    state: dict[int, int] = {}
    txns, cur, n = [], [], 0
    for kind, k, k2, v in seq:
        if kind == INSERT and k not in state:
            state[k] = v
            cur.append((INSERT, REF, [(k, v)]))
        elif kind == UPDATE and k in state and (k2 == k or k2 not in state):
            before = (k, state.pop(k))
            state[k2] = v
            cur.append((UPDATE, REF, [(before, (k2, v))]))
        elif kind == DELETE and k in state:
            cur.append((DELETE, REF, [(k, state.pop(k))]))
        else:
            continue
        if len(cur) == 3:
            n += 1
            txns.append((_pos(n), cur))
            cur = []
    if cur:
        txns.append((_pos(n + 1), cur))
    return txns, state


def _key_of(ch):
    return (ch[2] or ch[3])[0]


@settings(max_examples=100, deadline=None)
@given(ops, st.integers(1, 4))
def test_every_key_lives_in_one_partition_in_binlog_order(seq, n):
    txns, _ = _history(seq)
    parts = Partitioner({"down.orders": ["id"]}, n).split(txns)
    # the expected per-key sequence, with key-changing updates split into delete + insert
    expected: dict[int, list] = {}
    for pos, events in txns:
        for kind, _, rows in events:
            for r in rows:
                if kind == UPDATE and r[0][0] != r[1][0]:
                    expected.setdefault(r[0][0], []).append((DELETE, pos))
                    expected.setdefault(r[1][0], []).append((INSERT, pos))
                elif kind == UPDATE:
                    expected.setdefault(r[1][0], []).append((UPDATE, pos))
                else:
                    expected.setdefault(r[0], []).append((kind, pos))
    owner: dict[int, int] = {}
    got: dict[int, list] = {}
    for i, part in enumerate(parts):
        for ch in part:
            k = _key_of(ch)
            assert owner.setdefault(k, i) == i, f"key {k} spread over partitions"
            got.setdefault(k, []).append((ch[0], ch[4]))
    assert got == expected


def test_held_tables_applied_points_and_safe_marks():
    other = RowsTable("up", "orders_2", "down", "orders", ("id", "v"), ("id",))
    txns = [(_pos(1), [(INSERT, REF, [(1, 1)]), (INSERT, other, [(2, 2)])]),
            (_pos(2), [(INSERT, REF, [(3, 3)])]),
            (_pos(3), [(INSERT, REF, [(4, 4)])])]
    parts = Partitioner({}, 1).split(txns, held={("up", "orders_2")}, points={("up", "orders_1"): _pos(1)},
                                     safe_until=_pos(2))
    assert [(_key_of(c), c[5]) for c in parts[0]] == [(3, True), (4, False)]
    # no downstream key known: the upstream primary key from the binlog is used
    assert parts[0][0][1][4] == ("id",)


def test_case_and_trailing_space_variants_of_a_string_key_share_a_partition():
    ref = RowsTable("up", "items", "down", "items", ("sku", "v"), ("sku",))
    txns = [(_pos(1), [(INSERT, ref, [("abc", 1)])]), (_pos(2), [(DELETE, ref, [("ABC ", 1)])])]
    for n in (2, 3, 7):
        parts = Partitioner({}, n).split(txns)
        assert len(parts) == 1 and [c[0] for c in parts[0]] == [INSERT, DELETE]
    # accents and ß: one key under utf8mb4_general_ci / unicode_ci, so one partition
    for a, b in (("café", "CAFE "), ("straße", "STRASSE"), ("Ångström", "angstrom")):
        txns = [(_pos(1), [(DELETE, ref, [(a, 1)])]), (_pos(2), [(INSERT, ref, [(b, 1)])])]
        for n in (2, 3, 7, 16):
            parts = Partitioner({}, n).split(txns)
            assert len(parts) == 1 and [c[0] for c in parts[0]] == [DELETE, INSERT], (a, b, n)


def test_consecutive_changes_become_multi_row_statements(downstream_db):
    with downstream_db.connect() as conn:
        lit = Literals(conn)
        meta = ("up", "t", "`d`.`t`", ("id", "v"), ("id",))
        ins = [(INSERT, meta, None, (i, i), _pos(1), False) for i in range(3)]
        assert list(_statements(ins, False, lit)) == ["INSERT INTO `d`.`t` (`id`, `v`) VALUES (0,0),(1,1),(2,2)"]
        assert list(_statements(ins, True, lit))[0].startswith("REPLACE INTO")
        dels = [(DELETE, meta, (i, i), None, _pos(1), False) for i in range(3)]
        assert list(_statements(dels, False, lit)) == ["DELETE FROM `d`.`t` WHERE `id` IN (0,1,2)"]
        free = (*meta, True)          # matched by its own key, no other unique index: one join
        ups = [(UPDATE, free, (i, 0), (i, 5), _pos(1), False) for i in range(2)]
        assert list(_statements(ups, False, lit)) == [
            "UPDATE `d`.`t` AS _t JOIN (SELECT 0 AS `id`, 5 AS `v` UNION ALL VALUES (1,5)) AS _v "
            "ON _t.`id` = _v.`id` SET _t.`v` = _v.`v`"]
        # a target with another unique index (no reorder flag): one UPDATE a row, in binlog order
        ups = [(UPDATE, meta, (i, 0), (i, 5), _pos(1), False) for i in range(2)]
        assert list(_statements(ups, False, lit)) == ["UPDATE `d`.`t` SET `v` = 5 WHERE `id` = 0",
                                                      "UPDATE `d`.`t` SET `v` = 5 WHERE `id` = 1"]
        safe_ups = [(UPDATE, meta, (i, 0), (i, 5), _pos(1), True) for i in range(2)]
        assert list(_statements(safe_ups, True, lit)) == [
            "INSERT INTO `d`.`t` (`id`, `v`) VALUES (0,5),(1,5) ON DUPLICATE KEY UPDATE `v` = VALUES(`v`)"]


def test_a_single_delete_by_a_composite_key_uses_the_key(downstream_db):
    """One delete behind a composite key (e.g. a merged table keyed with DM's origin columns): MariaDB
    plans a one-tuple ``(a, b) IN ((x, y))`` DELETE as a full scan that X-locks every row, so
    the statement is column equalities; the server's own plan says whether it reads by the key."""
    downstream_db.execute("CREATE TABLE m (id INT, c_source VARCHAR(128), v INT, PRIMARY KEY (id, c_source))")
    downstream_db.execute("INSERT INTO m VALUES " + ",".join(f"({i}, 's{j}', 0)" for i in range(200) for j in (1, 2)))
    downstream_db.execute("ANALYZE TABLE m")
    with downstream_db.connect() as conn:
        lit = Literals(conn)
        meta = ("up", "t", f"`{downstream_db.name}`.`m`", ("id", "c_source", "v"), ("id", "c_source"))
        one = list(_statements([(DELETE, meta, (7, "s1", 0), None, _pos(1), False)], False, lit))
        assert one == [f"DELETE FROM `{downstream_db.name}`.`m` WHERE `id` = 7 AND `c_source` = 's1'"]
        two = list(_statements([(DELETE, meta, (i, "s2", 0), None, _pos(1), False) for i in (8, 9)], False, lit))
        assert two == [f"DELETE FROM `{downstream_db.name}`.`m` WHERE (`id`, `c_source`) IN ((8,'s2'),(9,'s2'))"]
        for sql in one + two:
            plan = downstream_db.execute("EXPLAIN " + sql)
            assert plan[0][3] != "ALL" and plan[0][5] == "PRIMARY", (sql, plan)
        with conn.cursor() as cur:
            for sql in one + two:
                cur.execute(sql)
        conn.commit()
    assert downstream_db.execute("SELECT COUNT(*) FROM m")[0][0] == 397


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops, st.integers(1, 3), st.integers(1, 4), st.booleans())
def test_mixed_changes_of_the_same_keys_reach_the_model_state(downstream_db, seq, n, batch, safe):
    """Apply every partition (multi-row groups of up to ``batch``) and compare with the model."""
    downstream_db.execute("CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY, v INT)")
    downstream_db.execute("DELETE FROM orders")
    ref = REF._replace(tgt_schema=downstream_db.name)
    txns, state = _history(seq)
    txns = [(p, [(k, ref, rows) for k, _, rows in evs]) for p, evs in txns]
    kw = resolve_tls(downstream_db.params)
    parts = Partitioner({f"{downstream_db.name}.orders": ["id"]}, n).split(
        txns, safe_until=_pos(10_000) if safe else None)
    acks = [apply_changes(p, db_kwargs=kw, batch=batch, source_id="s1") for p in parts]
    assert dict(downstream_db.execute("SELECT id, v FROM orders")) == state
    if txns:   # the acknowledged point of the table is its last transaction
        top = max((a[("up", "orders_1")] for a in acks if a), key=lambda a: a[1])
        assert top[1] == txns[-1][0].pos


def test_replay_of_an_applied_partition_switches_to_safe_mode(downstream_db):
    downstream_db.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
    ref = REF._replace(tgt_schema=downstream_db.name)
    txns = [(_pos(1), [(INSERT, ref, [(1, 1), (2, 2)])]), (_pos(2), [(UPDATE, ref, [((1, 1), (1, 9))])])]
    part = Partitioner({}, 1).split(txns)[0]
    kw = resolve_tls(downstream_db.params)
    apply_changes(part, db_kwargs=kw, batch=10, source_id="s1")
    ack = apply_changes(part, db_kwargs=kw, batch=10, source_id="s1", attempt=1)   # a retried Spark task
    assert ack[("up", "orders_1")][3] == 3
    assert sorted(downstream_db.execute("SELECT id, v FROM orders")) == [(1, 9), (2, 2)]


def test_shards_of_one_target_share_a_statement_and_a_collision_names_its_shard(downstream_db):
    """Interleaved changes of two shard tables into one keyed target are one multi-row statement
    (sysbench's transactions each hit a random shard); when that statement hits a taken key, the
    error still names the shard table and position of the change that collided."""
    from worker.sync.apply import KeyCollision, _group_key

    downstream_db.execute("CREATE TABLE merged (id INT PRIMARY KEY, v INT)")
    downstream_db.execute("INSERT INTO merged VALUES (50, 0)")      # a row the task did not write
    a = ("up", "orders_1", f"`{downstream_db.name}`.`merged`", ("id", "v"), ("id",))
    b = ("up", "orders_2", a[2], a[3], a[4])
    ins = [(INSERT, a, None, (1, 1), _pos(1), False), (INSERT, b, None, (2, 2), _pos(2), False),
           (INSERT, a, None, (3, 3), _pos(3), False)]
    assert len({_group_key(c) for c in ins}) == 1
    keyless = ("up", "orders_1", a[2], ("id", "v"), ("id", "v"))
    assert _group_key((DELETE, keyless, (1, 1), None, _pos(1), False)) != \
        _group_key((DELETE, keyless[:1] + ("orders_2",) + keyless[2:], (1, 1), None, _pos(1), False))
    kw = resolve_tls(downstream_db.params)
    with downstream_db.connect() as conn:
        lit = Literals(conn)
        assert list(_statements(ins, False, lit)) == [
            f"INSERT INTO `{downstream_db.name}`.`merged` (`id`, `v`) VALUES (1,1),(2,2),(3,3)"]
    apply_changes(ins, db_kwargs=kw, batch=100, source_id="s1")
    dels = [(DELETE, b, (2, 2), None, _pos(4), False), (DELETE, a, (3, 3), None, _pos(5), False)]
    apply_changes(dels, db_kwargs=kw, batch=100, source_id="s1")
    assert sorted(downstream_db.execute("SELECT id, v FROM merged")) == [(1, 1), (50, 0)]
    collide = [(INSERT, a, None, (4, 4), _pos(6), False), (INSERT, b, None, (50, 5), _pos(7), False),
               (INSERT, a, None, (6, 6), _pos(8), False)]
    with pytest.raises(KeyCollision) as ei:
        apply_changes(collide, db_kwargs=kw, batch=100, source_id="s1")
    msg = str(ei.value)
    assert "from up.orders_2" in msg and "position=mysql-bin.000001:1007" in msg, msg
    assert sorted(downstream_db.execute("SELECT id, v FROM merged")) == [(1, 1), (50, 0)]   # rolled back


def test_a_key_taken_by_another_shard_is_a_collision_not_an_overwrite(downstream_db):
    """DM's safe mode would REPLACE the other shard's row; here nothing of the partition is
    applied and the error names the key, the value, the shard table and the position."""
    from worker.sync.apply import KeyCollision

    downstream_db.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
    downstream_db.execute("INSERT INTO orders VALUES (2, 200)")            # shard 2's row
    ref = REF._replace(tgt_schema=downstream_db.name)
    part = Partitioner({f"{downstream_db.name}.orders": ["id"]}, 1).split(
        [(_pos(1), [(INSERT, ref, [(1, 1)])]), (_pos(2), [(INSERT, ref, [(2, 2)])])])[0]
    kw = resolve_tls(downstream_db.params)
    with pytest.raises(KeyCollision) as ei:
        apply_changes(part, db_kwargs=kw, batch=1, source_id="s1")
    msg = str(ei.value)
    for part_of_msg in ("Duplicate entry '2'", "orders_1", "source=s1", "position=mysql-bin.000001:1002",
                        "(id)", "safe-mode: true"):
        assert part_of_msg in msg
    assert sorted(downstream_db.execute("SELECT id, v FROM orders")) == [(2, 200)]
    # the same rows marked safe (replay after a crash, or safe-mode: true) overwrite, as DM does
    safe = Partitioner({f"{downstream_db.name}.orders": ["id"]}, 1).split(
        [(_pos(1), [(INSERT, ref, [(1, 1)])]), (_pos(2), [(INSERT, ref, [(2, 2)])])], force_safe=True)[0]
    apply_changes(safe, db_kwargs=kw, batch=1, source_id="s1")
    assert sorted(downstream_db.execute("SELECT id, v FROM orders")) == [(1, 1), (2, 2)]


def _users(downstream_db):
    downstream_db.execute("CREATE TABLE users (id INT PRIMARY KEY, email VARCHAR(20), UNIQUE KEY uk_email (email))")
    downstream_db.execute("INSERT INTO users VALUES (1, 'a@x'), (3, 'c@x')")
    return (Partitioner({f"{downstream_db.name}.users": ["id"]}, 1, serial={f"{downstream_db.name}.users"}),
            RowsTable("up", "users_2", downstream_db.name, "users", ("id", "email"), ("id",)))


@pytest.mark.parametrize("kind", ["insert", "update"])
def test_a_row_taking_another_rows_unique_value_stops_naming_both_rows(downstream_db, kind, monkeypatch):
    """Row 1 (another shard's) holds 'a@x' downstream; a change from shard users_2 gives row 2 or
    row 3 that value.  Before, the partition was re-applied in safe mode with a warning, and
    REPLACE deleted row 1.  Now the transaction is run again a few times (another source may be
    about to give the value up), then it is a KeyCollision naming both rows, the index and the
    value, and nothing is applied."""
    monkeypatch.setattr(apply_mod, "LOCK_RETRIES", 2)
    parts, ref = _users(downstream_db)
    if kind == "insert":
        txns = [(_pos(5), [(INSERT, ref, [(2, "b@x"), (4, "a@x")])])]
        mine = "(id=4)"
    else:
        txns = [(_pos(5), [(UPDATE, ref, [((3, "c@x"), (3, "a@x"))])])]
        mine = "(id=3)"
    [part] = parts.split(txns)
    with pytest.raises(KeyCollision) as e:
        apply_changes(part, db_kwargs=resolve_tls(downstream_db.params), batch=10, source_id="s1")
    msg = str(e.value)
    for part_of_msg in (mine, "(id=1)", "`uk_email`", "email='a@x'", "up.users_2", f"position={_pos(5)}",
                        "still held after 3 attempts"):
        assert part_of_msg in msg, (part_of_msg, msg)
    assert sorted(downstream_db.execute("SELECT id, email FROM users")) == [(1, "a@x"), (3, "c@x")]


def test_a_unique_value_another_source_gives_up_meanwhile_is_taken(downstream_db):
    """Another source's worker moves row 1 off 'a@x' a moment after this one first tries to give
    the value to row 4: the transaction run again applies, and no row is deleted."""
    parts, ref = _users(downstream_db)
    [part] = parts.split([(_pos(5), [(INSERT, ref, [(4, "a@x")])])])

    def other_source():
        time.sleep(0.3)
        with downstream_db.connect() as c, c.cursor() as cur:
            cur.execute("UPDATE users SET email = 'z@x' WHERE id = 1")
            c.commit()
    t = threading.Thread(target=other_source)
    t.start()
    try:
        apply_changes(part, db_kwargs=resolve_tls(downstream_db.params), batch=10, source_id="s1")
    finally:
        t.join()
    assert sorted(downstream_db.execute("SELECT id, email FROM users")) == [(1, "z@x"), (3, "c@x"), (4, "a@x")]


VALUES = ["plain", "it's", 'dq"', "back\\slash", "nul\x00", "nl\n\r\x1a", "ünï ✓", "", None, 0, -7, 2**63,
          True, 1.5, -0.0, decimal.Decimal("12.30"), decimal.Decimal("-0.001"), b"\x00\xff'\\", bytearray(b"ab"),
          dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.datetime(2024, 1, 2), dt.date(2024, 2, 29),
          dt.time(1, 2, 3), dt.timedelta(hours=-1, seconds=1), dt.timedelta(days=2, microseconds=5)]


def test_literals_equal_pymysql_escaping_in_both_quote_modes(downstream_db):
    with downstream_db.connect() as conn:
        for mode in ("", "NO_BACKSLASH_ESCAPES"):
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_mode = %s", (mode,))
                cur.execute("SELECT 1")
                cur.fetchall()
            lit = Literals(conn)
            for v in VALUES:
                assert lit.value(v) == conn.escape(v), (mode, v)
            assert lit.row(VALUES) == "(" + ",".join(conn.escape(v) for v in VALUES) + ")"
            # and the server reads them back as the values
            with conn.cursor() as cur:
                cur.execute("SELECT " + ", ".join(lit.value(v) for v in ["it's", "back\\slash", "nul\x00", "ünï ✓"]))
                assert cur.fetchone() == ("it's", "back\\slash", "nul\x00", "ünï ✓")


def test_a_table_without_a_key_stays_in_one_partition():
    """Row-matching deletes of a keyless table scan (and lock) the whole table: partitions of it
    applied in parallel would deadlock, so all its changes go to one partition, in order."""
    ref = RowsTable("up", "log", "down", "log", ("a", "b"), ())
    txns = [(_pos(i), [(INSERT, ref, [(i, i), (i + 100, 0)]), (UPDATE, ref, [((i, i), (i, -i))]),
                       (DELETE, ref, [(i + 100, 0)])]) for i in range(1, 30)]
    for n in (2, 5):
        parts = Partitioner({}, n).split(txns)
        assert len(parts) == 1
        assert [(c[0], c[4]) for c in parts[0]] == [(k, p) for p, evs in txns for k, _, rows in evs for _ in rows]


def _blocked_update(downstream_db, hold_s: float):
    """An update of row 1 while another session holds that row's lock for ``hold_s`` seconds;
    the applying session gives up a lock wait after 1 s (MariaDB error 1205)."""
    import threading

    downstream_db.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
    downstream_db.execute("INSERT INTO orders VALUES (1, 1), (2, 2)")
    ref = REF._replace(tgt_schema=downstream_db.name)
    part = Partitioner({}, 1).split([(_pos(1), [(UPDATE, ref, [((1, 1), (1, 7))]), (INSERT, ref, [(3, 3)])])])[0]
    kw = {**resolve_tls(downstream_db.params), "init_command": "SET SESSION innodb_lock_wait_timeout = 1"}
    holder = downstream_db.connect()
    locked = threading.Event()

    def hold():
        with holder.cursor() as cur:
            holder.begin()
            cur.execute("SELECT v FROM orders WHERE id = 1 FOR UPDATE")
            locked.set()
            time.sleep(hold_s)
            holder.rollback()
    t = threading.Thread(target=hold)
    t.start()
    locked.wait(10)
    return part, kw, t, holder


def test_a_lock_wait_timeout_reruns_the_partition(downstream_db):
    part, kw, t, holder = _blocked_update(downstream_db, 2.5)
    try:
        ack = apply_changes(part, db_kwargs=kw, batch=10, source_id="s1")
    finally:
        t.join()
        holder.close()
    assert ack[("up", "orders_1")][3] == 2
    assert sorted(downstream_db.execute("SELECT id, v FROM orders")) == [(1, 7), (2, 2), (3, 3)]


def test_a_lock_conflict_that_persists_is_a_typed_error_and_nothing_is_applied(downstream_db, monkeypatch):
    import worker.sync.apply as apply_mod

    monkeypatch.setattr(apply_mod, "LOCK_RETRIES", 1)
    part, kw, t, holder = _blocked_update(downstream_db, 4.0)
    try:
        with pytest.raises(apply_mod.ApplyError) as ei:
            apply_changes(part, db_kwargs=kw, batch=10, source_id="s1")
    finally:
        t.join()
        holder.close()
    msg = str(ei.value)
    assert "lock conflict persisted after 2 attempts" in msg and "source=s1" in msg and "orders_1" in msg
    assert sorted(downstream_db.execute("SELECT id, v FROM orders")) == [(1, 1), (2, 2)]


@pytest.mark.parametrize("server", ["mariadb", "mysql"])
@pytest.mark.parametrize("other_unique", [False, True], ids=["joined", "row-by-row"])
def test_an_update_of_a_row_missing_downstream_is_counted_not_recreated(request, server, other_unique):
    """Outside safe mode an update is an UPDATE: row 9 is gone downstream (deleted there), so its
    update applies to nothing and the acknowledgement counts it.  Before, the upsert re-created
    row 9, and where another row held its new unique value, the server updated *that* row with
    row 9's values instead (row 1 would have become 'nine').  The joined statement's VALUES
    table is written for each server (``ROW(...)`` on MySQL)."""
    downstream_db = request.getfixturevalue("downstream_db" if server == "mariadb" else "mysql_downstream_db")
    db = downstream_db.name
    uk = ", UNIQUE KEY uk_email (email)" if other_unique else ""
    downstream_db.execute(f"CREATE TABLE users (id INT PRIMARY KEY, email VARCHAR(20), name VARCHAR(10){uk})")
    downstream_db.execute("INSERT INTO users VALUES (1, 'a@x', 'one'), (2, 'b@x', 'two')")
    ref = RowsTable("up", "users_1", db, "users", ("id", "email", "name"), ("id",))
    serial = {f"{db}.users"} if other_unique else set()
    txns = [(_pos(1), [(UPDATE, ref, [((2, "b@x", "two"), (2, "b@x", "TWO")),
                                      ((9, "z@x", "nine"), (9, "a@x" if other_unique else "z@x", "nine"))])])]
    [part] = Partitioner({f"{db}.users": ["id"]}, 1, serial=serial).split(txns)
    ack = apply_changes(part, db_kwargs=resolve_tls(downstream_db.params), batch=10, source_id="s1")
    assert ack[("up", "users_1")][3:] == [2, 1]           # two changes acknowledged, one of a missing row
    assert sorted(downstream_db.execute("SELECT id, email, name FROM users")) == [
        (1, "a@x", "one"), (2, "b@x", "TWO")]
    # in safe mode (a replay) the update is idempotent and re-creates what it names
    safe = Partitioner({f"{db}.users": ["id"]}, 1, serial=serial).split(
        [(_pos(2), [(UPDATE, ref, [((9, "z@x", "nine"), (9, "z@x", "nine"))])])], force_safe=True)[0]
    assert apply_changes(safe, db_kwargs=resolve_tls(downstream_db.params), batch=10,
                         source_id="s1")[("up", "users_1")][4] == 0
    assert (9, "z@x", "nine") in downstream_db.execute("SELECT id, email, name FROM users")
