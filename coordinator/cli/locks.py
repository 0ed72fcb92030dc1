"""``shardctl shard-ddl-lock``: show optimistic shard DDL locks and resolve them by hand.

Forms (dmctl names; ``show-ddl-locks`` / ``unlock-ddl-lock`` are the legacy aliases)::

    shard-ddl-lock [-s SOURCE ...] [TASK]
    shard-ddl-lock unlock LOCK_ID -s SOURCE -d DATABASE -t TABLE [--action exec|skip]
    shard-ddl-lock unlock LOCK_ID --force-remove [--no-check] # drop the whole lock
    shard-ddl-lock remove-table LOCK_ID -s SOURCE -d DATABASE -t TABLE

--force-remove first compares the lock's schema with the downstream table and refuses when they
differ (listing the DDLs that would reconcile them) or the downstream cannot be read; --no-check
removes the lock anyway.  A refused or unapplied command exits 1.

The JSON has dmctl's fields (``ID``, ``task``, ``mode``, ``owner``, ``DDLs``, ``synced``,
``unsynced``; ``owner``/``DDLs`` are the first conflicting table's, as DM fills them) plus ``owners``:
every table that sent the lock a DDL, with its DDLs and where it stands (DM repeats the lock once
per conflicting owner instead).
"""
from __future__ import annotations

import argparse

from coordinator.lock_doc import lock_doc
from coordinator.cli.common import CLIError, add_sources_flag, call, common, emit, render_table
from protos import master_pb2 as pb

USAGE = ("usage: shard-ddl-lock [-s SOURCE ...] [TASK] | shard-ddl-lock unlock LOCK_ID -s SOURCE -d DATABASE "
         "-t TABLE [--action exec|skip] | shard-ddl-lock unlock LOCK_ID --force-remove [--no-check] | "
         "shard-ddl-lock remove-table LOCK_ID -s SOURCE -d DATABASE -t TABLE")


def _locks_table(doc: dict) -> str:
    if not doc["result"]:
        return f"FAILED: {doc['msg']}"
    if not doc.get("locks"):
        return doc.get("msg") or "no DDL lock exists"
    rows, details, owners = [], [], []
    for lk in doc["locks"]:
        n = len(lk["synced"]) + len(lk["unsynced"])
        rows.append([lk["ID"], lk["state"] or "-", lk["owner"] or "-", f"{len(lk['synced'])}/{n}",
                     "; ".join(lk["DDLs"]) or "-"])
        for o in lk["owners"]:
            owners.append([lk["ID"], o["owner"], o["state"], "; ".join(o["DDLs"]) or "-"])
        for w in lk["waiting"]:
            details.append(f"  {lk['ID']}  {w['table']}: {w['waitingFor']}")
        if lk["error"]:
            details.append(f"  {lk['ID']}  error: {lk['error']}")
    out = render_table(["LOCK ID", "STATE", "OWNER", "SYNCED", "DDLS"], rows)
    if owners:
        out += "\nowners:\n" + render_table(["LOCK ID", "OWNER", "STATE", "DDLS"], owners)
    if details:
        out += "\nwaiting:\n" + "\n".join(details)
    if doc.get("msg"):
        out += f"\n{doc['msg']}"
    return out


def show(args, task: str) -> int:
    try:
        resp = call(args, "ShowDDLLocks", pb.ShowDDLLocksRequest(task=task, sources=args.sources))
    except CLIError as e:
        raise CLIError(f"can not show DDL locks for task {task or '(all)'} and sources {args.sources}: {e}") from None
    doc = {"result": resp.result, "msg": resp.msg, "locks": [lock_doc(lk) for lk in resp.locks]}
    return emit(args, doc, _locks_table)


def unlock(args, lock_id: str, remove_table: bool = False) -> int:
    if args.action not in ("exec", "skip"):
        raise CLIError("please check --action argument, only exec/skip are acceptable")
    if args.no_check and not args.force_remove:
        raise CLIError("--no-check only applies to `shard-ddl-lock unlock LOCK_ID --force-remove`; "
                       + USAGE)
    if not args.force_remove:
        if len(args.sources) != 1:
            raise CLIError("give exactly one -s SOURCE (the shard table's source)")
        if not args.database or not args.table:
            raise CLIError("give the shard table with -d DATABASE -t TABLE (upstream names)")
    req = pb.UnlockDDLLockRequest(ID=lock_id, action=args.action, source=(args.sources or [""])[0],
                                  database=args.database, table=args.table, force_remove=args.force_remove,
                                  remove_table=remove_table, no_check=args.no_check)
    try:
        resp = call(args, "UnlockDDLLock", req)
    except CLIError as e:
        raise CLIError(f"can not unlock DDL lock {lock_id}: {e}") from None
    return emit(args, common(resp), lambda d: ("OK" if d["result"] else "FAILED") + (f": {d['msg']}" if d["msg"] else ""))


def _no_unlock_flags(args) -> None:
    if args.database or args.table or args.force_remove or args.action_given or args.no_check:
        raise CLIError("-d/-t/--action/--force-remove/--no-check only apply to `shard-ddl-lock unlock`; " + USAGE)


def shard_ddl_lock(args) -> int:
    words = list(args.words)
    if words and words[0] in ("unlock", "remove-table"):
        if len(words) != 2:
            raise CLIError(f"`shard-ddl-lock {words[0]}` takes exactly one LOCK_ID; " + USAGE)
        if words[0] == "remove-table" and (args.force_remove or args.action_given or args.no_check):
            raise CLIError("remove-table takes no --action/--force-remove/--no-check; " + USAGE)
        return unlock(args, words[1], remove_table=words[0] == "remove-table")
    if len(words) > 1:
        raise CLIError("shard-ddl-lock takes at most one TASK; " + USAGE)
    _no_unlock_flags(args)
    return show(args, words[0] if words else "")


def legacy_unlock(args) -> int:
    if len(args.words) != 1:
        raise CLIError("unlock-ddl-lock takes exactly one LOCK_ID; " + USAGE)
    return unlock(args, args.words[0])


_FORMS = {
    "unlock": ("shardctl shard-ddl-lock unlock LOCK_ID -s SOURCE -d DATABASE -t TABLE [--action exec|skip]\n"
               "       shardctl shard-ddl-lock unlock LOCK_ID --force-remove [--no-check]",
               "Resolve one table of a lock by hand (exec: run its DDLs, skip: run nothing; the worker goes "
               "on after the DDL), or remove the whole lock and its metadata with --force-remove.",
               "shardctl shard-ddl-lock unlock 'my-task-`shop`.`orders`' -s source1 -d shop_01 -t orders_0 "
               "--action skip"),
    "remove-table": ("shardctl shard-ddl-lock remove-table LOCK_ID -s SOURCE -d DATABASE -t TABLE",
                     "Take a shard table out of a lock (it will never make the change, or it was dropped "
                     "upstream): the others may then agree.",
                     "shardctl shard-ddl-lock remove-table 'my-task-`shop`.`orders`' -s source1 -d shop_01 "
                     "-t orders_0"),
}


class _FormHelp(argparse.Action):
    """``-h``: the help of the form named before it (``shard-ddl-lock unlock --help`` is unlock's,
    not the parent's); ``legacy`` for ``unlock-ddl-lock``, which is only the unlock form."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None, legacy=""):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)
        self.legacy = legacy

    def __call__(self, parser, namespace, values, option_string=None):
        words = list(getattr(namespace, "words", None) or [])
        form = self.legacy or (words[0] if words and words[0] in _FORMS else "")
        if not form:
            parser.print_help()
            parser.exit()
        usage, what, example = _FORMS[form]
        flags = "\n".join(f"  {f:<25} {h}" for f, h in (
            ("LOCK_ID", "the lock's ID as shard-ddl-lock shows it (quote it: it holds back-quotes)"),
            ("-s, --source SOURCE", "source ID of the shard table"),
            ("-d, --database DATABASE", "upstream database of the shard table"),
            ("-t, --table TABLE", "upstream table of the shard table"),
            *((("-a, --action ACTION", "exec (run the table's DDLs) or skip (default)"),
               ("-f, --force-remove", "remove the whole lock; refused when its schema and the downstream differ"),
               ("--no-check", "with --force-remove: skip that comparison")) if form == "unlock" else ())))
        print(f"usage: {usage}\n\n{what}\n\narguments:\n{flags}\n\n"
              f"The client options (--master-addr, --format, ...) are listed by `shardctl shard-ddl-lock --help`.\n\n"
              f"example:\n  {example}")
        parser.exit()


def _add(sub, name: str, func, help_text: str, words_help: str) -> None:
    p = sub.add_parser(name, help=help_text, description=__doc__.split("\n\n", 1)[1]
                       if name == "shard-ddl-lock" else None, formatter_class=_raw(), add_help=False)
    p.add_argument("-h", "--help", action=_FormHelp, legacy="unlock" if name == "unlock-ddl-lock" else "",
                   help="show this help message and exit (after `unlock` / `remove-table`: that form's help)")
    add_sources_flag(p)
    p.add_argument("-a", "--action", default=None, help="unlock: exec (run the DDLs) or skip (default)")
    p.add_argument("-d", "--database", default="", help="unlock: upstream database of the shard table")
    p.add_argument("-t", "--table", default="", help="unlock: upstream table of the shard table")
    p.add_argument("-f", "--force-remove", action="store_true",
                   help="unlock: remove the whole lock and its metadata (e.g. its task was stopped); refused "
                        "when the lock's schema and the downstream table differ")
    p.add_argument("--no-check", action="store_true",
                   help="with --force-remove: skip comparing the lock's schema with the downstream table")
    p.add_argument("words", nargs="*", metavar="ARG", help=words_help)

    def run(args, _f=func):
        args.action_given = args.action is not None
        args.action = args.action or "skip"
        return _f(args)
    p.set_defaults(func=run)


def _raw():
    return argparse.RawDescriptionHelpFormatter


def register(sub) -> None:
    _add(sub, "shard-ddl-lock", shard_ddl_lock, "show / unlock optimistic shard DDL locks",
         "[TASK] | unlock LOCK_ID | remove-table LOCK_ID")
    _add(sub, "show-ddl-locks", shard_ddl_lock, "legacy alias of shard-ddl-lock", "[TASK]")
    _add(sub, "unlock-ddl-lock", legacy_unlock, "legacy alias of shard-ddl-lock unlock", "LOCK_ID")
