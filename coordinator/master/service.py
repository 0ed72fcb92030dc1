"""The gRPC ``Master`` service.

Reads (query-status, get-config, operate-source show, members) are answered by any master from
etcd, and so is check-task (the prechecks read the sources and the downstream, write nothing).  Writes and lock views need the leader: a follower forwards them to the leader's
advertised address once (a forwarded call is marked so it is never forwarded again) and answers
"not leader, leader is X" when that fails.
"""
from __future__ import annotations

import json
import traceback
from typing import Protocol

import grpc

from coordinator.access.tls import TlsFiles
from coordinator.errors import ShardMergeError
from coordinator.etcdproto import EtcdUnavailable, Fenced, Store
from coordinator import answers
from coordinator.master import precheck_task, start_time
from coordinator.master.binlog_ops import handle_error
from coordinator.master.preview import ddl_preview
from coordinator.master.schema_ops import operate_schema
from coordinator.obs import logger
from protos import master_pb2 as pb, master_pb2_grpc as pbg

from .cluster import Cluster
from .errors import RequestError
from .election import Election
from .optimist import Optimist
from .transfer import transfer_source


class ServedNode(Protocol):
    """What the service needs of the master process (``node.MasterNode``), named here so the
    service does not import the node that builds it."""
    name: str
    advertise: str
    cluster: Cluster
    election: Election
    store: Store
    optimist: Optimist | None     # None while this master is not the leader

    tls: TlsFiles                 # this master's certificates: also its client identity towards the leader

    def leader_ready(self) -> bool: ...

    def wake_binder(self) -> None: ...

FORWARDED = "x-shardmerge-forwarded"
FORWARD_TIMEOUT = 30.0


class NotLeaderHere(Exception):
    def __init__(self, leader: str):
        super().__init__(leader)
        self.leader = leader


def _msg(e: BaseException) -> str:
    return str(e) if isinstance(e, ShardMergeError) else f"{type(e).__name__}: {e}"


def _common(out) -> pb.CommonResponse:
    return pb.CommonResponse(result=out.ok, msg=out.msg, sources=[
        pb.SourceResult(source=s, result=ok, msg=m) for s, ok, m in out.per_source])


class MasterService(pbg.MasterServicer):
    def __init__(self, node: ServedNode):
        self.node = node
        self.log = logger("master.api", member=node.name)
        self._channels: dict[str, grpc.Channel] = {}

    # ------------------------------------------------------------------ plumbing
    def _stub(self, addr: str) -> pbg.MasterStub:
        ch = self._channels.get(addr)
        if ch is None:
            ch = self._channels[addr] = self.node.tls.channel(addr, trust_own_cert=True)
        return pbg.MasterStub(ch)

    def _leader_call(self, name: str, request, context, resp_type, handler):
        """Run ``handler(fence)`` when leader, else forward ``name`` to the leader."""
        node = self.node
        fence = node.election.fence
        if fence is not None and node.leader_ready():
            try:
                return handler(fence)
            except RequestError as e:
                return resp_type(result=False, msg=str(e))
            except Fenced as e:
                node.election.lost()
                return resp_type(result=False, msg=f"{answers.LOST_LEADERSHIP}: {e}")
            except EtcdUnavailable as e:
                return resp_type(result=False, msg=f"etcd unavailable, retry: {e}")
            except ShardMergeError as e:
                return resp_type(result=False, msg=str(e))
            except Exception as e:  # noqa: BLE001 — report, never crash the server thread
                self.log.error("request failed", rpc=name, error=_msg(e), exc=traceback.format_exc())
                return resp_type(result=False, msg=f"internal error in {name}: {_msg(e)}")
        if fence is not None:
            return resp_type(result=False, msg=answers.REBUILDING, leader=node.advertise)
        leader = node.election.leader_addr()
        forwarded = any(k == FORWARDED for k, _ in (context.invocation_metadata() or ()))
        if not leader:
            return resp_type(result=False, msg=answers.NO_LEADER)
        if forwarded or leader == node.advertise:
            return resp_type(result=False, msg=answers.not_leader(leader), leader=leader)
        try:
            # the caller's token travels on (the leader's guard checks it again); with mutual TLS
            # the leader sees this master's certificate, so its CN must be allowed there
            auth = tuple((k, v) for k, v in (context.invocation_metadata() or ()) if k == "authorization")
            resp = getattr(self._stub(leader), name)(request, timeout=FORWARD_TIMEOUT,
                                                    metadata=((FORWARDED, node.name),) + auth)
            if not resp.leader:
                resp.leader = leader
            return resp
        except grpc.RpcError as e:
            return resp_type(result=False, leader=leader,
                             msg=answers.not_leader(leader, f"forwarding failed: {e.code().name}: {e.details()}"))

    def _read(self, name: str, resp_type, fn):
        try:
            return fn()
        except RequestError as e:
            return resp_type(result=False, msg=str(e))
        except EtcdUnavailable as e:
            return resp_type(result=False, msg=f"etcd unavailable, retry: {e}")
        except Exception as e:  # noqa: BLE001
            self.log.error("request failed", rpc=name, error=_msg(e), exc=traceback.format_exc())
            return resp_type(result=False, msg=f"internal error in {name}: {_msg(e)}")

    # ------------------------------------------------------------------ tasks
    def StartTask(self, request, context):  # noqa: N802 (gRPC names)
        def run(fence):
            cluster, opt = self.node.cluster, self.node.optimist
            text = request.task_yaml
            cfg, wanted = cluster.check_task(text, request.file, list(request.sources))
            cluster.refuse_running(cfg.name, wanted)
            warned: list[str] = []
            if request.start_time:
                text, warned = start_time.resolve(self.node.store, cfg, text, wanted, request.start_time)
                cfg, wanted = cluster.check_task(text, request.file, list(request.sources))
            if not request.skip_precheck:
                report = precheck_task.precheck(self.node.store, cfg, wanted)
                if not report.passed:
                    self.log.warning("start-task refused by precheck", task=cfg.name, summary=report.summary_line())
                    return pb.CommonResponse(result=False, msg=precheck_task.refusal(report, cfg.name))
                warned += precheck_task.warnings(report)
            if request.remove_meta and opt is not None:
                opt.remove_task_meta(fence, cfg.name, None)
            out = cluster.start_task(fence, text, request.file, list(request.sources))
            self.node.wake_binder()
            msg = "\n".join(m for m in (out.msg, *warned) if m)
            return pb.CommonResponse(result=out.ok, msg=msg, sources=[
                pb.SourceResult(source=s, result=ok, msg=m) for s, ok, m in out.per_source])
        return self._leader_call("StartTask", request, context, pb.CommonResponse, run)

    def CheckTask(self, request, context):  # noqa: N802
        """Any master answers: the checks read the sources and the downstream, nothing in etcd
        is written."""
        def run():
            cfg, wanted = self.node.cluster.check_task(request.task_yaml, request.file, list(request.sources))
            report = precheck_task.with_config_warnings(precheck_task.precheck(self.node.store, cfg, wanted), cfg)
            return pb.CheckTaskResponse(result=report.passed, msg=report.summary_line(),
                                        check_result_json=json.dumps(report.to_json()))
        return self._read("CheckTask", pb.CheckTaskResponse, run)

    def StopTask(self, request, context):  # noqa: N802
        def run(fence):
            out, meta_sources = self.node.cluster.stop_task(fence, request.name, list(request.sources))
            if out.ok:   # pending/used `binlog skip` records go with the task (or its sources)
                self.node.store.delete_binlog_skips(fence, request.name, meta_sources)
                if meta_sources is None:
                    self.node.store.delete_schema_ops(fence, request.name)
            opt = self.node.optimist
            if opt is not None and (out.ok or meta_sources is None):
                removed = opt.remove_task_meta(fence, request.name, meta_sources)
                if not out.ok and removed:
                    # stop-task of an unknown task still clears its orphan locks (DM leaves them behind)
                    return pb.CommonResponse(result=True, msg=f"task {request.name!r} not found; removed "
                                             f"its leftover shard DDL metadata ({removed} lock(s))")
            return pb.CommonResponse(result=out.ok, msg=out.msg, sources=[
                pb.SourceResult(source=s, result=ok, msg=m) for s, ok, m in out.per_source])
        return self._leader_call("StopTask", request, context, pb.CommonResponse, run)

    def PauseTask(self, request, context):  # noqa: N802
        def run(fence):
            out = self.node.cluster.pause_task(fence, request.name, list(request.sources))
            return _common(out)
        return self._leader_call("PauseTask", request, context, pb.CommonResponse, run)

    def ResumeTask(self, request, context):  # noqa: N802
        def run(fence):
            out = self.node.cluster.resume_task(fence, request.name, list(request.sources))
            return _common(out)
        return self._leader_call("ResumeTask", request, context, pb.CommonResponse, run)

    def HandleError(self, request, context):  # noqa: N802
        def run(fence):
            out = handle_error(self.node.cluster, fence, request.task, request.source,
                               request.op or "skip", request.binlog_pos, list(request.statements))
            return _common(out)
        return self._leader_call("HandleError", request, context, pb.CommonResponse, run)

    def OperateSchema(self, request, context):  # noqa: N802
        def run(fence):
            out = operate_schema(self.node.cluster, fence, request.task, request.source, request.op,
                                 request.database, request.table, request.schema, request.flush, request.sync,
                                 from_source=request.from_source, from_target=request.from_target,
                                 sync_given=request.sync_given)
            return _common(out)
        return self._leader_call("OperateSchema", request, context, pb.CommonResponse, run)

    def QueryStatus(self, request, context):  # noqa: N802
        def run():
            rows = self.node.cluster.query_status(request.name, list(request.sources))
            msg = "" if rows else "no task is running"
            return pb.QueryStatusResponse(result=True, msg=msg, leader=self.node.election.leader_addr(),
                                          subtasks=[pb.SubTaskStatus(**r) for r in rows])
        return self._read("QueryStatus", pb.QueryStatusResponse, run)

    # ------------------------------------------------------------------ locks
    def ShowDDLLocks(self, request, context):  # noqa: N802
        def run(fence):
            locks, msg = self.node.optimist.show_locks(request.task, list(request.sources))
            if not locks and request.task:
                self.node.cluster.require_task(request.task)    # a task that does not exist is not "no lock"
            if not locks and not msg:
                msg = "no DDL lock exists"
            return pb.ShowDDLLocksResponse(result=True, msg=msg, locks=locks)
        return self._leader_call("ShowDDLLocks", request, context, pb.ShowDDLLocksResponse, run)

    def UnlockDDLLock(self, request, context):  # noqa: N802
        def run(fence):
            msg = self.node.optimist.unlock(fence, request)
            return pb.CommonResponse(result=True, msg=msg)
        return self._leader_call("UnlockDDLLock", request, context, pb.CommonResponse, run)

    def DDLPreview(self, request, context):  # noqa: N802
        def run(fence):
            doc = ddl_preview(self.node.store, self.node.optimist, request.task, list(request.sources),
                              request.tables, request.sql, request.plan, request.plan_file or "the plan",
                              measure=not request.no_cost)
            return pb.DDLPreviewResponse(result=True, preview=json.dumps(doc, ensure_ascii=False))
        return self._leader_call("DDLPreview", request, context, pb.DDLPreviewResponse, run)

    # ------------------------------------------------------------------ cluster
    def GetLeader(self, request, context):  # noqa: N802
        e = self.node.election
        return pb.GetLeaderResponse(leader=e.leader_addr(), self=self.node.advertise, is_leader=e.is_leader)

    def OperateSource(self, request, context):  # noqa: N802
        op = request.op or "show"
        if op == "show":
            def show():
                rows = self.node.cluster.show_sources(list(request.sources))
                return pb.OperateSourceResponse(
                    result=all(r[1] for r in rows), msg="; ".join(r[2] for r in rows if not r[1]),
                    sources=[pb.SourceInfo(source=s, result=ok, msg=m, worker=w, worker_state=st)
                             for s, ok, m, w, st in rows])
            return self._read("OperateSource", pb.OperateSourceResponse, show)
        if op not in ("create", "update", "stop"):
            return pb.OperateSourceResponse(result=False, msg=f"operate-source: unknown operation {op!r}; "
                                                              f"use create, update, stop or show")

        def run(fence):
            c = self.node.cluster
            if op == "create":
                out = c.create_sources(fence, list(request.configs), list(request.files))
            elif op == "update":
                out = c.update_sources(fence, list(request.configs), list(request.files))
            else:
                out = c.stop_sources(fence, list(request.sources))
            self.node.wake_binder()
            return pb.OperateSourceResponse(result=out.ok, msg=out.msg, sources=[
                pb.SourceInfo(source=s, result=ok, msg=m) for s, ok, m in out.per_source])
        return self._leader_call("OperateSource", request, context, pb.OperateSourceResponse, run)

    def TransferSource(self, request, context):  # noqa: N802
        def run(fence):
            out = transfer_source(self.node.cluster, fence, request.source, request.worker)
            return _common(out)
        return self._leader_call("TransferSource", request, context, pb.CommonResponse, run)

    def GetConfig(self, request, context):  # noqa: N802
        return self._read("GetConfig", pb.GetConfigResponse, lambda: pb.GetConfigResponse(
            result=True, cfg=self.node.cluster.get_config(request.type, request.name)))

    def ListMember(self, request, context):  # noqa: N802
        def run():
            store = self.node.store
            members = []
            leader = store.leader()
            if leader is not None:
                members.append(pb.Member(name=leader.member, addr=leader.addr, role="leader", state="online"))
            for m in store.list_masters().items:      # followers (and the leader, listed above)
                if leader is None or m.member != leader.member:
                    members.append(pb.Member(name=m.member, addr=m.addr, role="master", state="online"))
            bound: dict[str, list[str]] = {}
            for b in store.list_bindings().items:
                bound.setdefault(b.worker, []).append(b.source)
            for w in store.list_workers().items:
                members.append(pb.Member(name=w.worker, addr=w.addr, role="worker", state="online",
                                         sources=sorted(bound.get(w.worker, []))))
            return pb.ListMemberResponse(result=True, members=members, leader=leader.addr if leader else "")
        return self._read("ListMember", pb.ListMemberResponse, run)
