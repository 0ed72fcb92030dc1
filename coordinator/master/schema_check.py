"""Force-remove's safety check: does the downstream table look like what the lock says it holds?

``shard-ddl-lock unlock LOCK_ID --force-remove`` forgets a lock.  If the lock and the downstream
table disagree (a DDL half-applied, run by hand, or lost), forgetting the lock also forgets the
only record of that, and the shards keep replicating into a table of the wrong shape (DM pain
#5).  So the master compares the lock's ``Expectation`` (coordinator.lock.keeper) with the
downstream's ``SHOW CREATE TABLE`` under lattice equality (column/index order, display widths,
comments and table options are cosmetic) and, when they differ, lists the ALTER statements that
would bring the downstream to the lock's schema, each tagged with the side that has the thing.
Pure logic; the master does the reading.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from coordinator.lock.keeper import Expectation
from coordinator.lock.schema_bag import cmp
from coordinator.schema import Column, Index, SchemaError, TableSchema, diff_ddls
from coordinator.schema.ddl import apply_ddl


@dataclass
class CheckResult:
    agree: bool
    text: str          # what the operator reads: differences, pending DDLs, notes


def _toward(target: TableSchema, ref: TableSchema) -> TableSchema:
    """``target`` with everything cosmetic taken from ``ref``: lattice-equal columns/indexes use
    ref's definitions and order, table options are ref's.  ``diff_ddls(ref, result)`` then lists
    only real differences (no column moves, no comment or display-width changes)."""
    rcols = {c.key: c for c in ref.columns}
    tcols = {c.key: c for c in target.columns}

    def pick(c: Column) -> Column:
        r = rcols.get(c.key)
        return r if r is not None and r.lattice_key() == c.lattice_key() else c
    out = [pick(tcols[c.key]) for c in ref.columns if c.key in tcols]
    prev = None
    for c in target.columns:
        if c.key not in rcols:
            at = 0 if prev is None else next(i for i, x in enumerate(out) if x.key == prev) + 1
            out.insert(at, c)
        prev = c.key
    ridx = {i.key: i for i in ref.indexes}
    tidx = {i.key: i for i in target.indexes}

    def pick_i(i: Index) -> Index:
        r = ridx.get(i.key)
        return r if r is not None and r.lattice_key() == i.lattice_key() else i
    idx = [pick_i(tidx[i.key]) for i in ref.indexes if i.key in tidx]
    idx += [i for i in target.indexes if i.key not in ridx]
    return replace(target, columns=tuple(out), indexes=tuple(idx), options=ref.options)


def _col(c: Column | None) -> str:
    return c.sql() if c is not None else "-"


def _changes(cur: TableSchema, nxt: TableSchema) -> list[tuple[str, str, str]]:
    """What one statement changed: (kind, name, side) with side ``lock`` (only the lock has it),
    ``downstream`` (only the downstream has it) or ``both`` (defined differently)."""
    out = []
    for kind, a, b in (("column", {c.key: c for c in cur.columns}, {c.key: c for c in nxt.columns}),
                       ("index", {i.key: i for i in cur.indexes}, {i.key: i for i in nxt.indexes})):
        for k in sorted(set(a) | set(b)):
            x, y = a.get(k), b.get(k)
            if x is None and y is not None:
                out.append((kind, y.name, "lock"))
            elif x is None:
                continue          # (k comes from one of the two maps)
            elif y is None:
                out.append((kind, x.name, "downstream"))
            elif x.lattice_key() != y.lattice_key():
                out.append((kind, y.name, "both"))
    if (cur.charset, cur.collation) != (nxt.charset, nxt.collation):
        out.append(("table charset", f"{nxt.charset}/{nxt.collation}", "both"))
    return out


def _get(s: TableSchema | None, kind: str, name: str):
    if s is None:
        return None
    if kind == "column":
        return s.column(name)
    if kind == "index":
        return s.index(name)
    return (s.charset, s.collation)


def _key(x):
    return x.lattice_key() if hasattr(x, "lattice_key") else x


_SIDE = {"lock": "only in the lock (its shard tables have it, the downstream does not)",
         "downstream": "only downstream (the lock's shard tables do not have it)",
         "both": "defined differently downstream and in the lock"}


def _explain(exp: Expectation, down: TableSchema, kind: str, name: str) -> str:
    """Why a difference may be legitimate: an Operation issued but not marked done, or the
    pending (blocked) DDL of a table already being downstream."""
    mine = _key(_get(down, kind, name))
    if exp.outstanding and _key(_get(exp.issued, kind, name)) == mine:
        return ("; the downstream already has the change of an Operation not yet marked done by "
                + ", ".join(t for t, _, _ in exp.outstanding[:5]) + " (wait for those workers)")
    if exp.pending and exp.joined is not None and _key(_get(exp.joined, kind, name)) == mine:
        return ("; matches the blocked DDL of " + ", ".join(t for t, _, _ in exp.pending[:5])
                + ", which the lock never ran downstream (applied by hand?)")
    return ""


def _between(lo: TableSchema, x: TableSchema, hi: TableSchema) -> bool:
    a, b = cmp(lo, x), cmp(x, hi)
    return a is not None and b is not None and (a in (0, -1) and b in (0, -1) or a in (0, 1) and b in (0, 1))


def _context(exp: Expectation) -> list[str]:
    out = []
    if exp.pending:
        out.append("pending DDLs, never applied downstream (they wait for the other tables; not a difference):")
        out += [f"  {t} ({stage}): " + "; ".join(ddls) for t, stage, ddls in exp.pending]
    if exp.outstanding:
        out.append("Operations issued but not yet marked done (the downstream may or may not have them):")
        out += [f"  {t} ({stage}): " + ("; ".join(ddls) or "no DDL") for t, stage, ddls in exp.outstanding]
    out += [f"note: {n}" for n in exp.notes]
    return out


def check(exp: Expectation, down: TableSchema | None, address: str) -> CheckResult:
    """Compare the lock's expectation with the downstream table read at ``address``."""
    fq = "`{}`.`{}`".format(*exp.down_table)
    where = f"downstream table {fq} at {address}"
    if exp.error or exp.now is None or exp.issued is None:
        return CheckResult(False, f"cannot check {where}: {exp.error}")
    if down is None:
        return CheckResult(False, "\n".join([
            f"{where} does not exist; the lock expects:", "  " + exp.now.to_create_sql(exp.down_table),
            *_context(exp)]))
    if down.same_as(exp.now) or down.same_as(exp.issued) or _between(exp.now, down, exp.issued):
        return CheckResult(True, "\n".join([f"schemas agree: {where} matches the lock", *_context(exp)]))
    want = _toward(exp.now, down)
    try:
        ddls = diff_ddls(down, want, exp.down_table)
    except SchemaError as e:
        return CheckResult(False, f"{where} differs from the lock's schema and no DDL can reconcile them "
                                  f"({e}); the lock expects:\n  " + exp.now.to_create_sql(exp.down_table))
    lines = [f"{where} differs from the schema the lock says it has now. DDLs that would make the "
             "downstream match the lock (and which side has what):"]
    cur = down
    for stmt in ddls:
        try:
            nxt = apply_ddl(cur, stmt)
        except SchemaError:
            nxt = None
        tags = []
        for kind, name, _ in (_changes(cur, nxt) if nxt is not None else []):
            d, lk = _get(down, kind, name), _get(exp.now, kind, name)
            side = "lock" if d is None else "downstream" if lk is None else "both"
            detail = (f": downstream {_col(d)}, lock {_col(lk)}"
                      if side == "both" and kind == "column" else "")
            tags.append(f"{kind} `{name}` {_SIDE[side]}{detail}{_explain(exp, down, kind, name)}")
        lines.append(f"  {stmt}")
        lines += [f"      -- {t}" for t in tags]
        cur = nxt if nxt is not None else cur
    return CheckResult(False, "\n".join(lines + _context(exp)))
