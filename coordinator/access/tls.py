"""TLS of the control plane: the master's gRPC server and HTTPS port, and every gRPC client
(``shardctl``, the HTTP API's own stub, a follower forwarding to the leader).

DM's keys: ``ssl-ca`` (the CA that signed the peers' certificates; on a server it also makes
client certificates mandatory on gRPC), ``ssl-cert``, ``ssl-key``.  A client without TLS never
falls back to plain text against a TLS master and vice versa: ``describe_unavailable`` turns the
failure into a sentence that names the flag to give."""
from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from coordinator.errors import ConfigError


@dataclass(frozen=True)
class TlsFiles:
    """Paths of the PEM files; ``origin`` names where they were given (a flag set or a file)
    so a config error names it."""
    ca: str = ""
    cert: str = ""
    key: str = ""
    origin: str = "command line"
    # the name a peer master's certificate must carry, when not the host it is dialed at (masters
    # sharing one certificate for a Service name while advertising pod IPs); "" = the dialed host
    peer_name: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.ca or self.cert or self.key)

    def _read(self, key: str) -> bytes | None:
        path = getattr(self, key)
        if not path:
            return None
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise ConfigError(f"cannot read ssl-{key} {path}: {e.strerror}", file=self.origin,
                              key=f"ssl-{key}") from None
        if b"-----BEGIN" not in data:
            raise ConfigError(f"ssl-{key} {path} is not a PEM file", file=self.origin, key=f"ssl-{key}")
        return data

    def check_pair(self) -> None:
        if bool(self.cert) != bool(self.key):
            missing = "ssl-key" if self.cert else "ssl-cert"
            raise ConfigError(f"give both ssl-cert and ssl-key ({missing} is missing)", file=self.origin,
                              key=missing)

    # ------------------------------------------------------------------ server side
    def server_credentials(self) -> grpc.ServerCredentials:
        """The gRPC server's credentials: mutual TLS (client certificate required and verified
        against ssl-ca) when ssl-ca is given, else server-only TLS."""
        self.check_pair()
        if not self.cert:
            raise ConfigError("a TLS server needs ssl-cert and ssl-key", file=self.origin, key="ssl-cert")
        ca, cert, key = self._read("ca"), self._read("cert"), self._read("key")
        assert cert is not None and key is not None
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)

    def server_context(self) -> ssl.SSLContext:
        """The HTTPS port's context: a client certificate is asked for (verified against ssl-ca)
        but optional, so a browser without one can still authenticate with a token."""
        self.check_pair()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            ctx.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"cannot load ssl-cert {self.cert} / ssl-key {self.key}: {e}", file=self.origin,
                              key="ssl-cert") from None
        if self.ca:
            try:
                ctx.load_verify_locations(self.ca)
            except (OSError, ssl.SSLError) as e:
                raise ConfigError(f"cannot load ssl-ca {self.ca}: {e}", file=self.origin, key="ssl-ca") from None
            ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    # ------------------------------------------------------------------ client side
    def channel(self, addr: str, server_name: str = "", trust_own_cert: bool = False) -> grpc.Channel:
        """A channel to ``addr``: TLS when any file is given (ssl-ca verifies the server; ssl-cert
        and ssl-key are this client's certificate), plain text otherwise.  ``server_name``: the name
        the server's certificate must carry when it differs from ``addr``'s host (a master dialing
        its own port on loopback checks its advertised name); ``trust_own_cert``: without ssl-ca,
        trust ssl-cert itself (a master dialing its own self-signed port)."""
        if not self.enabled:
            return grpc.insecure_channel(addr)
        self.check_pair()
        roots = self._read("ca") or (self._read("cert") if trust_own_cert else None)
        creds = grpc.ssl_channel_credentials(root_certificates=roots, private_key=self._read("key"),
                                             certificate_chain=self._read("cert"))
        name = server_name or self.peer_name
        options = [("grpc.ssl_target_name_override", name)] if name else []
        return grpc.secure_channel(addr, creds, options=options)


def speaks_tls(addr: str, timeout: float = 3.0) -> bool:
    """Whether ``addr`` answers a TLS ClientHello with a TLS handshake (certificates unchecked):
    tells "the master wants TLS" from "the master is down"."""
    host, _, port = addr.rpartition(":")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout) as raw:
            with ctx.wrap_socket(raw) as tls:
                return tls.version() is not None
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
        return False                # closed without a TLS answer
    except ssl.SSLError as e:
        # a TLS alert: the server spoke TLS but refused us (e.g. it requires a client certificate);
        # bytes that are not a TLS record: a plain-text server
        return "WRONG_VERSION_NUMBER" not in str(e) and "record layer failure" not in str(e)
    except (OSError, ValueError):
        return False


def describe_unavailable(addr: str, details: str, tls: TlsFiles) -> str:
    """One sentence for an UNAVAILABLE call to the master at ``addr``."""
    low = details.lower()
    if not tls.enabled:
        if speaks_tls(addr):
            return (f"master at {addr} serves TLS and this client speaks plain text; give --ssl-ca "
                    f"(and --ssl-cert/--ssl-key for a master with mutual TLS)")
        return f"cannot reach master at {addr}: {details} (is `shardctl master` running there? set --master-addr)"
    if "certificate verify failed" in low or "certificate_verify_failed" in low:
        return (f"TLS to master at {addr} failed: its certificate is not signed by --ssl-ca {tls.ca or '(system CAs)'}"
                f" or does not name {addr.rpartition(':')[0]} ({details})")
    if "handshake" in low or "ssl" in low or "tls" in low or "socket closed" in low or "connection reset" in low:
        if not speaks_tls(addr):
            return f"master at {addr} does not speak TLS (it serves plain text); drop --ssl-ca/--ssl-cert/--ssl-key"
        hint = ("it requires a client certificate: give --ssl-cert and --ssl-key" if not tls.cert else
                "it refused this client certificate (signed by a CA the master does not trust?)")
        return f"TLS handshake with master at {addr} failed: {hint} ({details})"
    return f"cannot reach master at {addr}: {details} (is `shardctl master` running there? set --master-addr)"
