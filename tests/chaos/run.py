"""Chaos test: replicate 2 sources x 4 shards into one target while processes and servers die.

    .venv/bin/python -m tests.chaos.run --seed 7 --faults 20 --duration 600     # long form
    .venv/bin/python -m tests.chaos.run --seed 7 --faults 5 --duration 100      # short form (CI)

Runs on a PRIVATE etcd + MariaDB set (``tests/chaos/services.py``: ports +2000, data under
``.services/chaos``), 2 masters and 2 workers (real ``shardctl`` subprocesses).  While writers
change rows and a DDL stream alters the shards (``tests/chaos/workload.py``), faults are injected
at random moments (seeded): SIGKILL + restart of a worker, SIGKILL of the leader master (the
follower must take over; the killed one is restarted), SIGKILL + restart of etcd, SIGKILL +
restart of the downstream MariaDB.  Then writers stop, the DDL round is finished, and the run
waits for catch-up (``shardctl check`` equal and no DDL lock left).

Prints ONE summary line (and, with ``--json-out``, the same figures as JSON).  How each is measured:

* ``rows_written``: committed upstream inserts + updates + deletes (the writers count after commit).
* ``rows_lost``: ids present upstream but missing downstream; ``rows_stale``: ids whose values differ
  (a lost update) — both from an exact id-by-id comparison of all shards with the target (and
  cross-checked by ``worker.check.check_task``: ``check=equal|different``).
* ``rows_duplicated``: ids present downstream but not upstream (e.g. a deleted row resurrected by a
  replay) + downstream rows beyond one per id; ``row_counts``: upstream vs downstream ``COUNT(*)``.
* ``ddls_applied_twice``: statements of the DDL stream (each names a unique column/index) that the
  downstream's binary log shows as successfully executed more than once on the target (not the
  widening ``MODIFY``, which DM runs for every shard: idempotent, see the design doc's S9; the
  narrowing ``MODIFY note`` counts as twice only when two narrowings follow each other with no
  widening between: a source that widens and narrows back before a lagging one widens makes the
  join narrow twice, legitimately; nor ``ADD``/``DROP COLUMN`` of ``g_k`` and ``w_k``, which run
  once more each time the join gains and loses them while a lagging table is a step behind: their
  counts must be equal instead);
  ``ddls_applied`` is how many the binlog shows in total; ``ddls_missing``: a finished round's
  ``ADD COLUMN c_k``, rename ``CHANGE c_k r_k``, ``MODIFY r_k``, ``ADD COLUMN g_k`` (generated),
  ``DROP COLUMN g_k`` or ``DROP COLUMN r_k`` not in the binlog, or ``ADD INDEX i_k`` and ``DROP INDEX
  i_k`` counts that differ (the lock adds an index only once every shard has it and drops it at the
  first drop, so when a lagging worker makes the phases overlap neither runs —
  ``index_rounds_never_applied`` counts those); ``schema_ok`` that the final target has exactly
  ``id, v, note`` and only the PRIMARY index (``--keyless``: the tables have no primary/unique
  key, only the plain index ``k_id`` on id, which must be all that is left).
* ``locks_left``: locks of the task in ``shardctl show-ddl-locks`` after catch-up.
* ``unexpected_exits``: master/worker processes that died without being killed by the harness
  (no process may exit on a transient error).
"""
from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import yaml

from tests.support.cluster import ProcessCluster
from tests.support.probes import wait_for

from . import services
from .workload import FINAL_COLUMNS, SHARDS, DDLStream, Writer, connect

FAULTS = ("worker_kill", "master_kill", "etcd_restart", "downstream_restart", "master_kill_in_resolution")


class Harness:
    def __init__(self, seed: int, faults: int, duration: float, *, catchup_timeout: float = 300,
                 work: Path | None = None, keep: bool = False, verbose: bool = True, keyless: bool = False,
                 create_drop: bool = False):
        self.seed, self.n_faults, self.duration = seed, faults, duration
        self.keyless = keyless        # shards without a primary/unique key (checkpoint rule 10)
        self.create_drop = create_drop   # shard tables created and dropped while locks are open
        self.rng = random.Random(seed)
        self.catchup_timeout = catchup_timeout
        self.keep = keep
        self.verbose = verbose
        self.work = work or Path(tempfile.mkdtemp(prefix=f"shardmerge-chaos-{seed}-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.run_id = f"{seed}_{uuid.uuid4().hex[:6]}"
        self.db = f"chaos_{self.run_id}"               # same name on every server
        self.task = f"chaos_{self.run_id}"
        self.injected: Counter = Counter()
        self.events: list[str] = []
        self.takeovers: list[float] = []
        self.unexpected: list[str] = []
        self.fault_errors: list[str] = []
        self.statuses = open(self.work / "query-status.jsonl", "a")
        self.waiting_seen: Counter = Counter()

    def say(self, msg: str) -> None:
        line = f"[chaos {time.strftime('%H:%M:%S')}] {msg}"
        self.events.append(line)
        if self.verbose:
            print(line, file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        self.svc = services.start()
        self.mysql = self.svc["mysql"]
        self.prefix = f"/shardmerge-chaos/{self.run_id}/"
        self.say(f"services up: etcd {self.svc['etcd']}; work dir {self.work}; task {self.task}")
        starts = {}
        for sid, server in (("s1", "source1"), ("s2", "source2")):
            with connect(self.mysql[server]) as c, c.cursor() as cur:
                cur.execute(f"CREATE DATABASE {self.db}")
                cur.execute("SHOW MASTER STATUS")
                f, p = cur.fetchone()[:2]
                cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (f, p))
                starts[sid] = (f, int(p), cur.fetchone()[0] or "")
                for t in SHARDS:
                    key = "KEY k_id (id)" if self.keyless else "PRIMARY KEY (id)"
                    cur.execute(f"CREATE TABLE {self.db}.{t} (id BIGINT NOT NULL, v INT NOT NULL, note VARCHAR(40), {key})")
        with connect(self.mysql["downstream"]) as c, c.cursor() as cur:
            cur.execute(f"CREATE DATABASE {self.db}")
        self.writers = {sid: Writer(sid, self.mysql[server], self.db, self.seed * 10 + n)
                        for n, (sid, server) in enumerate((("s1", "source1"), ("s2", "source2")))}
        for w in self.writers.values():
            w.seed_rows(20)
        self.ddl = DDLStream({sid: (self.mysql[server], self.db) for sid, server in
                              (("s1", "source1"), ("s2", "source2"))}, self.seed * 10 + 7,
                              create_drop=self.create_drop)
        self.cluster = ProcessCluster(self.svc["etcd"], self.mysql, self.work, self.prefix, masters=("m1", "m2"))
        self.task_file = self.work / f"{self.task}.yaml"
        self.task_file.write_text(yaml.safe_dump(self._task(starts)))
        self.cluster.start()
        self._wait(self._bound, 120, "both sources bound")
        rc, doc = self.cluster.ctl("start-task", str(self.task_file))
        if rc != 0:
            raise RuntimeError(f"start-task failed: {doc}")
        self._wait(self._running, 180, "task Running on s1 and s2")
        self.say("task running")

    def _task(self, starts) -> dict:
        down = {k: self.mysql["downstream"][k] for k in ("host", "port", "user", "password")}
        routes, bals, insts = {}, {}, []
        for sid in ("s1", "s2"):
            routes[f"r-{sid}"] = {"schema-pattern": self.db, "table-pattern": "orders_*",
                                  "target-schema": self.db, "target-table": "orders"}
            bals[f"b-{sid}"] = {"do-dbs": [self.db]}
            f, p, g = starts[sid]
            insts.append({"source-id": sid, "route-rules": [f"r-{sid}"], "block-allow-list": f"b-{sid}",
                          "syncer": {"worker-count": 2, "batch": 100},
                          "meta": {"binlog-name": f, "binlog-pos": p, "binlog-gtid": g}})
        return {"name": self.task, "task-mode": "incremental", "shard-mode": "optimistic",
                "meta-schema": f"{self.db}_meta", "target-database": down, "routes": routes,
                "block-allow-list": bals, "mysql-instances": insts}

    def _wait(self, cond, timeout: float, what: str, interval: float = 1.0):
        """``wait_for`` that notices a process death we did not cause at every try."""
        return wait_for(cond, timeout, what, self.cluster.diagnostics, interval=interval,
                        each=self.watch_processes, error=TimeoutError)

    def _bound(self) -> bool:
        rc, doc = self.cluster.ctl("operate-source", "show")
        got = {s["source"]: s["worker"] for s in doc.get("sources", [])} if isinstance(doc, dict) else {}
        return bool(got.get("s1")) and bool(got.get("s2"))

    def subtasks(self) -> dict:
        rc, doc = self.cluster.ctl("query-status", self.task)
        if not isinstance(doc, dict):
            return {}
        self.statuses.write(json.dumps({"t": time.time(), "doc": doc}) + "\n")
        out = {}
        for s in doc.get("sources", []):
            for st in s.get("subTaskStatus") or []:
                out[s["sourceStatus"]["source"]] = st
                if st.get("waitingFor"):
                    self.waiting_seen[re.sub(r"\d+", "N", st["waitingFor"])[:120]] += 1
        return out

    def _running(self) -> bool:
        st = self.subtasks()
        return all(st.get(s, {}).get("stage") == "Running" for s in ("s1", "s2"))

    # ------------------------------------------------------------------ processes
    def watch_processes(self) -> None:
        """A master/worker that died without our kill is a finding: record it and restart it."""
        for p in self.cluster.procs():
            if p.proc is not None and not p.alive() and not p.expected_dead:
                rc = p.proc.returncode
                self.unexpected.append(f"{p.name} exited with {rc}")
                self.say(f"UNEXPECTED EXIT: {p.name} rc={rc}; tail:\n{p.tail(15)}")
                p.start()

    # ------------------------------------------------------------------ faults
    def schedule(self) -> list[tuple[float, str]]:
        kinds = list(FAULTS) * (self.n_faults // len(FAULTS)) + \
            self.rng.sample(FAULTS, self.n_faults % len(FAULTS))
        self.rng.shuffle(kinds)
        times = sorted(self.rng.uniform(0.05, 0.9) * self.duration for _ in kinds)
        return list(zip(times, kinds))

    def inject(self, kind: str) -> None:
        t0 = time.monotonic()
        if kind == "worker_kill":
            sid = self.rng.choice(sorted(self.cluster.workers))
            w = self.cluster.workers[sid]
            w.kill()
            down = self.rng.uniform(0.0, 6.0)
            self.say(f"fault worker_kill: SIGKILL {w.name}; restart in {down:.1f}s")
            time.sleep(down)
            w.start()
        elif kind == "master_kill":
            lead = self.cluster.leader() or self.cluster.wait_leader(60)
            self.cluster.masters[lead].kill()
            self.say(f"fault master_kill: SIGKILL leader {lead}")
            other = self.cluster.wait_leader(90, exclude=lead)
            took = time.monotonic() - t0
            self.takeovers.append(took)
            self.say(f"  {other} took over after {took:.1f}s")
            time.sleep(self.rng.uniform(0.5, 4.0))
            self.cluster.masters[lead].start()
        elif kind == "master_kill_in_resolution":
            # issue 28: the leader dies while a lock has held tables or an answer not yet done
            deadline = time.monotonic() + 60
            seen = ""
            while time.monotonic() < deadline and not seen:
                try:
                    for lk in self.locks():
                        states = {o.get("state") for o in lk.get("owners", [])}
                        if states & {"held", "executing", "redirected"}:
                            seen = f"{lk.get('ID')} ({', '.join(sorted(s for s in states if s))})"
                except Exception:  # noqa: BLE001 — the master may be busy; ask again
                    pass
                if not seen:
                    time.sleep(0.2)
            lead = self.cluster.leader() or self.cluster.wait_leader(60)
            self.cluster.masters[lead].kill()
            self.say(f"fault master_kill_in_resolution: SIGKILL leader {lead} while {seen or 'no lock was open'}")
            other = self.cluster.wait_leader(90, exclude=lead)
            self.takeovers.append(time.monotonic() - t0)
            self.say(f"  {other} took over")
            time.sleep(self.rng.uniform(0.5, 2.0))
            self.cluster.masters[lead].start()
        elif kind == "etcd_restart":
            services.kill_etcd()
            down = self.rng.uniform(1.0, 8.0)
            self.say(f"fault etcd_restart: SIGKILL etcd; down for {down:.1f}s")
            time.sleep(down)
            services.start_etcd()
        elif kind == "downstream_restart":
            services.kill_downstream()
            down = self.rng.uniform(2.0, 10.0)
            self.say(f"fault downstream_restart: SIGKILL downstream MariaDB; down for {down:.1f}s")
            time.sleep(down)
            services.start_downstream()
        self.injected[kind] += 1
        self.say(f"  {kind} done in {time.monotonic() - t0:.1f}s")

    # ------------------------------------------------------------------ the run
    def run(self) -> dict:
        t_start = time.monotonic()
        self.setup()
        for w in self.writers.values():
            w.start()
        self.ddl.start()
        plan = self.schedule()
        self.waiting_seen.clear()          # only what was reported during the chaos counts
        self.say("fault plan: " + ", ".join(f"{k}@{t:.0f}s" for t, k in plan))
        t0 = time.monotonic()
        last_status = 0.0
        while True:
            now = time.monotonic() - t0
            if plan and now >= plan[0][0]:
                kind = plan.pop(0)[1]
                try:
                    self.inject(kind)
                except Exception as e:  # noqa: BLE001 — e.g. no leader elected: a finding, go on
                    self.fault_errors.append(f"{kind}: {type(e).__name__}: {str(e)[:300]}")
                    self.say(f"FAULT FAILED {kind}: {type(e).__name__}: {str(e)[:2000]}")
                    for p in self.cluster.procs():      # leave every process running
                        if not p.alive() and p.expected_dead:
                            p.start()
                    for fn in (services.start_etcd, services.start_downstream):
                        fn()
                continue
            if now >= self.duration and not plan:
                break
            if self.ddl.failure:
                self.say(f"DDL stream failed: {self.ddl.failure}")
                break
            self.watch_processes()
            if time.monotonic() - last_status > 5:
                last_status = time.monotonic()
                try:
                    self.subtasks()
                except Exception:  # noqa: BLE001 — sampling only
                    pass
            time.sleep(0.5)
        self.say("stopping writers, finishing the DDL round")
        self.stop_extra_load()
        for w in self.writers.values():
            w.stop()
        self.ddl.stop()
        self.say(f"writers stopped: {sum(w.rows_written for w in self.writers.values())} rows written; "
                 f"DDL rounds {self.ddl.rounds_done}, statements {len(self.ddl.executed)}")
        caught_up, check_rep, catchup_s = self.catch_up()
        result = self.measure(check_rep)
        result.update(caught_up=caught_up, catchup_seconds=round(catchup_s, 1),
                      total_seconds=round(time.monotonic() - t_start, 1))
        return result

    def stop_extra_load(self) -> None:
        """Hook for a subclass's own load (the soak's bulk writers): stopped with the writers."""

    def catch_up(self):
        from coordinator.config import load_source, load_task
        from worker.check import check_task
        task = load_task(str(self.task_file))
        srcs = {sid: load_source(f) for sid, f in self.cluster.source_files.items()}
        t0 = time.monotonic()
        rep = None
        while time.monotonic() - t0 < self.catchup_timeout:
            self.watch_processes()
            try:
                rep = check_task(task, srcs)
                locks = self.locks()
                st = self.subtasks()
                # rows equal compares only the columns every side has, and a lagging worker may be
                # between two locks: the final schema downstream shows it has read the whole round
                # (CI, seed 7 keyless: "caught up" 0.3 s after the writers stopped, with r_1/g_1
                # still downstream and the round's last lock opened a moment later)
                if (rep.equal and not locks and self.target_schema() == self.final_schema()
                        and all(st.get(s, {}).get("stage") == "Running" for s in ("s1", "s2"))):
                    self.say(f"caught up after {time.monotonic() - t0:.1f}s")
                    return True, rep, time.monotonic() - t0
            except Exception as e:  # noqa: BLE001 — servers may still be recovering
                self.say(f"catch-up probe failed: {type(e).__name__}: {e}")
            time.sleep(3)
        self.say("NOT caught up within the catch-up timeout")
        try:
            rep = check_task(task, srcs)
        except Exception as e:  # noqa: BLE001
            self.say(f"final check failed: {e}")
        return False, rep, time.monotonic() - t0

    def final_schema(self) -> tuple[list[str], list[str]]:
        return FINAL_COLUMNS, (["k_id"] if self.keyless else ["PRIMARY"])

    def target_schema(self) -> tuple[list[str], list[str]]:
        """The merged target's columns (in order) and index names, downstream."""
        with connect(self.mysql["downstream"], self.db) as c, c.cursor() as cur:
            cur.execute("SHOW COLUMNS FROM orders")
            cols = [r[0] for r in cur.fetchall()]
            cur.execute("SHOW INDEX FROM orders")
            return cols, sorted({r[2] for r in cur.fetchall()})

    def locks(self) -> list:
        rc, doc = self.cluster.ctl("show-ddl-locks", self.task)
        if not isinstance(doc, dict):
            raise RuntimeError(f"show-ddl-locks failed: {doc}")
        return doc.get("locks") or []

    # ------------------------------------------------------------------ figures
    def measure(self, check_rep) -> dict:
        up: dict[int, tuple] = {}
        up_count = 0
        for server in ("source1", "source2"):
            with connect(self.mysql[server], self.db) as c, c.cursor() as cur:
                for t in SHARDS:
                    cur.execute(f"SELECT id, v, note FROM {t}")
                    for i, v, n in cur.fetchall():
                        up_count += 1
                        up[i] = (v, n)
        with connect(self.mysql["downstream"], self.db) as c, c.cursor() as cur:
            cur.execute("SELECT id, v, note FROM orders")
            rows = cur.fetchall()
        cols, indexes = self.target_schema()
        per_id = Counter(r[0] for r in rows)
        down = {r[0]: (r[1], r[2]) for r in rows}
        lost = [i for i in up if i not in down]
        extra = [i for i in down if i not in up]
        stale = [i for i in up if i in down and down[i] != up[i]]
        dup = len(extra) + sum(n - 1 for n in per_id.values())
        ddl_counts, note_seq = self.downstream_ddl_counts()
        # an identical widening MODIFY runs downstream for every shard, as in DM (design doc S9:
        # the table grows, so each shard's DDL is returned; re-running it changes nothing and
        # succeeds, so the binlog shows it once per shard): only "missing" applies to it
        # A column added and dropped by consecutive steps (the generated g_k) may run twice when
        # one table is a whole step ahead of the others: after a rename the resolving table goes
        # on while the held ones replay, so it adds and drops g_k while they lack it (joined
        # schema gains and loses it), then they add and drop it again.  As for indexes, the
        # invariant there is "as many ADD as DROP, at least one".
        # The same holds for w_k (added, widened on some shards, dropped): a table held earlier in
        # the round replays later than its siblings, so all the others may add and drop w_k
        # before it adds it (seen with seed 7: three ADD/DROP pairs, each valid when it ran).
        paired = {f"{a} COLUMN {c}_{k}" for k in range(1, self.ddl.rounds_done + 2) for a in ("ADD", "DROP")
                  for c in ("g", "w", "p")}
        twice = {k: n for k, n in ddl_counts.items() if n > 1 and not k.startswith("MODIFY ") and k not in paired}
        # the narrowing MODIFY of `note` runs once each time the join narrows, by the last shard
        # (issue 28).  That is once per round when the shards' phases overlap, but when one
        # source widens and narrows back before a lagging source widens, the join narrows twice
        # (40 -> 60 -> 40 -> 60 -> 40): ran twice means two narrowings with no widening between
        narrowed = ddl_counts.get("MODIFY COLUMN note varchar(40)", 0)
        repeats = sum(1 for a, b in zip(note_seq, note_seq[1:]) if a == b == "varchar(40)")
        if repeats:
            twice["MODIFY COLUMN note varchar(40)"] = narrowed
        # Columns: the lock runs ADD COLUMN at the first shard's add and DROP COLUMN at the last
        # shard's drop, so every finished round must show both exactly once.  Indexes: ADD INDEX
        # runs only when ALL shards have the index and DROP INDEX at the first drop, so when the
        # phases overlap (a lagging worker still adding while others already drop) neither runs;
        # the invariant is "as many ADD INDEX i_k as DROP INDEX i_k".
        rounds = range(1, self.ddl.rounds_done + 1)
        once = ("ADD COLUMN c_{k}", "CHANGE COLUMN c_{k}", "MODIFY COLUMN r_{k}", "ADD COLUMN g_{k}",
                "DROP COLUMN g_{k}", "DROP COLUMN r_{k}", "ADD COLUMN w_{k}", "DROP COLUMN w_{k}",
                "ADD COLUMN p_{k}", "DROP COLUMN p_{k}", "MODIFY COLUMN p_{k}", "ADD COLUMN e_{k}",
                "ADD COLUMN f_{k}", "CHANGE COLUMN e_{k}", "CHANGE COLUMN f_{k}", "DROP COLUMN s_{k}",
                "DROP COLUMN t_{k}", "ADD COLUMN a_{k}", "ADD COLUMN b_{k}", "CHANGE COLUMN a_{k}",
                "CHANGE COLUMN b_{k}", "DROP COLUMN x_{k}", "DROP COLUMN y_{k}")
        missing = [name.format(k=k) for k in rounds for name in once if ddl_counts.get(name.format(k=k), 0) == 0]
        missing += [f"COLUMN {c}_{k}: {ddl_counts.get(f'ADD COLUMN {c}_{k}', 0)} ADD vs "
                    f"{ddl_counts.get(f'DROP COLUMN {c}_{k}', 0)} DROP" for k in rounds for c in ("g", "w", "p")
                    if ddl_counts.get(f"ADD COLUMN {c}_{k}", 0) != ddl_counts.get(f"DROP COLUMN {c}_{k}", 0)]
        if self.ddl.rounds_done and narrowed < self.ddl.rounds_done:
            missing.append(f"MODIFY COLUMN note varchar(40): {narrowed} runs for {self.ddl.rounds_done} rounds")
        missing += [f"INDEX i_{k}: {ddl_counts.get(f'ADD INDEX i_{k}', 0)} ADD vs "
                    f"{ddl_counts.get(f'DROP INDEX i_{k}', 0)} DROP" for k in rounds
                    if ddl_counts.get(f"ADD INDEX i_{k}", 0) != ddl_counts.get(f"DROP INDEX i_{k}", 0)]
        # the renamed index: the first shard's rename drops i_k, the last one's adds j_k, the first
        # DROP INDEX j_k drops it (so also as many ADD as DROP of j_k)
        missing += [f"INDEX {x}_{k}: {ddl_counts.get(f'ADD INDEX {x}_{k}', 0)} ADD vs "
                    f"{ddl_counts.get(f'DROP INDEX {x}_{k}', 0)} DROP" for k in rounds for x in ("q", "j")
                    if ddl_counts.get(f"ADD INDEX {x}_{k}", 0) != ddl_counts.get(f"DROP INDEX {x}_{k}", 0)]
        index_rounds_skipped = sum(1 for k in rounds if not ddl_counts.get(f"ADD INDEX i_{k}"))
        try:
            locks_left = len(self.locks())
        except Exception as e:  # noqa: BLE001
            self.say(f"show-ddl-locks failed at the end: {e}")
            locks_left = -1
        res = {
            "seed": self.seed, "faults": sum(self.injected.values()), "fault_kinds": dict(self.injected),
            "rows_written": sum(w.rows_written for w in self.writers.values()),
            "rows_lost": len(lost), "rows_stale": len(stale), "rows_duplicated": dup,
            "row_counts": {"upstream": up_count, "downstream": len(rows)},
            "ddl_statements_upstream": len(self.ddl.executed), "ddl_rounds": self.ddl.rounds_done,
            "tables_created_dropped": len(self.ddl.created_dropped),
            "ddls_applied": sum(ddl_counts.values()), "ddls_applied_twice": len(twice),
            "ddls_missing": len(missing), "ddls_missing_detail": missing,
            "index_rounds_never_applied": index_rounds_skipped,
            "ddls_twice_detail": twice, "note_modifies": note_seq, "schema_ok": (cols, indexes) == self.final_schema(),
            "keyless": self.keyless, "create_drop": self.create_drop,
            "schema": {"columns": cols, "indexes": indexes},
            "locks_left": locks_left, "unexpected_exits": len(self.unexpected),
            "fault_errors": self.fault_errors,
            "unexpected_detail": self.unexpected,
            "check": ("equal" if check_rep is not None and check_rep.equal else
                      "different" if check_rep is not None else "error"),
            "check_detail": check_rep.to_json() if check_rep is not None and not check_rep.equal else None,
            "leader_takeover_s": [round(x, 1) for x in self.takeovers],
            "ddl_stream_failure": self.ddl.failure,
            "examples": {"lost": lost[:5], "stale": stale[:5], "extra": extra[:5]},
            "waiting_for_seen": dict(self.waiting_seen.most_common(12)),
            "work_dir": str(self.work),
        }
        return res

    def downstream_ddl_counts(self) -> tuple[Counter, list[str]]:
        """Successful DDLs on the target, from the downstream's binlog, by (action, name); and
        the types `note`'s MODIFYs set, in binlog order."""
        pat = re.compile(r"\b(ADD|DROP|CHANGE|MODIFY)\s+(COLUMN\s+|INDEX\s+|KEY\s+)?`?([abcefigjrstwpqxy]_\d+)`?", re.I)
        note = re.compile(r"\bMODIFY\s+(?:COLUMN\s+)?`?note`?\s+(varchar\(\d+\))", re.I)
        counts: Counter = Counter()
        note_seq: list[str] = []         # `note`'s MODIFY types in binlog order
        with connect(self.mysql["downstream"]) as c, c.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            files = [r[0] for r in cur.fetchall()]
            for f in files:
                cur.execute(f"SHOW BINLOG EVENTS IN '{f}'")
                for ev in cur.fetchall():
                    info = ev[5] or ""
                    if ev[2] != "Query" or "ALTER" not in info.upper() or self.db not in info:
                        continue
                    for action, kind, name in pat.findall(info):
                        kind = kind.strip().upper().replace("KEY", "INDEX") or ("INDEX" if name[0] in "ijq" else "COLUMN")
                        counts[f"{action.upper()} {kind} {name}"] += 1
                    for typ in note.findall(info):
                        counts[f"MODIFY COLUMN note {typ.lower()}"] += 1
                        note_seq.append(typ.lower())
        return counts, note_seq

    # ------------------------------------------------------------------ cleanup
    def cleanup(self) -> None:
        try:
            self.cluster.stop()
        except Exception:  # noqa: BLE001
            pass
        self.statuses.close()
        if self.keep:
            return
        for server in ("source1", "source2", "downstream"):
            try:
                with connect(self.mysql[server]) as c, c.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS {self.db}")
                    cur.execute(f"DROP DATABASE IF EXISTS {self.db}_meta")
            except Exception:  # noqa: BLE001
                pass
        try:
            from coordinator.etcd_client import connect as etcd_connect
            cl = etcd_connect(self.svc["etcd"])
            cl.delete_prefix(self.prefix)
            cl.close()
        except Exception:  # noqa: BLE001
            pass


def summary_line(r: dict) -> str:
    kinds = ",".join(f"{k}={v}" for k, v in sorted(r["fault_kinds"].items()))
    extra = f"tables_created_dropped={r['tables_created_dropped']} " if r.get("create_drop") else ""
    return (f"CHAOS seed={r['seed']} keyless={r.get('keyless', False)} faults={r['faults']} ({kinds}) {extra}rows_written={r['rows_written']} "
            f"rows_lost={r['rows_lost']} rows_stale={r['rows_stale']} rows_duplicated={r['rows_duplicated']} "
            f"ddls_applied={r['ddls_applied']} ddls_applied_twice={r['ddls_applied_twice']} "
            f"ddls_missing={r['ddls_missing']} "
            f"locks_left={r['locks_left']} check={r['check']} schema_ok={r['schema_ok']} "
            f"unexpected_exits={r['unexpected_exits']} fault_errors={len(r['fault_errors'])} "
            f"caught_up={r['caught_up']} "
            f"rows={r['row_counts']['upstream']}/{r['row_counts']['downstream']} "
            f"catchup={r['catchup_seconds']}s total={r['total_seconds']}s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.chaos.run", description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--faults", type=int, default=20)
    ap.add_argument("--duration", type=float, default=600, help="seconds of writes + faults")
    ap.add_argument("--catchup-timeout", type=float, default=300)
    ap.add_argument("--json-out", default="", help="write the figures as JSON here")
    ap.add_argument("--work-dir", default="", help="logs and files (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the databases and etcd keys")
    ap.add_argument("--clean", action="store_true", help="remove the work dir (logs) after a clean run")
    ap.add_argument("--stop-services", action="store_true", help="stop the private services at the end")
    ap.add_argument("--keyless", action="store_true", help="shard tables without a primary/unique key "
                    "(a plain index on id): replay after a crash must still be exact")
    ap.add_argument("--create-drop", action="store_true", help="in every round's ADD COLUMN and rename steps, "
                    "create a shard table halfway through the step (the lock is open) and drop it at three quarters")
    a = ap.parse_args(argv)
    h = Harness(a.seed, a.faults, a.duration, catchup_timeout=a.catchup_timeout,
                work=Path(a.work_dir) if a.work_dir else None, keep=a.keep, keyless=a.keyless,
                create_drop=a.create_drop)
    ok = False
    try:
        r = h.run()
        if a.json_out:
            Path(a.json_out).write_text(json.dumps(r, indent=2, default=str))
        print(summary_line(r), flush=True)
        ok = (r["caught_up"] and r["rows_lost"] == 0 and r["rows_stale"] == 0 and r["rows_duplicated"] == 0
              and r["ddls_applied_twice"] == 0 and r["ddls_missing"] == 0 and r["locks_left"] == 0 and r["unexpected_exits"] == 0
              and r["schema_ok"] and not r["fault_errors"])
        if not ok:
            print(json.dumps({k: r[k] for k in ("check_detail", "ddls_twice_detail", "ddls_missing_detail", "examples",
                                                "unexpected_detail", "fault_errors", "waiting_for_seen", "work_dir")},
                             default=str)[:8000], file=sys.stderr)
    finally:
        h.cleanup()
        if a.stop_services:
            services.stop()
        if ok and a.clean:
            shutil.rmtree(h.work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
