"""Connections the prechecks make (to the sources and the downstream): short timeouts, since a
precheck must answer within the start-task RPC."""
from __future__ import annotations

import pymysql

CONNECT_TIMEOUT = 5
QUERY_TIMEOUT = 60
SECRET_HINT = ("give the master the same secret (environment variable / file) as the workers so it can "
               "check, or accept that these checks are skipped")


def connect(db):
    """``db``: a ``coordinator.config.DBConfig``; its password is resolved here (ConfigError when
    this process cannot read a password-env / password-file)."""
    # the server's greeting is read with the read timeout: a host that accepts and never greets
    # would hold the check (and its gRPC thread) for a minute, so the handshake gets the connect
    # timeout and the queries after it their own
    conn = pymysql.connect(**db.pymysql_kwargs(), autocommit=True, charset="utf8mb4",
                           connect_timeout=CONNECT_TIMEOUT, read_timeout=CONNECT_TIMEOUT, write_timeout=60)
    conn._read_timeout = QUERY_TIMEOUT       # PyMySQL applies it to each later read (no public setter)
    return conn
