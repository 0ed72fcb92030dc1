"""The preview itself: the real lock engine on a copy of the live lock, answered by simulated
workers that do what ``worker.shardddl`` does with each Operation.

Why a simulation and not just one ``handle_info``: what a statement does downstream depends on
what the other shards do next (a rename is held until every shard made it, then run once by one
of them; a DROP COLUMN runs when the last shard drops it), so each shard of a step sends its
Info, its answer is acted on (run and marked done, held, paused) and every follow-up answer
(redirects, re-evaluated conflicts) is acted on too before the next shard's DDL: the order an
operator's rollout produces when each shard's DDL is answered before the next one runs.

Pure: the engine copy, the schemas and the optional ``cost`` callback (the downstream trial, see
``cost.py``) are given; nothing is written anywhere.
"""
from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from coordinator.api.exits import table_exits
from coordinator.etcdproto import Info, LockKey, Operation, Stage, TableRef
from coordinator.lock import LockChange, LockKeeper
from coordinator.lock.keeper import SchemaSource
from coordinator.lock.views import lock_state
from coordinator.schema import SchemaError, TableSchema, apply_ddl

from .target import Statement

Cost = Callable[[str], dict]       # one downstream statement -> its cost document (cost.py)

_BLOCKED = (Stage.DETECTED, Stage.ERROR)


@dataclass
class PlanStep:
    """One step of a rollout: ``statement`` run on ``shards``, in that order."""
    statement: Statement
    shards: list[TableRef]


@dataclass
class _Worker:
    """What the preview keeps of one shard's worker: its tracked schema and where its DDL is."""
    table: TableRef
    schema: TableSchema | None
    queue: deque = field(default_factory=deque)   # (step, Statement) not sent yet
    phase: str = "idle"                           # idle | waiting | held | paused | failed
    info: Info | None = None
    afters: list[TableSchema] = field(default_factory=list)


def copy_keeper(live: LockKeeper, key: LockKey, schema_source: SchemaSource) -> LockKeeper:
    """A keeper holding a deep copy of ``live``'s lock for ``key`` (if any) and the task's
    SourceTables, whose joining members start from ``schema_source``.  Call it where the live
    keeper is not changing (the master's coordinator thread); the copy is independent."""
    out = LockKeeper(schema_source=schema_source)
    for st in copy.deepcopy([st for (task, _s), st in live._source_tables.items() if task == key.task]):
        out.update_source_tables(st)
    lock = live.find(key)
    if lock is not None:
        out._locks[key] = copy.deepcopy(lock)
    return out


class Simulation:
    """Run steps against ``keeper`` (a copy: see ``copy_keeper``) for the lock ``key``.
    ``schemas`` are the tracked schemas of the target's shards that are not members of the live
    lock (their checkpoints); members start from what the lock holds for them."""

    def __init__(self, keeper: LockKeeper, key: LockKey, schemas: dict[TableRef, TableSchema | None],
                 cost: Cost | None = None, first_revision: int = 0):
        self.keeper, self.key, self.cost = keeper, key, cost
        self.workers: dict[TableRef, _Worker] = {}
        lock = keeper.find(key)
        self.rev = max([first_revision, lock.handled_revision if lock else 0]
                       + [m.info_revision for m in (lock.members.values() if lock else ())]) + 1
        for t, s in schemas.items():
            self.workers[t] = _Worker(t, s)
        given = keeper.schema_source
        # a lock created during the preview (after one resolved) starts a joining table from its
        # checkpoint, i.e. the schema its simulated worker has reached, as the master would read it
        keeper.schema_source = lambda k, t: (self.workers[t].schema if t in self.workers
                                             else given(k, t) if given is not None else None)
        self._ran: list[dict] = []
        self._answers: list[dict] = []
        self._errors: list[dict] = []
        self._resolved = False
        self._in_flight: list[Operation] = []
        if lock is not None:
            for t, m in sorted(lock.members.items(), key=lambda x: str(x[0])):
                w = self.workers.setdefault(t, _Worker(t, m.schema))
                w.schema = m.schema
                a = m.answer
                if a is None or (m.done and a.stage not in (Stage.SKIP_AND_WAIT, *_BLOCKED)):
                    continue
                w.info, w.afters = a.info, list(a.afters)
                w.schema = a.before if a.before is not None else m.schema
                w.phase = {Stage.SKIP_AND_WAIT: "held", Stage.DETECTED: "paused", Stage.ERROR: "paused"}.get(
                    a.stage, "waiting")
                if w.phase == "waiting":     # its worker is acting on this answer right now
                    self._in_flight.append(LockKeeper._op_for(lock, t, a))

    # ------------------------------------------------------------------ the report of one step
    def settle(self) -> dict | None:
        """Let the answers the live lock has outstanding be acted on (workers running their
        statements, replaying a redirect); the report of that, or None when there were none."""
        if not self._in_flight:
            return None
        ops, self._in_flight = self._in_flight, []
        self._act(deque(ops), 0)
        self._pump(0)
        return self._report(0, "(answers already issued by the live lock)", [])

    def run_step(self, index: int, step: PlanStep) -> dict:
        for t in step.shards:
            w = self.workers.setdefault(t, _Worker(t, None))
            w.queue.append((index, step.statement))
        self._pump(index)
        return self._report(index, step.statement.sql, [str(t) for t in step.shards])

    # ------------------------------------------------------------------ workers
    def _paused_sources(self) -> set[str]:
        """A conflict pauses (an error stops) the whole subtask of the table's source."""
        return {w.table.source for w in self.workers.values() if w.phase in ("paused", "failed")}

    def _pump(self, step: int) -> None:
        while True:
            paused = self._paused_sources()
            w = next((w for w in self.workers.values()
                      if w.phase == "idle" and w.queue and w.table.source not in paused), None)
            if w is None:
                return
            self._send(w, step)

    def _next_rev(self) -> int:
        self.rev += 1
        return self.rev

    def _send(self, w: _Worker, step: int) -> None:
        """The worker meets the statement: previews it on its tracked schema, sends its Info."""
        _, stmt = w.queue.popleft()
        if w.schema is None:
            self._fail(w, f"{w.table}: its schema is unknown to the master (no checkpoint with a table "
                          "structure yet); the worker would load it from the upstream")
            return
        afters, cur = [], w.schema
        try:
            for part in stmt.parts:
                nxt = apply_ddl(cur, part)
                if nxt is None:
                    raise SchemaError("the statement drops the table")
                afters.append(nxt)
                cur = nxt
        except SchemaError as e:
            self._fail(w, f"the worker's schema tracker refuses {stmt.sql!r} on {w.table}: {e}; the subtask "
                          "would stop in Error (exit: `shardctl binlog skip`)")
            return
        info = Info(task=self.key.task, source=w.table.source, up_schema=w.table.schema, up_table=w.table.table,
                    down_schema=self.key.down_schema, down_table=self.key.down_table, ddls=stmt.routed(self.key),
                    before=w.schema.to_json(), afters=[a.to_json() for a in afters])
        info.revision = self._next_rev()
        w.info, w.afters, w.phase = info, afters, "waiting"
        self._handle(self.keeper.handle_info(info), step)

    def _fail(self, w: _Worker, message: str) -> None:
        w.phase = "failed"
        self._errors.append({"table": str(w.table), "stage": "worker-error", "DDLs": [], "message": message,
                             "exits": [f"shardctl binlog skip {self.key.task} -s {w.table.source}"]})

    def _handle(self, change: LockChange, step: int) -> None:
        self._act(deque([change]), step)

    def _act(self, todo: deque, step: int) -> None:
        """Act on engine results in order: each Operation as its worker would (run + done mark,
        hold, pause, replay), appending the engine's answers to those actions."""
        while todo:
            item = todo.popleft()
            if isinstance(item, LockChange):
                if item.lock is not None and (item.resolved or item.empty):
                    self.keeper.drop_lock(item.lock)      # the master removes a resolved lock
                    self._resolved = self._resolved or item.resolved
                todo.extend(item.operations)
                continue
            op: Operation = item
            w = self.workers.get(op.table)
            if w is None or w.info is None or op.info_revision != w.info.revision:
                continue                                   # stale: the worker ignores it
            self._answers.append({"table": str(op.table), "stage": op.stage.value, "DDLs": list(op.ddls),
                                  "message": op.message})
            if op.stage in (Stage.NONE, Stage.UNLOCKED):
                for stmt in op.ddls:
                    self._ran.append({"table": str(op.table), "statement": stmt,
                                      "cost": self.cost(stmt) if self.cost is not None else None})
                w.schema, w.phase, w.info = w.afters[-1], "idle", None
                todo.append(self.keeper.mark_done(op))
            elif op.stage is Stage.RESOLVED:
                if w.phase in ("held", "waiting"):         # redirected: replay the DDL (a new Info)
                    info = copy.copy(w.info)
                    info.revision = self._next_rev()
                    w.info, w.phase = info, "waiting"
                    todo.append(self.keeper.handle_info(info))
            elif op.stage is Stage.SKIP_AND_WAIT:
                w.phase = "held"
            else:
                w.phase = "paused"

    def _report(self, index: int, sql: str, shards: list[str]) -> dict:
        lock = self.keeper.find(self.key)
        doc: dict = {"step": index, "statement": sql, "shards": shards, "downstream": self._ran,
                     "answers": self._answers, "held": [], "conflicts": list(self._errors), "waiting": [],
                     "partially_dropped": [], "resolved": self._resolved,
                     "lock_state": lock_state(lock) if lock is not None else ("resolved" if self._resolved else "none")}
        self._ran, self._answers, self._errors, self._resolved = [], [], [], False
        if lock is None:
            return doc
        ready = lock.ready()
        for t in sorted(lock.members, key=str):
            m = lock.members[t]
            why = lock.waiting_for(t, ready)
            if why:
                doc["waiting"].append({"table": str(t), "waitingFor": why})
            a = m.answer
            if a is None:
                continue
            if a.stage is Stage.SKIP_AND_WAIT:
                doc["held"].append({"table": str(t), "DDLs": list(a.info.ddls), "waitingFor": why})
            elif a.stage in _BLOCKED or m.error:
                doc["conflicts"].append({"table": str(t), "stage": a.stage.value, "DDLs": list(a.info.ddls),
                                         "message": a.message or m.error,
                                         "exits": table_exits(lock.id, self.key.task, str(t), why)})
        for col, per in sorted(lock.dropped_columns.items()):
            still = sorted(str(t) for t, m in lock.members.items() if m.final.column(col) is not None)
            if still:
                doc["partially_dropped"].append({"column": col, "dropped_by": sorted(str(t) for t in per),
                                                 "still_on": still})
        return doc

    # ------------------------------------------------------------------ whole runs
    def run(self, steps: list[PlanStep]) -> dict:
        """Every step's report, where the lock resolves and the first problem of the rollout."""
        lock = self.keeper.find(self.key)
        out: dict = {"lock_id": self.key.id, "live_lock": lock_state(lock) if lock is not None else "none",
                     "in_flight": self.settle(), "steps": []}
        for i, step in enumerate(steps, 1):
            out["steps"].append(self.run_step(i, step))
        out["resolves_at"] = next((s["step"] for s in reversed(out["steps"]) if s["resolved"]), None)
        final = self.keeper.find(self.key)
        out["final_state"] = lock_state(final) if final is not None else "none"
        out["problem"] = first_problem(out["steps"], out["final_state"])
        return out


def first_problem(steps: list[dict], final_state: str) -> dict | None:
    """The first step producing a conflict (or a worker error) or a table copy downstream; else,
    when the lock is still open after the last step, the step since which it stayed open."""
    for s in steps:
        if s["conflicts"]:
            c = s["conflicts"][0]
            return {"step": s["step"], "kind": "conflict", "table": c["table"], "message": c["message"],
                    "exits": c.get("exits", [])}
        copies = [d for d in s["downstream"] if (d.get("cost") or {}).get("class") == "copy"]
        if copies:
            return {"step": s["step"], "kind": "table-copy", "table": copies[0]["table"],
                    "message": f"{copies[0]['statement']} copies the downstream table "
                               f"({copies[0]['cost'].get('rows', '?')} rows): {copies[0]['cost'].get('reason', '')}",
                    "exits": []}
    if final_state in ("none", "resolved") or not steps:
        return None
    since = steps[-1]["step"]
    for s in reversed(steps):
        if s["lock_state"] in ("none", "resolved"):
            break
        since = s["step"]
    last = steps[-1]
    waits = "; ".join(f"{w['table']}: {w['waitingFor']}" for w in last["waiting"][:5])
    return {"step": since, "kind": "unresolved", "table": "",
            "message": f"the lock open since step {since} is still {final_state} after the last step: {waits}",
            "exits": []}
