"""Create (or widen) each downstream target from the joined schema of its shards.

Each worker knows only its own source's shards, so the target converges on the join of all
sources: under a downstream named lock per target, a worker joins its shards' schemas with the
target's current definition (if it exists) and runs the ALTERs (``coordinator.schema.diff_ddls``)
that widen the target to that join; the next worker does the same with its shards.  Joining is
order-independent, so the result is the join of every shard whatever order workers come in.
Incompatible shards (``SchemaConflict``) stop the load naming both tables.
"""
from __future__ import annotations

from dataclasses import replace
from functools import reduce

import pymysql

from coordinator.errors import ShardMergeError
from coordinator.obs import logger
from coordinator.schema import SchemaConflict, TableSchema, diff_ddls, join
from coordinator.schema.dialect import for_server, server_flavor
from coordinator.sql import quote_ident
from coordinator.schema.parse import parse_create_table

log = logger("worker.load.targets")


class TargetError(ShardMergeError):
    """A target table could not be created or made to fit its shards."""


_q = quote_ident


def strip_counter(s: TableSchema) -> TableSchema:
    return replace(s, options=tuple(o for o in s.options if o[0] != "AUTO_INCREMENT"))


def joined(schemas: list[tuple[str, TableSchema]], target: str, task: str, source: str) -> TableSchema:
    """Join of (label, schema) pairs; a conflict names the two shards."""
    def step(acc, item):
        (la, a), (lb, b) = acc, item
        try:
            return (f"{la}+{lb}" if len(schemas) < 4 else "joined shards", join(a, b, a_label=la, b_label=lb))
        except SchemaConflict as e:
            raise TargetError(f"shards of {target} cannot be merged: {e}; make their schemas compatible "
                              f"before the full load", task=task, source=source, table=target) from e
    return strip_counter(reduce(step, schemas)[1])


def ensure_target(conn, target: tuple[str, str], mine: TableSchema, *, task: str, source: str,
                  lock_timeout: int = 60) -> list[str]:
    """Make ``target`` at least ``mine`` (join with what exists); the statements it ran."""
    ts, tt = target
    name = f"{ts}.{tt}"
    lock = f"shardmerge-load:{task}:{name}"[:64]
    with conn.cursor() as cur:
        cur.execute("SELECT GET_LOCK(%s, %s)", (lock, lock_timeout))
        if cur.fetchone()[0] != 1:
            raise TargetError(f"could not take the downstream lock {lock!r} in {lock_timeout}s (another worker "
                              f"is preparing the same target)", task=task, source=source, table=name)
        try:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {_q(ts)}")
            try:
                cur.execute(f"SHOW CREATE TABLE {_q(ts)}.{_q(tt)}")
                existing = parse_create_table(cur.fetchone()[1])
            except pymysql.err.ProgrammingError as e:
                if e.args[0] != 1146:
                    raise
                existing = None
            if existing is None:
                stmts = [mine.to_create_sql((ts, tt))]
            else:
                try:
                    want = join(strip_counter(existing), mine, a_label=f"downstream {name}", b_label=f"shards of {source}")
                except SchemaConflict as e:
                    raise TargetError(f"existing downstream table {name} does not fit the shards of source "
                                      f"{source}: {e}", task=task, source=source, table=name) from e
                stmts = [] if want.same_as(strip_counter(existing)) else diff_ddls(existing, want, (ts, tt))
                kept = [x for x in stmts if " DROP " in x.upper()]
                if kept:   # never remove what the target has (an index another source's shards share)
                    log.info("keeping downstream definitions the shards of this source lack", task=task,
                             source=source, table=name, statements="; ".join(kept))
                    stmts = [x for x in stmts if x not in kept]
            flavor = server_flavor(conn.get_server_info())
            for sql in stmts:
                log.info("preparing target for the full load", task=task, source=source, table=name, statement=sql)
                cur.execute(for_server(sql, flavor))
            return stmts
        except pymysql.MySQLError as e:
            raise TargetError(f"preparing downstream table {name} failed: {e.args[-1] if e.args else e}",
                              task=task, source=source, table=name) from e
        finally:
            cur.execute("SELECT RELEASE_LOCK(%s)", (lock,))
