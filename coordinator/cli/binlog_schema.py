"""``shardctl binlog-schema list|update|delete TASK -s SOURCE DB TABLE [SCHEMA_FILE] [--flush] [--sync]
[--from-source|--from-target]`` (dmctl's ``binlog-schema``): show or override the structure the
worker's schema tracker holds for one upstream shard table, the exit when the tracked structure
went wrong (a table changed upstream outside the binlog).  ``update`` and ``delete`` need the
subtask Paused or stopped in Error.  As in dmctl, ``--flush`` (write it to the checkpoint too: it
survives a worker restart) and ``--sync`` (send it to the shard-DDL lock, optimistic mode) are on
unless given ``=false``.  The master hands the request to the source's worker and prints its
answer; ``list``'s per-source ``msg`` is the ``CREATE TABLE``."""
from __future__ import annotations

from pathlib import Path

from coordinator.cli.common import CLIError, call, common, common_table, emit
from coordinator.cli.tasks import task_name


def _bool(flag: str, text: str | None) -> bool | None:
    """dmctl's boolean flag values (``--flush=false``); None when the flag was not given."""
    if text is None:
        return None
    t = text.strip().lower()
    if t in ("true", "1", "yes", "on"):
        return True
    if t in ("false", "0", "no", "off"):
        return False
    raise CLIError(f"--{flag}={text} is not a boolean: use --{flag}, --{flag}=true or --{flag}=false")


def run(args, op: str) -> int:
    from protos import master_pb2 as pb      # gRPC stubs: loaded by the handler, not at parser build
    cmd = f"binlog-schema {op}"
    if len(args.sources) != 1:
        got = "none" if not args.sources else ", ".join(args.sources)
        raise CLIError(f"{cmd} needs exactly one source: -s SOURCE (got {got})")
    schema = ""
    from_source, from_target = bool(getattr(args, "from_source", False)), bool(getattr(args, "from_target", False))
    if op == "update" and [bool(args.schema_file), from_source, from_target].count(True) != 1:
        raise CLIError(f"{cmd} takes the new structure from exactly one of: a SCHEMA_FILE, --from-source (the "
                       "upstream table now), --from-target (the downstream table)")
    if op == "update" and args.schema_file:
        path = Path(args.schema_file)
        try:
            schema = path.read_text()
        except OSError as e:
            raise CLIError(f"{cmd}: cannot read schema file {args.schema_file!r}: {e.strerror or e}; give a file "
                           "holding the table's CREATE TABLE statement; nothing changed") from None
        from coordinator.schema.errors import NOT_CREATE_TABLE, SchemaError      # sqlglot: not at parser build
        from coordinator.schema.parse import parse_create_table   # (the same)
        try:
            parse_create_table(schema)
        except (SchemaError, ValueError) as e:
            raise CLIError(f"{cmd}: schema file {args.schema_file!r} {NOT_CREATE_TABLE}: {e}; give a file "
                           "holding the table's CREATE TABLE statement; nothing changed") from None
    sync = _bool("sync", getattr(args, "sync", None))
    flush = _bool("flush", getattr(args, "flush", None)) is not False    # dmctl: on by default
    req = pb.OperateSchemaRequest(task=task_name(args.task), source=args.sources[0], op=op,
                                  database=args.database, table=args.table, schema=schema,
                                  flush=op != "list" and flush, sync=op == "update" and sync is not False,
                                  sync_given=sync is not None, from_source=from_source, from_target=from_target)
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
            q.add_argument("schema_file", metavar="SCHEMA_FILE", nargs="?", default="",
                           help="file with the table's CREATE TABLE")
            q.add_argument("--sync", nargs="?", const="true", default=None, metavar="BOOL",
                           help="send the structure to the table's shard-DDL lock (default: true where it "
                                "applies, a shard table in optimistic mode; --sync=false not)")
            q.add_argument("--from-source", action="store_true",
                           help="take the upstream table's current structure instead of a file")
            q.add_argument("--from-target", action="store_true",
                           help="take the downstream target table's structure instead of a file")
        if op != "list":
            q.add_argument("--flush", nargs="?", const="true", default=None, metavar="BOOL",
                           help="also write it to the checkpoint, so it survives a worker restart (default "
                                "true; --flush=false keeps it in the worker until the subtask checkpoints it)")
        q.set_defaults(func=lambda a, op=op: run(a, op))
