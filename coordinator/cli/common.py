"""Shared plumbing of the ``shardctl`` client commands: dialing the master, printing results
(dmctl-shaped JSON, or ``--format table``) and turning failures into one line + exit code."""
from __future__ import annotations

import json
import sys
from typing import Callable

import grpc

from protos import master_pb2_grpc as pbg

RPC_TIMEOUT = 60.0


class CLIError(Exception):
    """Printed as one line on stderr; exit code 1."""


def stub(args):
    addr = args.master_addr
    return pbg.MasterStub(grpc.insecure_channel(addr)), addr


def call(args, method: str, request, timeout: float = RPC_TIMEOUT):
    """Call ``method`` on the master; unreachable / timed out -> ``CLIError`` naming the address."""
    s, addr = stub(args)
    try:
        return getattr(s, method)(request, timeout=timeout)
    except grpc.RpcError as e:
        code = e.code()
        if code == grpc.StatusCode.UNAVAILABLE:
            raise CLIError(f"cannot reach master at {addr}: {e.details()} "
                           f"(is `shardctl master` running there? set --master-addr)") from None
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise CLIError(f"master at {addr} did not answer {method} within {timeout:.0f}s") from None
        raise CLIError(f"master at {addr} failed {method}: {code.name}: {e.details()}") from None


def emit(args, doc: dict, table: Callable[[dict], str] | None = None) -> int:
    """Print ``doc`` (JSON, 4-space indent like dmctl, or the table view); exit code from
    ``doc['result']``."""
    if getattr(args, "format", "json") == "table" and table is not None:
        sys.stdout.write(table(doc).rstrip("\n") + "\n")
    else:
        sys.stdout.write(json.dumps(doc, indent=4, ensure_ascii=False) + "\n")
    return 0 if doc.get("result") else 1


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


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)] if rows else [len(h) for h in headers]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers)] + [line(r) for r in rows])


def add_sources_flag(p) -> None:
    p.add_argument("-s", "--source", dest="sources", action="append", default=[], metavar="SOURCE",
                   help="restrict to this source ID (repeatable)")
