"""Sources, tasks and source->worker bindings: validation, storage and the status view.

Writes go through the leader's ``Fence``; reads work on any master.  Config errors are
returned verbatim (they name the file and the key); DM-only keys come back as warnings.
"""
from __future__ import annotations

import json
import threading
from typing import Any
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

import yaml

from coordinator.config import parse_source, parse_task
from coordinator.errors import ConfigError
from coordinator.etcdproto import Fence, SourceBinding, SourceRecord, Store, SubtaskStatus, TaskRecord
from coordinator.obs import logger
from coordinator.precheck.result import FAIL, WARN
from coordinator.precheck.runner import check_source

from . import metrics, sealed
from .errors import RequestError


MAX_TASK_FILE = 256 << 10


@dataclass
class CommandResult:
    """Result of a write request: ``msg`` holds the error or the warnings."""
    ok: bool
    msg: str = ""
    per_source: list[tuple[str, bool, str]] = field(default_factory=list)


def _mask(text: str, paths: list[tuple[str, ...]]) -> str:
    """The YAML with passwords (and private keys given as content) replaced: get-config must not
    leak them."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if not isinstance(data, dict):
        return text
    for path in paths:
        node: Any = data
        for k in path[:-1]:
            node = node.get(k) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(path[-1]):
            node[path[-1]] = "******"
    return yaml.safe_dump(data, sort_keys=False)


class Cluster:
    def __init__(self, store: Store):
        self.store = store
        self.log = logger("master.cluster")
        # task records are read-modify-written (start -s, stop -s, pause, resume); gRPC serves
        # requests on several threads, so without this two of them could both read the old
        # record and the later put would silently undo the earlier one that reported success
        self.task_lock = threading.RLock()

    # ------------------------------------------------------------------ sources
    def create_sources(self, fence: Fence, configs: list[str], files: list[str]) -> CommandResult:
        results: list[tuple[str, bool, str]] = []
        got = self._parse_sources(configs, files)
        if isinstance(got, CommandResult):
            return got
        parsed, warnings = got
        ids = [c.source_id for c, _ in parsed]
        dup = [s for s, n in Counter(ids).items() if n > 1]
        if dup:
            return CommandResult(False, f"source {dup[0]!r} is given twice")
        existing = {s.source for s in self.store.list_sources().items}
        for cfg, text in parsed:
            if cfg.source_id in existing:
                results.append((cfg.source_id, False, f"source {cfg.source_id!r} already exists; "
                                f"`operate-source stop {cfg.source_id}` first to replace it"))
                continue
            refused, seen = self._check_source(cfg, warnings)
            if refused:
                results.append((cfg.source_id, False, refused))
                continue
            self.store.put_source(fence, SourceRecord(cfg.source_id, sealed.seal(text, sealed.SOURCE), checked=seen))
            self.log.info("source registered", source=cfg.source_id)
            results.append((cfg.source_id, True, ""))
        ok = all(r[1] for r in results)
        msg = "; ".join(r[2] for r in results if not r[1]) or "\n".join(warnings)
        return CommandResult(ok, msg, results)

    @staticmethod
    def _parse_sources(configs: list[str], files: list[str]):
        """([(config, text)], warnings) of the posted source files, or the CommandResult that
        refuses the first one that does not parse (named by its file)."""
        parsed: list = []
        warnings: list[str] = []
        for i, text in enumerate(configs):
            file = files[i] if i < len(files) and files[i] else f"<source #{i + 1}>"
            try:
                cfg = parse_source(text, file)
            except ConfigError as e:
                return CommandResult(False, str(e), [(file, False, str(e))])
            parsed.append((cfg, text))
            warnings.extend(cfg.warnings)
        return parsed, warnings

    def _source_users(self) -> dict[str, list[str]]:
        """source -> the tasks that replicate it."""
        users: dict[str, list[str]] = {}
        for t in self.store.list_tasks().items:
            for src in t.sources:
                users.setdefault(src, []).append(t.task)
        return users

    def update_sources(self, fence: Fence, configs: list[str], files: list[str]) -> CommandResult:
        """dmctl's ``operate-source update``: a registered source's config replaced, as DM does
        only while no task uses the source (a running subtask keeps the config it started
        with); the new config is checked like a new source's."""
        got = self._parse_sources(configs, files)
        if isinstance(got, CommandResult):
            return got
        parsed, warnings = got
        if not parsed:
            return CommandResult(False, "operate-source update needs at least one SOURCE.yaml")
        existing = {s.source for s in self.store.list_sources().items}
        users = self._source_users()
        results = []
        for cfg, text in parsed:
            sid = cfg.source_id
            if sid not in existing:
                results.append((sid, False, f"source {sid!r} not found; `operate-source create` registers it"))
            elif sid in users:
                results.append((sid, False, f"source {sid!r} is used by task(s) {', '.join(sorted(users[sid]))}; "
                                            f"stop-task them first (as DM, a source is updated only while no task "
                                            f"uses it)"))
            elif (checked := self._check_source(cfg, warnings))[0]:
                results.append((sid, False, checked[0].replace("not registered", "not updated")))
            else:
                self.store.put_source(fence, SourceRecord(sid, sealed.seal(text, sealed.SOURCE), checked=checked[1]))
                self.log.info("source updated", source=sid)
                results.append((sid, True, ""))
        ok = all(r[1] for r in results)
        return CommandResult(ok, "; ".join(r[2] for r in results if not r[1]) or "\n".join(warnings), results)

    def _check_source(self, cfg, warnings: list[str]) -> tuple[str, str]:
        """Connect to the source and check it as DM does before registering it: (the reasons it is
        refused, "" when it may be registered; what the check saw, kept with the record for
        ``operate-source show``).  Its warnings are added to ``warnings``."""
        items = check_source(cfg)
        warned: list[str] = []
        for it in items:
            if it.state == WARN:
                warned.extend(m for sev, m in it.errors if sev == WARN)
        warnings.extend(f"source {cfg.source_id}: {m}" for m in warned)
        bad = [it for it in items if it.state == FAIL]
        if not bad:
            seen = f"{_now()}: {len(items)} checks passed" + (f"; warnings: {'; '.join(warned)}" if warned else "")
            return "", seen
        reasons = "; ".join(m for it in bad for sev, m in it.errors if sev == FAIL)
        todo = " ".join(dict.fromkeys(i for it in bad for i in it.instructions))
        self.log.warning("source refused by its check", source=cfg.source_id, reasons=reasons)
        return f"source {cfg.source_id!r} not registered: {reasons}" + (f" (to fix: {todo})" if todo else ""), ""

    def stop_sources(self, fence: Fence, sources: list[str]) -> CommandResult:
        if not sources:
            return CommandResult(False, "operate-source stop needs a source ID or a source config file")
        existing = {s.source for s in self.store.list_sources().items}
        users = self._source_users()
        results = []
        for s in sources:
            if s not in existing:
                results.append((s, False, f"source {s!r} not found"))
            elif s in users:
                results.append((s, False, f"source {s!r} is used by task(s) {', '.join(sorted(users[s]))}; "
                                          f"stop-task them first"))
            else:
                self.store.delete_source(fence, s)
                self.log.info("source removed", source=s)
                results.append((s, True, ""))
        return CommandResult(all(r[1] for r in results), "; ".join(r[2] for r in results if not r[1]), results)

    def show_sources(self, sources: list[str]) -> list[tuple[str, bool, str, str, str]]:
        """(source, ok, msg, worker, worker_state) per source; ``msg`` says what was last seen of
        the source: the check when it was registered, and each subtask that replicates it (its
        stage, and the error it stopped on), so a source that went bad since is not shown as just
        "online" (that word is about its worker)."""
        known = {s.source: s for s in self.store.list_sources().items}
        bindings = {b.source: b for b in self.store.list_bindings().items}
        live = {w.worker for w in self.store.list_workers().items}
        status: dict[str, list[SubtaskStatus]] = {}
        for st in self.store.list_status().items:
            status.setdefault(st.source, []).append(st)
        out = []
        for s in sources or sorted(known):
            if s not in known:
                out.append((s, False, f"source {s!r} not found", "", ""))
                continue
            b = bindings.get(s)
            out.append((s, True, _source_seen(known[s], status.get(s, [])), b.worker if b else "",
                        ("online" if b.worker in live else "offline") if b else ""))
        return out

    def get_config(self, typ: str, name: str) -> str:
        if typ == "source":
            src = self.store.get_source(name)
            if src is None:
                raise RequestError(f"source {name!r} not found")
            return _mask(src.yaml, [("from", "password"), ("from", "security", "ssl-key-bytes")])
        if typ == "task":
            rec = self.store.get_task(name)
            if rec is None:
                raise RequestError(f"task {name!r} not found")
            return _mask(rec.yaml, [("target-database", "password"), ("target-database", "security", "ssl-key-bytes")])
        if typ in ("master", "worker"):
            # dmctl's `config master|worker NAME`: a shardmerge process is configured by its
            # command-line flags; what the cluster knows of it is its registration
            if typ == "master":
                found: dict | None = next(({"name": r.member, "addr": r.addr, "http-addr": r.http_addr,
                                            "started-at": r.started_at}
                                           for r in self.store.list_masters().items if r.member == name), None)
            else:
                found = next(({"name": r.worker, "addr": r.addr, "started-at": r.started_at,
                               "source": r.source} for r in self.store.list_workers().items if r.worker == name),
                             None)
            if found is None:
                raise RequestError(f"{typ} {name!r} not found: not registered (stopped, or another name; see "
                                   f"`shardctl list-member`)")
            return (f"# {typ} {name}: configured by its command-line flags (`shardctl {typ} --help`); what it "
                    f"registered:\n" + yaml.safe_dump(found, sort_keys=False))
        raise RequestError(f"config type {typ!r} is not one of task, source, master, worker")

    # ------------------------------------------------------------------ tasks
    def check_task(self, text: str, file: str, sources: list[str]):
        """Parse and validate a start-task request; returns (TaskRecord, sources to start)."""
        if len(text) > MAX_TASK_FILE:
            # parsing and validating megabytes of YAML costs the master minutes of CPU, and the
            # record would not fit etcd's request limit: a task file is a few KB
            raise RequestError(f"the task file is {len(text) // 1024} KiB; at most {MAX_TASK_FILE // 1024} KiB is "
                               "accepted (a task file is a few KB: is this the right file?)", file=file)
        try:
            cfg = parse_task(text, file or "<task>")
        except ConfigError as e:
            raise RequestError(str(e)) from None
        wanted = list(sources) or cfg.sources
        for s in wanted:
            if s not in cfg.sources:
                raise RequestError(f"source {s!r} is not in `mysql-instances` of task {cfg.name!r}",
                                   file=file, task=cfg.name)
        known = {s.source for s in self.store.list_sources().items}
        missing = [s for s in wanted if s not in known]
        if missing:
            raise RequestError(f"source(s) {', '.join(missing)} of task {cfg.name!r} are not registered; "
                               f"run `shardctl operate-source create SOURCE.yaml` first", file=file, task=cfg.name)
        return cfg, wanted

    def refuse_running(self, name: str, wanted: list[str]) -> TaskRecord | None:
        """The task's record when it exists; a RequestError when it already runs on a source
        ``wanted`` names (asked before the prechecks too: their findings would hide the answer)."""
        cur = self.store.get_task(name)
        if cur is not None:
            already = [s for s in wanted if s in cur.sources]
            if already:
                raise RequestError(f"task {name!r} is already running on source(s) {', '.join(already)}; "
                                   f"stop-task it first (or start it on other sources with -s)", task=name)
        return cur

    def start_task(self, fence: Fence, text: str, file: str, sources: list[str]) -> CommandResult:
        with self.task_lock:
            return self._start_task(fence, text, file, sources)

    def _start_task(self, fence: Fence, text: str, file: str, sources: list[str]) -> CommandResult:
        cfg, wanted = self.check_task(text, file, sources)
        text = sealed.seal(text, sealed.TASK)
        started = sorted(wanted)
        cur = self.refuse_running(cfg.name, wanted)
        if cur is not None:
            wanted = cur.sources + wanted
            # sources already in the task keep their desired stage (a paused one stays paused)
            rec = TaskRecord(cfg.name, text, cur.sources, cur.stage, dict(cur.source_stages))
            rec = rec.with_stages({s: "running" for s in wanted if s not in cur.sources}, sorted(wanted))
        else:
            rec = TaskRecord(cfg.name, text, sorted(wanted))
        self.store.put_task(fence, rec)
        self.log.info("task started", task=cfg.name, sources=",".join(sorted(wanted)))
        # per source: only those this request started (the others were running already)
        return CommandResult(True, "\n".join(cfg.warnings), [(s, True, "") for s in started])

    def stop_task(self, fence: Fence, name: str, sources: list[str]) -> tuple[CommandResult, list[str] | None]:
        """Remove the task (or some of its sources).  Returns the outcome and the sources whose
        shard-DDL metadata must go (None = all of the task)."""
        with self.task_lock:
            return self._stop_task(fence, name, sources)

    def _stop_task(self, fence: Fence, name: str, sources: list[str]) -> tuple[CommandResult, list[str] | None]:
        cur = self.store.get_task(name)
        if cur is None:
            return CommandResult(False, f"task {name!r} not found"), None
        bad = [s for s in sources if s not in cur.sources]
        if bad:
            return CommandResult(False, f"task {name!r} does not run on source(s) {', '.join(bad)}"), []
        remaining = [s for s in cur.sources if s not in sources] if sources else []
        if remaining:
            self.store.put_task(fence, cur.with_stages({}, remaining))
            self.log.info("task stopped on sources", task=name, sources=",".join(sources))
            return CommandResult(True, "", [(s, True, "") for s in sources]), list(sources)
        self.store.delete_task_config(fence, name)
        self.log.info("task stopped", task=name)
        return CommandResult(True, "", [(s, True, "") for s in cur.sources]), None

    def pause_task(self, fence: Fence, name: str, sources: list[str]) -> CommandResult:
        """Set the desired stage of the task (or of ``sources``) to paused; the workers stop those
        subtasks (checkpoints flushed) and report them ``Paused``.  Already paused is fine."""
        with self.task_lock:
            return self._pause_task(fence, name, sources)

    def _pause_task(self, fence: Fence, name: str, sources: list[str]) -> CommandResult:
        cur = self._task_for_stage_change(name, sources, "pause-task")
        targets = list(sources) or list(cur.sources)
        already = [s for s in targets if cur.stage_of(s) == "paused"]
        changed = [s for s in targets if s not in already]
        if changed:
            self.store.put_task(fence, cur.with_stages({s: "paused" for s in changed}))
            self.log.info("task paused", task=name, sources=",".join(changed))
        if not changed:
            msg = f"task {name!r} is already paused on {', '.join(targets)}; nothing to do"
        elif already:
            msg = f"paused {', '.join(changed)}; {', '.join(already)} already paused"
        else:
            msg = ""
        return CommandResult(True, msg, [(s, True, "already paused" if s in already else "") for s in targets])

    def resume_task(self, fence: Fence, name: str, sources: list[str]) -> CommandResult:
        """Set the desired stage back to running.  The record is always rewritten (new
        revision), even when nothing was paused: that is what makes a worker restart a subtask
        that stopped in ``Error`` on an error a retry cannot fix."""
        with self.task_lock:
            return self._resume_task(fence, name, sources)

    def _resume_task(self, fence: Fence, name: str, sources: list[str]) -> CommandResult:
        cur = self._task_for_stage_change(name, sources, "resume-task")
        targets = list(sources) or list(cur.sources)
        running = [s for s in targets if cur.stage_of(s) == "running"]
        self.store.put_task(fence, cur.with_stages({s: "running" for s in targets}))
        self.log.info("task resumed", task=name, sources=",".join(targets))
        msg = (f"{', '.join(running)} {'was' if len(running) == 1 else 'were'} not paused; a subtask "
               f"stopped in Error there is restarted") if running else ""
        return CommandResult(True, msg, [(s, True, "not paused; restarted if it stopped in Error" if s in running
                                    else "") for s in targets])

    def require_task(self, name: str) -> TaskRecord:
        """The task record of ``name``; a RequestError naming the started tasks when there is none."""
        cur = self.store.get_task(name)
        if cur is None:
            known = sorted(t.task for t in self.store.list_tasks().items)
            raise RequestError(f"task {name!r} not found" + (f"; tasks: {', '.join(known)}" if known
                                                              else "; no task is started"))
        return cur

    def _task_for_stage_change(self, name: str, sources: list[str], cmd: str) -> TaskRecord:
        if not name:
            raise RequestError(f"{cmd} needs a task name (or task file)")
        cur = self.require_task(name)
        bad = [s for s in sources if s not in cur.sources]
        if bad:
            raise RequestError(f"task {name!r} does not run on source(s) {', '.join(bad)}; its sources: "
                               f"{', '.join(cur.sources)}")
        return cur

    # ------------------------------------------------------------------ status
    def query_status(self, name: str, sources: list[str]) -> list[dict]:
        tasks = self.store.list_tasks().items
        if name:
            tasks = [t for t in tasks if t.task == name]
            if not tasks:
                raise RequestError(f"task {name!r} not found")
        bindings = {b.source: b.worker for b in self.store.list_bindings().items}
        live = {w.worker for w in self.store.list_workers().items}
        known = {s.source for s in self.store.list_sources().items}
        status = {(s.task, s.source): s for s in self.store.list_status().items}
        used = {src for t in tasks for src in t.sources}
        unknown = [s for s in sources if s not in used]
        if unknown:
            # as dmctl: a source the selected tasks do not replicate is an error, not an empty answer
            scope = f"task {name!r}" if name else "any task"
            raise RequestError(f"source(s) {', '.join(unknown)} not found in {scope} (its sources: "
                               f"{', '.join(sorted(used)) or 'none'})")
        out = []
        for t in sorted(tasks, key=lambda t: t.task):
            for src in t.sources:
                if sources and src not in sources:
                    continue
                d = self._subtask(t.task, src, status.get((t.task, src)), bindings.get(src), live, known)
                out.append(self._desired_stage_note(d, t.stage_of(src), status.get((t.task, src))))
        return out

    @staticmethod
    def _desired_stage_note(d: dict, desired: str, st: SubtaskStatus | None) -> dict:
        """Say so when the worker has not yet acted on a pause-task / resume-task."""
        by_operator = st is not None and st.stage == "Paused" and (st.detail or {}).get("paused_by") == "operator"
        note = ""
        if desired == "paused" and not by_operator:
            note = "pause-task requested; the worker has not stopped this subtask yet"
        elif desired == "running" and by_operator:
            note = "resume-task requested; the worker has not restarted this subtask yet"
        if note:
            d["waiting_for"] = note + (f"; {d['waiting_for']}" if d.get("waiting_for") else "")
        return d

    @staticmethod
    def _subtask(task: str, source: str, st: SubtaskStatus | None, worker: str | None,
                 live: set[str], known: set[str]) -> dict:
        d: dict[str, Any] = {"task": task, "source": source, "worker": worker or "", "stage": "New"}
        if worker is None:
            wait = f"no worker bound to source {source}"
            if source not in known:
                wait += f" (source {source} is not registered)"
            elif not live:
                wait += " (no live worker registered)"
        elif worker not in live:
            wait = f"worker {worker} bound to source {source} is offline"
        else:
            wait = f"worker {worker} has not reported status for this task yet"
        if st is None:
            d["waiting_for"] = wait
            return d
        det = st.detail or {}
        d.update(stage=st.stage, worker=st.worker or d["worker"], block_ddl_owner=st.block_ddl_owner,
                 conflict_msg=st.conflict_msg, updated_at=st.updated_at,
                 detail_json=json.dumps(det, sort_keys=True))
        # detail keys as written by worker/status.py (older/alternative names accepted too)
        for k, names in (("unit", ("unit",)), ("lock_id", ("lock_id",)), ("waiting_for", ("waiting_for",)),
                         ("synced_pos", ("synced_position", "synced_pos")),
                         ("checkpoint_pos", ("checkpoint", "checkpoint_pos")), ("binlog_pos", ("binlog_pos",))):
            for n in names:
                if det.get(n) not in (None, "", {}):
                    d[k] = det[n] if isinstance(det[n], str) else json.dumps(det[n], sort_keys=True)
                    break
        err = det.get("error")
        if isinstance(err, dict) and err:
            ctx = ", ".join(f"{k}={v}" for k, v in err.items() if k not in ("type", "message"))
            d["error"] = f"{err.get('type', 'Error')}: {err.get('message', '')}" + (f" [{ctx}]" if ctx else "")
            if err.get("position") and "binlog_pos" not in d:
                d["binlog_pos"] = str(err["position"])
            if err.get("lock_id") and "lock_id" not in d:
                d["lock_id"] = str(err["lock_id"])
        elif err:
            d["error"] = str(err)
        for k, typ in (("lag_seconds", float), ("lag_events", int)):
            try:
                if det.get(k) is not None:
                    d[k] = typ(det[k])
            except (TypeError, ValueError):
                pass
        if worker is None or worker not in live:
            d["waiting_for"] = (d.get("waiting_for", "") + "; " if d.get("waiting_for") else "") + wait
        return d

    # ------------------------------------------------------------------ bindings
    def _register_offered_sources(self, fence: Fence, regs, known: list[str]) -> list[str]:
        """Register sources that live workers were started with (``--source FILE``) but the
        cluster does not know yet; a bad file is logged, never fatal."""
        added = []
        for r in regs:
            if not r.source or r.source in known or r.source in added or not r.source_yaml:
                continue
            try:
                cfg = parse_source(r.source_yaml, f"<source file of worker {r.worker}>")
            except ConfigError as e:
                self.log.error("worker offers an invalid source config", worker=r.worker, error=str(e))
                continue
            if cfg.source_id != r.source:
                self.log.error("worker's source file names another source", worker=r.worker,
                               source=r.source, file_source=cfg.source_id)
                continue
            self.store.put_source(fence, SourceRecord(cfg.source_id, sealed.seal(r.source_yaml, sealed.SOURCE)))
            self.log.info("source registered from its worker", source=cfg.source_id, worker=r.worker)
            added.append(cfg.source_id)
        return added

    def reconcile_bindings(self, fence: Fence) -> list[str]:
        """Bind every source to one live worker; a dead worker's sources move to the least
        loaded live one (DM can report a stale one).  Returns human-readable changes."""
        regs = self.store.list_workers().items
        sources = sorted(s.source for s in self.store.list_sources().items)
        added = self._register_offered_sources(fence, regs, sources)
        sources = sorted(set(sources) | set(added))
        changes = [f"registered source {s} offered by its worker" for s in added]
        workers = sorted(w.worker for w in regs)
        offers: dict[str, list[str]] = {}
        for r in regs:
            if r.source:
                offers.setdefault(r.source, []).append(r.worker)
        bindings = self.store.list_bindings()
        by_source = {b.source: b for b in bindings.items}
        for gone in bindings.items:
            if gone.source not in sources:
                self.store.delete_binding(fence, gone.source)
                changes.append(f"unbound removed source {gone.source} from {gone.worker}")
        load = Counter(b.worker for b in by_source.values() if b.worker in workers and b.source in sources)
        bound = 0
        for s in sources:
            b = by_source.get(s)
            if b is not None and b.worker in workers:
                bound += 1
                continue
            if not workers:
                if b is not None:
                    self.store.delete_binding(fence, s)
                    changes.append(f"unbound {s} from offline worker {b.worker} (no live worker)")
                continue
            # a worker started for this source first, then the least loaded one
            w = min(workers, key=lambda w: (w not in offers.get(s, ()), load[w], w))
            if self.store.put_binding(fence, SourceBinding(s, w), expect_revision=b.revision if b else 0):
                load[w] += 1
                bound += 1
                changes.append(f"bound {s} to {w}" + (f" (was {b.worker}, offline)" if b else ""))
        metrics.BINDINGS.set(bound)
        metrics.UNBOUND.set(len(sources) - bound)
        for c in changes:
            self.log.info("binding changed", change=c)
        return changes


# ----------------------------------------------------------------------------- binlog skip


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _source_seen(rec: SourceRecord, subtasks: list[SubtaskStatus]) -> str:
    """What ``operate-source show`` says it last saw of a source (see ``Cluster.show_sources``)."""
    parts = [f"checked {rec.checked}" if rec.checked else "registered without a master check (a worker's "
             "--source-file)"]
    for st in sorted(subtasks, key=lambda x: x.task):
        err = (st.detail or {}).get("error") or {}
        line = f"task {st.task}: {st.stage} at {st.updated_at}"
        if isinstance(err, dict) and err.get("message"):
            line += f" ({err['message']})"
        parts.append(line)
    return "; ".join(parts)
