"""``shardctl ddl-preview TASK [-s SOURCE ...] [--tables PATTERN] SQL`` and ``ddl-preview TASK
--plan FILE``: what a shard DDL would do to the merged table before it runs upstream, simulated
by the master on a copy of the live lock and the shards' tracked schemas (nothing is written).
Per step: the statements run downstream with their cost (instant / in-place / copy, tried on an
empty copy of the table downstream) and rows touched, the held tables and what each waits for,
conflicts with their exits, partially dropped columns, and where the lock resolves.  With
``--plan`` the first step that conflicts, copies the table or leaves the lock unresolved is
named.  Exit code 1 when the preview finds a problem or is refused.  See
docs/operator-commands.md#ddl-preview."""
from __future__ import annotations

import json
from pathlib import Path

from coordinator.cli.common import CLIError, add_sources_flag, call, emit
from coordinator.cli.tasks import task_name
from protos import master_pb2 as pb


def run(args) -> int:
    from coordinator.preview.render import preview_table   # the package pulls in the lock engine: only when run

    sql = " ".join(args.sql).strip()
    plan, plan_file = "", ""
    if args.plan:
        if sql:
            raise CLIError("ddl-preview takes either a statement or --plan FILE, not both")
        if args.sources or args.tables:
            raise CLIError("with --plan, give sources and tables per step in the plan file")
        try:
            plan, plan_file = Path(args.plan).read_text(), args.plan
        except OSError as e:
            raise CLIError(f"cannot read --plan {args.plan}: {e.strerror}") from None
    elif not sql:
        raise CLIError('ddl-preview needs a statement, e.g. ddl-preview my-task "ALTER TABLE shop.orders ADD COLUMN '
                       'note VARCHAR(64)"; or --plan FILE')
    resp = call(args, "DDLPreview", pb.DDLPreviewRequest(task=task_name(args.task), sources=args.sources,
                                                         tables=args.tables or "", sql=sql, plan=plan,
                                                         plan_file=plan_file, no_cost=args.no_cost))
    doc: dict = {"result": resp.result, "msg": resp.msg}
    if resp.result:
        doc["preview"] = json.loads(resp.preview)
        if doc["preview"].get("problem"):
            doc["result"] = False
            doc["msg"] = "the preview found a problem: " + doc["preview"]["problem"]["message"]
    code = emit(args, doc, preview_table)
    return code


def register(sub) -> None:
    p = sub.add_parser("ddl-preview", help="what a shard DDL (or a rollout --plan) would do to the merged table, "
                                           "before it runs upstream; writes nothing")
    add_sources_flag(p)
    p.add_argument("--tables", default="", metavar="PATTERN",
                   help="only the shard tables matching this glob on schema.table or table")
    p.add_argument("--plan", default="", metavar="FILE",
                   help="a rollout: YAML/JSON list of steps {sql, sources, tables}")
    p.add_argument("--no-cost", action="store_true", help="do not try the statements on the downstream")
    p.add_argument("task", metavar="TASK", help="task name or task file")
    p.add_argument("sql", nargs="*", metavar="SQL", help="the statement (quote it)")
    p.set_defaults(func=run, trailing_sql=True)
