"""``shardctl worker``: run a worker process until SIGTERM/SIGINT.

``python -m coordinator.cli worker ...`` runs it without the installed script."""
from __future__ import annotations

from coordinator.cli.process import log_level, serve
from coordinator.errors import ShardMergeError
from coordinator.etcd_client import EtcdEndpointError, add_security_args


def run(args) -> int:
    from worker.process import WorkerOptions, WorkerProcess   # the whole worker: only when this command runs
    return serve("worker", args, lambda: WorkerProcess(WorkerOptions(
        etcd=args.etcd, name=args.name, source_file=args.source, prefix=args.prefix,
        spark_master=args.spark_master, metrics_addr=args.metrics_addr, ttl=args.ttl)),
        (ShardMergeError, EtcdEndpointError, OSError))


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
    p.add_argument("--log-level", default="INFO", type=log_level,
                   help="DEBUG, INFO, WARNING or ERROR (default: %(default)s)")
    add_security_args(p)
    p.set_defaults(func=run)

