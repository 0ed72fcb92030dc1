"""``shardctl operate-source | transfer-source | get-config | config | list-member``: sources and
cluster members."""
from __future__ import annotations

import os

from coordinator.config_file import read_config
from coordinator.cli.common import CLIError, add_sources_flag, call, common, common_table, emit, render_table
from protos import master_pb2 as pb


def _read(path: str) -> str:
    return read_config(path, "source file")


def _source_id(arg: str) -> str:
    """stop accepts a source ID or a source config file (like dmctl)."""
    if os.path.isfile(arg):
        import yaml   # only for a source file given as the ID: not at every CLI start-up
        data = yaml.safe_load(_read(arg)) or {}
        if isinstance(data, dict) and isinstance(data.get("source-id"), str):
            return data["source-id"]
        raise CLIError(f"source file {arg} has no `source-id`")
    return arg


def operate_source(args) -> int:
    op = args.op
    if op in ("create", "update"):
        if not args.items:
            raise CLIError(f"operate-source {op} needs at least one SOURCE.yaml")
        req = pb.OperateSourceRequest(op=op, configs=[_read(f) for f in args.items], files=args.items)
    elif op == "stop":
        ids = [_source_id(x) for x in args.items] + args.sources
        if not ids:
            raise CLIError("operate-source stop needs a source ID or SOURCE.yaml")
        req = pb.OperateSourceRequest(op="stop", sources=ids)
    else:
        req = pb.OperateSourceRequest(op="show", sources=[_source_id(x) for x in args.items] + args.sources)
    resp = call(args, "OperateSource", req)
    doc = {"result": resp.result, "msg": resp.msg,
           "sources": [{"result": s.result, "msg": s.msg, "source": s.source, "worker": s.worker,
                        **({"workerState": s.worker_state} if op == "show" else {})} for s in resp.sources]}

    def table(d):
        rows = [[s["source"], "ok" if s["result"] else "failed", s["worker"] or "-",
                 s.get("workerState") or "-", s["msg"] or ""] for s in d["sources"]]
        return render_table(["SOURCE", "RESULT", "WORKER", "STATE", "MSG"], rows) + (f"\n{d['msg']}" if d["msg"] else "")
    return emit(args, doc, table)


def transfer_source(args) -> int:
    """dmctl transfer-source: bind SOURCE to the free, online WORKER (exit 0 only if it moved)."""
    for what, v in (("SOURCE", args.source_id), ("WORKER", args.worker)):
        if not v.strip():
            raise CLIError(f"transfer-source: {what} is empty; usage: transfer-source SOURCE WORKER")
    try:
        resp = call(args, "TransferSource", pb.TransferSourceRequest(source=args.source_id, worker=args.worker))
    except CLIError as e:
        raise CLIError(f"can not transfer source {args.source_id} to worker {args.worker}: {e}") from None
    return emit(args, common(resp), common_table)


def get_config(args) -> int:
    resp = call(args, "GetConfig", pb.GetConfigRequest(type=args.type, name=args.name))
    doc = {"result": resp.result, "msg": resp.msg, "cfg": resp.cfg}
    return emit(args, doc, lambda d: d["cfg"] if d["result"] else f"FAILED: {d['msg']}")


def member_doc(resp, leader_only: bool = False, masters: bool = False, workers: bool = False,
               names: list[str] | None = None) -> dict:
    """dmctl's list-member JSON: ``members`` = ``[{"leader": {...}}, {"masters": {"masters": [...]}},
    {"workers": {"workers": [...]}}]`` (``--leader`` / ``--master`` / ``--worker`` keep one part,
    ``-n`` keeps the named members).  A worker serving several sources has ``source`` empty and
    all of them in ``sources`` (a DM worker has one).  ``leader`` (the leader's address) is
    shardctl's extra top-level field."""
    doc: dict = {"result": resp.result, "msg": resp.msg}
    if not resp.result:
        return doc
    keep = (lambda name: name in names) if names else (lambda name: True)
    every = not (leader_only or masters or workers)
    parts: list[dict] = []
    lead = next((m for m in resp.members if m.role == "leader"), None)
    if every or leader_only:
        parts.append({"leader": {"msg": "" if lead else "no leader elected",
                                 "name": lead.name if lead else "", "addr": lead.addr if lead else ""}})
    if every or masters:
        parts.append({"masters": {"msg": "", "masters": [
            {"name": m.name, "alive": m.state == "online", "addr": m.addr, "leader": m.role == "leader",
             "clientURLs": [f"http://{m.addr}"]}
            for m in resp.members if m.role in ("leader", "master") and keep(m.name)]}})
    if every or workers:
        parts.append({"workers": {"msg": "", "workers": [
            {"name": m.name, "addr": m.addr, "stage": "bound" if m.sources else "free",
             "source": m.sources[0] if len(m.sources) == 1 else "", "sources": list(m.sources)}
            for m in resp.members if m.role == "worker" and keep(m.name)]}})
    doc["members"] = parts
    doc["leader"] = resp.leader
    return doc


def _member_table(resp) -> str:
    return render_table(["NAME", "ROLE", "ADDR", "SOURCES"],
                        [[m.name, m.role, m.addr, ",".join(m.sources) or "-"] for m in resp.members])


def list_member(args) -> int:
    resp = call(args, "ListMember", pb.ListMemberRequest())
    doc = member_doc(resp, args.leader, args.master, args.worker, args.names)
    return emit(args, doc, lambda d: _member_table(resp) if d["result"] else f"FAILED: {d['msg']}")


def offline_member(args) -> int:
    """dmctl's ``offline-member --type master|worker --name NAME``.  A shardmerge member is
    registered on its own lease and leaves the cluster by itself when its process stops (its
    sources move to a live worker), so there is nothing to delete: a member that is still
    registered is refused (stop its process first), one that is not is reported offline."""
    resp = call(args, "ListMember", pb.ListMemberRequest())
    if not resp.result:
        return emit(args, {"result": False, "msg": resp.msg}, lambda d: f"FAILED: {d['msg']}")
    roles = ("leader", "master") if args.type == "master" else ("worker",)
    live = [m for m in resp.members if m.role in roles and m.name == args.name]
    if live:
        doc = {"result": False, "msg": f"{args.type} {args.name!r} is online (at {live[0].addr}); stop its process "
                                       f"first: its registration then ends with its lease"}
    else:
        doc = {"result": True, "msg": f"{args.type} {args.name!r} is offline: not registered (a stopped member "
                                      f"leaves when its lease ends), nothing to remove"}
    return emit(args, doc, lambda d: ("" if d["result"] else "FAILED: ") + d["msg"])


def register(sub) -> None:
    p = sub.add_parser("operate-source", help="create (register), update, stop (remove) or show upstream sources")
    add_sources_flag(p)
    p.add_argument("op", choices=["create", "update", "stop", "show"])
    p.add_argument("items", nargs="*", metavar="SOURCE.yaml|SOURCE-ID")
    p.set_defaults(func=operate_source)
    p = sub.add_parser("transfer-source", help="bind a source to another (free, online) worker, like dmctl")
    p.add_argument("source_id", metavar="SOURCE")
    p.add_argument("worker", metavar="WORKER")
    p.set_defaults(func=transfer_source)
    for name in ("config", "get-config"):
        p = sub.add_parser(name, help="show the stored config of a task or source (passwords masked), or what a "
                                      "master or worker registered")
        p.add_argument("type", choices=["task", "source", "master", "worker"])
        p.add_argument("name")
        p.set_defaults(func=get_config)
    p = sub.add_parser("list-member", help="masters (the leader and its followers) and workers with their sources")
    p.add_argument("--leader", action="store_true", help="only the leader")
    p.add_argument("--master", action="store_true", help="only the masters")
    p.add_argument("--worker", action="store_true", help="only the workers")
    p.add_argument("-n", "--name", dest="names", action="append", default=[], metavar="NAME",
                   help="only the members with this name (repeatable)")
    p.set_defaults(func=list_member)
    p = sub.add_parser("offline-member", help="dmctl's: say whether a master or worker has left (members leave by "
                                              "themselves when their process stops)")
    p.add_argument("--type", required=True, choices=["master", "worker"])
    p.add_argument("--name", required=True, metavar="NAME")
    p.set_defaults(func=offline_member)
