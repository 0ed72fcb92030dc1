"""Roles and the access decision for one call to the master, shared by gRPC and HTTP.

Two roles: ``read`` (status, locks, configs, members) and ``operator`` (everything that changes
the cluster: start/stop/pause/resume, sources, unlock, skip/replace/inject, binlog-schema
update/delete, transfer-source; and check-task, which makes the master connect to the hosts a
posted task names).  A caller is identified by

* its TLS client certificate (verified against ``ssl-ca``): its CN must be in
  ``cert-allowed-cn`` (operator) or ``cert-read-only-cn`` (read) when either list is set; with
  no list every certificate signed by ``ssl-ca`` is an operator (DM's behaviour);
* and/or a bearer token listed in ``auth-token-file`` (``TOKEN,NAME,ROLE`` a line).

The caller's role is the highest its credentials give.  When neither ``ssl-ca`` nor
``auth-token-file`` is configured the control plane is open (every caller is an operator, as
before this module existed).  A refusal is ``AccessDenied`` with HTTP-style status: 401 no or
an unknown credential, 403 a certificate CN not allowed or a read-only caller asking for an
operator action."""
from __future__ import annotations

import hmac
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.errors import ConfigError, ShardMergeError

READ, OPERATOR = "read", "operator"
ROLES = (READ, OPERATOR)
_RANK = {READ: 1, OPERATOR: 2}

# gRPC method -> role it needs; a method whose answer depends on its ``op`` has a dict op -> role
# (any other op: operator).
RPC_ROLES: dict[str, str | dict[str, str]] = {
    "StartTask": OPERATOR, "StopTask": OPERATOR, "PauseTask": OPERATOR, "ResumeTask": OPERATOR,
    "UnlockDDLLock": OPERATOR, "TransferSource": OPERATOR,
    "HandleError": {"list": READ},
    "OperateSchema": {"list": READ},
    "OperateSource": {"show": READ},
    # check-task writes nothing but makes the master connect to the hosts a posted task names:
    # an operator's tool, not an observer's
    "CheckTask": OPERATOR, "QueryStatus": READ, "ShowDDLLocks": READ, "GetLeader": READ, "GetConfig": READ,
    "ListMember": READ,
    # ddl-preview changes no lock, but creates (and drops) a scratch copy of the merged table
    # downstream to try the statements: an operator's tool
    "DDLPreview": OPERATOR,
}


def rpc_role(method: str, request=None) -> str:
    """The role ``method`` (short name, e.g. ``UnlockDDLLock``) needs for ``request``; unknown
    methods need operator."""
    need = RPC_ROLES.get(method, OPERATOR)
    if isinstance(need, dict):
        return need.get(getattr(request, "op", ""), OPERATOR)
    return need


def http_role(method: str) -> str:
    """The role an HTTP API request needs: GET reads, every other method acts."""
    return READ if method == "GET" else OPERATOR


class AccessDenied(ShardMergeError):
    """A call refused by the access policy; ``status`` is 401 or 403."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Caller:
    name: str       # "cn=ops-alice", "token=ci-bot", "anonymous"
    role: str


def private_secret(path: str, origin: str) -> None:
    """A file of secrets that every user of the machine may read (or write) is refused, as ssh
    refuses such a key: a token anyone can read is anyone's.  Group access is left alone
    (Kubernetes mounts secrets group-readable with an ``fsGroup``)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return                     # the read that follows names the error
    if mode & (stat.S_IROTH | stat.S_IWOTH):
        raise ConfigError(f"the token file {path} is readable or writable by every user (mode {stat.S_IMODE(mode):04o}): "
                          f"chmod o-rwx {path} (600 is usual)", file=path, key=origin)


def load_tokens(path: str, origin: str = "auth-token-file") -> dict[str, tuple[str, str]]:
    """``TOKEN,NAME,ROLE`` lines (``#`` comments and blank lines ignored) -> token -> (name, role).
    Errors name the file, the line and what is wrong (never the token)."""
    private_secret(path, origin)
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"cannot read the token file {path}: {e.strerror}", key=origin) from None
    out: dict[str, tuple[str, str]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",")]
        where = f"{path}:{n}"
        if len(parts) != 3 or not all(parts):
            raise ConfigError("a token line is TOKEN,NAME,ROLE", file=where, key=origin)
        token, name, role = parts
        if role not in ROLES:
            raise ConfigError(f"role {role!r} of {name} is not one of {', '.join(ROLES)}", file=where, key=origin)
        if len(token) < 16:
            raise ConfigError(f"the token of {name} is shorter than 16 characters", file=where, key=origin)
        if token in out:
            raise ConfigError(f"the token of {name} is also the token of {out[token][0]}", file=where, key=origin)
        out[token] = (name, role)
    return out


@dataclass
class AccessPolicy:
    """The master's policy; built once at start (``from_settings``) and asked per call."""
    client_certs: bool = False                      # ssl-ca given: client certificates are checked
    allowed_cn: frozenset[str] = frozenset()        # cert-allowed-cn (operators)
    read_only_cn: frozenset[str] = frozenset()      # cert-read-only-cn
    tokens: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, ssl_ca: str = "", allowed_cn: list[str] | None = None,
                      read_only_cn: list[str] | None = None, token_file: str = "") -> "AccessPolicy":
        allowed, read_only = frozenset(allowed_cn or ()), frozenset(read_only_cn or ())
        if (allowed or read_only) and not ssl_ca:
            raise ConfigError("cert-allowed-cn / cert-read-only-cn check client certificates: give ssl-ca "
                              "(and ssl-cert, ssl-key) too", key="cert-allowed-cn" if allowed else "cert-read-only-cn")
        both = allowed & read_only
        if both:
            raise ConfigError(f"CN {sorted(both)[0]!r} is in both cert-allowed-cn and cert-read-only-cn",
                              key="cert-read-only-cn")
        return cls(bool(ssl_ca), allowed, read_only, load_tokens(token_file) if token_file else {})

    @property
    def open(self) -> bool:
        """No authentication configured: every caller is an operator."""
        return not self.client_certs and not self.tokens

    def identify(self, cn: str | None, token: str | None) -> Caller:
        """The caller of one request: ``cn`` of its verified client certificate (None: none
        presented), ``token`` from ``Authorization: Bearer`` (None: none)."""
        if self.open:
            return Caller("anonymous", OPERATOR)
        best: Caller | None = None
        if cn is not None and self.client_certs:
            if self.allowed_cn or self.read_only_cn:
                if cn in self.allowed_cn:
                    best = Caller(f"cn={cn}", OPERATOR)
                elif cn in self.read_only_cn:
                    best = Caller(f"cn={cn}", READ)
                else:
                    raise AccessDenied(403, f"client certificate CN {cn!r} is not allowed "
                                            f"(cert-allowed-cn: {', '.join(sorted(self.allowed_cn)) or '-'}; "
                                            f"cert-read-only-cn: {', '.join(sorted(self.read_only_cn)) or '-'})")
            else:
                best = Caller(f"cn={cn}", OPERATOR)
        if token is not None:
            found = self._token(token)
            if found is None:
                raise AccessDenied(401, "unknown token (not in the master's auth-token-file)")
            if best is None or _RANK[found.role] > _RANK[best.role]:
                best = found
        if best is None:
            how = ["a client certificate signed by the master's ssl-ca"] if self.client_certs else []
            how += ["a token (Authorization: Bearer TOKEN; shardctl --token-file)"] if self.tokens else []
            raise AccessDenied(401, "authentication required: present " + " or ".join(how))
        return best

    def _token(self, token: str) -> Caller | None:
        for known, (name, role) in self.tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return Caller(f"token={name}", role)
        return None

    @staticmethod
    def authorize(caller: Caller, need: str, what: str) -> None:
        if _RANK[caller.role] < _RANK[need]:
            raise AccessDenied(403, f"{what} needs the {need} role; {caller.name} has the {caller.role} role")


def bearer(value: str | None) -> str | None:
    """The token of an ``Authorization`` value (``Bearer X``); None when absent."""
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AccessDenied(401, "the Authorization header must be 'Bearer TOKEN'")
    return token.strip()
