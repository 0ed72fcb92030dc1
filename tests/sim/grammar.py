"""The simulation's DDL generator, derived from the statement grammar the schema model knows
(``coordinator.schema.kinds.ClauseKind``): every clause kind has a maker here, and
``tests/sim/test_grammar.py`` fails when a kind is added there without one, so a new kind is
simulated without anyone remembering to.

A scenario is a few *changes* (each touching its own columns or indexes).  A change offers
per-table *paths*: different statement sequences that end at the same schema (a rename here,
DROP + ADD there; a widen that is narrowed back while another shard does nothing), so a correct
protocol ends every seed with the lock resolved and the downstream equal to every shard.  Each
table takes one path per change, interleaves the changes' clauses at random (keeping each
change's own order) and packs clauses of *different* changes into one ALTER (MySQL refuses two
clauses on one column in one ALTER); the packed statement goes through the worker's own
``split_ddl`` and ``canonical_ddl``, so the simulated Info is what the real worker would send
(and the text a worker would run downstream).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from coordinator.schema.kinds import ClauseKind, StatementKind
from coordinator.schema.canonical import canonical_ddl
from coordinator.schema.split import split_ddl

# Enough independent columns for several changes a scenario; `nn` starts NOT NULL, `d` with a
# default, `s` with its own collation, `ix_e`/`ix_f`/`ix_g` are indexes to drop, rename, alter.
BASE = ("CREATE TABLE t (id INT NOT NULL, a INT, b INT, c INT, r INT, w INT, x INT, y INT, "
        "v VARCHAR(10), k INT, m INT, u INT, n INT, nn INT NOT NULL DEFAULT 0, d INT DEFAULT 1, "
        "s VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, e INT, f INT, g INT, "
        "PRIMARY KEY (id), KEY ix_e (e), KEY ix_f (f), KEY ix_g (g))")

INT_COLUMNS = ("a", "b", "c", "r", "w", "x", "y", "k", "m", "u")
# Kinds with no maker, and why: nothing else may be missing (tests/sim/test_grammar.py).
NOT_SIMULATED = {
    ClauseKind.RENAME_TABLE: "refused on the shard path in optimistic mode (the worker stops with UnsupportedShardDDL)",
    ClauseKind.NOOP: "dropped by split_ddl; packed into multi-change ALTERs as filler instead (see pack)",
}


@dataclass(frozen=True)
class Change:
    """One change of the merged table: ``paths`` are the per-table ways to make it (each a list
    of ALTER clauses, or whole statements starting with CREATE/DROP); all end at one schema.
    ``usual`` is the share of tables taking the first path."""
    kind: str
    touches: frozenset[str]
    paths: tuple[tuple[str, ...], ...]
    usual: float = 0.4


@dataclass
class Names:
    """Columns and indexes of the base table not yet touched by a change of this scenario, and a
    counter for new names."""
    free: set[str] = field(default_factory=lambda: set(INT_COLUMNS))
    taken: set[str] = field(default_factory=set)
    n: int = 0

    def int_column(self, rng: random.Random) -> str | None:
        cols = sorted(self.free & set(INT_COLUMNS))
        if not cols:
            return None
        c = rng.choice(cols)
        self.free.discard(c)
        return c

    def take(self, name: str) -> bool:
        """Claim one of the base table's special columns/indexes (False: another change has it)."""
        if name in self.taken:
            return False
        self.taken.add(name)
        return True

    def new(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"


def _c(*paths: tuple[str, ...] | list[str]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(p) for p in paths)


# ----------------------------------------------------------------------------- makers, one per kind
def add_column(rng: random.Random, nm: Names) -> Change | None:
    c = nm.new("c")
    where = rng.choice(["", "", " FIRST", " AFTER id"])
    generated = rng.random() < 0.2
    typ = "INT AS (id + 1) VIRTUAL" if generated else rng.choice(["INT", "BIGINT", "VARCHAR(16)", "INT NOT NULL DEFAULT 0"])
    paths = [[f"ADD COLUMN {c} {typ}{where}"]]
    if not generated and typ == "INT":
        paths.append([f"ADD COLUMN {c} SMALLINT{where}", f"MODIFY COLUMN {c} INT"])   # added narrow, then widened
    return Change("add_column", frozenset({c}), _c(*paths), usual=0.7)


def add_then_drop(rng: random.Random, nm: Names) -> Change | None:
    """A column that comes and goes again (a lagging shard adds it after others widened it)."""
    c = nm.new("t")
    return Change("add_column", frozenset({c}), _c([f"ADD COLUMN {c} INT", f"DROP COLUMN {c}"],
                                                   [f"ADD COLUMN {c} INT", f"MODIFY COLUMN {c} BIGINT", f"DROP COLUMN {c}"]))


def drop_column(rng: random.Random, nm: Names) -> Change | None:
    x = nm.int_column(rng)
    if x is None:
        return None
    return Change("drop_column", frozenset({x}), _c([f"DROP COLUMN {x}"], [f"MODIFY COLUMN {x} BIGINT", f"DROP COLUMN {x}"]))


def modify_column(rng: random.Random, nm: Names) -> Change | None:
    x = nm.int_column(rng)
    if x is None:
        return None
    shape = rng.choice(["widen", "narrow", "race", "race", "null"])
    if shape == "widen":
        return Change("modify_column", frozenset({x}), _c([f"MODIFY COLUMN {x} BIGINT"], [f"MODIFY COLUMN {x} INT AFTER id",
                                                                                          f"MODIFY COLUMN {x} BIGINT"]))
    if shape == "narrow":
        return Change("modify_column", frozenset({x}), _c([f"MODIFY COLUMN {x} SMALLINT"]))
    if shape == "null":
        return Change("modify_column", frozenset({x}), _c([f"MODIFY COLUMN {x} INT NOT NULL"]))
    # opposite changes racing: some shards widen and narrow back, others never change it
    return Change("modify_column", frozenset({x}), _c([], [f"MODIFY COLUMN {x} BIGINT", f"MODIFY COLUMN {x} INT"]),
                  usual=0.3)


def modify_special(rng: random.Random, nm: Names) -> Change | None:
    """Retype, NULL again, collation: columns of their own in the base table."""
    options = [o for o in ("v", "nn", "s") if o not in nm.taken]
    if not options:
        return None
    o = rng.choice(options)
    nm.take(o)
    if o == "v":
        return Change("modify_column", frozenset({"v"}), _c(["MODIFY COLUMN v INT"]))                  # retype
    if o == "nn":
        return Change("modify_column", frozenset({"nn"}), _c(["MODIFY COLUMN nn INT NULL"]))
    return Change("modify_column", frozenset({"s"}),
                  _c(["MODIFY COLUMN s VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"]))


def change_column(rng: random.Random, nm: Names) -> Change | None:
    x = nm.int_column(rng)
    if x is None:
        return None
    if rng.random() < 0.5:
        return Change("change_column", frozenset({x}), _c([f"CHANGE COLUMN {x} {x} BIGINT"], [f"MODIFY COLUMN {x} BIGINT"]))
    y = f"{x}_rn"
    return Change("change_column", frozenset({x, y}), _c([f"CHANGE COLUMN {x} {y} INT"], [f"RENAME COLUMN {x} TO {y}"]))


def rename_column(rng: random.Random, nm: Names) -> Change | None:
    x = nm.int_column(rng)
    if x is None:
        return None
    y = f"{x}_rn"
    if rng.random() < 0.4:          # every shard renames
        return Change("rename_column", frozenset({x, y}), _c([f"RENAME COLUMN {x} TO {y}"]))
    return Change("rename_column", frozenset({x, y}), _c([f"RENAME COLUMN {x} TO {y}"],
                                                         [f"DROP COLUMN {x}", f"ADD COLUMN {y} INT"],
                                                         [f"ADD COLUMN {y} INT", f"DROP COLUMN {x}"]))


def add_then_rename(rng: random.Random, nm: Names) -> Change | None:
    """A column added in the scenario and then renamed: a lagging shard has neither name while
    the others rename it (it has not added it yet), unlike one that dropped it; some shards
    drop it and add the new name instead."""
    c = nm.new("z")
    y = f"{c}_rn"
    return Change("rename_column", frozenset({c, y}), _c([f"ADD COLUMN {c} INT", f"RENAME COLUMN {c} TO {y}"],
                                                         [f"ADD COLUMN {c} INT", f"DROP COLUMN {c}", f"ADD COLUMN {y} INT"]),
                  usual=0.7)


def alter_default(rng: random.Random, nm: Names) -> Change | None:
    if not nm.take("d"):
        return None
    return Change("alter_default", frozenset({"d"}), _c([rng.choice(["ALTER COLUMN d SET DEFAULT 5",
                                                                     "ALTER COLUMN d DROP DEFAULT"])]))


def column_visibility(rng: random.Random, nm: Names) -> Change | None:
    if not nm.take("n"):
        return None
    return Change("column_visibility", frozenset({"n"}), _c(["ALTER COLUMN n SET INVISIBLE"]))


def add_index(rng: random.Random, nm: Names) -> Change | None:
    x = nm.int_column(rng)
    if x is None:
        return None
    if rng.random() < 0.3:           # opposite changes racing: a UNIQUE index added and dropped again
        return Change("add_index", frozenset({x}), _c([], [f"ADD UNIQUE INDEX ux_{x} ({x})", f"DROP INDEX ux_{x}"]),
                      usual=0.3)
    unique = "UNIQUE " if rng.random() < 0.3 else ""
    return Change("add_index", frozenset({x}), _c([f"ADD {unique}INDEX ix_{x} ({x})"],
                                                  [f"CREATE {unique}INDEX ix_{x} ON t ({x})"]))


def drop_index(rng: random.Random, nm: Names) -> Change | None:
    if not nm.take("ix_e"):
        return None
    return Change("drop_index", frozenset({"ix_e"}), _c(["DROP INDEX ix_e"], ["DROP INDEX ix_e ON t"]))


def rename_index(rng: random.Random, nm: Names) -> Change | None:
    if not nm.take("ix_f"):
        return None
    if rng.random() < 0.4:
        # renamed then dropped on some tables, dropped under its old name on others: a fast table
        # names the new name while the downstream may still have the old one
        return Change("rename_index", frozenset({"ix_f"}),
                      _c(["RENAME INDEX ix_f TO ix_f2", "DROP INDEX ix_f2"], ["DROP INDEX ix_f"]))
    return Change("rename_index", frozenset({"ix_f"}), _c(["RENAME INDEX ix_f TO ix_f2"],
                                                          ["RENAME KEY ix_f TO ix_f2"]))


def alter_index(rng: random.Random, nm: Names) -> Change | None:
    if not nm.take("ix_g"):
        return None
    return Change("alter_index", frozenset({"ix_g"}), _c(["ALTER INDEX ix_g INVISIBLE"]))


def table_options(rng: random.Random, nm: Names) -> Change | None:
    if not nm.take("options"):
        return None
    return Change("table_options", frozenset({"options"}), _c(["COMMENT = 'merged'"], ["ENGINE = InnoDB", "COMMENT = 'merged'"]))


def convert_charset(rng: random.Random, nm: Names) -> Change | None:
    # converts every string column: a change of `s` or `v` in another order would end elsewhere
    if {"charset", "s", "v"} & nm.taken:
        return None
    nm.taken |= {"charset", "s", "v"}
    return Change("convert_charset", frozenset({"charset"}), _c(["CONVERT TO CHARACTER SET utf8mb4"]))


# ClauseKind -> its makers; a statement kind's maker is reached through the clause it stands for
# (CREATE INDEX / DROP INDEX ... ON t are paths of add_index / drop_index)
MAKERS = {
    ClauseKind.ADD_COLUMN: (add_column, add_then_drop),
    ClauseKind.DROP_COLUMN: (drop_column,),
    ClauseKind.MODIFY_COLUMN: (modify_column, modify_special),
    ClauseKind.CHANGE_COLUMN: (change_column,),
    ClauseKind.RENAME_COLUMN: (rename_column, add_then_rename),
    ClauseKind.ALTER_DEFAULT: (alter_default,),
    ClauseKind.COLUMN_VISIBILITY: (column_visibility,),
    ClauseKind.ADD_INDEX: (add_index,),
    ClauseKind.DROP_INDEX: (drop_index,),
    ClauseKind.RENAME_INDEX: (rename_index,),
    ClauseKind.ALTER_INDEX: (alter_index,),
    ClauseKind.TABLE_OPTIONS: (table_options,),
    ClauseKind.CONVERT_CHARSET: (convert_charset,),
}
# statement kinds on a shard table the generator emits (the rest are database-level, or are
# table lifecycle the world models as joining/leaving members)
STATEMENT_KINDS = {StatementKind.ALTER_TABLE, StatementKind.CREATE_INDEX, StatementKind.DROP_INDEX}


def changes(rng: random.Random, count: int, exclude: tuple[str, ...] = ()) -> list[Change]:
    """``count`` changes on distinct columns, kinds drawn uniformly from the grammar."""
    nm = Names()
    kinds = [k for k in MAKERS if k.value not in exclude]
    out: list[Change] = []
    for _ in range(count * 4):
        if len(out) == count:
            break
        maker = rng.choice(MAKERS[rng.choice(kinds)])
        ch = maker(rng, nm)
        if ch is not None:
            out.append(ch)
    return out


def _interleave(rng: random.Random, seqs: list[list[tuple[int, str]]]) -> list[tuple[int, str]]:
    seqs = [list(s) for s in seqs if s]
    out = []
    while seqs:
        i = rng.randrange(len(seqs))
        out.append(seqs[i].pop(0))
        if not seqs[i]:
            seqs.pop(i)
    return out


def pack(rng: random.Random, clauses: list[tuple[int, str]], multi: float = 0.65) -> list[str]:
    """Upstream statements from (change index, clause): consecutive clauses of different changes
    share one ALTER with probability ``multi`` each; CREATE/DROP INDEX statements stand alone."""
    stmts: list[str] = []
    cur: list[str] = []
    owners: set[int] = set()
    for owner, cl in clauses:
        whole = cl.upper().startswith(("CREATE ", "DROP INDEX ")) and " ON " in cl.upper()
        if whole:
            if cur:
                stmts.append(_alter(rng, cur))
                cur, owners = [], set()
            stmts.append(cl)
            continue
        if cur and (owner in owners or rng.random() >= multi):
            stmts.append(_alter(rng, cur))
            cur, owners = [], set()
        cur.append(cl)
        owners.add(owner)
    if cur:
        stmts.append(_alter(rng, cur))
    return stmts


def _alter(rng: random.Random, clauses: list[str]) -> str:
    tail = [rng.choice(["ALGORITHM = INPLACE", "LOCK = NONE", "ALGORITHM = DEFAULT"])] \
        if len(clauses) > 1 and rng.random() < 0.15 else []
    return "ALTER TABLE t " + ", ".join(clauses + tail)


def table_events(rng: random.Random, chosen: list[Change], tables: int) -> list[list[list[str]]]:
    """Per table its events: one event per upstream statement, split as the worker splits it
    (one Info each, its statements the ALTER's changes)."""
    out = []
    for _ in range(tables):
        per = []
        for i, ch in enumerate(chosen):
            path = ch.paths[0] if rng.random() < ch.usual or len(ch.paths) == 1 else rng.choice(ch.paths[1:])
            per.append([(i, cl) for cl in path])
        out.append([[canonical_ddl(x) for x in split_ddl(s)] for s in pack(rng, _interleave(rng, per))])
    return out


def multi_share(events: list[list[list[str]]]) -> tuple[int, int]:
    """(ALTERs with more than one change, all statements) of a scenario."""
    evs = [ev for tab in events for ev in tab]
    return sum(1 for ev in evs if len(ev) > 1), len(evs)
