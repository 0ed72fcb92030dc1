"""``shardctl check``: compare each downstream table of a task with the merge of its upstream
shards (``worker.check.check_task``); exit 0 equal, 1 different, 2 error."""
from __future__ import annotations

import json
import sys

from coordinator.errors import ShardMergeError


def register(subparsers) -> None:
    """Add ``check`` to shardctl's sub-parsers."""
    p = subparsers.add_parser("check", help="compare each downstream table with the merge of its shards",
                              description="Compare each downstream table of a task with the merge of its "
                                          "upstream shards (counts + checksums per key chunk). Exit 0 "
                                          "equal, 1 different, 2 error.")
    p.add_argument("--task-file", required=True, help="task YAML")
    p.add_argument("--source-file", action="append", default=[], required=True,
                   help="source YAML, once per source of the task")
    p.add_argument("--chunk-rows", type=int, default=10_000, help="rows per checksum chunk (approx.)")
    p.add_argument("--max-keys", type=int, default=10, help="differing keys listed per table and kind")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    # sqlglot (via the config), pymysql and the comparison: only when the command runs
    from coordinator.config import load_source, load_task
    from worker.check import check_task
    try:
        task = load_task(args.task_file)
        srcs = {}
        for f in args.source_file:
            s = load_source(f)
            srcs[s.source_id] = s
        rep = check_task(task, srcs, chunk_rows=args.chunk_rows, max_keys=args.max_keys)
    except ShardMergeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if getattr(args, "format", "json") == "table":
        for t in rep.tables:
            state = "equal" if t.equal else "DIFFERENT"
            print(f"{t.target}\t{state}\tdownstream={t.downstream_rows}\tupstream={t.upstream_rows}\t"
                  f"chunks={t.differing_chunks}/{t.chunks}\t{t.problem}")
            for label, ks in (("missing downstream", t.missing_downstream),
                              ("extra downstream", t.extra_downstream), ("different", t.different)):
                if ks:
                    print(f"  {label}: {ks}")
    else:
        print(json.dumps(rep.to_json(), indent=2, default=str))
    return 0 if rep.equal else 1
