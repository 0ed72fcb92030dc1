"""Typed errors of the schema library.

Every error carries the context a lock engine needs to report a problem to
an operator without re-parsing the message: which column, which tables
(labels such as ``s1.shard_01.t1``), which statement and which clause.
"""
from __future__ import annotations

# DM's phrase for a structure that is not one CREATE TABLE (binlog-schema update); our detail follows it
NOT_CREATE_TABLE = "is not a valid `CREATE TABLE` statement"


class SchemaError(Exception):
    """Base class; ``str(err)`` is a human message, fields give the context."""

    def __init__(self, message: str, *, column: str | None = None,
                 index: str | None = None, a_label: str | None = None,
                 b_label: str | None = None, statement: str | None = None,
                 clause: str | None = None):
        super().__init__(message)
        self.message = message
        self.column = column
        self.index = index
        self.a_label = a_label
        self.b_label = b_label
        self.statement = statement
        self.clause = clause

    def __str__(self) -> str:
        if self.clause and self.clause not in self.message:
            return f"{self.message} (in clause: {self.clause})"
        return self.message

    def context(self) -> dict:
        """The context fields as a dict (None fields omitted), e.g. for logs/JSON."""
        keys = ("column", "index", "a_label", "b_label", "statement", "clause")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}


class SchemaConflict(SchemaError):
    """Two schemas have no common upper bound (``join`` fails)."""


class Incomparable(SchemaError):
    """Neither schema is below the other (``compare`` cannot answer -1/0/1)."""


class UnsupportedDDL(SchemaError):
    """A statement or one of its clauses is outside what the library models."""


class InvalidDDL(SchemaError):
    """A supported statement that cannot apply to this schema (unknown column,
    duplicate index name, ...) — MySQL itself would reject it."""
