"""``shardctl binlog skip|revert TASK [-s SOURCE] [-b FILE:POS]`` (legacy dmctl form:
``handle-error TASK skip|revert -s SOURCE [-b FILE:POS]``): the operator's exit for a statement
that stopped a subtask in Error (a partition ALTER, a DDL the schema engine cannot apply, an
online-DDL cut-over RENAME...).  The statement is not executed nor coordinated; the worker moves
its checkpoints past it, once.  Without ``-b`` it is the statement the subtask is stopped on;
``-b`` names the statement *starting* at FILE:POS (pre-arm a skip for one not reached yet).
``binlog skip TASK`` without ``-s`` skips on every source stopped at a statement, as in DM."""
from __future__ import annotations

from coordinator.cli_common import CLIError, add_sources_flag, call, common, common_table, emit


def _one_source(args, cmd: str) -> str:
    if len(args.sources) != 1:
        got = "none" if not args.sources else ", ".join(args.sources)
        raise CLIError(f"{cmd} needs exactly one source: -s SOURCE (got {got})")
    return args.sources[0]


def run(args, op: str) -> int:
    from coordinator.cli_tasks import _task_name
    from coordinator.etcdproto import parse_binlog_pos
    from protos import master_pb2 as pb
    cmd = f"binlog {op}"
    # DM's runbook form `binlog skip TASK`: every source stopped at a statement
    source = "" if op == "skip" and not args.sources and not args.binlog_pos else _one_source(args, cmd)
    if args.binlog_pos:
        try:
            parse_binlog_pos(args.binlog_pos)
        except ValueError as e:
            raise CLIError(f"-b {e}") from None
    resp = call(args, "HandleError", pb.HandleErrorRequest(task=_task_name(args.task), source=source, op=op,
                                                           binlog_pos=args.binlog_pos or ""))
    return emit(args, common(resp), common_table)


def _add_common(p) -> None:
    add_sources_flag(p)
    p.add_argument("-b", "--binlog-pos", default="", metavar="FILE:POS",
                   help="start position of the statement (default: the one the subtask is stopped on)")
    p.add_argument("task", metavar="TASK", help="task name or task file")


def register(sub) -> None:
    p = sub.add_parser("binlog", help="skip one binlog statement that stopped a subtask (binlog skip|revert)")
    ops = p.add_subparsers(dest="binlog_op", metavar="OP", required=True)
    q = ops.add_parser("skip", help="skip the statement the subtask is stopped on in Error (or the one at -b) "
                                    "and restart the subtask")
    _add_common(q)
    q.set_defaults(func=lambda a: run(a, "skip"))
    q = ops.add_parser("revert", help="remove a pending skip (all of the source's, or the one at -b)")
    _add_common(q)
    q.set_defaults(func=lambda a: run(a, "revert"))

    p = sub.add_parser("handle-error", help="legacy form of `binlog`: handle-error TASK skip|revert -s SOURCE [-b FILE:POS]")
    add_sources_flag(p)
    p.add_argument("-b", "--binlog-pos", default="", metavar="FILE:POS")
    p.add_argument("task", metavar="TASK")
    p.add_argument("op", choices=["skip", "revert"], metavar="skip|revert")
    p.set_defaults(func=lambda a: run(a, a.op))
