"""``shardctl binlog skip|replace|inject|revert|list TASK [-s SOURCE] [-b FILE:POS]`` (legacy dmctl
form: ``handle-error TASK skip|replace|inject|revert -s SOURCE [-b FILE:POS] [SQL]``): the operator's
exit for a statement that stopped a subtask in Error or paused it on a shard-DDL conflict (a
partition ALTER, a DDL the schema engine cannot apply, an online-DDL cut-over RENAME...).

``skip``: the statement is not executed nor coordinated; the worker moves its checkpoints past
it, once.  ``replace TASK "SQL1; SQL2"``: the given DDLs are handled in its place, coordinated on
the shard-DDL lock like an upstream DDL (DM's intrusive fix of a conflict).  ``inject TASK "SQL"``:
the given DDLs are handled just before it (coordinated the same way), then the statement itself
(DM's fix for an upstream table changed outside the binlog).  Without ``-b`` it is
the statement the subtask is stopped on; ``-b`` names the statement *starting* at FILE:POS (arm
one not reached yet).  Without ``-s`` skip/replace/inject apply on every source stopped at a statement,
as in DM.  ``revert`` removes a pending one; ``list`` shows them and what became of them.
``binlog-schema`` (the tracked table structures) lives in ``binlog_schema.py``."""
from __future__ import annotations

from coordinator.cli.common import CLIError, add_sources_flag, call, common, common_table, emit
from coordinator.cli.tasks import task_name
from protos import master_pb2 as pb


def _one_source(args, cmd: str) -> str:
    if len(args.sources) != 1:
        got = "none" if not args.sources else ", ".join(args.sources)
        raise CLIError(f"{cmd} needs exactly one source: -s SOURCE (got {got})")
    return args.sources[0]


def run(args, op: str) -> int:
    cmd = f"binlog {op}"
    # DM's runbook form `binlog skip TASK`: every source stopped at a statement
    statements = [" ".join(args.sql)] if getattr(args, "sql", None) else []
    if op in ("replace", "inject") and not statements:
        what = "to run instead" if op == "replace" else "to run before it"
        raise CLIError(f'binlog {op} needs the statements {what}, e.g. '
                       f'binlog {op} TASK -s SOURCE "ALTER TABLE db.t ADD COLUMN c INT; ALTER TABLE db.t ADD UNIQUE (c)"')
    if op not in ("replace", "inject") and statements:
        raise CLIError(f"{cmd} takes no SQL (only binlog replace and inject do): {statements[0]!r}")
    open_ended = op in ("skip", "replace", "inject", "list") and not args.binlog_pos
    source = "" if open_ended and not args.sources else _one_source(args, cmd)
    if args.binlog_pos:
        from coordinator.etcdproto import parse_binlog_pos   # the etcd layout: not at CLI start-up
        try:
            parse_binlog_pos(args.binlog_pos)
        except ValueError as e:
            raise CLIError(f"-b {e}") from None
    resp = call(args, "HandleError", pb.HandleErrorRequest(task=task_name(args.task), source=source, op=op,
                                                           binlog_pos=args.binlog_pos or "", statements=statements))
    return emit(args, common(resp), common_table)


def _add_common(p) -> None:
    add_sources_flag(p)
    p.add_argument("-b", "--binlog-pos", default="", metavar="FILE:POS",
                   help="start position of the statement (default: the one the subtask is stopped on)")
    p.add_argument("task", metavar="TASK", help="task name or task file")


def register(sub) -> None:
    p = sub.add_parser("binlog", help="skip, replace or inject before one binlog statement that stopped a subtask "
                                      "(binlog skip|replace|inject|revert|list)")
    ops = p.add_subparsers(dest="binlog_op", metavar="OP", required=True)
    q = ops.add_parser("skip", help="skip the statement the subtask is stopped on in Error (or the one at -b) "
                                    "and restart the subtask")
    _add_common(q)
    q.set_defaults(func=lambda a: run(a, "skip"))
    q = ops.add_parser("replace", help="run the given DDLs instead of the statement the subtask is stopped on "
                                       "(or the one at -b), coordinated like an upstream DDL")
    _add_common(q)
    q.add_argument("sql", nargs="+", metavar="SQL", help="the statements, separated by ';' (quote them)")
    q.set_defaults(func=lambda a: run(a, "replace"))
    q = ops.add_parser("inject", help="run the given DDLs just before the statement the subtask is stopped on "
                                      "(or the one at -b), coordinated like an upstream DDL, then the statement")
    _add_common(q)
    q.add_argument("sql", nargs="+", metavar="SQL", help="the statements, separated by ';' (quote them)")
    q.set_defaults(func=lambda a: run(a, "inject"))
    q = ops.add_parser("revert", help="remove a pending skip, replace or inject (all of the source's, or the one at -b)")
    _add_common(q)
    q.set_defaults(func=lambda a: run(a, "revert"))
    q = ops.add_parser("list", help="the armed skips, replaces and injects of a task and what became of them")
    _add_common(q)
    q.set_defaults(func=lambda a: run(a, "list"))

    p = sub.add_parser("handle-error", help="legacy form of `binlog`: handle-error TASK skip|replace|revert "
                                            "-s SOURCE [-b FILE:POS] [SQL]")
    add_sources_flag(p)
    p.add_argument("-b", "--binlog-pos", default="", metavar="FILE:POS")
    p.add_argument("task", metavar="TASK")
    p.add_argument("op", choices=["skip", "replace", "inject", "revert"], metavar="skip|replace|inject|revert")
    p.add_argument("sql", nargs="*", metavar="SQL", help="replace/inject: the statements, separated by ';'")
    p.set_defaults(func=lambda a: run(a, a.op))
