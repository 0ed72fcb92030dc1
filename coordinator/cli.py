"""`shardctl`: the command line of shardmerge (dmctl-like).

Each command lives in its own module and registers a sub-parser here, so this file stays a
table of contents.  Errors print one line naming the input and exit non-zero.
"""
from __future__ import annotations

import argparse
import sys

from coordinator import __version__


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shardctl", description="shardmerge control: tasks, shard DDL locks, processes")
    p.add_argument("--version", action="version", version=f"shardctl {__version__}")
    p.add_argument("--master-addr", default="127.0.0.1:8261", help="master gRPC address HOST:PORT")
    p.add_argument("--format", choices=["json", "table"], default="json", help="output format")
    p.add_subparsers(dest="command", metavar="COMMAND")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
