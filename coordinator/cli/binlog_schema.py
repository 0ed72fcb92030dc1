"""``shardctl binlog-schema list|update|delete TASK -s SOURCE DB TABLE [SCHEMA_FILE] [--flush] [--sync]``
(dmctl's ``binlog-schema``): show or override the structure the worker's schema tracker holds for
one upstream shard table, the exit when the tracked structure went wrong (a table changed
upstream outside the binlog).  ``update`` and ``delete`` need the subtask Paused or stopped in
Error; ``--flush`` also writes the structure to the checkpoint (it survives a worker restart),
``--sync`` sends it to the shard-DDL lock (optimistic mode).  The master hands the request to the
source's worker and prints its answer; ``list``'s per-source ``msg`` is the ``CREATE TABLE``."""
from __future__ import annotations

from pathlib import Path

from coordinator.cli.common import CLIError, call, common, common_table, emit
from coordinator.cli.tasks import task_name


def run(args, op: str) -> int:
    from protos import master_pb2 as pb
    cmd = f"binlog-schema {op}"
    if len(args.sources) != 1:
        got = "none" if not args.sources else ", ".join(args.sources)
        raise CLIError(f"{cmd} needs exactly one source: -s SOURCE (got {got})")
    schema = ""
    if op == "update":
        path = Path(args.schema_file)
        try:
            schema = path.read_text()
        except OSError as e:
            raise CLIError(f"{cmd}: cannot read schema file {args.schema_file!r}: {e.strerror or e}; give a file "
                           "holding the table's CREATE TABLE statement; nothing changed") from None
        from coordinator.schema.errors import SchemaError      # sqlglot: not at parser build
        from coordinator.schema.parse import parse_create_table
        try:
            parse_create_table(schema)
        except (SchemaError, ValueError) as e:
            raise CLIError(f"{cmd}: schema file {args.schema_file!r} is not a CREATE TABLE statement shardmerge "
                           f"can read: {e}; nothing changed") from None
    req = pb.OperateSchemaRequest(task=task_name(args.task), source=args.sources[0], op=op,
                                  database=args.database, table=args.table, schema=schema,
                                  flush=bool(getattr(args, "flush", False)), sync=bool(getattr(args, "sync", False)))
    return emit(args, common(call(args, "OperateSchema", req)), common_table)


def register(sub) -> None:
    p = sub.add_parser("binlog-schema", help="show or override the tracked structure of an upstream table "
                                             "(binlog-schema list|update|delete)")
    ops = p.add_subparsers(dest="schema_op", metavar="OP", required=True)
    helps = {"list": "print the tracked CREATE TABLE of the table",
             "update": "set the tracked structure from SCHEMA_FILE (a CREATE TABLE); the subtask must be "
                       "Paused or in Error",
             "delete": "forget the tracked structure: the worker reads it from the upstream again; the subtask "
                       "must be Paused or in Error"}
    for op, text in helps.items():
        q = ops.add_parser(op, help=text)
        q.add_argument("-s", "--source", dest="sources", action="append", default=[], metavar="SOURCE",
                       help="the source ID (exactly one)")
        q.add_argument("task", metavar="TASK", help="task name or task file")
        q.add_argument("database", metavar="DB", help="the upstream shard's database")
        q.add_argument("table", metavar="TABLE", help="the upstream shard's table")
        if op == "update":
            q.add_argument("schema_file", metavar="SCHEMA_FILE", help="file with the table's CREATE TABLE")
            q.add_argument("--sync", action="store_true",
                           help="also send the structure to the shard-DDL lock (optimistic mode)")
        if op != "list":
            q.add_argument("--flush", action="store_true",
                           help="also write it to the checkpoint, so it survives a worker restart")
        q.set_defaults(func=lambda a, op=op: run(a, op))
