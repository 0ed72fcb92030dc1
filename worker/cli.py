"""The worker side's commands of ``shardctl``: ``worker`` (run a worker process until SIGTERM /
SIGINT; ``python -m coordinator.cli worker ...`` without the installed script) and ``check``
(compare each downstream table of a task with the merge of its upstream shards,
``worker.check.check_task``; exit 0 equal, 1 different, 2 error).  ``coordinator.cli`` loads this
module by name, so nothing under ``coordinator/`` imports the worker.
"""
from __future__ import annotations

import json
import sys

from coordinator.serve import log_level, serve
from coordinator.errors import ShardMergeError
from coordinator.etcd_client import EtcdEndpointError, add_security_args


def register(sub) -> None:
    """Add ``worker`` and ``check`` to shardctl's sub-parsers."""
    _register_worker(sub)
    _register_check(sub)


def run(args) -> int:
    from worker.process import WorkerOptions, WorkerProcess   # the whole worker: only when this command runs
    return serve("worker", args, lambda: WorkerProcess(WorkerOptions(
        etcd=args.etcd, name=args.name, source_file=args.source, prefix=args.prefix,
        spark_master=args.spark_master, metrics_addr=args.metrics_addr, ttl=args.ttl)),
        (ShardMergeError, EtcdEndpointError, OSError))


def _register_worker(sub) -> None:
    p = sub.add_parser("worker", help="run a worker (replicates the sources the master binds to it)")
    p.add_argument("--etcd", required=True, help="etcd endpoint(s) HOST:PORT[,HOST:PORT]")
    p.add_argument("--source", default=None, metavar="SOURCE.yaml",
                   help="DM source config (source-id, enable-gtid, flavor, from: {host, port, user, password}) "
                        "of the source this worker serves")
    p.add_argument("--spark-master", default="", help="Spark master URL (default local[2])")
    p.add_argument("--name", default="", help="worker name in etcd (default worker-<source>-<host>-<pid>)")
    p.add_argument("--metrics-addr", default="", help="HOST:PORT for /metrics /healthz /readyz (off if empty)")
    p.add_argument("--prefix", default="/shardmerge/", help="etcd key prefix of this cluster")
    p.add_argument("--ttl", type=int, default=10, help="registration lease TTL in seconds")
    p.add_argument("--log-level", default="INFO", type=log_level,
                   help="DEBUG, INFO, WARNING or ERROR (default: %(default)s)")
    add_security_args(p)
    p.set_defaults(func=run)


def _register_check(subparsers) -> None:
    p = subparsers.add_parser("check", help="compare each downstream table with the merge of its shards",
                              description="Compare each downstream table of a task with the merge of its "
                                          "upstream shards (counts + checksums per key chunk). Exit 0 "
                                          "equal, 1 different, 2 error.")
    p.add_argument("--task-file", required=True, help="task YAML")
    p.add_argument("--source-file", action="append", default=[], required=True,
                   help="source YAML, once per source of the task")
    p.add_argument("--chunk-rows", type=int, default=10_000, help="rows per checksum chunk (approx.)")
    p.add_argument("--max-keys", type=int, default=10, help="differing keys listed per table and kind")
    p.set_defaults(func=_check)


def _check(args) -> int:
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
