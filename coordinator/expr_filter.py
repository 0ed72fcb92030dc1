"""DM's expression filters (task ``expression-filter`` + instance ``expression-filters``).

A rule names one upstream table (``schema`` + ``table``, exact names as in DM) and SQL
expressions over its columns; a row change is dropped when its expression is TRUE for the row:

* ``insert-value-expr`` on an inserted row (and on every row the full load copies);
* ``update-old-value-expr`` / ``update-new-value-expr`` on an update: dropped when the old row
  satisfies the first AND the new row the second (a missing one counts as TRUE), as in DM;
* ``delete-value-expr`` on a deleted row.

Supported SQL (checked when the task starts; anything else is refused naming the key):
column names, number / string / NULL / TRUE / FALSE literals, ``=  <>  !=  <  <=  >  >=
<=>``, ``AND  OR  XOR  NOT``, ``IS [NOT] NULL``, ``IS [NOT] TRUE|FALSE``, ``[NOT] IN (...)``,
``[NOT] BETWEEN ... AND ...``, ``[NOT] LIKE`` (``%``, ``_``, ``\\`` escapes), ``+ - * / % DIV``,
unary minus and parentheses; no functions.  NULL is three-valued as in SQL.  Strings compare as
the default ``_ci`` collations do (case-insensitive, trailing spaces ignored); a string compared
with a number is read as a number; a date/time column compared with a string reads the string
as an ISO date/time.  The full load evaluates ``insert-value-expr`` in the upstream's own SQL
(``WHERE (expr) IS NOT TRUE``), replication evaluates it here on the decoded row.
"""
from __future__ import annotations

import datetime as dt
import decimal
import re
from dataclasses import dataclass
from functools import lru_cache

import sqlglot
from sqlglot import exp

from coordinator.errors import ConfigError, ShardMergeError

EXPR_KEYS = ("insert-value-expr", "update-old-value-expr", "update-new-value-expr", "delete-value-expr")


class ExprError(ShardMergeError):
    """An expression filter cannot be evaluated on a table (e.g. it names a column the table lacks)."""


@dataclass(frozen=True)
class ExprRule:
    name: str
    schema: str
    table: str
    insert: str = ""
    update_old: str = ""
    update_new: str = ""
    delete: str = ""


_BINARY = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.And, exp.Or, exp.Xor,
           exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)
_LEAF = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Identifier)
_OTHER = (exp.Not, exp.Paren, exp.Neg, exp.Is, exp.In, exp.Between, exp.Like)


def _check(node: exp.Expression) -> None:
    for n in node.walk():
        if not isinstance(n, _BINARY + _LEAF + _OTHER):
            raise ValueError(f"`{n.sql(dialect='mysql')[:60]}` ({type(n).__name__}) is outside the supported subset")
        if isinstance(n, exp.Column) and n.table:
            raise ValueError(f"`{n.sql(dialect='mysql')}`: name the column without a table")


@lru_cache(maxsize=256)
def parse(text: str) -> exp.Expression:
    try:
        node = sqlglot.parse_one(text, read="mysql")
    except sqlglot.errors.ParseError as e:
        raise ValueError(f"not an SQL expression: {str(e).splitlines()[0]}") from None
    _check(node)
    return node


def parse_rule(name: str, node) -> ExprRule:
    """One entry of ``expression-filter`` (``node``: ``coordinator.config._Node``)."""
    schema = node.get("schema", str, required=True)
    table = node.get("table", str, required=True)
    vals = {}
    for k in EXPR_KEYS:
        v = node.get(k, str, default="")
        if v:
            try:
                parse(v)
            except ValueError as e:
                raise ConfigError(f"`{node.key(k)}` {v!r}: {e}; see docs/coming-from-dm.md for the supported SQL",
                                  file=node.file, key=node.key(k)) from None
        vals[k] = v
    if not any(vals.values()):
        raise ConfigError(f"`{node.path}` sets none of {', '.join(EXPR_KEYS)}", file=node.file, key=node.path)
    node.finish()
    return ExprRule(name, schema, table, vals["insert-value-expr"], vals["update-old-value-expr"],
                    vals["update-new-value-expr"], vals["delete-value-expr"])


# ------------------------------------------------------------------ evaluation (three-valued)
_NUM = (int, float, decimal.Decimal)
_NUM_PREFIX = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


def _num(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, _NUM):
        return v
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode("utf-8", "replace")
    if isinstance(v, str):
        m = _NUM_PREFIX.match(v)
        return decimal.Decimal(m.group(0).strip()) if m else 0
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    return 0


def _text(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode("utf-8", "replace")
    return str(v).rstrip(" ").casefold()


def _cmp(a, b) -> int | None:
    if a is None or b is None:
        return None
    if isinstance(a, (dt.date, dt.datetime)) or isinstance(b, (dt.date, dt.datetime)):
        try:
            a2 = a if isinstance(a, (dt.date, dt.datetime)) else dt.datetime.fromisoformat(str(a))
            b2 = b if isinstance(b, (dt.date, dt.datetime)) else dt.datetime.fromisoformat(str(b))
            if isinstance(a2, dt.datetime) != isinstance(b2, dt.datetime):
                a2 = a2 if isinstance(a2, dt.datetime) else dt.datetime.combine(a2, dt.time())
                b2 = b2 if isinstance(b2, dt.datetime) else dt.datetime.combine(b2, dt.time())
            return (a2 > b2) - (a2 < b2)
        except (TypeError, ValueError):
            a, b = str(a), str(b)
    if isinstance(a, (str, bytes, bytearray)) and isinstance(b, (str, bytes, bytearray)):
        x, y = _text(a), _text(b)
        return (x > y) - (x < y)
    x, y = _num(a), _num(b)
    if isinstance(x, float) or isinstance(y, float):
        x, y = float(x), float(y)
    return (x > y) - (x < y)


def _truth(v) -> bool | None:
    if v is None:
        return None
    return _num(v) != 0


def _like(v, pat) -> bool | None:
    if v is None or pat is None:
        return None
    rx, i, p = [], 0, str(pat)
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            rx.append(re.escape(p[i + 1]))
            i += 2
            continue
        rx.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.fullmatch("".join(rx), _text(v) if not isinstance(v, _NUM) else str(v), re.IGNORECASE | re.DOTALL) \
        is not None


def _and(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _not(a):
    return None if a is None else not a


def _arith(op, a, b):
    if a is None or b is None:
        return None
    x, y = _num(a), _num(b)
    if isinstance(x, float) or isinstance(y, float):
        x, y = float(x), float(y)
    elif isinstance(x, decimal.Decimal) or isinstance(y, decimal.Decimal):
        x, y = decimal.Decimal(x), decimal.Decimal(y)
    if op in ("/", "%", "div") and y == 0:
        return None
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        return decimal.Decimal(x) / decimal.Decimal(y) if not isinstance(x, float) else x / y
    if op == "div":
        return int(x / y)
    return x - y * int(x / y)     # MySQL's %: the sign of the dividend


def compile_expr(node: exp.Expression, cols: tuple[str, ...], where: str):
    """A function row -> True/False/None for ``node`` over a row image with columns ``cols``."""
    index = {c.lower(): i for i, c in enumerate(cols)}

    def build(n):
        if isinstance(n, exp.Paren):
            return build(n.this)
        if isinstance(n, exp.Column):
            name = n.name.lower()
            if name not in index:
                raise ExprError(f"expression filter {where}: column `{n.name}` is not in the table "
                                f"(columns: {', '.join(cols)})")
            i = index[name]
            return lambda r: r[i]
        if isinstance(n, exp.Null):
            return lambda r: None
        if isinstance(n, exp.Boolean):
            v = 1 if n.this else 0
            return lambda r: v
        if isinstance(n, exp.Literal):
            if n.is_string:
                s = n.this
                return lambda r: s
            t = n.this
            v = decimal.Decimal(t) if any(ch in t for ch in ".eE") else int(t)
            return lambda r: v
        if isinstance(n, exp.Neg):
            f = build(n.this)
            return lambda r: None if (x := f(r)) is None else -_num(x)
        if isinstance(n, exp.Not):
            f = build(n.this)
            return lambda r: _not(_b(f(r)))
        if isinstance(n, exp.Is):
            f, rhs = build(n.this), n.expression
            if isinstance(rhs, exp.Null):
                return lambda r: f(r) is None
            want = bool(rhs.this)
            return lambda r: _truth(f(r)) is want
        if isinstance(n, exp.In):
            f, items = build(n.this), [build(x) for x in n.expressions]

            def _in(r):
                v = f(r)
                if v is None:
                    return None
                seen_null = False
                for g in items:
                    c = _cmp(v, g(r))
                    if c == 0:
                        return True
                    seen_null = seen_null or c is None
                return None if seen_null else False
            return _in
        if isinstance(n, exp.Between):
            f, lo, hi = build(n.this), build(n.args["low"]), build(n.args["high"])
            return lambda r: _and(_ge(_cmp(f(r), lo(r))), _le(_cmp(f(r), hi(r))))
        if isinstance(n, exp.Like):
            f, p = build(n.this), build(n.expression)
            neg = bool(n.args.get("negate"))
            return (lambda r: _not(_like(f(r), p(r)))) if neg else (lambda r: _like(f(r), p(r)))
        a, b = build(n.this), build(n.expression)
        if isinstance(n, exp.And):
            return lambda r: _and(_b(a(r)), _b(b(r)))
        if isinstance(n, exp.Or):
            return lambda r: _or(_b(a(r)), _b(b(r)))
        if isinstance(n, exp.Xor):
            return lambda r: None if (x := _b(a(r))) is None or (y := _b(b(r))) is None else x != y
        if isinstance(n, exp.NullSafeEQ):
            return lambda r: (a(r) is None and b(r) is None) or _cmp(a(r), b(r)) == 0
        ops = {exp.EQ: lambda c: c == 0, exp.NEQ: lambda c: c != 0, exp.GT: lambda c: c > 0,
               exp.GTE: lambda c: c >= 0, exp.LT: lambda c: c < 0, exp.LTE: lambda c: c <= 0}
        for k, test in ops.items():
            if isinstance(n, k):
                return lambda r, test=test: None if (c := _cmp(a(r), b(r))) is None else test(c)
        arith = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.IntDiv: "div"}
        op = arith[type(n)]
        return lambda r: _arith(op, a(r), b(r))

    f = build(node)
    return lambda row: _b(f(row)) is True


def _always(row) -> bool:
    return True


def _b(v):
    return v if v is None or isinstance(v, bool) else _truth(v)


def _ge(c):
    return None if c is None else c >= 0


def _le(c):
    return None if c is None else c <= 0


class TableExprs:
    """The compiled filters of one table for one row image layout."""

    def __init__(self, rules: list[ExprRule], cols: tuple[str, ...]):
        def comp(text: str, rule: ExprRule, key: str):
            return compile_expr(parse(text), cols, f"`{rule.name}`.{key} on `{rule.schema}`.`{rule.table}`")
        self.insert = [comp(r.insert, r, "insert-value-expr") for r in rules if r.insert]
        self.delete = [comp(r.delete, r, "delete-value-expr") for r in rules if r.delete]
        self.update = [(comp(r.update_old, r, "update-old-value-expr") if r.update_old else _always,
                        comp(r.update_new, r, "update-new-value-expr") if r.update_new else _always)
                       for r in rules if r.update_old or r.update_new]

    def skip_insert(self, row) -> bool:
        return any(f(row) for f in self.insert)

    def skip_delete(self, row) -> bool:
        return any(f(row) for f in self.delete)

    def skip_update(self, before, after) -> bool:
        return any(o(before) and n(after) for o, n in self.update)


class ExpressionFilter:
    """The expression filters of one task instance, per table and row image layout."""

    def __init__(self, rules: tuple[ExprRule, ...] | list[ExprRule]):
        self.rules = tuple(rules)
        self._by_table: dict[tuple[str, str], list[ExprRule]] = {}
        for r in self.rules:
            self._by_table.setdefault((r.schema.lower(), r.table.lower()), []).append(r)
        self._compiled: dict[tuple, TableExprs | None] = {}

    def for_table(self, schema: str, table: str, cols: tuple[str, ...]) -> TableExprs | None:
        k = (schema, table, cols)
        if k not in self._compiled:
            rules = self._by_table.get((schema.lower(), table.lower()))
            self._compiled[k] = TableExprs(rules, cols) if rules else None
        return self._compiled[k]

    def insert_sql(self, schema: str, table: str) -> list[str]:
        """The ``insert-value-expr`` texts of a table (the full load's ``WHERE (expr) IS NOT TRUE``)."""
        return [parse(r.insert).sql(dialect="mysql") for r in self._by_table.get((schema.lower(), table.lower()), [])
                if r.insert]
