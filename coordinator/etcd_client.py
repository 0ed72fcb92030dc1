"""Connecting to etcd: the one place that builds an etcd3 client.

We use ``python3-etcd3`` (maintained fork of ``etcd3`` with protobuf 4+ stubs).  Its 0.13
release still calls ``six.itervalues`` in the watch thread's error path without importing
``six``; a broken watch stream (etcd restart, network cut) then dies with NameError and the
watchers are never told.  The master must re-read on a lost watch, so we supply the name.
"""
from __future__ import annotations

import types

import etcd3
import etcd3.watch as _watch

if not hasattr(_watch, "six"):
    _watch.six = types.SimpleNamespace(itervalues=lambda d: list(d.values()))


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


def connect(spec: str, timeout: float = 10, **kw) -> etcd3.Etcd3Client:
    """A client for the first endpoint of ``spec`` (multi-endpoint failover is etcd3's
    MultiEndpointEtcd3Client, used when several are given)."""
    eps = parse_endpoints(spec)
    if len(eps) == 1:
        host, port = eps[0]
        return etcd3.client(host=host, port=port, timeout=timeout, **kw)
    endpoints = [etcd3.Endpoint(host, port, secure=False) for host, port in eps]
    return etcd3.MultiEndpointEtcd3Client(endpoints=endpoints, timeout=timeout, failover=True)
