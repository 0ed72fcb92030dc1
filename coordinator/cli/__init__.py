"""`shardctl`: the command line of shardmerge (dmctl-like).

Every command lives in this package, one module a command group, each with a
``register(subparsers)`` function; this file only lists them in ``COMMAND_MODULES`` (imported when
the parser is built, so ``register`` must stay cheap: command handlers import gRPC stubs, the
master, the worker or pyspark inside themselves).  Shared client helpers: ``common``.  Errors
print one line naming the input and exit non-zero.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from coordinator import __version__
from coordinator.cli.common import CLIError
from coordinator.errors import ShardMergeError

# Add a module here to add its commands.
COMMAND_MODULES = (
    "coordinator.cli.master",     # master (run the process)
    "coordinator.cli.worker",     # worker (run the process)
    "coordinator.cli.tasks",      # start-task, check-task, stop-task, pause-task, resume-task, query-status
    "coordinator.cli.locks",      # shard-ddl-lock (show-ddl-locks, unlock-ddl-lock)
    "coordinator.cli.sources",    # operate-source, get-config/config, list-member
    "coordinator.cli.binlog",     # binlog skip|replace|inject|revert|list, handle-error (legacy form)
    "coordinator.cli.binlog_schema",  # binlog-schema list|update|delete (the tracked table structures)
    "coordinator.cli.check",      # check (compare downstream with the merged upstream)
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shardctl", description="shardmerge control: tasks, shard DDL locks, processes")
    p.add_argument("--version", action="version", version=f"shardctl {__version__}")
    p.add_argument("--master-addr", default="127.0.0.1:8261", help="master gRPC address HOST:PORT")
    p.add_argument("--format", choices=["json", "table"], default="json", help="output format")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except (CLIError, ShardMergeError) as e:
        print(f"shardctl {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130

