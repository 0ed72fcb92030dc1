"""Each HTTP endpoint as a translation onto one or more gRPC calls of the master's own service.

A handler gets a checked ``Request`` and a ``call(method, request)`` bound to the local gRPC
endpoint, and returns (status, JSON document).  A refused command comes back from the master as
``result: false`` with its message; ``refusal`` turns that into the HTTP status.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import yaml

from coordinator import answers
from protos import master_pb2 as pb

from . import shapes
from .request import ApiError, Request, _text, check_object

Call = Callable[[str, Any], Any]   # (gRPC method name, request) -> its response message

SOURCE_FIELDS = {"source_name": "name", "host": "name", "port": "int", "user": "name", "password": "str",
                 "enable_gtid": "bool", "enable": "bool", "flavor": "name", "security": "object"}
SECURITY_KEYS = {"ssl_ca_content": "ssl-ca-bytes", "ssl_cert_content": "ssl-cert-bytes",
                 "ssl_key_content": "ssl-key-bytes", "cert_allowed_cn": "cert-allowed-cn"}
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")


def refusal(resp) -> ApiError:
    """The HTTP status of a command the master answered with ``result: false``."""
    msg = resp.msg or "; ".join(f"{s.source}: {s.msg}" for s in getattr(resp, "sources", ()) if not s.result) \
        or "the master refused the request without a message"
    if msg.startswith("etcd unavailable") or answers.leaderless(msg):
        return ApiError(503, msg)
    if msg.startswith("internal error"):
        return ApiError(500, msg)
    if "not found" in msg:
        return ApiError(404, msg)
    return ApiError(400, msg)


def _ok(resp, status: int = 200) -> tuple[int, dict]:
    if not resp.result:
        raise refusal(resp)
    return status, shapes.command(resp)


# ----------------------------------------------------------------------------- sources
def _source_docs(call: Call, names: list[str], with_status: bool) -> list[dict]:
    resp = call("OperateSource", pb.OperateSourceRequest(op="show", sources=names))
    if not resp.result:
        raise refusal(resp)
    out = []
    for info in resp.sources:
        cfg = call("GetConfig", pb.GetConfigRequest(type="source", name=info.source))
        out.append(shapes.source(info, cfg.cfg if cfg.result else "", with_status))
    return out


def list_sources(req: Request, call: Call):
    q = ("with_status",)
    docs = _source_docs(call, [], req.query_bool("with_status", q))
    return 200, {"total": len(docs), "data": docs}


def get_source(req: Request, call: Call):
    q = ("with_status",)
    name = req.path("source-name")
    return 200, _source_docs(call, [name], req.query_bool("with_status", q))[0]


def _source_yaml(src: dict, where: str) -> str:
    if src.get("enable") is False:
        raise ApiError(400, f"field enable of {where} is false: a disabled source is not supported; "
                            "register it when it should run")
    port = src["port"]
    if not 1 <= port <= 65535:
        raise ApiError(400, f"field port of {where} is {port}; give a TCP port 1-65535")
    frm: dict = {"host": src["host"], "port": port, "user": src["user"], "password": src.get("password") or ""}
    sec = src.get("security")
    if sec:
        check_object(sec, {k: ("[name]" if k == "cert_allowed_cn" else "str") for k in SECURITY_KEYS}, (),
                     f"field security of {where}")
        frm["security"] = {SECURITY_KEYS[k]: v for k, v in sec.items() if v not in (None, "", [])}
    cfg: dict = {"source-id": src["source_name"], "enable-gtid": bool(src.get("enable_gtid")), "from": frm}
    if src.get("flavor"):
        cfg["flavor"] = src["flavor"]
    return yaml.safe_dump(cfg, sort_keys=False)


def _posted_source(req: Request) -> tuple[str, str, str]:
    """(source YAML text, its source-id, where it came from) of a create / update body: DM's
    Source object or the source file's text."""
    body = req.json({"source": "object", "source_yaml": "str"})
    where = f"body of {req.method} {req.route}"
    if ("source" in body) == ("source_yaml" in body):
        raise ApiError(400, f"{where} needs exactly one of source (DM's Source object) or source_yaml "
                            "(the source YAML file's text)")
    if "source" in body:
        src = check_object(body["source"], SOURCE_FIELDS, ("source_name", "host", "port", "user"),
                           f"field source of {where}")
        return _source_yaml(src, f"field source of {where}"), src["source_name"], where
    text = body["source_yaml"]
    try:
        sid = (yaml.safe_load(text) or {}).get("source-id", "")
    except (yaml.YAMLError, AttributeError):
        sid = ""                 # the master names what is wrong with the file
    return text, sid, where


def create_source(req: Request, call: Call):
    text, _, where = _posted_source(req)
    resp = call("OperateSource", pb.OperateSourceRequest(op="create", configs=[text], files=[f"{where}"]))
    if not resp.result:
        raise refusal(resp)
    created = [s.source for s in resp.sources if s.result]
    return 201, _source_docs(call, created, True)[0] if created else shapes.command(resp)


def update_source(req: Request, call: Call):
    """DM's ``PUT /api/v1/sources/{source-name}`` (``operate-source update``): checked like a new
    source, refused while a task uses it."""
    name = req.path("source-name")
    text, sid, where = _posted_source(req)
    if sid != name:
        raise ApiError(400, f"{where} is for source {sid!r}, not {name!r} of the path: a source ID cannot be "
                            "changed by an update (register the new one with POST /api/v1/sources)")
    resp = call("OperateSource", pb.OperateSourceRequest(op="update", configs=[text], files=[f"{where}"]))
    if not resp.result:
        raise refusal(resp)
    return 200, _source_docs(call, [name], True)[0]


def delete_source(req: Request, call: Call):
    name = req.path("source-name")
    req.query(())
    return _ok(call("OperateSource", pb.OperateSourceRequest(op="stop", sources=[name])))


# ----------------------------------------------------------------------------- tasks
def list_tasks(req: Request, call: Call):
    q = ("with_status", "stage", "source_name_list")
    with_status = req.query_bool("with_status", q)
    stage = req.query_str("stage", q)
    sources = req.query_list("source_name_list", q)
    resp = call("QueryStatus", pb.QueryStatusRequest(name="", sources=sources))
    if not resp.result:
        raise refusal(resp)
    docs = shapes.tasks(resp.subtasks, with_status)
    if stage:
        docs = [d for d in docs if d["stage"] == stage]
    return 200, {"total": len(docs), "data": docs}


def _task_text(req: Request) -> tuple[str, list[str], bool, str]:
    ctype = req.content_type.split(";")[0].strip().lower()
    if ctype in YAML_TYPES:          # the task file itself, as `shardctl start-task TASK.yaml` sends it
        req.query(())
        try:
            return _text(req.body.decode("utf-8"), f"body of {req.method} {req.route}"), [], False, ""
        except UnicodeDecodeError:
            raise ApiError(400, f"body of {req.method} {req.route} is not UTF-8 text") from None
    body = req.json({"task": "str|object", "source_name_list": "[name]", "remove_meta": "bool", "start_time": "str"},
                    ("task",))
    task = body["task"]
    if isinstance(task, dict):
        task = _text(yaml.safe_dump(task, sort_keys=False, allow_unicode=True), "field task")
    return task, body.get("source_name_list") or [], bool(body.get("remove_meta")), body.get("start_time") or ""


def create_task(req: Request, call: Call):
    text, sources, remove_meta, start_time = _task_text(req)
    where = f"body of {req.method} {req.route}"
    resp = call("StartTask", pb.StartTaskRequest(task_yaml=text, file=where, sources=sources, remove_meta=remove_meta,
                                                 start_time=start_time))
    status, doc = _ok(resp, 201)
    try:
        name = (yaml.safe_load(text) or {}).get("name", "")
    except (yaml.YAMLError, AttributeError):
        name = ""
    doc["task"] = {"name": name}
    return status, doc


def get_task(req: Request, call: Call):
    q = ("with_status",)
    name = req.path("task-name")
    with_status = req.query_bool("with_status", q)
    cfg = call("GetConfig", pb.GetConfigRequest(type="task", name=name))
    if not cfg.result:
        raise refusal(cfg)
    doc: dict = {"name": name, "config": cfg.cfg}
    if with_status:
        st = call("QueryStatus", pb.QueryStatusRequest(name=name))
        doc["status_list"] = [shapes.subtask(s) for s in st.subtasks] if st.result else []
    return 200, doc


def delete_task(req: Request, call: Call):
    name = req.path("task-name")
    sources = req.query_list("source_name_list", ("source_name_list",))
    return _ok(call("StopTask", pb.StopTaskRequest(name=name, sources=sources)))


def task_status(req: Request, call: Call):
    name = req.path("task-name")
    sources = req.query_list("source_name_list", ("source_name_list",))
    resp = call("QueryStatus", pb.QueryStatusRequest(name=name, sources=sources))
    if not resp.result:
        raise refusal(resp)
    data = [shapes.subtask(s) for s in resp.subtasks]
    return 200, {"total": len(data), "data": data}


def _stage_change(method: str, req_type):
    def handler(req: Request, call: Call):
        name = req.path("task-name")
        req.query(())
        body = req.json({"source_name_list": "[name]"}, optional_body=True)
        return _ok(call(method, req_type(name=name, sources=body.get("source_name_list") or [])))
    return handler


pause_task = _stage_change("PauseTask", pb.PauseTaskRequest)
resume_task = _stage_change("ResumeTask", pb.ResumeTaskRequest)


def start_task(req: Request, call: Call):
    """DM's ``POST /api/v1/tasks/{task-name}/start`` on a created task: its subtasks run again
    (``resume-task``; shardmerge creates and starts a task in one step, ``POST /api/v1/tasks``).
    DM's ``remove_meta`` only applies when the task is created."""
    name = req.path("task-name")
    req.query(())
    body = req.json({"source_name_list": "[name]", "remove_meta": "bool"}, optional_body=True)
    if body.get("remove_meta"):
        raise ApiError(400, "remove_meta of POST /api/v1/tasks/{task-name}/start: the task exists already; "
                            "stop it (DELETE /api/v1/tasks/{task-name}) and create it with POST /api/v1/tasks "
                            "and remove_meta true")
    return _ok(call("ResumeTask", pb.ResumeTaskRequest(name=name, sources=body.get("source_name_list") or [])))


def stop_task(req: Request, call: Call):
    """DM's ``POST /api/v1/tasks/{task-name}/stop``: the subtasks stop with their checkpoints and
    the task stays (``pause-task``; DM's stopped task is our Paused one).  ``DELETE`` removes it."""
    name = req.path("task-name")
    req.query(())
    body = req.json({"source_name_list": "[name]"}, optional_body=True)
    return _ok(call("PauseTask", pb.PauseTaskRequest(name=name, sources=body.get("source_name_list") or [])))


# ----------------------------------------------------------------------------- locks
def list_locks(req: Request, call: Call):
    q = ("task", "source_name_list")
    task = req.query_str("task", q)
    sources = req.query_list("source_name_list", q)
    resp = call("ShowDDLLocks", pb.ShowDDLLocksRequest(task=task, sources=sources))
    if not resp.result:
        raise refusal(resp)
    data = [shapes.lock(lk) for lk in resp.locks]
    return 200, {"total": len(data), "data": data, "msg": resp.msg}


def remove_lock(req: Request, call: Call):
    lock_id = req.path("lock-id")
    no_check = req.query_bool("no_check", ("no_check",))
    return _ok(call("UnlockDDLLock", pb.UnlockDDLLockRequest(ID=lock_id, force_remove=True, no_check=no_check)))


TABLE_FIELDS = {"source": "name", "database": "name", "table": "name"}


def unlock_table(req: Request, call: Call):
    lock_id = req.path("lock-id")
    req.query(())
    body = req.json({**TABLE_FIELDS, "action": "name"}, ("source", "database", "table"))
    action = body.get("action") or "skip"
    if action not in ("exec", "skip"):
        raise ApiError(400, f"field action is {action!r}; please check action, only exec/skip are acceptable")
    return _ok(call("UnlockDDLLock", pb.UnlockDDLLockRequest(
        ID=lock_id, action=action, source=body["source"], database=body["database"], table=body["table"])))


def remove_table(req: Request, call: Call):
    lock_id = req.path("lock-id")
    req.query(())
    body = req.json(TABLE_FIELDS, ("source", "database", "table"))
    return _ok(call("UnlockDDLLock", pb.UnlockDDLLockRequest(
        ID=lock_id, remove_table=True, source=body["source"], database=body["database"], table=body["table"])))


# ----------------------------------------------------------------------------- cluster
def _members(req: Request, call: Call):
    req.query(())
    resp = call("ListMember", pb.ListMemberRequest())
    if not resp.result:
        raise refusal(resp)
    return resp


def list_masters(req: Request, call: Call):
    data = shapes.masters(_members(req, call))
    return 200, {"total": len(data), "data": data}


def list_workers(req: Request, call: Call):
    data = shapes.workers(_members(req, call))
    return 200, {"total": len(data), "data": data}


# ----------------------------------------------------------------------------- ddl-preview
def ddl_preview(req: Request, call: Call):
    """``shardctl ddl-preview``: the simulated effect of a statement (or a rollout plan) on the
    merged table; the master writes nothing."""
    name = req.path("task-name")
    req.query(())
    body = req.json({"sql": "str", "source_name_list": "[name]", "tables": "str", "plan": "str|object",
                     "no_cost": "bool"})
    sql, plan = (body.get("sql") or "").strip(), body.get("plan") or ""
    if isinstance(plan, (dict, list)):
        plan = yaml.safe_dump(plan, sort_keys=False, allow_unicode=True)
    where = f"body of {req.method} {req.route}"
    if bool(sql) == bool(plan.strip()):
        raise ApiError(400, f"{where} needs exactly one of sql (one statement, with optional source_name_list and "
                            "tables) or plan (the rollout: a list of steps {sql, sources, tables})")
    resp = call("DDLPreview", pb.DDLPreviewRequest(task=name, sources=body.get("source_name_list") or [],
                                                   tables=body.get("tables") or "", sql=sql, plan=plan,
                                                   plan_file="field plan", no_cost=bool(body.get("no_cost"))))
    if not resp.result:
        raise refusal(resp)
    return 200, {"result": True, "msg": "", "preview": json.loads(resp.preview)}
