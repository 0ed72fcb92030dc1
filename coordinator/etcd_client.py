"""Connecting to etcd: the one place that builds an etcd3 client (and mends the library).

We use ``python3-etcd3`` (maintained fork of ``etcd3`` with protobuf 4+ stubs).  Its 0.13
release still calls ``six.itervalues`` in the watch thread's error path without importing
``six``; a broken watch stream (etcd restart, network cut) then dies with NameError and the
watchers are never told.  The master must re-read on a lost watch, so we supply the name.
"""
from __future__ import annotations

import os
import types
from dataclasses import dataclass
from pathlib import Path

import etcd3
import etcd3.watch as _watch
import grpc

if not hasattr(_watch, "six"):
    _watch.six = types.SimpleNamespace(itervalues=lambda d: list(d.values()))


def unquarantine_endpoints(client) -> None:
    """python3-etcd3 marks an endpoint *failed* for ``time_retry`` = 300 s after one UNAVAILABLE
    answer and, with a single endpoint, refuses every call meanwhile ("Trying to use a failed
    node"): a 2-second etcd restart cut masters and workers off for five minutes (found by the
    chaos test).  gRPC reconnects by itself, so a single endpoint is never quarantined and one of
    several only for 2 s (long enough to fail over, short enough to come back)."""
    eps = getattr(client, "endpoints", None)
    if not isinstance(eps, dict):
        return
    for ep in eps.values():
        if hasattr(ep, "time_retry"):
            ep.time_retry = 0.0 if len(eps) == 1 else min(float(ep.time_retry), 2.0)


class EtcdEndpointError(ValueError):
    """An --etcd value that is not HOST:PORT[,HOST:PORT...]."""


def parse_endpoints(spec: str) -> list[tuple[str, int]]:
    """Parse ``host:port[,host:port]`` (an optional ``http://`` is accepted, as etcdctl does)."""
    out = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        part = part.removeprefix("http://").removeprefix("https://")
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise EtcdEndpointError(
                f"etcd endpoint {part!r} in {spec!r} is not HOST:PORT (example: 127.0.0.1:2379)")
        out.append((host, int(port)))
    if not out:
        raise EtcdEndpointError("no etcd endpoint given; pass --etcd HOST:PORT")
    return out


@dataclass(frozen=True)
class EtcdSecurity:
    """Authentication and TLS for etcd.  The password is read from a file or an environment
    variable, never taken on the command line, and is not part of ``repr``."""
    user: str = ""
    password_file: str = ""
    password_env: str = ""
    ca: str = ""
    cert: str = ""
    key: str = ""

    ENV = {"user": "SHARDMERGE_ETCD_USER", "password_file": "SHARDMERGE_ETCD_PASSWORD_FILE",
           "ca": "SHARDMERGE_ETCD_CACERT", "cert": "SHARDMERGE_ETCD_CERT", "key": "SHARDMERGE_ETCD_KEY"}

    @classmethod
    def from_env(cls) -> "EtcdSecurity":
        vals = {f: os.environ.get(env, "") for f, env in cls.ENV.items()}
        if os.environ.get("SHARDMERGE_ETCD_PASSWORD"):
            vals["password_env"] = "SHARDMERGE_ETCD_PASSWORD"
        return cls(**vals)

    def password(self) -> str | None:
        if self.password_file:
            try:
                return Path(self.password_file).read_text().rstrip("\r\n")
            except OSError as e:
                raise EtcdEndpointError(f"cannot read the etcd password file {self.password_file!r}: "
                                        f"{e.strerror}") from None
        if self.password_env:
            if self.password_env not in os.environ:
                raise EtcdEndpointError(f"environment variable {self.password_env!r} (etcd password) is not set")
            return os.environ[self.password_env]
        return None

    def client_kwargs(self) -> dict:
        if bool(self.cert) != bool(self.key):
            raise EtcdEndpointError("give both --etcd-cert and --etcd-key (client certificate and its key)")
        if self.cert and not self.ca:
            # the etcd client library would open a plain-text channel and send nothing of the certificate
            raise EtcdEndpointError("--etcd-cert without --etcd-cacert would talk to etcd in plain text: give "
                                    "--etcd-cacert (the CA that signed etcd's server certificate)")
        for what, path in (("--etcd-cacert", self.ca), ("--etcd-cert", self.cert), ("--etcd-key", self.key)):
            if path and not Path(path).is_file():
                raise EtcdEndpointError(f"{what} file {path!r} does not exist")
        kw = {}
        if self.user:
            pw = self.password()
            if pw is None:
                raise EtcdEndpointError(f"etcd user {self.user!r} needs a password: --etcd-password-file "
                                        f"or SHARDMERGE_ETCD_PASSWORD")
            kw.update(user=self.user, password=pw)
        if self.ca:
            kw["ca_cert"] = self.ca
        if self.cert:
            kw.update(cert_cert=self.cert, cert_key=self.key)
        return kw


_default_security: EtcdSecurity | None = None


def set_default_security(sec: EtcdSecurity | None) -> None:
    """Set by the master/worker CLIs from their --etcd-* flags for every client they build."""
    global _default_security
    _default_security = sec


def add_security_args(p) -> None:
    """``--etcd-user``, ``--etcd-password-file``, ``--etcd-cacert``, ``--etcd-cert``, ``--etcd-key``
    (env: SHARDMERGE_ETCD_USER, SHARDMERGE_ETCD_PASSWORD[_FILE], SHARDMERGE_ETCD_CACERT/CERT/KEY)."""
    p.add_argument("--etcd-user", default="", help="etcd user (auth enabled clusters)")
    p.add_argument("--etcd-password-file", default="", help="file holding the etcd user's password")
    p.add_argument("--etcd-cacert", default="", help="CA bundle to verify etcd's TLS certificate")
    p.add_argument("--etcd-cert", default="", help="client certificate for etcd TLS")
    p.add_argument("--etcd-key", default="", help="client key for etcd TLS")


def security_from_args(args) -> EtcdSecurity:
    env = EtcdSecurity.from_env()
    return EtcdSecurity(user=args.etcd_user or env.user,
                        password_file=args.etcd_password_file or env.password_file,
                        password_env="" if args.etcd_password_file else env.password_env,
                        ca=args.etcd_cacert or env.ca, cert=args.etcd_cert or env.cert, key=args.etcd_key or env.key)


def connect(spec: str, timeout: float = 10, security: EtcdSecurity | None = None) -> etcd3.Etcd3Client:
    """A client for ``spec`` (several endpoints: etcd3's failover client).  Security comes from
    ``security``, else the CLI's flags, else the SHARDMERGE_ETCD_* environment."""
    eps = parse_endpoints(spec)
    sec = security or _default_security or EtcdSecurity.from_env()
    kw = sec.client_kwargs()
    schemes = {p.strip().split("://", 1)[0] for p in spec.split(",") if "://" in p}
    if "https" in schemes and not sec.ca:
        raise EtcdEndpointError(f"etcd endpoint {spec!r} is https:// but no --etcd-cacert is given: the connection "
                                "would be plain text; give the CA that signed etcd's certificate")
    if "http" in schemes and sec.ca:
        raise EtcdEndpointError(f"etcd endpoint {spec!r} is http:// but --etcd-cacert is given: use https:// "
                                "(TLS) or drop the TLS flags")
    if len(eps) == 1:
        host, port = eps[0]
        client = etcd3.client(host=host, port=port, timeout=timeout, **kw)
        unquarantine_endpoints(client)
        return client
    creds = None
    if sec.ca:
        read = lambda path: Path(path).read_bytes() if path else None  # noqa: E731
        creds = grpc.ssl_channel_credentials(read(sec.ca), read(sec.key), read(sec.cert))
    endpoints = [etcd3.Endpoint(host, port, secure=creds is not None, creds=creds) for host, port in eps]
    client = etcd3.MultiEndpointEtcd3Client(endpoints=endpoints, timeout=timeout, failover=True,
                                            user=kw.get("user"), password=kw.get("password"))
    unquarantine_endpoints(client)
    return client
