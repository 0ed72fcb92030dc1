"""Shared plumbing of the ``shardctl`` client commands: dialing the master, printing results
(dmctl-shaped JSON, or ``--format table``) and turning failures into one line + exit code."""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Callable

import grpc

from coordinator.access.exposure import is_loopback
from coordinator.access.policy import private_secret
from coordinator.access.tls import TlsFiles, describe_unavailable
from coordinator.errors import ConfigError
from coordinator import answers
from protos import master_pb2_grpc as pbg

RPC_TIMEOUT = 60.0
LEADER_WAIT = 30.0      # longer than the default election TTL (10 s): a dead leader's lease runs out
LEADER_POLL = 0.5
DEFAULT_MASTER = "127.0.0.1:8261"
# --master-addr, then these (dmctl's own name last), then the default
MASTER_ADDR_ENV = ("SHARDMERGE_MASTER_ADDR", "DM_MASTER_ADDR")


class CLIError(Exception):
    """Printed as one line on stderr; exit code 1."""


def master_addrs(args) -> list[str]:
    """The masters to try, in order: ``--master-addr`` (comma-separated), else the environment."""
    raw = getattr(args, "master_addr", None) or next(
        (os.environ[k] for k in MASTER_ADDR_ENV if os.environ.get(k, "").strip()), DEFAULT_MASTER)
    addrs = [a.strip() for a in raw.split(",") if a.strip()]
    for a in addrs:
        host, sep, port = a.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise CLIError(f"master address {a!r} is not HOST:PORT (--master-addr or {MASTER_ADDR_ENV[0]})")
    if not addrs:
        raise CLIError("no master address: give --master-addr HOST:PORT[,HOST:PORT]")
    return addrs


def tls_files(args) -> TlsFiles:
    env = os.environ.get
    return TlsFiles(getattr(args, "ssl_ca", None) or env("SHARDMERGE_SSL_CA", ""),
                    getattr(args, "ssl_cert", None) or env("SHARDMERGE_SSL_CERT", ""),
                    getattr(args, "ssl_key", None) or env("SHARDMERGE_SSL_KEY", ""),
                    origin="--ssl-ca/--ssl-cert/--ssl-key")


def auth_metadata(args) -> tuple:
    """``authorization`` metadata from ``--token-file`` / SHARDMERGE_TOKEN_FILE / SHARDMERGE_TOKEN."""
    path = getattr(args, "token_file", None) or os.environ.get("SHARDMERGE_TOKEN_FILE", "")
    if path:
        try:
            private_secret(path, "--token-file")
        except ConfigError as e:
            raise CLIError(str(e)) from None
        try:
            token = Path(path).read_text().strip()
        except OSError as e:
            raise CLIError(f"cannot read --token-file {path}: {e.strerror}") from None
        if not token:
            raise CLIError(f"--token-file {path} is empty")
    else:
        token = os.environ.get("SHARDMERGE_TOKEN", "").strip()
    return (("authorization", f"Bearer {token}"),) if token else ()


_WARNED: set[str] = set()


def _warn_plain_token(meta: tuple, tls: TlsFiles, addrs: list[str]) -> None:
    """A bearer token sent without TLS to a master beyond loopback can be read on the way (and
    used by whoever reads it): say so on stderr, once per address."""
    if not meta or tls.enabled:
        return
    for a in addrs:
        if not is_loopback(a) and a not in _WARNED:
            _WARNED.add(a)
            print(f"shardctl: warning: sending a bearer token to {a} over plain text (no --ssl-ca): anyone on the "
                  "path can read it and act with it", file=sys.stderr)


def stub(args, addr: str | None = None):
    addr = addr or master_addrs(args)[0]
    return pbg.MasterStub(tls_files(args).channel(addr)), addr


def rpc_timeout(args, default: float = RPC_TIMEOUT) -> float:
    given = getattr(args, "rpc_timeout", None)
    return given if given is not None else default


def leader_wait(args) -> float:
    given = getattr(args, "leader_wait", None)
    return given if given is not None else LEADER_WAIT


def call(args, method: str, request, timeout: float = RPC_TIMEOUT):
    """``call_once``, sent again while the masters answer that no leader is ready (an election
    is under way: the request was refused before it was handled), for up to ``--leader-wait``.
    One line on stderr says the CLI is waiting; the last refusal is the answer when time is up."""
    deadline = time.monotonic() + leader_wait(args)
    said = False
    while True:
        resp = call_once(args, method, request, timeout)
        msg = str(getattr(resp, "msg", ""))
        if getattr(resp, "result", True) or not answers.retry_safe(msg) or time.monotonic() >= deadline:
            return resp
        if not said:
            print(f"shardctl: {method}: no master is leader yet ({msg}); retrying for up to "
                  f"{leader_wait(args):g}s (--leader-wait)", file=sys.stderr)
            said = True
        time.sleep(LEADER_POLL)


def call_once(args, method: str, request, timeout: float = RPC_TIMEOUT):
    """Call ``method`` on the first master of ``--master-addr`` that answers (a master that
    names another as leader is left for that leader); unreachable / refused / timed out ->
    ``CLIError`` with the reason per address."""
    addrs, tls, meta = master_addrs(args), tls_files(args), auth_metadata(args)
    _warn_plain_token(meta, tls, addrs)
    timeout = rpc_timeout(args, timeout)
    tried: list[str] = []
    queue = list(addrs)
    not_leader = None           # a follower's "not leader, leader is X" answer, kept in case X fails too
    while queue:
        addr = queue.pop(0)
        if addr in tried:
            continue
        tried.append(addr)
        try:
            resp = getattr(stub(args, addr)[0], method)(request, timeout=timeout, metadata=meta)
        except grpc.RpcError as e:
            code = e.code()
            if code == grpc.StatusCode.UNAVAILABLE:
                reason = describe_unavailable(addr, e.details() or "", tls)
                if queue:
                    continue
                if not_leader is not None:
                    return not_leader
                raise CLIError(reason if len(tried) == 1 else f"no master answered ({', '.join(tried)}); "
                                                              f"last: {reason}") from None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise CLIError(f"master at {addr} did not answer {method} within {timeout:g}s "
                               f"(--rpc-timeout)") from None
            if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                raise CLIError(f"master at {addr} refused {method}: {e.details()}") from None
            raise CLIError(f"master at {addr} failed {method}: {code.name}: {e.details()}") from None
        leader = getattr(resp, "leader", "")
        if (not getattr(resp, "result", True) and leader and leader not in tried
                and answers.is_not_leader(str(getattr(resp, "msg", "")))):
            queue.insert(0, leader)       # this master could not forward: ask the leader directly
            not_leader = resp
            continue
        return resp
    raise CLIError(f"no master answered {method} ({', '.join(tried)})")


def emit(args, doc: dict, table: Callable[[dict], str] | None = None) -> int:
    """Print ``doc`` (JSON, 4-space indent like dmctl, or the table view); exit code from
    ``doc['result']``."""
    if getattr(args, "format", "json") == "table" and table is not None:
        text = table(doc).rstrip("\n")
        sys.stdout.write("\n".join(printable(line) for line in text.split("\n")) + "\n")
    else:
        # JSON escapes C0 controls itself; C1 ones (U+0080-U+009F, e.g. a CSI) it leaves raw
        text = json.dumps(doc, indent=4, ensure_ascii=False)
        sys.stdout.write(_C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")
    return 0 if doc.get("result") else 1


_C1 = re.compile(r"[\x7f-\x9f]")


def common(resp) -> dict:
    """``{"result", "msg", "sources"}`` of a CommonResponse, dmctl style."""
    doc = {"result": resp.result, "msg": resp.msg}
    if resp.sources:
        doc["sources"] = [{"result": s.result, "msg": s.msg, "source": s.source} for s in resp.sources]
    return doc


def common_table(doc: dict) -> str:
    """``--format table`` of a CommonResponse: OK/FAILED with the message, then one line per source."""
    lines = [("OK" if doc["result"] else "FAILED") + (f": {doc['msg']}" if doc.get("msg") else "")]
    for s in doc.get("sources", []):
        lines.append(f"  {s['source']}: {'ok' if s['result'] else 'failed'}" + (f" - {s['msg']}" if s["msg"] else ""))
    return "\n".join(lines)


def printable(value) -> str:
    """``value`` as text a terminal shows as it is: control characters but the tab (an escape
    sequence in a table or column name can recolour, hide or rewrite what the operator reads)
    become ``\\xNN``."""
    text = str(value)
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")      # a tab is left alone: it only moves the cursor


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    rows = [[printable(x) for x in r] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)] if rows else [len(h) for h in headers]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers)] + [line(r) for r in rows])


def add_sources_flag(p) -> None:
    p.add_argument("-s", "--source", dest="sources", action="append", default=[], metavar="SOURCE",
                   help="restrict to this source ID (repeatable)")
