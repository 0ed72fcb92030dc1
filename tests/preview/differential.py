"""Differential test of ``ddl-preview``: a random DDL sequence is previewed as a rollout plan,
then run for real on the shards of a running task (real master, workers, MariaDB), and after
every step the preview's prediction is compared with what happened:

* the downstream table: the previewed downstream statements applied to the table's model must give
  the structure ``SHOW CREATE TABLE`` shows (lattice-equal);
* the held tables (skip-and-wait) and the conflicting ones (detected / error) of the live lock;
* a worker stopped in Error where the preview says the worker's tracker refuses the statement;
* whether the lock is open or resolved;
* the statements the workers ran on the merged table: the downstream's general query log (enabled
  on the dev downstream for the run) must show exactly the previewed downstream statements.

Sequences come from the protocol simulation's generator (``tests/sim/scripts.py``: every shard
reaches the same schema by its own path: renames vs DROP+ADD, widenings before a DROP, index
added and dropped ...), shard DDLs interleaved at random (seeded).  Each sequence runs in its own
task on fresh databases; it ends at the first conflict (which both must report at the same step).

    .venv/bin/python -m tests.preview --sequences 200            # the long form (its own command)
    .venv/bin/python -m tests.preview --sequences 3 --start 40   # a few

``tests/preview/test_preview_cluster.py::test_preview_agrees_with_reality_short_form`` is the
short form in the normal suite."""
from __future__ import annotations

import json
import random
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pymysql
import yaml

from coordinator.lock.schema_bag import eq
from coordinator.schema import SchemaError, apply_ddl, parse_create_table
from tests.api.conftest import Http
from tests.sim.run import Config, scenario
from tests.support.probes import wait_for

_QUERY = re.compile(r"\sQuery\t(.*)$")
BASE_COLUMNS = "id INT NOT NULL, a INT, b INT, r INT, v VARCHAR(10), k INT, PRIMARY KEY (id)"  # sim BASE
SOURCES = ("s1", "s2")


_NAME = re.compile(r"\b(?:COLUMN|INDEX)\s+`?(\w+)", re.I)


def _upstream_events(events: list[list[str]]) -> list[list[str]]:
    """The generator's events as upstream statements: several clauses are one ALTER (one Info)
    unless two of them name the same column or index, which MariaDB refuses in one statement
    (``ADD INDEX ix, DROP INDEX ix``): those run one by one."""
    out = []
    for ev in events:
        names = [n.lower() for s in ev for n in _NAME.findall(s)]
        out.extend([ev] if len(names) == len(set(names)) else [[s] for s in ev])
    return out


@dataclass
class Sequence:
    seed: int
    events: list[list[list[str]]]          # per table: its events (each: the statements of one DDL)
    order: list[tuple[int, int]]           # (table, event) in the order they run

    def source(self, i: int) -> str:
        return SOURCES[i % 2]

    @staticmethod
    def table(i: int) -> str:
        return f"orders_t{i}"

    def sql(self, i: int, ev: int) -> str:
        """One upstream statement for the event (several clauses: one multi-clause ALTER)."""
        clauses = [s.split(" ", 3)[3] for s in self.events[i][ev]]     # "ALTER TABLE t <clause>"
        return f"ALTER TABLE {self.table(i)} " + ", ".join(clauses)


def make_sequence(seed: int, tables: int = 3, plans: int = 2) -> Sequence:
    events = [_upstream_events(evs) for evs in scenario(seed, Config(tables=tables, plans=plans, generator="plans"))]
    rng = random.Random(seed * 31 + 7)
    pos, order = [0] * len(events), []
    while True:
        left = [i for i in range(len(events)) if pos[i] < len(events[i])]
        if not left:
            break
        i = rng.choice(left)
        order.append((i, pos[i]))
        pos[i] += 1
    return Sequence(seed, events, order)


@dataclass
class Outcome:
    seed: int
    steps: int = 0              # steps compared
    statements: int = 0         # downstream statements seen in the general log (all matched the preview)
    ended: str = "done"         # done | conflict (both reported it) | mismatch | error
    detail: str = ""
    seconds: float = 0.0
    log: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.ended in ("done", "conflict")


class Differential:
    """Runs sequences on ``cluster`` (tests/e2e/conftest.Cluster: a master and workers s1, s2)."""

    def __init__(self, cluster, services, work: Path, timeout: float = 60.0):
        self.c, self.services, self.work, self.timeout = cluster, services, work, timeout
        self.http = Http(f"http://127.0.0.1:{cluster.mmetrics}")
        self.marker = 0
        self.general_log = self._general_log()

    def _general_log(self) -> Path:
        """The downstream's general query log (a file on this machine: the dev services), turned on:
        the one record of what the workers really ran downstream."""
        row = self._exec("downstream", None, "SELECT @@general_log, @@general_log_file, @@datadir")[0]
        self._log_was_on = bool(row[0])
        if not row[0]:
            self._exec("downstream", None, "SET GLOBAL log_output = 'FILE'")
            self._exec("downstream", None, "SET GLOBAL general_log = 1")
        path = Path(row[1]) if row[1].startswith("/") else Path(row[2]) / row[1]
        assert path.exists(), f"the downstream's general log {path} is not readable here"
        return path

    def close(self) -> None:
        """Turn the general log off again if this run turned it on."""
        if not self._log_was_on:
            self._exec("downstream", None, "SET GLOBAL general_log = 0")

    def _ran_since(self, offset: int, down_db: str) -> tuple[list[str], int]:
        """ALTERs of ``down_db``.orders in the general log after ``offset``; and the new offset."""
        with self.general_log.open("rb") as f:
            f.seek(offset)
            data = f.read()
        head = f"ALTER TABLE `{down_db}`.`orders` "
        out = []
        for line in data.decode("utf-8", "replace").splitlines():
            m = _QUERY.search(line)
            if m and m[1].startswith(head):
                out.append(m[1].rstrip())
        return out, offset + len(data)

    # ------------------------------------------------------------------ set-up
    def _db(self, server: str, name: str):
        return pymysql.connect(**self.services.mysql[server], database=name, autocommit=True, charset="utf8mb4")

    def _exec(self, server: str, name: str | None, sql: str, args=None) -> list:
        with pymysql.connect(**self.services.mysql[server], database=name, autocommit=True,
                             charset="utf8mb4") as c, c.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def _setup(self, seq: Sequence) -> dict:
        tag = f"dq{seq.seed}_{uuid.uuid4().hex[:6]}"
        names = {"s1": f"{tag}_a", "s2": f"{tag}_b", "down": f"{tag}_d"}
        servers = {"s1": "source1", "s2": "source2", "down": "downstream"}
        for k, name in names.items():
            self._exec(servers[k], None, f"CREATE DATABASE `{name}`")
        for i in range(len(seq.events)):
            sid = seq.source(i)
            self._exec(servers[sid], names[sid], f"CREATE TABLE {seq.table(i)} ({BASE_COLUMNS})")
            self._exec(servers[sid], names[sid], f"INSERT INTO {seq.table(i)} (id, v) VALUES "
                                                 f"({i * 100 + 1}, 'x'), ({i * 100 + 2}, 'y')")
        for sid in SOURCES:
            self._exec(servers[sid], names[sid], "CREATE TABLE marker (id INT PRIMARY KEY)")
        task = f"diff_{tag}"
        from tests.support.procs import db_params
        down_params = dict(self.services.mysql["downstream"])
        routes, insts, bals = {}, [], {}
        for sid in SOURCES:
            routes[f"shard-{sid}"] = {"schema-pattern": names[sid], "table-pattern": "orders_*",
                                      "target-schema": names["down"], "target-table": "orders"}
            routes[f"mark-{sid}"] = {"schema-pattern": names[sid], "table-pattern": "marker",
                                     "target-schema": names["down"], "target-table": f"marker_{sid}"}
            bals[f"bal-{sid}"] = {"do-dbs": [names[sid]]}
            insts.append({"source-id": sid, "route-rules": [f"shard-{sid}", f"mark-{sid}"],
                          "block-allow-list": f"bal-{sid}", "syncer": {"worker-count": 2, "batch": 100}})
        doc = {"name": task, "task-mode": "all", "shard-mode": "optimistic", "meta-schema": names["down"],
               "target-database": db_params(down_params), "routes": routes, "block-allow-list": bals,
               "mysql-instances": insts}
        f = self.work / f"{task}.yaml"
        f.write_text(yaml.safe_dump(doc))
        self.c.task_name = task
        self.c.ctl_ok("start-task", str(f))
        return {"task": task, "names": names, "servers": servers, "file": f}

    def _teardown(self, env: dict) -> None:
        try:
            self.c.ctl("stop-task", env["task"])
        finally:
            self.c.task_name = ""
            for k, name in env["names"].items():
                try:
                    self._exec(env["servers"][k], None, f"DROP DATABASE IF EXISTS `{name}`")
                except pymysql.MySQLError:
                    pass

    # ------------------------------------------------------------------ observing
    def _stages(self, env: dict) -> dict[str, str]:
        st, doc = self.http.get(f"/api/v1/tasks/{env['task']}/status")
        if st != 200:
            return {}
        return {s["source_name"]: s["stage"] for s in doc["data"]}

    def _lock(self, env: dict) -> dict | None:
        st, doc = self.http.get(f"/api/v1/ddl-locks?task={env['task']}")
        assert st == 200, doc
        return doc["data"][0] if doc["data"] else None

    def _down(self, env: dict):
        rows = self._exec("downstream", env["names"]["down"], "SHOW CREATE TABLE orders")
        return parse_create_table(rows[0][1])

    def _markers_seen(self, env: dict, n: int, skip: set[str]) -> bool:
        for sid in SOURCES:
            if sid in skip:
                continue
            try:
                got = self._exec("downstream", env["names"]["down"], f"SELECT COUNT(*) FROM marker_{sid} WHERE id=%s",
                                 (n,))
            except pymysql.MySQLError:
                return False
            if not got or got[0][0] != 1:
                return False
        return True

    def _quiet(self, env: dict) -> None:
        """Every source's worker has processed everything written so far, the lock's answers are
        acted on (no owner executing or being redirected), twice in a row."""
        for _ in range(2):
            stopped = {s for s, st in self._stages(env).items() if st in ("Paused", "Error")}
            self.marker += 1
            for sid in SOURCES:
                if sid not in stopped:
                    self._exec(env["servers"][sid], env["names"][sid], "INSERT INTO marker VALUES (%s)", (self.marker,))
            n = self.marker
            wait_for(lambda n=n: self._markers_seen(env, n, {s for s, st in self._stages(env).items()
                                                         if st in ("Paused", "Error")}),
                     self.timeout, f"markers {n} of {env['task']} downstream", self.c.diagnostics, interval=0.2)
            wait_for(lambda: not any(o["state"] in ("executing", "redirected")
                                     for o in ((self._lock(env) or {}).get("owners") or [])),
                     self.timeout, f"lock answers of {env['task']} acted on", self.c.diagnostics, interval=0.2)

    def _observe(self, env: dict) -> dict:
        lock = self._lock(env)
        owners = (lock or {}).get("owners") or []
        return {"down": self._down(env),
                "held": sorted(o["owner"] for o in owners if o["state"] == "held"),
                "conflicts": sorted(o["owner"] for o in owners if o["state"] in ("conflict", "error")),
                "errors": sorted(s for s, st in self._stages(env).items() if st == "Error"),
                "open": lock is not None}

    # ------------------------------------------------------------------ one sequence
    def run(self, seq: Sequence) -> Outcome:
        out = Outcome(seq.seed)
        t0 = time.monotonic()
        env = self._setup(seq)
        try:
            wait_for(lambda: set(self._stages(env).values()) == {"Running"} and self._has_orders(env),
                     120, f"task {env['task']} running with its target", self.c.diagnostics)
            self._quiet(env)
            plan = [{"sql": seq.sql(i, ev), "sources": [seq.source(i)], "tables": seq.table(i)} for i, ev in seq.order]
            st, doc = self.http.post(f"/api/v1/tasks/{env['task']}/ddl-preview", {"plan": {"steps": plan}, "no_cost": True})
            if st != 200:
                out.ended, out.detail = "error", f"preview refused: {doc}"
                return out
            steps = doc["preview"]["steps"]
            model = self._down(env)
            ups = {sid: env["names"][sid] for sid in SOURCES}
            for k, (i, ev) in enumerate(seq.order):
                sid = seq.source(i)
                sql = seq.sql(i, ev)
                out.log.append(f"step {k + 1}: {sid} {sql}")
                if sid in self._observe(env)["errors"] or self._stages(env).get(sid) == "Paused":
                    out.ended, out.detail = "error", f"step {k + 1}: source {sid} is stopped before its DDL"
                    return out
                offset = self.general_log.stat().st_size
                self._exec(env["servers"][sid], ups[sid], sql)
                self._quiet(env)
                real = self._observe(env)
                ran, _ = self._ran_since(offset, env["names"]["down"])
                pred = steps[k]
                for d in pred["downstream"]:
                    try:
                        model = apply_ddl(model, d["statement"])
                    except SchemaError:
                        pass        # the worker ignores a repeat the downstream refuses (1060/1061/1091)
                p_conf = sorted(c["table"] for c in pred["conflicts"] if c["stage"] != "worker-error")
                p_err = sorted({c["table"].split("-", 1)[0] for c in pred["conflicts"] if c["stage"] == "worker-error"})
                mism = []
                previewed = [d["statement"] for d in pred["downstream"]]
                if sorted(previewed) != sorted(ran):
                    mism.append(f"statements run downstream: preview {previewed} vs real {ran}")
                if not eq(model, real["down"]):
                    mism.append(f"downstream: preview {_cols(model)} vs real {_cols(real['down'])} "
                                f"(previewed statements {[d['statement'] for d in pred['downstream']]})")
                if sorted(h["table"] for h in pred["held"]) != real["held"]:
                    mism.append(f"held: preview {sorted(h['table'] for h in pred['held'])} vs real {real['held']}")
                if p_conf != real["conflicts"]:
                    mism.append(f"conflicts: preview {p_conf} vs real {real['conflicts']}")
                if p_err != real["errors"]:
                    mism.append(f"worker errors: preview {p_err} vs real {real['errors']}")
                if (pred["lock_state"] not in ("none", "resolved")) != real["open"]:
                    mism.append(f"lock: preview {pred['lock_state']} vs real {'open' if real['open'] else 'none'}")
                out.steps = k + 1
                out.statements += len(ran)
                if mism:
                    out.ended = "mismatch"
                    out.detail = f"step {k + 1} ({sid}: {sql}): " + "; ".join(mism)
                    out.log.append(json.dumps(pred)[:3000])
                    return out
                if p_conf or p_err:
                    out.ended, out.detail = "conflict", f"step {k + 1}: both report {p_conf or p_err}"
                    return out
                model = real["down"]
            return out
        except Exception as e:  # noqa: BLE001 — reported with the sequence
            out.ended, out.detail = "error", f"{type(e).__name__}: {str(e)[:3000]}"
            return out
        finally:
            out.seconds = time.monotonic() - t0
            self._teardown(env)

    def _has_orders(self, env: dict) -> bool:
        try:
            self._down(env)
            return True
        except (pymysql.MySQLError, IndexError):
            return False


def _cols(s) -> str:
    return ", ".join(f"{c.name} {c.type.sql()}" for c in s.columns) + (
        " | " + ", ".join(i.name for i in s.indexes if i.name) if s.indexes else "")
