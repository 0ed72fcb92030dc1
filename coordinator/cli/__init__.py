"""`shardctl`: the command line of shardmerge (dmctl-like).

Every command lives in this package, one module a command group, each with a
``register(subparsers)`` function, except the worker side's (``worker.cli``, loaded by name so
the coordinator never imports the worker); this file only lists them in ``COMMAND_MODULES`` (imported when
the parser is built, so ``register`` must stay cheap: command handlers import gRPC stubs, the
master, the worker or pyspark inside themselves).  Shared client helpers: ``common``.  Errors
print one line naming the input and exit non-zero.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from coordinator import __version__
from coordinator.cli import helptext
from coordinator.cli.common import CLIError
from coordinator.errors import ShardMergeError

# Add a module here to add its commands.
COMMAND_MODULES = (
    "coordinator.cli.master",     # master (run the process)
    "worker.cli",                 # worker (run the process), check (compare downstream with upstream)
    "coordinator.cli.tasks",      # start-task, check-task, stop-task, pause-task, resume-task, query-status
    "coordinator.cli.locks",      # shard-ddl-lock (show-ddl-locks, unlock-ddl-lock)
    "coordinator.cli.sources",    # operate-source, get-config/config, list-member
    "coordinator.cli.binlog",     # binlog skip|replace|inject|revert|list, handle-error (legacy form)
    "coordinator.cli.binlog_schema",  # binlog-schema list|update|delete (the tracked table structures)
    "coordinator.cli.preview",    # ddl-preview (what a shard DDL would do, simulated on the master)
    "coordinator.cli.completion",  # completion bash|zsh (generated from this parser)
    "coordinator.cli.encrypt",    # encrypt / decrypt (dmctl's, local)
    "coordinator.cli.validation",  # validation ... (dmctl's; no continuous validator yet: says so)
)


class Parser(argparse.ArgumentParser):
    """A usage error is one line naming the command and pointing at its ``--help``, exit 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _duration(value: str, *, zero: bool = False) -> float:
    """``--rpc-timeout``: seconds, or a number with s / m / h (dmctl's ``10m``)."""
    v = value.strip().lower()
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(v[-1:], None)
    try:
        n = float(v[:-1] if scale else v) * (scale or 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a duration (e.g. 30, 30s, 10m)") from None
    if n < 0 or (n == 0 and not zero):
        raise argparse.ArgumentTypeError(f"{value!r} must be above zero" if not zero else f"{value!r} is negative")
    return n


def _wait(value: str) -> float:
    """``--leader-wait``: a duration, or 0 for "do not wait"."""
    return _duration(value, zero=True)


# (flags, keyword arguments) of the options every client command takes, before or after its name
GLOBAL_OPTIONS: list[tuple[tuple[str, ...], dict]] = [
    (("--master-addr",), dict(metavar="HOST:PORT[,HOST:PORT]",
                              help="master gRPC address(es), tried in order (default: $SHARDMERGE_MASTER_ADDR, "
                                   "$DM_MASTER_ADDR, else 127.0.0.1:8261)")),
    (("--format",), dict(choices=["json", "table"], help="output format (default: json)")),
    (("--rpc-timeout",), dict(type=_duration, metavar="DURATION",
                              help="timeout of each call to the master: seconds or 30s / 10m (default: 60s; "
                                   "check-task: longer)")),
    (("--leader-wait",), dict(type=_wait, metavar="DURATION",
                              help="while the masters are electing a leader, keep sending the command for "
                                   "this long (default: 30s; 0: do not wait; the command is refused before it "
                                   "runs, so sending it again is safe)")),
    (("--ssl-ca",), dict(metavar="FILE", help="CA that signed the master's certificate: talk TLS "
                                              "(default: $SHARDMERGE_SSL_CA; plain text if no --ssl-* is given)")),
    (("--ssl-cert",), dict(metavar="FILE", help="client certificate for a master with mutual TLS "
                                                "(default: $SHARDMERGE_SSL_CERT)")),
    (("--ssl-key",), dict(metavar="FILE", help="private key of --ssl-cert (default: $SHARDMERGE_SSL_KEY)")),
    (("--token-file",), dict(metavar="FILE", help="file holding a bearer token of the master's auth-token-file "
                                                  "(default: $SHARDMERGE_TOKEN_FILE, or the token in "
                                                  "$SHARDMERGE_TOKEN)")),
]
PROCESS_COMMANDS = ("master", "worker", "completion", "encrypt", "decrypt", "validation")   # no call to a master: no client options     # run a process: no client options


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Yield (command path, parser) for ``parser`` and every sub-command below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    continue                     # an alias of a command already walked
                seen.add(id(sub))
                yield from walk(sub, path + (name,))


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="shardctl", description="shardmerge control: tasks, shard DDL locks, processes",
               epilog="example:\n  shardctl --master-addr 10.0.0.1:8261,10.0.0.2:8261 query-status my-task\n"
                      "  shardctl query-status --help",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"shardctl {__version__}")
    for flags, kw in GLOBAL_OPTIONS:
        p.add_argument(*flags, default=None, **kw)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    # dmctl accepts its global flags after the command too: each client command repeats them with
    # SUPPRESS defaults, so a value given there wins and none given leaves the top-level one
    for path, cmd in walk(p):
        if not path or path[0] in PROCESS_COMMANDS:
            continue
        for flags, kw in GLOBAL_OPTIONS:
            if not any(f in cmd._option_string_actions for f in flags):
                cmd.add_argument(*flags, default=argparse.SUPPRESS, **kw)
    helptext.finish(p, walk)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "trailing_sql", False) and not any(x.startswith("-") for x in extra):
        # `ddl-preview TASK -s S --tables P "SQL"`: argparse gave the optional positional SQL its
        # empty match before the options, so the statement after them comes back unparsed
        args.sql, extra = [*args.sql, *extra], []
    if extra:       # name the command whose --help lists the flags, on one line
        cmd = " ".join(x for x in (getattr(args, "command", None), getattr(args, "binlog_op", None),
                                   getattr(args, "schema_op", None)) if x)
        prog = f"shardctl {cmd}".strip()
        print(f"{prog}: error: unrecognized arguments: {' '.join(extra)} (see `{prog} --help`)", file=sys.stderr)
        raise SystemExit(2)          # as argparse's own usage errors
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

