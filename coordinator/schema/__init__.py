"""Schema model, DDL application and schema lattice for shard merging.

Pure library (no I/O).  Public API:

* ``parse_create_table(sql)`` — parse ``SHOW CREATE TABLE`` text
  (MariaDB 10.11 / MySQL 8) with sqlglot into a ``TableSchema``.
* ``TableSchema.to_create_sql(table_name=None)`` — render back, byte-identical
  to MariaDB's ``SHOW CREATE TABLE`` for tables it parsed.  ``table_name`` is
  ``"t"`` or ``("db", "t")``.
* ``apply_ddl(schema, sql)`` — apply one DDL statement, returning the new
  schema (``None`` after DROP TABLE).  ``apply_ddl(None, "CREATE TABLE ...")``
  creates one.
* ``TableSchema.to_json()`` / ``TableSchema.from_json(d)``; schemas are frozen,
  hashable dataclasses.  ``==`` is exact (order, comments, widths);
  ``same_as`` is lattice equality.
* ``split_ddl(sql, target=None) -> list[str]`` — one statement per change of a
  multi-clause ALTER TABLE (``ADD COLUMN (a INT, b INT)`` gives two); with
  ``target`` (``"t"`` or ``("db", "t")``) the table reference is rewritten.
  ``rename_ddl_table(sql, target)`` rewrites the table of one statement
  without splitting.
* ``join(a, b, a_label=None, b_label=None) -> TableSchema`` raises
  ``SchemaConflict``; ``compare(a, b, a_label=None, b_label=None) -> int``
  raises ``Incomparable``.
* ``diff_ddls(old, new, table) -> list[str]`` — single-change ALTER statements
  turning ``old`` into ``new``.
* ``classify(before, after)`` / ``classify_ddl(schema, sql)`` — 'widening',
  'narrowing', 'neutral' or 'conflicting' for the lock engine.

Errors: ``SchemaError`` (fields ``column``, ``index``, ``a_label``,
``b_label``, ``statement``, ``clause``) with subclasses ``SchemaConflict``,
``Incomparable``, ``UnsupportedDDL`` and ``InvalidDDL``.
The lattice rules are documented in docs/schema-lattice.md.
"""
from .ddl import apply_ddl
from .diff import diff_ddls
from .errors import Incomparable, InvalidDDL, SchemaConflict, SchemaError, UnsupportedDDL
from .lattice import classify, classify_ddl, compare, join
from .model import Column, ColumnType, Index, TableSchema
from .parse import parse_create_table
from .split import rename_ddl_table, split_ddl

__all__ = [
    "TableSchema", "Column", "ColumnType", "Index", "apply_ddl", "parse_create_table", "join", "compare",
    "classify", "classify_ddl", "diff_ddls", "split_ddl", "rename_ddl_table",
    "SchemaError", "SchemaConflict", "Incomparable", "UnsupportedDDL", "InvalidDDL",
]
