"""``ddl-preview``: what a shard DDL (or a rollout of them) would do to the merged table, before it
runs upstream.  The live lock and the shards' tracked schemas are copied; the real lock engine
decides the copy's Infos while simulated workers answer them as the real ones would; nothing is
written anywhere.  The downstream's cost of each statement is read from the server by trying
``ALGORITHM=INSTANT``/``INPLACE`` on an empty copy of the table.

* ``target``   - which downstream table a statement changes and which shard tables run it;
* ``simulate`` - the pure simulation: steps, answers, holds, conflicts, resolution;
* ``cost``     - the downstream trial (the only module that talks to a server);
* ``plan``     - reading a ``--plan`` rollout file;
* ``render``   - the report as a table.
"""
from .errors import BadPlan, BadStatement, PreviewError, TableNotInTask, TaskNotRunning
from .simulate import PlanStep, Simulation, first_problem

__all__ = ["BadPlan", "BadStatement", "PlanStep", "PreviewError", "Simulation", "TableNotInTask",
           "TaskNotRunning", "first_problem"]
