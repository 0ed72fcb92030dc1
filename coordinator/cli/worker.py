"""``shardctl worker``: run a worker process until SIGTERM/SIGINT.

``python -m coordinator.cli worker ...`` runs it without the installed script."""
from __future__ import annotations

import signal
import sys

from coordinator.errors import ShardMergeError
from coordinator.etcd_client import EtcdEndpointError, add_security_args, security_from_args, set_default_security
from coordinator.obs import setup_logging


def run(args) -> int:

    from worker.process import WorkerOptions, WorkerProcess   # the whole worker: only when this command runs
    setup_logging(args.log_level)
    set_default_security(security_from_args(args))
    try:
        proc = WorkerProcess(WorkerOptions(
            etcd=args.etcd, name=args.name, source_file=args.source, prefix=args.prefix,
            spark_master=args.spark_master, metrics_addr=args.metrics_addr, ttl=args.ttl))
        proc.start()
    except (ShardMergeError, EtcdEndpointError, OSError) as e:
        print(f"shardctl worker: {e}", file=sys.stderr)
        return 1
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: proc.stop())
    proc.wait()
    return 0


def register(sub) -> None:
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
    p.add_argument("--log-level", default="INFO")
    add_security_args(p)
    p.set_defaults(func=run)

