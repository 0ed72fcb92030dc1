"""A ``--plan`` rollout file: the (shard set, statement) steps an operator intends to run.

YAML or JSON, a list of steps (or ``{steps: [...]}``); each step has ``sql`` and optionally
``sources`` (list, in the order they run) and ``tables`` (a glob on ``schema.table`` or
``table``); without them the step runs on every shard of the target::

    - {sql: "ALTER TABLE shop.orders ADD COLUMN note VARCHAR(64)", sources: [source1], tables: "shop_01.*"}
    - {sql: "ALTER TABLE shop.orders ADD COLUMN note VARCHAR(64)", sources: [source1, source2]}
"""
from __future__ import annotations

from dataclasses import dataclass

import yaml

from .errors import BadPlan
from .target import Statement, parse

_FIELDS = {"sql", "sources", "tables"}


@dataclass(frozen=True)
class RawStep:
    statement: Statement
    sources: tuple[str, ...]
    tables: str


def parse_plan(text: str, name: str = "the plan") -> list[RawStep]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise BadPlan(f"{name} is not YAML/JSON: {e}", file=name) from None
    if isinstance(doc, dict) and set(doc) == {"steps"}:
        doc = doc["steps"]
    if not isinstance(doc, list) or not doc:
        raise BadPlan(f"{name} must be a non-empty list of steps, each {{sql, sources?, tables?}}", file=name)
    out = []
    for i, step in enumerate(doc, 1):
        where = f"step {i} of {name}"
        if not isinstance(step, dict):
            raise BadPlan(f"{where} is not a mapping; give {{sql: ..., sources: [...], tables: ...}}", file=name)
        unknown = sorted(set(step) - _FIELDS)
        if unknown:
            raise BadPlan(f"{where} has unknown key(s) {', '.join(unknown)}; known: sql, sources, tables", file=name)
        sql, sources, tables = step.get("sql"), step.get("sources") or [], step.get("tables") or ""
        if not isinstance(sql, str):
            raise BadPlan(f"{where} needs sql: the statement (a string)", file=name)
        if isinstance(sources, str):
            sources = [sources]
        if not isinstance(sources, list) or not all(isinstance(s, str) and s for s in sources):
            raise BadPlan(f"{where}: sources must be a list of source names", file=name)
        if not isinstance(tables, str):
            raise BadPlan(f"{where}: tables must be one glob pattern (a string)", file=name)
        out.append(RawStep(parse(sql, f"sql of {where}"), tuple(sources), tables))
    return out
