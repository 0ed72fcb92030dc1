"""One cached MySQL tokenizer for every statement reader (kinds, parse, statement, canonical).

A shard DDL's text is tokenized by several readers in turn (its kind, its split, its
routing, the tracker's model): six sqlglot tokenizations of the same string were ~3 ms of the
worker's ~30 ms per shard DDL.  The tokens are returned as a tuple, shared
between callers, which only read them.  Only short statements are cached: a token is an
object of its own, so one large statement's tokens take many times its text."""
from __future__ import annotations

from functools import lru_cache

from sqlglot.dialects.mysql import MySQL
from sqlglot.tokens import Token

_DIALECT = MySQL()
CACHED_CHARS = 16_384     # longer statements are tokenized each time (not kept)


def mysql_tokens(sql: str) -> tuple[Token, ...]:
    """sqlglot's MySQL tokens of ``sql``; raises sqlglot's ``TokenError`` (not cached)."""
    if len(sql) > CACHED_CHARS:
        return tuple(_DIALECT.tokenize(sql))
    return _cached(sql)


@lru_cache(maxsize=1024)
def _cached(sql: str) -> tuple[Token, ...]:
    return tuple(_DIALECT.tokenize(sql))
