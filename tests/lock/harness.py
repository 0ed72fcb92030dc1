"""A pure-logic driver for the lock engine: simulated workers with schema trackers.

Each shard table has a tracked schema (as a worker's tracker would); ``send`` applies the DDLs to
it, builds the Info (before, one after per statement), hands it to the keeper and — like a worker
— keeps the new schema only when the answer lets it proceed (none/unlocked); on skip-and-wait or
detected the tracker stays at ``before`` (the worker re-processes the event later).
"""
from __future__ import annotations

import itertools

from coordinator.etcdproto import Info, LockKey, Operation, SourceTables, Stage, TableRef
from coordinator.lock import LockKeeper, LockChange
from coordinator.schema import TableSchema
from coordinator.schema.ddl import apply_ddl
from coordinator.schema.parse import parse_create_table

LOCK = LockKey("task", "db", "t")


class Harness:
    def __init__(self, create_sql: str, tables=("A", "B"), keeper: LockKeeper | None = None):
        self.k = keeper or LockKeeper()
        self.init = parse_create_table(create_sql)
        self.schema: dict[str, TableSchema] = {}
        self.refs: dict[str, TableRef] = {}
        self.rev = itertools.count(100)
        self.last: dict[str, Operation] = {}
        self.infos: dict[str, Info] = {}
        self.written: list[Operation] = []
        for n in tables:
            self.add(n)
        self.publish_source_tables()

    def add(self, name: str, schema: TableSchema | None = None) -> TableRef:
        src, _, tbl = name.rpartition(".")
        ref = TableRef(src or "s1", "db", tbl.lower())
        self.refs[name] = ref
        self.schema[name] = schema or self.init
        return ref

    def publish_source_tables(self):
        by_src: dict[str, SourceTables] = {}
        for ref in self.refs.values():
            st = by_src.setdefault(ref.source, SourceTables(LOCK.task, ref.source))
            st.add(ref.schema, ref.table, LOCK.down_schema, LOCK.down_table)
        outs = []
        for st in by_src.values():
            outs += self.k.update_source_tables(st)
        return outs

    def make_info(self, name: str, *ddls: str, before: TableSchema | None = None, ignore_conflict=False) -> Info:
        ref = self.refs[name]
        cur = before or self.schema[name]
        afters, s = [], cur
        for d in ddls:
            s = apply_ddl(s, d)
            afters.append(s)
        return Info(task=LOCK.task, source=ref.source, up_schema=ref.schema, up_table=ref.table,
                    down_schema=LOCK.down_schema, down_table=LOCK.down_table, ddls=list(ddls),
                    before=cur.to_json(), afters=[a.to_json() for a in afters],
                    ignore_conflict=ignore_conflict, revision=next(self.rev))

    def send(self, name: str, *ddls: str, info: Info | None = None, done: bool = True) -> LockChange:
        info = info or self.make_info(name, *ddls)
        self.infos[name] = info
        out = self.k.handle_info(info)
        self.written += out.operations
        op = out.operation
        for o in out.others:       # before this table's done mark, whose redirects come after them
            for n, r in self.refs.items():
                if r == o.table:
                    self.last[n] = o
        if op is not None:
            self.last[name] = op
            if op.stage in (Stage.NONE, Stage.UNLOCKED):
                self.schema[name] = TableSchema.from_json(info.afters[-1])
                if done:
                    self.done(name)
        elif info.ignore_conflict:
            self.schema[name] = TableSchema.from_json(info.afters[-1])
        return out

    def done(self, name: str) -> LockChange:
        op = self.last[name]
        op.done = True
        self.last_done = self.k.mark_done(op)
        self.written += self.last_done.others
        for o in self.last_done.others:      # redirects released by this execution
            for n, r in self.refs.items():
                if r == o.table:
                    self.last[n] = o
        return self.last_done

    def unlock(self, name: str, action: str) -> LockChange:
        ref = self.refs[name]
        out = self.k.unlock(LOCK.id, ref.source, ref.schema, ref.table, action)
        self.last[name] = out.operation
        info = self.infos[name]
        self.schema[name] = TableSchema.from_json(info.afters[-1])
        return out

    # --- views
    @property
    def lock(self):
        return self.k.find(LOCK)

    def ready(self) -> dict[str, bool]:
        r = self.lock.ready()
        return {n: r[ref] for n, ref in self.refs.items() if ref in r}

    def remain(self) -> int:
        return sum(1 for v in self.ready().values() if not v)

    def synced(self) -> bool:
        return self.lock.is_synced()

    def dropped(self) -> dict[str, dict[str, int]]:
        names = {v: k for k, v in self.refs.items()}
        return {c: {names[t]: int(s) for t, s in per.items()} for c, per in self.lock.dropped_columns.items()}
