"""What the chaos test writes upstream: row changes on 2 sources x 4 shards and a stream of
shard DDLs, with exact bookkeeping so losses and duplicates can be counted afterwards.

* Rows: ``id BIGINT PRIMARY KEY, v INT, note VARCHAR(40)``.  Every id is unique across all
  shards and sources (a per-source base plus a counter), so the merged target can hold each
  row once; a row that shows up downstream without existing upstream is a duplicate (e.g. a
  deleted row resurrected by a replay), a row missing downstream is lost, a row with other
  values downstream lost an update.  Operations: single-row INSERT / UPDATE / DELETE, key-changing
  UPDATEs (``SET id = new``) and small multi-shard transactions.  Only committed work is counted.
* DDLs: rounds ``k`` of twenty-four steps, each step run on all 8 shards one by one in a random order with
  pauses, covering every DDL kind the lock treats differently: ``ADD COLUMN c_k`` with a default,
  ``ADD INDEX i_k (c_k)``, ``RENAME INDEX i_k TO j_k``, ``DROP INDEX j_k``, a rename ``CHANGE c_k r_k``, a type change
  ``MODIFY r_k BIGINT``, a generated column ``ADD COLUMN g_k ... AS (r_k + 1) VIRTUAL`` and its
  drop, ``DROP COLUMN r_k``; then ``ADD COLUMN w_k``, ``MODIFY w_k BIGINT`` on some shards only and
  ``DROP COLUMN w_k`` on all (the DROP must wait for the last shard); two-change ALTERs on
  ``p_k`` and its index ``q_k`` (added together, widened and unindexed together, narrowed back on
  some shards, dropped); two columns ``e_k``, ``f_k`` added in one ALTER, renamed to ``s_k``, ``t_k``
  in one ALTER whose two changes each shard makes in its own drawn order (opposite orders race),
  dropped in one; the same with ``a_k``, ``b_k`` renamed to ``x_k``, ``y_k`` in two statements
  with rows between, each shard in its drawn order; and ``note`` widened to
  ``VARCHAR(60)`` and narrowed back to ``VARCHAR(40)`` on all (the narrowing runs once per round, by
  the last shard; a column every shard has, so no lagging worker adds it after the others narrowed
  it, which would be a real conflict).  Every other statement names a column/index used by no other round, so
  each should change the downstream exactly once; a second successful run is visible in the
  downstream's binlog.
  Stopping finishes the current round, so the final schema is known: ``id, v, note`` + PRIMARY.
"""
from __future__ import annotations

import random
import threading
import time

import pymysql
from tests.support.writer import BackgroundWriter

SHARDS = ("orders_01", "orders_02", "orders_03", "orders_04")
COLUMNS = "id BIGINT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40)"
FINAL_COLUMNS = ["id", "v", "note"]
ID_BASE = {"s1": 1_000_000_000, "s2": 2_000_000_000}
STEPS = ("ADD COLUMN c_{k} INT DEFAULT {k}", "ADD INDEX i_{k} (c_{k})", "RENAME INDEX i_{k} TO j_{k}",
         "DROP INDEX j_{k}",
         "CHANGE c_{k} r_{k} INT DEFAULT {k}", "MODIFY r_{k} BIGINT DEFAULT {k}",
         "ADD COLUMN g_{k} BIGINT AS (r_{k} + 1) VIRTUAL", "DROP COLUMN g_{k}", "DROP COLUMN r_{k}",
         # issue 28's cases: widen on some shards then drop everywhere (the DROP must wait for the
         # last shard), a narrowing MODIFY on every shard (runs once, by the last)
         "ADD COLUMN w_{k} INT DEFAULT {k}", "?MODIFY w_{k} BIGINT DEFAULT {k}", "DROP COLUMN w_{k}",
         # multi-change ALTERs (coordinated one change at a time): a column and its index added in
         # one statement, widened and unindexed in one, narrowed back on some shards only (the
         # join stays wide: nothing runs), then dropped
         "ADD COLUMN p_{k} INT DEFAULT {k}, ADD INDEX q_{k} (p_{k})",
         "MODIFY p_{k} BIGINT DEFAULT {k}, DROP INDEX q_{k}", "?MODIFY p_{k} INT DEFAULT {k}", "DROP COLUMN p_{k}",
         # two renames packed in one ALTER, their order drawn per shard ("~"): opposite orders race
         # (the lock asks a table for its later rename first), each rename runs once
         "ADD COLUMN e_{k} INT DEFAULT {k}, ADD COLUMN f_{k} INT DEFAULT {k}",
         "~CHANGE e_{k} s_{k} INT DEFAULT {k}, CHANGE f_{k} t_{k} INT DEFAULT {k}",
         "DROP COLUMN s_{k}, DROP COLUMN t_{k}",
         # the same two renames as separate statements, rows between, each shard in its drawn
         # order ("^"): a held table reads past its first rename and the lock asks the tables to
         # run both as one ALTER (Operation.combine); each rename runs once
         "ADD COLUMN a_{k} INT DEFAULT {k}, ADD COLUMN b_{k} INT DEFAULT {k}",
         "^CHANGE a_{k} x_{k} INT DEFAULT {k}, CHANGE b_{k} y_{k} INT DEFAULT {k}",
         "DROP COLUMN x_{k}, DROP COLUMN y_{k}",
         # a retype to a type whose join holds both (VARCHAR(10) -> INT: the merged column is
         # VARCHAR(20) meanwhile) and a default change, in each shard's drawn order, rows between:
         # neither holds a table, so opposite orders never wait for each other
         "ADD COLUMN u_{k} VARCHAR(10) DEFAULT '{k}', ADD COLUMN z_{k} INT DEFAULT {k}",
         "^MODIFY u_{k} INT DEFAULT {k}, ALTER COLUMN z_{k} SET DEFAULT 7",
         "DROP COLUMN u_{k}, DROP COLUMN z_{k}",
         "MODIFY note VARCHAR(60)", "MODIFY note VARCHAR(40)")


def connect(params: dict, db: str | None = None):
    return pymysql.connect(**params, database=db, autocommit=True, charset="utf8mb4",
                           connect_timeout=5, read_timeout=60, write_timeout=60)


class Writer(BackgroundWriter):
    """Row changes on the 4 shards of one source until stopped."""

    def __init__(self, sid: str, params: dict, db: str, seed: int, *, pause: tuple[float, float] = (0.02, 0.06)):
        super().__init__(f"writer-{sid}", lambda: connect(params, db), seed, pause=pause)
        self.sid, self.params, self.db = sid, params, db
        self.next_id = ID_BASE[sid]
        self.live: dict[str, dict[int, None]] = {t: {} for t in SHARDS}   # ordered sets of live ids
        self.stats = {"inserted": 0, "updated": 0, "deleted": 0, "key_changes": 0, "transactions": 0}

    def seed_rows(self, n: int) -> None:
        with connect(self.params, self.db) as c, c.cursor() as cur:
            for t in SHARDS:
                ids = [self._new_id() for _ in range(n)]
                cur.executemany(f"INSERT INTO {t} (id, v, note) VALUES (%s, %s, %s)",
                                [(i, i % 97, f"seed-{i}") for i in ids])
                for i in ids:
                    self.live[t][i] = None
                self.stats["inserted"] += n

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    @property
    def rows_written(self) -> int:
        s = self.stats
        return s["inserted"] + s["updated"] + s["deleted"]

    def _pick(self, t: str) -> int | None:
        live = self.live[t]
        if not live:
            return None
        # mostly recent rows (hot keys change again soon), sometimes old ones
        ids = list(live) if len(live) < 64 else list(live)[-64:] if self.rng.random() < 0.7 else list(live)
        return self.rng.choice(ids)

    def step(self, conn) -> None:
        r = self.rng.random()
        if r < 0.08:
            self._transaction(conn)
            return
        t = self.rng.choice(SHARDS)
        with conn.cursor() as cur:
            if r < 0.55:
                i = self._new_id()
                cur.execute(f"INSERT INTO {t} (id, v, note) VALUES (%s, %s, %s)", (i, i % 97, f"ins-{i}"))
                self.live[t][i] = None
                self.stats["inserted"] += 1
            elif r < 0.82:
                i = self._pick(t)
                if i is None:
                    return
                cur.execute(f"UPDATE {t} SET v = v + 1, note = %s WHERE id = %s", (f"upd-{self.rng.random():.6f}", i))
                self.stats["updated"] += cur.rowcount
            elif r < 0.86:
                old = self._pick(t)
                if old is None:
                    return
                new = self._new_id()
                cur.execute(f"UPDATE {t} SET id = %s, note = %s WHERE id = %s", (new, f"moved-{old}", old))
                if cur.rowcount:
                    del self.live[t][old]
                    self.live[t][new] = None
                    self.stats["updated"] += 1
                    self.stats["key_changes"] += 1
            else:
                i = self._pick(t)
                if i is None:
                    return
                cur.execute(f"DELETE FROM {t} WHERE id = %s", (i,))
                if cur.rowcount:
                    del self.live[t][i]
                    self.stats["deleted"] += 1

    def _transaction(self, conn) -> None:
        """Insert into two shards, update and delete in a third, one commit."""
        a, b, c = self.rng.sample(SHARDS, 3)
        ins = [(a, self._new_id()), (b, self._new_id())]
        victim = self._pick(c)
        with conn.cursor() as cur:
            conn.begin()
            for t, i in ins:
                cur.execute(f"INSERT INTO {t} (id, v, note) VALUES (%s, %s, %s)", (i, i % 97, f"txn-{i}"))
            upd = 0
            dele = 0
            if victim is not None:
                cur.execute(f"UPDATE {c} SET v = v + 10 WHERE id = %s", (victim,))
                upd = cur.rowcount
                cur.execute(f"DELETE FROM {c} WHERE id = %s", (victim,))
                dele = cur.rowcount
            conn.commit()
        for t, i in ins:
            self.live[t][i] = None
        if dele:
            del self.live[c][victim]
        self.stats["inserted"] += len(ins)
        self.stats["updated"] += upd
        self.stats["deleted"] += dele
        self.stats["transactions"] += 1


class DDLStream(threading.Thread):
    """Rounds of uniquely named ADD/DROP COLUMN/INDEX on all 8 shards (see module doc)."""

    def __init__(self, dbs: dict[str, tuple[dict, str]], seed: int, *, gap: tuple[float, float] = (1.0, 4.0),
                 create_drop: bool = False):
        super().__init__(name="ddl-stream", daemon=True)
        self.dbs = dbs                     # sid -> (params, database)
        # --create-drop: in the ADD COLUMN and the rename steps of every round, a shard table is
        # created (from a shard's current definition, before or after the step) halfway through
        # the step, while the lock is open, and dropped at three quarters; it holds no rows
        self.create_drop = create_drop
        self.created_dropped: list[tuple[str, str, str]] = []   # (sid, table, "CREATE"/"DROP")
        self.rng = random.Random(seed)
        self.gap = gap
        self.stop_event = threading.Event()
        self.executed: list[tuple[str, str, str]] = []   # (sid, table, statement)
        self.rounds_done = 0
        self.round = 0
        self.errors: list[str] = []
        self.failure = ""

    def run(self) -> None:
        try:
            self._rounds()
        except Exception as e:  # noqa: BLE001 — reported in the summary
            self.failure = f"{type(e).__name__}: {e}"

    def _rounds(self) -> None:
        conns = {sid: connect(p, db) for sid, (p, db) in self.dbs.items()}
        try:
            while not self.stop_event.is_set():
                self.round += 1
                for n_step, step in enumerate(STEPS):
                    stmt = step.lstrip("?~^").format(k=self.round)
                    order = [(sid, t) for sid in self.dbs for t in SHARDS]
                    self.rng.shuffle(order)
                    if step.startswith("?"):        # only some shards take this step
                        order = order[:self.rng.randint(1, len(order) - 1)]
                    extra = (self.rng.choice(sorted(self.dbs)), f"orders_x{self.round}_{n_step}") \
                        if self.create_drop and n_step in (0, STEPS.index("CHANGE c_{k} r_{k} INT DEFAULT {k}")) else None
                    for n, (sid, t) in enumerate(order):
                        if extra is not None and n == len(order) // 2:
                            self._create_like(conns, extra[0], extra[1], self.rng.choice(SHARDS))
                        if extra is not None and n == 3 * len(order) // 4:
                            self._run(conns, extra[0], f"DROP TABLE {extra[1]}")
                            self.created_dropped.append((extra[0], extra[1], "DROP"))
                        if step.startswith("~"):       # this shard's order of the ALTER's changes
                            parts = stmt.split(", ")
                            self.rng.shuffle(parts)
                            self._alter(conns, sid, t, ", ".join(parts))
                        elif step.startswith("^"):     # one statement each, in this shard's order
                            parts = stmt.split(", ")
                            self.rng.shuffle(parts)
                            for i, part in enumerate(parts):
                                if i and not self.stop_event.is_set():
                                    self.stop_event.wait(self.rng.uniform(0.1, 0.5))   # rows between
                                self._alter(conns, sid, t, part)
                        else:
                            self._alter(conns, sid, t, stmt)
                        # finishing a round after stop: no more pauses
                        if not self.stop_event.is_set():
                            self.stop_event.wait(self.rng.uniform(*self.gap))
                self.rounds_done += 1
        finally:
            for c in conns.values():
                c.close()

    def _alter(self, conns, sid: str, t: str, stmt: str) -> None:
        self._run(conns, sid, f"ALTER TABLE {t} {stmt}")
        self.executed.append((sid, t, stmt))

    def _create_like(self, conns, sid: str, name: str, model: str) -> None:
        """A full CREATE TABLE with ``model``'s current definition (not ``CREATE ... LIKE``, whose
        text names a table the worker may no longer find upstream when it reads the statement)."""
        with conns[sid].cursor() as cur:
            cur.execute(f"SHOW CREATE TABLE {model}")
            ddl = cur.fetchone()[1]
        self._run(conns, sid, ddl.replace(f"CREATE TABLE `{model}`", f"CREATE TABLE `{name}`", 1))
        self.created_dropped.append((sid, name, "CREATE"))

    def _run(self, conns, sid: str, sql: str) -> None:
        for _attempt in range(20):
            try:
                with conns[sid].cursor() as cur:
                    cur.execute(sql)
                return
            except pymysql.MySQLError as e:   # lock wait with a writer: try again
                self.errors.append(f"{sid}: {sql}: {e}")
                time.sleep(0.5)
                if isinstance(e, (pymysql.err.OperationalError, pymysql.err.InterfaceError)) and e.args \
                        and e.args[0] in (2006, 2013, 2003):
                    p, db = self.dbs[sid]
                    conns[sid] = connect(p, db)
        raise RuntimeError(f"upstream refused {sql} on {sid} 20 times: {self.errors[-1]}")

    def stop(self) -> None:
        """Finish the current round (so the final schema is known), then stop."""
        self.stop_event.set()
        self.join(300)
