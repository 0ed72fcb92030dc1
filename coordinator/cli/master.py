"""``shardctl master``: run a master process until SIGTERM/SIGINT.

Every flag can also be given in ``--config FILE`` (YAML, the flag's name without ``--`` as the
key, e.g. ``ssl-ca``, ``cert-allowed-cn``); a flag on the command line wins over the file."""
from __future__ import annotations

import argparse
import sys

from coordinator import gc_tuning
from coordinator.access import exposure
from coordinator.access.policy import AccessPolicy
from coordinator.access.tls import TlsFiles
from coordinator.serve import log_level, serve
from coordinator.errors import ConfigError, ShardMergeError
from coordinator.etcd_client import add_security_args

EXAMPLE = """example:
  shardctl master --etcd 127.0.0.1:2379 --listen 127.0.0.1:8261 --metrics-addr 127.0.0.1:8262 \\
      --ssl-ca ca.pem --ssl-cert master.pem --ssl-key master-key.pem --cert-allowed-cn ops,master
"""


def _cn_list(value) -> list[str]:
    items = value if isinstance(value, list) else str(value or "").split(",")
    return [str(x).strip() for x in items if str(x).strip()]


def apply_config_file(args, parser: argparse.ArgumentParser) -> None:
    """Fill the flags not given on the command line from ``args.config`` (YAML mapping)."""
    import yaml   # the master's config file only: not at every CLI start-up
    path = args.config
    try:
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
    except OSError as e:
        raise ConfigError(f"cannot read the master config: {e.strerror}", file=path) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"the master config is not valid YAML: {e}", file=path) from None
    if not isinstance(doc, dict):
        raise ConfigError("the master config must be a mapping of flag names to values", file=path)
    known = {a.option_strings[0][2:]: a for a in parser._actions
             if a.option_strings and a.option_strings[0].startswith("--") and a.dest not in ("help", "config")}
    for key, value in doc.items():
        action = known.get(str(key))
        if action is None:
            raise ConfigError(f"unknown key; the keys are the flags of `shardctl master`: "
                              f"{', '.join(sorted(known))}", file=path, key=str(key))
        if getattr(args, action.dest) != action.default:
            continue                          # given on the command line
        if action.type is int and not isinstance(value, int):
            raise ConfigError(f"must be an integer, not {value!r}", file=path, key=str(key))
        if isinstance(value, (dict, list)) and key not in ("cert-allowed-cn", "cert-read-only-cn"):
            raise ConfigError("must be a single value", file=path, key=str(key))
        setattr(args, action.dest, value if isinstance(value, (int, list)) else str(value))


def run(args) -> int:
    from coordinator.master.node import MasterNode   # the whole master: only when this command runs

    if args.config:
        try:
            apply_config_file(args, args.parser)
        except ConfigError as e:
            print(f"shardctl master: {e}", file=sys.stderr)
            return 1

    def build() -> MasterNode:
        if not args.etcd:
            raise ConfigError("give --etcd HOST:PORT (or etcd: in --config)", key="--etcd")
        origin = args.config or "command line"
        tls = TlsFiles(args.ssl_ca, args.ssl_cert, args.ssl_key, origin=origin, peer_name=args.ssl_peer_name)
        if tls.enabled and not tls.cert:
            raise ConfigError("ssl-ca without ssl-cert/ssl-key: the master needs its own certificate to serve TLS",
                              file=origin, key="ssl-cert")
        try:
            policy = AccessPolicy.from_settings(args.ssl_ca, _cn_list(args.cert_allowed_cn),
                                                _cn_list(args.cert_read_only_cn), args.auth_token_file)
        except ConfigError as e:
            e.context.setdefault("file", origin)
            raise
        secured = tls.enabled or not policy.open
        warning = exposure.check({"--listen": args.listen, "--metrics-addr": args.metrics_addr}, secured,
                                 bool(args.insecure), origin)
        node = MasterNode(args.etcd, args.listen, advertise=args.advertise_addr, name=args.name, prefix=args.prefix,
                          election_ttl=args.election_ttl, metrics_addr=args.metrics_addr,
                          http_cert=args.http_cert, http_key=args.http_key, tls=tls, policy=policy,
                          open_warning=warning, http_allowed_hosts=tuple(_cn_list(args.http_allowed_hosts)))
        gc_tuning.tune()    # what start-up loaded is long-lived; the watch decodes thousands of records a second
        return node
    return serve("master", args, build, (ShardMergeError, ValueError, OSError))


def register(sub) -> None:
    p = sub.add_parser("master", help="run a master (leader election, shard DDL locks, gRPC API)",
                       description="Run a master: leader election over etcd, the shard DDL lock engine while "
                                   "leader, the gRPC API for shardctl and (with --metrics-addr) the HTTP API and page.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="", metavar="FILE",
                   help="YAML file of these flags (key = flag name without --); flags win (default: none)")
    p.add_argument("--etcd", default="", help="etcd endpoint(s) HOST:PORT[,HOST:PORT] (required)")
    p.add_argument("--listen", default="127.0.0.1:8261", help="gRPC listen address HOST:PORT (default: %(default)s)")
    p.add_argument("--advertise-addr", default="", help="address other masters and clients reach this one at")
    p.add_argument("--name", default="", help="member name (default master-<advertise-addr>)")
    p.add_argument("--metrics-addr", default="", help="HOST:PORT of the HTTP port: /metrics /healthz /readyz, "
                   "the HTTP API /api/v1/... and the web page / (off if empty)")
    p.add_argument("--http-cert", default="", help="PEM certificate of the HTTP port only (default: --ssl-cert)")
    p.add_argument("--http-key", default="", help="PEM private key of --http-cert")
    p.add_argument("--ssl-ca", default="", help="CA of the client certificates: gRPC requires one (mutual TLS), "
                   "HTTPS checks one when presented; also verifies the leader when forwarding")
    p.add_argument("--ssl-cert", default="", help="PEM certificate of this master: gRPC and HTTP over TLS only")
    p.add_argument("--ssl-key", default="", help="PEM private key of --ssl-cert")
    p.add_argument("--ssl-peer-name", default="", metavar="NAME",
                   help="name the masters' certificate carries when it is not their advertised host (one "
                        "certificate for a Service name, pods advertising their IP); checked when a follower "
                        "forwards and when the HTTP API calls its own gRPC port")
    p.add_argument("--cert-allowed-cn", default="", metavar="CN[,CN]",
                   help="client certificate CNs with the operator role (other CNs are refused); include the "
                        "masters' own CN (followers forward to the leader with it)")
    p.add_argument("--cert-read-only-cn", default="", metavar="CN[,CN]",
                   help="client certificate CNs with the read role (status, locks, configs only)")
    p.add_argument("--auth-token-file", default="", metavar="FILE",
                   help="bearer tokens, one TOKEN,NAME,ROLE a line (ROLE: read or operator); required from "
                        "every caller without an allowed client certificate")
    p.add_argument("--insecure", action="store_true",
                   help="run without TLS and tokens on an address that is not loopback (every caller that can "
                        "reach it is an operator); refused without this flag, and logged every hour with it")
    p.add_argument("--http-allowed-hosts", default="", metavar="NAME[,NAME]",
                   help="host names the HTTP API and page answer to besides IP addresses and localhost (e.g. the "
                        "Service or Ingress name); other names are refused (DNS rebinding)")
    p.add_argument("--prefix", default="/shardmerge/", help="etcd key prefix of this cluster (default: %(default)s)")
    p.add_argument("--election-ttl", type=int, default=10, help="leader lease TTL in seconds (default: %(default)s)")
    p.add_argument("--log-level", default="INFO", type=log_level,
                   help="DEBUG, INFO, WARNING or ERROR (default: %(default)s)")
    add_security_args(p)
    p.set_defaults(func=run, parser=p)
