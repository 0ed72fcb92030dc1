"""JSON documents of the HTTP API, built from the gRPC answers: DM's OpenAPI field names
(``source_name``, ``worker_name``, ``unresolved_ddl_lock_id``, ``sync_status`` ...) where DM has
them, the ``shardctl`` JSON (``coordinator/cli``) for what DM's API does not cover (locks)."""
from __future__ import annotations

import json

import yaml

from coordinator.lock_doc import lock_doc

from . import exits


def _detail(st) -> dict:
    try:
        d = json.loads(st.detail_json) if st.detail_json else {}
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def subtask(st) -> dict:
    """One query-status row as DM's ``SubTaskStatus`` (plus what shardctl adds)."""
    d = {"name": st.task, "source_name": st.source, "worker_name": st.worker, "stage": st.stage,
         "unit": st.unit, "unresolved_ddl_lock_id": st.lock_id, "error_msg": st.error,
         "waiting_for": st.waiting_for, "block_ddl_owner": st.block_ddl_owner, "conflict_msg": st.conflict_msg,
         "updated_at": st.updated_at,
         "sync_status": {"syncer_binlog": st.synced_pos, "checkpoint": st.checkpoint_pos,
                         "error_binlog": st.binlog_pos, "seconds_behind_master": st.lag_seconds,
                         "events_behind": st.lag_events},
         "exits": exits.subtask_exits(st.task, st.source, st.stage, st.error, st.waiting_for, st.lock_id)}
    det = _detail(st)
    for key in ("master_binlog", "master_binlog_gtid", "syncer_binlog_gtid", "synced", "total_events", "total_tps"):
        if key in det:
            d["sync_status"][key] = det[key]
    if det.get("syncer_binlog"):                  # DM's "(file, pos)"; older workers: the position text
        d["sync_status"]["syncer_binlog"] = det["syncer_binlog"]
    load = det.get("load")
    if load:
        d["load_status"] = load
    return d


def task_stage(stages: list[str]) -> str:
    """A task's stage from its subtasks' (the worst wins), as query-status without a task name."""
    for s in ("Error", "Paused", "New"):
        if s in stages:
            return s
    return "Running" if stages and all(s == "Running" for s in stages) else (stages[0] if stages else "")


def tasks(rows, with_status: bool) -> list[dict]:
    by_task: dict[str, list] = {}
    for st in rows:
        by_task.setdefault(st.task, []).append(st)
    out = []
    for name, sts in by_task.items():
        d = {"name": name, "stage": task_stage([s.stage for s in sts]),
             "source_name_list": [s.source for s in sts],
             "waiting_for": {s.source: s.waiting_for for s in sts if s.waiting_for}}
        if with_status:
            d["status_list"] = [subtask(s) for s in sts]
        out.append(d)
    return out


def source(info, cfg_yaml: str, with_status: bool) -> dict:
    """DM's ``Source`` from ``operate-source show`` and the stored (masked) source YAML."""
    try:
        loaded = yaml.safe_load(cfg_yaml) if cfg_yaml else {}
    except yaml.YAMLError:
        loaded = {}
    cfg: dict = loaded if isinstance(loaded, dict) else {}
    frm: dict = cfg["from"] if isinstance(cfg.get("from"), dict) else {}
    d = {"source_name": info.source, "host": frm.get("host", ""), "port": frm.get("port", 0),
         "user": frm.get("user", ""), "enable_gtid": bool(cfg.get("enable-gtid", False)), "enable": True,
         "flavor": cfg.get("flavor", "")}
    if with_status:
        d["status_list"] = [{"source_name": info.source, "worker_name": info.worker,
                             "worker_state": info.worker_state}]
    return d


def lock(lk) -> dict:
    """A shard DDL lock as ``shardctl shard-ddl-lock`` prints it, with each table's stage and
    the exact commands that get it out (``exits``)."""
    d = lock_doc(lk)
    for w in d["waiting"]:
        w["stage"] = exits.table_stage(w["waitingFor"])
        w["exits"] = exits.table_exits(lk.ID, lk.task, w["table"], w["waitingFor"])
    d["exits"] = exits.lock_exits(lk.ID)
    return d


def command(resp) -> dict:
    """``{"result", "msg", "sources"}`` of a command, as shardctl prints it."""
    d = {"result": resp.result, "msg": resp.msg}
    if resp.sources:
        d["sources"] = [{"result": s.result, "msg": s.msg, "source": s.source} for s in resp.sources]
    return d


def masters(resp) -> list[dict]:
    return [{"name": m.name, "alive": m.state == "online", "leader": m.role == "leader", "addr": m.addr}
            for m in resp.members if m.role in ("leader", "master")]


def workers(resp) -> list[dict]:
    return [{"name": m.name, "addr": m.addr, "bound_stage": "bound" if m.sources else "free",
             "bound_source_name": ",".join(m.sources), "source_name_list": list(m.sources)}
            for m in resp.members if m.role == "worker"]
