"""Online schema change tools on shard tables (task option ``online-ddl: true``, DM's name).

pt-online-schema-change and gh-ost never ALTER the real table: they create a *shadow* table
(``_t_new`` / ``_t_gho``), ALTER it, copy the rows into it (plus triggers or their own binlog
reader for the rows written meanwhile) and swap it in with one ``RENAME TABLE`` (the *cut-over*);
the old table and their helpers become *trash* (``_t_old``, ``_t_del``, ``_t_ghc``).  So:

* rows of shadow and trash tables are not replicated (``TableMapper.target`` filters them);
* a DDL on a shadow table is remembered, rewritten for the real table, and nothing runs;
  DDLs on trash tables, and the tools' triggers, are ignored;
* at the cut-over RENAME the remembered DDLs become that shard table's DDL, at the RENAME's
  binlog position, through the normal path (coordinated on the shard-DDL lock in optimistic
  mode, one Info); the RENAME itself never runs downstream.

The remembered DDLs are stored in the downstream, table ``<meta-schema>.<task>_onlineddl``
(one row per source and real table), written before the syncer's global point passes the
shadow DDL.  A replay after a crash meets the same statements again: a shadow CREATE starts the
row afresh and a shadow DDL already remembered at the same position is not added twice, so the
row always equals what the binlog up to the global point says.  The row is kept after the
cut-over (marked ``cut_over``): a table held on its lock replays the RENAME and needs the DDLs
again; the next shadow CREATE of the table replaces it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import pymysql

from coordinator.errors import ShardMergeError
from coordinator.obs import logger
from coordinator.routing import OnlineTables
from coordinator.schema.kinds import ParsedDDL, Route, StatementKind
from coordinator.schema.replacement import ReplacementError, plan_replacement
from coordinator.sql import quote_table
from worker.events import Position
from worker.meta_store import create_statements

log = logger("worker.sync.online_ddl")


class OnlineDDLError(ShardMergeError):
    """An online schema change the worker cannot follow; names the table and the way out."""


def online_ddl_table(task: str) -> str:
    """The table of remembered shadow-table DDLs, in the task's ``meta-schema``."""
    return f"{task}_onlineddl"


@dataclass
class Pending:
    """One real table's online schema change: the shadow table and the DDLs run on it."""
    schema: str
    table: str
    shadow: str
    ddls: list[dict] = field(default_factory=list)   # {"pos": Position JSON (end), "sql": for the real table}
    cut_over: str = ""                                # the cut-over RENAME's end once seen

    def to_json(self) -> str:
        return json.dumps({"shadow": self.shadow, "ddls": self.ddls, "cut_over": self.cut_over}, sort_keys=True)

    def status(self) -> dict:
        return {"table": f"{self.schema}.{self.table}", "shadow": self.shadow,
                "ddls": [d["sql"] for d in self.ddls], "stage": "cut-over" if self.cut_over else "in progress"}


@dataclass(frozen=True)
class Ignore:
    """A tool's statement that runs nothing downstream."""
    note: str


@dataclass(frozen=True)
class CutOver:
    """The RENAME that swaps the shadow in: run ``sql`` (the remembered DDLs, merged) as the
    real table's DDL; ``sql`` is empty when nothing was remembered."""
    schema: str
    table: str
    shadow: str
    sql: str


class OnlineDDLStore:
    """The ``<task>_onlineddl`` rows of one source in the downstream."""

    def __init__(self, db_kwargs: dict, meta_schema: str, task: str, source_id: str):
        self.db_kwargs, self.source_id, self.task = dict(db_kwargs), source_id, task
        self.meta_schema = meta_schema
        self.fq = quote_table(meta_schema, online_ddl_table(task))

    def _run(self, sql: str, args: tuple = ()) -> list:
        try:
            conn = pymysql.connect(**self.db_kwargs, autocommit=True, charset="utf8mb4")
        except pymysql.MySQLError as e:
            raise OnlineDDLError(f"cannot connect to the downstream for {self.fq}: {e}", task=self.task,
                                 source=self.source_id) from e
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        except pymysql.MySQLError as e:
            raise OnlineDDLError(f"{self.fq}: {e}", task=self.task, source=self.source_id) from e
        finally:
            conn.close()

    def ensure_table(self) -> None:
        for sql in create_statements(self.meta_schema, self.fq, """
                id VARCHAR(64) NOT NULL,
                up_schema VARCHAR(128) NOT NULL,
                up_table VARCHAR(128) NOT NULL,
                state LONGTEXT NOT NULL,
                update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
                PRIMARY KEY (id, up_schema, up_table)"""):
            self._run(sql)

    def load(self) -> dict[tuple[str, str], Pending]:
        out = {}
        for s, t, state in self._run(f"SELECT up_schema, up_table, state FROM {self.fq} WHERE id = %s",
                                     (self.source_id,)):
            d = json.loads(state)
            out[(s, t)] = Pending(s, t, d["shadow"], list(d.get("ddls") or []), d.get("cut_over") or "")
        return out

    def save(self, p: Pending) -> None:
        self._run(f"INSERT INTO {self.fq} (id, up_schema, up_table, state) VALUES (%s, %s, %s, %s) "
                  f"ON DUPLICATE KEY UPDATE state = VALUES(state)", (self.source_id, p.schema, p.table, p.to_json()))

    def delete(self, schema: str, table: str) -> None:
        self._run(f"DELETE FROM {self.fq} WHERE id = %s AND up_schema = %s AND up_table = %s",
                  (self.source_id, schema, table))


class OnlineDDL:
    """What the syncer asks at every statement when the task has ``online-ddl: true``."""

    def __init__(self, tables: OnlineTables, store: OnlineDDLStore):
        self.tables, self.store = tables, store
        self.pending: dict[tuple[str, str], Pending] = {}

    def restore(self) -> None:
        """Rebuild from the downstream rows (checkpoint rule 9: rebuild, don't remember)."""
        self.store.ensure_table()
        self.pending = self.store.load()

    def in_progress(self) -> list[dict]:
        """For ``query-status``: every shard table with a shadow table not yet swapped in."""
        return [p.status() for _, p in sorted(self.pending.items()) if not p.cut_over]

    def observe(self, parsed: ParsedDDL, start: Position, end: Position) -> Ignore | CutOver | None:
        """The statement's meaning for online DDL; None when it is not a tool's statement (the
        syncer handles it as usual).  Remembers shadow DDLs (stored before returning)."""
        if parsed.kind is StatementKind.RENAME_TABLE:
            return self._rename(parsed, end)
        if not parsed.tables:
            return None
        names = [t for t in parsed.tables if self.tables.is_tool_table(t.table)]
        if not names:
            return None
        if len(names) < len(parsed.tables):
            others = ", ".join(f"{t.schema}.{t.table}" for t in parsed.tables if t not in names)
            raise OnlineDDLError(f"statement names both an online schema change tool's table and other tables "
                                 f"({others}); run them as separate statements, or `shardctl binlog skip` it",
                                 statement=parsed.query[:200], position=str(start))
        t = names[0]
        real = self.tables.real_of_shadow(t.table)
        if real is None:
            return Ignore(f"statement on the online schema change tool's table {t.schema}.{t.table}")
        key = (t.schema, real)
        route = parsed.kind.row.route     # a shard's CREATE / DROP / coordinated change, on the shadow
        if route is Route.CREATE:
            p = Pending(t.schema, real, t.table)
            self.store.save(p)
            self.pending[key] = p
            log.info("online schema change started: shadow table created", table=f"{t.schema}.{real}",
                     shadow=t.table, position=str(start))
            return Ignore(f"shadow table {t.table} of {real} created")
        if route is Route.DROP:
            gone = self.pending.get(key)
            if gone is not None and gone.shadow == t.table and not gone.cut_over:
                self.store.delete(*key)
                del self.pending[key]
                log.warning("online schema change abandoned: shadow table dropped before its cut-over; its "
                            "remembered DDLs are forgotten", table=f"{t.schema}.{real}", shadow=t.table,
                            position=str(start))
            return Ignore(f"shadow table {t.table} dropped")
        if route is Route.COORDINATE:
            known = self.pending.get(key)
            p = known if known is not None and known.shadow == t.table and not known.cut_over \
                else Pending(t.schema, real, t.table)   # else the CREATE came before the task's start
            sql = parsed.rewrite([quote_table(t.schema, real)])
            if not any(Position.from_json(d["pos"]).same_point(end) for d in p.ddls):
                p.ddls.append({"pos": end.to_json(), "sql": sql})
                self.store.save(p)
                self.pending[key] = p
                log.info("online schema change: DDL on the shadow table remembered until the cut-over",
                         table=f"{t.schema}.{real}", shadow=t.table, statement=sql[:500], position=str(start))
            return Ignore(f"DDL on shadow table {t.table} remembered for {real}")
        return Ignore(f"{parsed.kind.value} on shadow table {t.table}")

    def _rename(self, parsed: ParsedDDL, end: Position) -> Ignore | CutOver | None:
        pairs = list(zip(parsed.tables[0::2], parsed.tables[1::2]))
        tool = [(a, b) for a, b in pairs if self.tables.is_tool_table(a.table) or self.tables.is_tool_table(b.table)]
        if not tool:
            return None
        if len(tool) < len(pairs):
            raise OnlineDDLError("RENAME TABLE mixes an online schema change tool's tables with other tables; "
                                 "`shardctl binlog skip` it and rename downstream by hand",
                                 statement=parsed.query[:200], position=str(end))
        swap = [(a, b) for a, b in pairs if self.tables.real_of_shadow(a.table) is not None
                and self.tables.real_of_shadow(a.table) == b.table and a.schema == b.schema]
        if not swap:
            return Ignore("RENAME of the online schema change tool's tables")
        shadow, real = swap[0]
        key = (real.schema, real.table)
        p = self.pending.get(key)
        if p is None or p.shadow != shadow.table or not p.ddls:
            log.warning("online schema change cut-over, but no DDL on its shadow table was seen (the task "
                        "started after it?): nothing runs downstream; if the table changed, change the target "
                        "the same way", table=f"{real.schema}.{real.table}", shadow=shadow.table)
            return CutOver(real.schema, real.table, shadow.table, "")
        try:
            plan = plan_replacement([d["sql"] for d in p.ddls], real.schema)
        except ReplacementError as e:
            raise OnlineDDLError(f"the DDLs remembered from shadow table {shadow.table} cannot run as one "
                                 f"statement on {real.schema}.{real.table}: {e}; `shardctl binlog replace` the "
                                 f"cut-over RENAME with one ALTER TABLE", position=str(end)) from None
        if len(plan) != 1:
            raise OnlineDDLError(f"the DDLs remembered from shadow table {shadow.table} are several statements "
                                 f"({'; '.join(plan)}); `shardctl binlog replace` the cut-over RENAME with one "
                                 f"ALTER TABLE", position=str(end))
        if not p.cut_over:
            p.cut_over = str(end)
            self.store.save(p)
        log.info("online schema change cut-over: the shadow table's DDL runs as the table's DDL",
                 table=f"{real.schema}.{real.table}", shadow=shadow.table, statement=plan[0][:500])
        return CutOver(real.schema, real.table, shadow.table, plan[0])
