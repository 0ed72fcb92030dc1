"""``shardctl validation start|stop|status|show-error|ignore-error|resolve-error|clear-error|update``:
dmctl's continuous-validator commands.  shardmerge has no continuous validator yet, so each one
answers that clearly (exit 1) and names what does compare the data today: ``shardctl check``."""
from __future__ import annotations

import argparse

from .common import emit

OPS = ("start", "stop", "status", "show-error", "ignore-error", "resolve-error", "clear-error", "update")


def validation(args) -> int:
    doc = {"result": False,
           "msg": f"validation {args.op}: shardmerge has no continuous validator yet (DM's `validators`, "
                  f"`validator-config-name` are accepted and not run); `shardctl check --task-file TASK.yaml "
                  f"--source-file SOURCE.yaml ...` compares each downstream table with the merge of its shards"}
    return emit(args, doc, lambda d: f"FAILED: {d['msg']}")


def register(sub) -> None:
    p = sub.add_parser("validation", help="dmctl's continuous-validator commands (no validator yet: each says so)")
    p.add_argument("op", choices=OPS)
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="ARG",
                   help="the arguments dmctl takes (task name, --mode, --start-time...)")
    p.set_defaults(func=validation)
