"""``shardctl master``: run a master process until SIGTERM/SIGINT."""
from __future__ import annotations

from coordinator import gc_tuning
from coordinator.cli.process import serve
from coordinator.errors import ShardMergeError
from coordinator.etcd_client import add_security_args


def run(args) -> int:
    from coordinator.master.node import MasterNode   # the whole master: only when this command runs

    def build() -> MasterNode:
        node = MasterNode(args.etcd, args.listen, advertise=args.advertise_addr, name=args.name, prefix=args.prefix,
                          election_ttl=args.election_ttl, metrics_addr=args.metrics_addr,
                          http_cert=args.http_cert, http_key=args.http_key)
        gc_tuning.tune()    # what start-up loaded is long-lived; the watch decodes thousands of records a second
        return node
    return serve("master", args, build, (ShardMergeError, ValueError, OSError))


def register(sub) -> None:
    p = sub.add_parser("master", help="run a master (leader election, shard DDL locks, gRPC API)")
    p.add_argument("--etcd", required=True, help="etcd endpoint(s) HOST:PORT[,HOST:PORT]")
    p.add_argument("--listen", default="127.0.0.1:8261", help="gRPC listen address HOST:PORT")
    p.add_argument("--advertise-addr", default="", help="address other masters and clients reach this one at")
    p.add_argument("--name", default="", help="member name (default master-<advertise-addr>)")
    p.add_argument("--metrics-addr", default="", help="HOST:PORT of the HTTP port: /metrics /healthz /readyz, "
                   "the HTTP API /api/v1/... and the web page / (off if empty)")
    p.add_argument("--http-cert", default="", help="PEM certificate: serve the HTTP port over HTTPS only")
    p.add_argument("--http-key", default="", help="PEM private key of --http-cert")
    p.add_argument("--prefix", default="/shardmerge/", help="etcd key prefix of this cluster")
    p.add_argument("--election-ttl", type=int, default=10, help="leader lease TTL in seconds")
    p.add_argument("--log-level", default="INFO")
    add_security_args(p)
    p.set_defaults(func=run)
