"""One cached MySQL tokenizer for every statement reader (kinds, parse, statement, canonical).

A shard DDL's text is tokenized by several readers in turn (its kind, its split, its
routing, the tracker's model): six sqlglot tokenizations of the same string were ~3 ms of the
worker's ~30 ms per shard DDL (issue 33).  The tokens are returned as a tuple, shared
between callers, which only read them."""
from __future__ import annotations

from functools import lru_cache

from sqlglot.dialects.mysql import MySQL
from sqlglot.tokens import Token

_DIALECT = MySQL()


@lru_cache(maxsize=1024)
def mysql_tokens(sql: str) -> tuple[Token, ...]:
    """sqlglot's MySQL tokens of ``sql``; raises sqlglot's ``TokenError`` (not cached)."""
    return tuple(_DIALECT.tokenize(sql))
