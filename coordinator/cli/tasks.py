"""``shardctl start-task | check-task | stop-task | pause-task | resume-task | query-status``: task lifecycle
commands (dmctl names)."""
from __future__ import annotations

import json
import os

from coordinator.api.exits import subtask_exits
from coordinator.config_file import read_config
from coordinator.load_progress import format_progress
from coordinator.cli.common import (RPC_TIMEOUT, CLIError, add_sources_flag, call, common, common_table, emit,
                                    render_table)
from protos import master_pb2 as pb

CHECK_TIMEOUT = 2 * RPC_TIMEOUT     # the checks read every shard table's definition


def _read(path: str) -> str:
    return read_config(path, "task file")


def start_task(args) -> int:
    text = _read(args.config)
    resp = call(args, "StartTask", pb.StartTaskRequest(task_yaml=text, file=args.config, sources=args.sources,
                                                        remove_meta=args.remove_meta,
                                                        skip_precheck=args.skip_precheck,
                                                        start_time=args.start_time or ""))
    return emit(args, common(resp), common_table)


def check_doc(resp) -> dict:
    """dmctl check-task's JSON: result, msg, and checkResult when the checks ran."""
    doc: dict = {"result": resp.result, "msg": resp.msg}
    if resp.check_result_json:
        doc["checkResult"] = json.loads(resp.check_result_json)
    return doc


def check_table(doc: dict) -> str:
    lines = [("OK" if doc["result"] else "FAILED") + (f": {doc['msg']}" if doc.get("msg") else "")]
    results = doc.get("checkResult", {}).get("results", [])
    rows = [[str(r["id"]), r["state"], r["name"], r["extra"] or "-"] for r in results]
    if rows:
        lines.append(render_table(["ID", "STATE", "CHECK", "WHERE"], rows))
    for r in results:
        for e in r["errors"]:
            lines.append(f"  [{r['id']}] {e['severity']}: {e['short_error']}")
        if r["errors"] and r["instruction"]:
            lines.append(f"  [{r['id']}] fix: {r['instruction']}")
    return "\n".join(lines)


def check_task(args) -> int:
    """Prechecks only; exit 0 when no check failed (warnings allowed), else 1."""
    text = _read(args.config)
    resp = call(args, "CheckTask", pb.CheckTaskRequest(task_yaml=text, file=args.config, sources=args.sources),
                timeout=CHECK_TIMEOUT)
    return emit(args, check_doc(resp), check_table)


def task_name(arg: str) -> str:
    """dmctl accepts a task file where a task name is expected: use its `name`."""
    if os.path.isfile(arg) and arg.endswith((".yaml", ".yml")):
        import yaml   # only for a task file given as the name: not at every CLI start-up
        try:
            data = yaml.safe_load(_read(arg))
        except yaml.YAMLError as e:
            raise CLIError(f"task file {arg} is not valid YAML: {e}") from None
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            return data["name"]
        raise CLIError(f"task file {arg} has no `name`")
    return arg


def stop_task(args) -> int:
    resp = call(args, "StopTask", pb.StopTaskRequest(name=task_name(args.task), sources=args.sources))
    return emit(args, common(resp), common_table)


def pause_task(args) -> int:
    resp = call(args, "PauseTask", pb.PauseTaskRequest(name=task_name(args.task), sources=args.sources))
    return emit(args, common(resp), common_table)


def resume_task(args) -> int:
    resp = call(args, "ResumeTask", pb.ResumeTaskRequest(name=task_name(args.task), sources=args.sources))
    return emit(args, common(resp), common_table)


def _subtask_doc(st) -> dict:
    d = {"name": st.task, "stage": st.stage, "unit": st.unit, "worker": st.worker,
         "waitingFor": st.waiting_for, "unresolvedDDLLockID": st.lock_id,
         "blockDDLOwner": st.block_ddl_owner, "conflictMsg": st.conflict_msg, "error": st.error,
         "sync": {"syncerBinlog": st.synced_pos, "checkpoint": st.checkpoint_pos,
                  "errorBinlog": st.binlog_pos, "secondsBehindMaster": st.lag_seconds,
                  "eventsBehind": st.lag_events},
         "updatedAt": st.updated_at}
    det = _detail(st)
    sync = d["sync"]
    # DM's names: the upstream's end and the syncer's point as (file, pos) with their GTID sets
    for key, dm in (("master_binlog", "masterBinlog"), ("master_binlog_gtid", "masterBinlogGtid"),
                    ("syncer_binlog", "syncerBinlog"), ("syncer_binlog_gtid", "syncerBinlogGtid"),
                    ("synced", "synced"), ("total_events", "totalEvents"), ("total_tps", "totalTps")):
        if det.get(key) not in (None, ""):
            sync[dm] = det[key]
    if st.error:      # DM's result.errors[]: one entry for the error the subtask stopped on
        found = det.get("error")
        err: dict = found if isinstance(found, dict) else {}
        d["result"] = {"isCanceled": False, "errors": [{
            "ErrClass": err.get("type", "Error"), "ErrLevel": "high", "Message": st.error,
            "RawCause": err.get("message", ""),
            "Workaround": "; ".join(subtask_exits(st.task, st.source, st.stage, st.error, st.waiting_for,
                                                  st.lock_id))}]}
    if det.get("load"):
        d["load"] = det["load"]
    if det.get("online_ddl"):     # shard tables with an online schema change tool's shadow table
        d["sync"]["onlineDDL"] = det["online_ddl"]
    return d


def _detail(st) -> dict:
    try:
        return json.loads(st.detail_json) if st.detail_json else {}
    except ValueError:
        return {}


def _task_stage(stages: list[str]) -> str:
    for s in ("Error", "Paused", "New"):
        if s in stages:
            return s
    return "Running" if stages and all(s == "Running" for s in stages) else (stages[0] if stages else "")


def status_doc(resp, name: str) -> dict:
    doc = {"result": resp.result, "msg": resp.msg}
    if not resp.result:
        return doc
    if name:
        by_source: dict[str, list] = {}
        for st in resp.subtasks:
            by_source.setdefault(st.source, []).append(st)
        doc["sources"] = [{"result": True, "msg": "",
                           "sourceStatus": {"source": src, "worker": sts[0].worker},
                           "subTaskStatus": [_subtask_doc(st) for st in sts]}
                          for src, sts in by_source.items()]
    else:
        tasks: dict[str, list] = {}
        for st in resp.subtasks:
            tasks.setdefault(st.task, []).append(st)
        doc["tasks"] = [{"taskName": t, "taskStatus": _task_stage([s.stage for s in sts]),
                         "sources": [s.source for s in sts],
                         "waitingFor": {s.source: s.waiting_for for s in sts if s.waiting_for}}
                        for t, sts in tasks.items()]
    return doc


def query_status(args) -> int:
    name = task_name(args.task) if args.task else ""
    resp = call(args, "QueryStatus", pb.QueryStatusRequest(name=name, sources=args.sources))
    doc = status_doc(resp, name)

    def table(_doc):
        if not resp.result:
            return f"FAILED: {resp.msg}"
        rows = [[st.task, st.source, st.worker or "-", st.stage, st.unit or "-", st.lock_id or "-",
                 st.error or st.waiting_for or "-"] for st in resp.subtasks]
        loads = [format_progress(_detail(st)["load"]) for st in resp.subtasks
                 if st.unit == "Load" and _detail(st).get("load")]
        return render_table(["TASK", "SOURCE", "WORKER", "STAGE", "UNIT", "LOCK", "ERROR / WAITING FOR"], rows) \
            + "".join("\n" + text for text in loads) + (f"\n{resp.msg}" if resp.msg else "")
    return emit(args, doc, table)


def register(sub) -> None:
    p = sub.add_parser("start-task", help="validate a DM task YAML, store it and start its subtasks")
    add_sources_flag(p)
    p.add_argument("--remove-meta", action="store_true", help="first delete the task's shard DDL metadata (locks)")
    p.add_argument("--skip-precheck", action="store_true",
                   help="start without the prechecks of check-task (by default any failed check refuses the task)")
    p.add_argument("--start-time", metavar="TIME",
                   help="incremental tasks: start each source at the first transaction written at or after TIME, "
                        "e.g. '2021-10-21 00:01:00' or 2021-10-21T00:01:00 (optionally ending in Z or +08:00; "
                        "without it, the master's local time zone); wins over `meta` in the task file; refused "
                        "for a source that has a checkpoint from an earlier run")
    p.add_argument("config", metavar="TASK.yaml")
    p.set_defaults(func=start_task)

    p = sub.add_parser("check-task", help="run the prechecks of a task (binlog settings, privileges, shard "
                                          "schemas, keys, downstream) without starting it")
    add_sources_flag(p)
    p.add_argument("config", metavar="TASK.yaml")
    p.set_defaults(func=check_task)

    p = sub.add_parser("stop-task", help="stop a task (or some of its sources) and release its locks")
    add_sources_flag(p)
    p.add_argument("task", metavar="TASK", help="task name or task file")
    p.set_defaults(func=stop_task)

    p = sub.add_parser("pause-task", help="pause a task (or some of its sources): subtasks stop, checkpoints kept")
    add_sources_flag(p)
    p.add_argument("task", metavar="TASK", help="task name or task file")
    p.set_defaults(func=pause_task)

    p = sub.add_parser("resume-task", help="resume a paused task (or some of its sources); also restarts "
                                           "subtasks stopped in Error")
    add_sources_flag(p)
    p.add_argument("task", metavar="TASK", help="task name or task file")
    p.set_defaults(func=resume_task)

    p = sub.add_parser("query-status", help="per-source status of one task or of all tasks")
    add_sources_flag(p)
    p.add_argument("task", nargs="?", default="", metavar="TASK")
    p.set_defaults(func=query_status)
