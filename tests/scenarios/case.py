"""One DM optimistic case as data, and the step language the runner (``test_dm_cases.py``) speaks.

A case names the DM case it comes from, the shard tables per source (DM's ``tb1``/``tb2``; ours are
``orders_01``/``orders_02`` of the test's database (``tb3``/``tb4`` -> ``orders_03``/``orders_04``, e.g. for DM's second database ``shardddl2``), routed to one target ``orders``; a source that
DM's case does not use is left out) and the steps in order.  Steps:

* ``(source, sql)``: a statement on that source (``s1``/``s2``) in the test's database, ``tb1``/``tb2``
  standing for the shard tables; ``(source, (sql, sql...))``: statements in one session (e.g.
  ``SET TIMESTAMP = ...`` first, to give a DDL its binlog time);
* ``("start",)``: start the task here (steps before it run before ``start-task``; without it the task
  starts before the first step);
* ``("expect", "stage", source, stage, phrase...)``: the subtask reaches ``stage`` with an error
  that contains every phrase (waited for) (DM's phrases where DM's test greps one); source ``any``: one of them;
* ``("expect", "locks", n, phrase...)``: ``shard-ddl-lock TASK`` shows ``n`` locks and its JSON text
  contains every phrase (e.g. a DDL, ``"unsynced"`` member);
* ``("running",)``: every source's subtask is Running;
* ``("ctl", arg...)``: a ``shardctl`` command that must succeed (``{task}`` is the case's task, ``{task_file}`` its task file,
  ``{down}`` the downstream database, ``{db}`` / ``{db:s1}`` / ``{db:s2}`` a source's upstream database;
  ``tb1``.. are renamed as in statements);
* ``("ctl_fails", (phrase...), arg...)``: a ``shardctl`` command that must fail (exit code not 0) with
  every phrase in its output (DM's error texts, checked as text);
* ``("file", name, text)``: writes ``text`` (``tb1``.. renamed) to ``{tmp}/name`` (``{tmp}``: the case's
  temporary directory, for ``ctl`` arguments such as a schema file);
* ``("ignore_tables", table...)``: the task file's block-allow lists leave these shard tables out
  (``ignore-tables``; DM's changed ``do-dbs``), for the next ``start_task``;
* ``("down", sql)``: a statement on the downstream (an operator's fix);
* ``("down_rows", sql, rows)``: the downstream query returns exactly ``rows`` (a list of tuples),
  waited for;
* ``("count", n)``: the target holds ``n`` rows, waited for;
* ``("restart", "master")`` / ``("restart", "worker", source)``: SIGKILL the process and start it again
  (a master: until it leads again); ``("kill", ...)`` and ``("revive", ...)`` do the two halves, so
  upstream statements can run while the process is down;
* ``("expect", "different")``: ``shardctl check`` reports the data different (DM's "not equal" end);
* ``("stop_task",)`` / ``("start_task",)``: ``stop-task`` then ``start-task`` again (resumes from the
  checkpoints, as DM does without ``--remove-meta``);
* ``("wait_equal",)``: ``shardctl check`` equal (the last step of every case that expects equal data).

Written in our words from DM's cases; DM's own code is not used.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    dm: str                                   # DM test file and case function
    tables: dict                              # {source: shard tables} in DM's names (tb1, tb2)
    steps: tuple
    columns: str = "id INT PRIMARY KEY"
    table_options: str = ""                   # e.g. a PARTITION BY clause for every shard table
    mode: str = "incremental"                 # task-mode: "all" dumps what steps before ("start",) wrote
    task_options: tuple = ()                  # extra task keys, e.g. (("strict-optimistic-shard-mode", True),)
    # ((MariaDB text, MySQL text), ...): how a statement reads on a MySQL source (e.g. MariaDB's
    # ALTER INDEX ... IGNORED is MySQL's INVISIBLE); replaced in order
    mysql_forms: tuple = ()
    mariadb_only: str = ""                    # why the case cannot run on MySQL (its syntax is MariaDB's)



def three_steps(name: str, dm: str, columns: str, alter: str, width: int) -> Case:
    """DM's shardddl4_1 pattern: source 1's tb1, then source 2's tb1, then its tb2 run ``alter``,
    with a row written to each table before and after every step; the data must end equal."""
    def rows(n0: int) -> tuple:
        vals = lambda n: "(" + ",".join([str(n)] * width) + ")"  # noqa: E731
        return (("s1", f"insert into tb1 values{vals(n0)}"), ("s2", f"insert into tb1 values{vals(n0 + 1)}"),
                ("s2", f"insert into tb2 values{vals(n0 + 2)}"))
    steps = (*rows(1), ("s1", f"alter table tb1 {alter}"), *rows(4), ("s2", f"alter table tb1 {alter}"), *rows(7),
             ("s2", f"alter table tb2 {alter}"), *rows(10), ("wait_equal",))
    return Case(name, dm, {"s1": ("tb1",), "s2": ("tb1", "tb2")}, steps, columns=columns)
