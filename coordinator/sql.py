"""Shared SQL helpers: identifier quoting, ``SHOW CREATE TABLE``, the checkpoint table's name.

One place so that quoting rules and the checkpoint table name cannot drift apart between the
worker (which writes checkpoints) and the master (which reads them for new lock members).
"""
from __future__ import annotations

import pymysql


# information_schema.COLUMNS predicates for generated (VIRTUAL / STORED) columns that both flavors
# answer: MariaDB's IS_GENERATED does not exist on MySQL, whose EXTRA says "VIRTUAL GENERATED" /
# "STORED GENERATED" as MariaDB's does ("DEFAULT_GENERATED", an expression default, is not one).
# Written for a query run with arguments (pymysql then formats it: ``%%`` is one ``%``).
GENERATED_COLUMN = "(EXTRA LIKE '%%VIRTUAL GENERATED%%' OR EXTRA LIKE '%%STORED GENERATED%%')"
STORED_COLUMN = f"NOT {GENERATED_COLUMN}"


def quote_ident(name: str) -> str:
    """``a`b`` -> ```a``b``` (MariaDB identifier quoting)."""
    return "`" + name.replace("`", "``") + "`"


def quote_table(schema: str, table: str | None = None) -> str:
    """```db`.`tb``` (or just ```db``` for a database)."""
    return quote_ident(schema) if table is None else f"{quote_ident(schema)}.{quote_ident(table)}"


def checkpoint_table(task: str) -> str:
    """The checkpoint table of a task, in its ``meta-schema`` (DM's ``<task>_syncer_checkpoint``)."""
    return f"{task}_syncer_checkpoint"


def show_create_table(conn, schema: str, table: str) -> str | None:
    """``SHOW CREATE TABLE`` text, or None when the table does not exist (error 1146); other
    errors propagate."""
    try:
        with conn.cursor() as cur:
            cur.execute(f"SHOW CREATE TABLE {quote_table(schema, table)}")
            row = cur.fetchone()
    except pymysql.err.ProgrammingError as e:
        if e.args and e.args[0] == 1146:
            return None
        raise
    return row[1] if row else None
