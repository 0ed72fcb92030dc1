"""One master process: gRPC API + election + (while leader) the lock coordinator and the binder."""
from __future__ import annotations

import ssl
import threading
from concurrent import futures

import grpc

from coordinator.access.exposure import Reminder
from coordinator.access.grpc_guard import AccessGuard
from coordinator.access.policy import AccessPolicy
from coordinator.access.tls import TlsFiles
from coordinator.api.app import ApiApp
from coordinator.errors import ConfigError
from coordinator.etcd_client import connect
from coordinator.etcdproto import DEFAULT_PREFIX, Fence, Store
from coordinator.obs import ObsServer, logger
from protos import master_pb2_grpc as pbg

from . import metrics, sealed
from .binder import Binder
from .cluster import Cluster
from .election import Election
from .membership import Membership
from .optimist import Optimist
from .service import MasterService


def http_tls_context(cert: str, key: str) -> ssl.SSLContext | None:
    """TLS for the HTTP port (API, page, metrics) when a certificate is given; None = plain HTTP."""
    if not cert and not key:
        return None
    if not (cert and key):
        raise ConfigError("give both --http-cert and --http-key for HTTPS (or neither for plain HTTP)",
                          key="--http-cert" if not cert else "--http-key")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the HTTPS certificate {cert} / key {key}: {e}", key="--http-cert") from None
    return ctx


class MasterNode:
    def __init__(self, etcd: str, listen: str, advertise: str = "", name: str = "",
                 prefix: str = DEFAULT_PREFIX, election_ttl: int = 10, metrics_addr: str = "",
                 bind_period: float = 3.0, http_cert: str = "", http_key: str = "",
                 tls: TlsFiles | None = None, policy: AccessPolicy | None = None,
                 open_warning: str = "", http_allowed_hosts: tuple[str, ...] = ()):
        self.etcd_spec, self.listen, self.prefix = etcd, listen, prefix
        self.open_warning = open_warning          # coordinator.access.exposure.check's, "" when secured
        self.http_allowed_hosts = http_allowed_hosts
        self.reminder: Reminder | None = None
        self.metrics_addr = metrics_addr
        self.tls = tls or TlsFiles()
        self.policy = policy or AccessPolicy()
        # the HTTP port: its own pair when given, else the gRPC port's certificates (and CA)
        self.http_tls = (http_tls_context(http_cert, http_key) if http_cert or http_key
                         else self.tls.server_context() if self.tls.cert else None)
        creds = self.tls.server_credentials() if self.tls.enabled else None
        self.client = connect(etcd)
        self.store = Store(self.client, prefix)
        self.cluster = Cluster(self.store)
        self.bind_period = bind_period
        # beyond 64 calls in flight a caller is refused at once (RESOURCE_EXHAUSTED) instead of
        # queued without bound behind the 8 threads
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="grpc"),
                                  interceptors=[AccessGuard(self.policy, name or listen)], maximum_concurrent_rpcs=64)
        try:
            port = (self.server.add_secure_port(listen, creds) if creds is not None
                    else self.server.add_insecure_port(listen))
        except RuntimeError as e:
            raise ConfigError(f"cannot listen on {listen}: {e}", key="--listen") from None
        if not port:
            raise ConfigError(f"cannot listen on {listen} (address in use or invalid)", key="--listen")
        host = listen.rsplit(":", 1)[0] or "127.0.0.1"
        if host in ("0.0.0.0", "[::]", "::"):
            host = "127.0.0.1"
        self.advertise = advertise or f"{host}:{port}"
        self.local_addr = f"{host}:{port}"     # where this master's HTTP API reaches its own gRPC
        self.port = port
        self.name = name or f"master-{self.advertise}"
        self.log = logger("master", member=self.name)
        self.election = Election(self.store, self.name, self.advertise, election_ttl,
                                 self._on_elected, self._on_deposed)
        self.membership = Membership(self.store, self.name, self.advertise, metrics_addr, election_ttl)
        self.optimist: Optimist | None = None
        self.binder: Binder | None = None
        self._duty_lock = threading.Lock()
        self.obs: ObsServer | None = None
        self.service = MasterService(self)
        pbg.add_MasterServicer_to_server(self.service, self.server)
        self._stopped = threading.Event()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "MasterNode":
        if self.metrics_addr:
            h, _, p = self.metrics_addr.rpartition(":")
            app = ApiApp(self.local_addr, self.name, self.tls, self.policy, server_name=self._own_tls_name(),
                         allowed_hosts=self.http_allowed_hosts)
            self.obs = ObsServer(h or "127.0.0.1", int(p), ready=self.ready, app=app,
                                 ssl_context=self.http_tls).start()
        self.server.start()
        metrics.IS_LEADER.set(0)
        self.election.start()
        self.membership.start()
        self.log.info("master started", listen=self.listen, advertise=self.advertise, etcd=self.etcd_spec,
                      prefix=self.prefix)
        if not sealed.enabled():
            self.log.warning(sealed.UNSEALED_WARNING)
        if self.open_warning.startswith("running open on purpose"):
            self.reminder = Reminder(self.log, self.open_warning).start()      # now and every hour
        elif self.open_warning:
            self.log.warning(self.open_warning)
        return self

    def _own_tls_name(self) -> str:
        """The name this master's certificate must carry when its HTTP layer dials its own gRPC
        port on ``local_addr``: the advertised host (what clients verify), unless that is the
        local address itself."""
        if not self.tls.enabled or self.tls.peer_name:
            return ""           # no TLS, or ssl-peer-name names it (TlsFiles.channel applies it)
        host = self.advertise.rsplit(":", 1)[0].strip("[]")
        return "" if host == self.local_addr.rsplit(":", 1)[0] else host

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.reminder is not None:
            self.reminder.stop()
        self.election.stop(resign=True)
        self.membership.stop()
        self.server.stop(grace=1).wait()
        if self.obs:
            self.obs.stop()
        self.client.close()
        self.log.info("master stopped")

    def wait(self) -> None:
        self._stopped.wait()

    # ------------------------------------------------------------------ leadership
    def _on_elected(self, fence: Fence) -> None:
        with self._duty_lock:
            opt = Optimist(self.store, fence, on_fenced=self.election.lost)
            opt.start()
            self.optimist = opt
            self.binder = Binder(self.store, self.cluster, fence, self.election.lost, self.bind_period).start()

    def _on_deposed(self) -> None:
        with self._duty_lock:
            opt, self.optimist = self.optimist, None
            binder, self.binder = self.binder, None
        if binder:
            binder.stop()
        if opt:
            opt.close()

    def leader_ready(self) -> bool:
        opt = self.optimist
        return opt is not None and opt.ready

    def wake_binder(self) -> None:
        if self.binder:
            self.binder.wake.set()

    def ready(self) -> tuple[bool, str]:
        e = self.election
        if not e.etcd_ok:
            return False, f"not connected to etcd {self.etcd_spec}: {e.etcd_error or 'no answer yet'}"
        if e.is_leader:
            return (True, "leader") if self.leader_ready() else (False, "leader, rebuilding locks")
        if e.leader_addr():
            return True, f"follower, leader is {e.leader_addr()}"
        return False, "no leader elected yet"
