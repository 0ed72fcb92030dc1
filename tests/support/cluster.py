"""One parameterised cluster of real processes: masters, one worker per source (and free workers),
on one etcd prefix.  The e2e and scenario suites use one master and two sources, the operator
tools a spare worker, the chaos suite two masters; all are this class with other arguments."""
from __future__ import annotations

import contextlib
import json
import signal
import uuid
from pathlib import Path

from tests.support.ports import free_port
from tests.support.probes import http_get, shardctl_doc, wait_for
from tests.support.procs import Proc, master_args, worker_args, write_source_file

TWO_SOURCES = {"s1": "source1", "s2": "source2"}


class ProcessCluster:
    """``masters``: their names; ``sources``: {source ID: dev server name} (one bound worker
    ``w-<source>`` each); ``spare``: names of free workers (``w-<name>``); ``spark_master`` for every
    worker.  ``ctl(...)`` runs shardctl against the leader (any live master if none is known)."""

    def __init__(self, etcd: str, mysql: dict, work: Path, prefix: str, *, masters=("m1",),
                 sources: dict[str, str] | None = None, spare=(), election_ttl: int = 3, worker_ttl: int = 3,
                 worker_env: dict | None = None, spark_master: str = "local[1]"):
        self.etcd, self.mysql, self.work, self.prefix = etcd, mysql, work, prefix
        self.masters: dict[str, Proc] = {}
        self.grpc_addr: dict[str, str] = {}
        self.metrics_addr: dict[str, str] = {}
        for name in masters:
            self.grpc_addr[name] = f"127.0.0.1:{free_port()}"
            self.metrics_addr[name] = f"127.0.0.1:{free_port()}"
            self.masters[name] = Proc(name, master_args(etcd, self.grpc_addr[name], prefix, name, election_ttl,
                                                        self.metrics_addr[name]), work)
        self.sources = dict(TWO_SOURCES if sources is None else sources)
        self.source_files: dict[str, str] = {}
        self.workers: dict[str, Proc] = {}
        self.worker_metrics: dict[str, str] = {}   # worker key (source or spare name) -> its /metrics
        for key in (*self.sources, *spare):
            src = None
            if key in self.sources:
                src = self.source_files[key] = write_source_file(work / f"{key}.yaml", key, mysql[self.sources[key]])
            self.worker_metrics[key] = f"127.0.0.1:{free_port()}"
            self.workers[key] = Proc(f"worker-{key}", worker_args(etcd, prefix, f"w-{key}", worker_ttl,
                                                                  self.worker_metrics[key], source_file=src,
                                                                  spark_master=spark_master), work, env=worker_env)
        self.spare = tuple(spare)
        self.context = ""        # what the running test is doing (printed on failure)
        self.task_name = ""      # its task: query-status and locks are printed on failure

    def procs(self) -> list[Proc]:
        return [*self.masters.values(), *self.workers.values()]

    # ------------------------------------------------------------------ masters
    def leader(self) -> str | None:
        """The master that reports itself leader on /metrics and is ready on /readyz."""
        for name, p in self.masters.items():
            if not p.alive():
                continue
            code, text = http_get(self.metrics_addr[name], "/metrics")
            if code == 200 and any(line.startswith("shardmerge_master_is_leader ") and line.split()[-1] == "1.0"
                                   for line in text.splitlines()):
                if http_get(self.metrics_addr[name], "/readyz")[0] == 200:
                    return name
        return None

    def wait_leader(self, timeout: float = 60, exclude: str | None = None) -> str:
        return wait_for(lambda: (lead := self.leader()) and lead != exclude and lead, timeout,
                        "a master to lead", self.diagnostics, interval=0.2)

    # ------------------------------------------------------------------ processes
    def start(self) -> "ProcessCluster":
        for m in self.masters.values():
            m.start()
        self.wait_leader()
        for w in self.workers.values():
            w.start()
        self.wait_bound()
        return self

    def wait_bound(self, timeout: float = 90) -> None:
        """Every source bound to its own worker and every spare worker registered free."""
        def ready():
            rc, doc = self.ctl("list-member")
            parts = doc.get("members", []) if isinstance(doc, dict) else []
            got = {w["name"]: w["sources"] for part in parts for w in part.get("workers", {}).get("workers", [])}
            return (all(got.get(f"w-{sid}") == [sid] for sid in self.sources)
                    and all(got.get(f"w-{name}") == [] for name in self.spare) and got)
        self.wait(ready, timeout, "every source bound to its worker, spare workers free")

    def stop(self) -> None:
        for p in self.procs():
            if p.alive():
                p.kill(signal.SIGTERM, timeout=20)

    # ------------------------------------------------------------------ shardctl
    def ctl(self, *argv: str, fmt: str | None = None) -> tuple[int, dict | str]:
        """``shardctl`` against the leader first, then every other live master (a follower
        forwards writes); (exit code, JSON or text)."""
        lead = self.leader() if len(self.masters) > 1 else None
        live = [n for n in sorted(self.masters, key=lambda n: n != lead) if self.masters[n].alive()]
        rc, result = 1, "no live master"
        for name in live or list(self.masters)[:1]:   # none alive: the CLI's own error is the answer
            rc, result = shardctl_doc(self.grpc_addr[name], *argv, fmt=fmt)
            if isinstance(result, dict) or rc == 0:
                return rc, result
        return rc, result

    def ctl_ok(self, *argv: str) -> dict:
        rc, doc = self.ctl(*argv)
        assert rc == 0, f"shardctl {' '.join(argv)} failed (exit {rc}): {doc}\n{self.diagnostics()}"
        return doc if isinstance(doc, dict) else {}

    def wait(self, cond, timeout: float, what: str, interval: float = 0.5):
        return wait_for(cond, timeout, what, self.diagnostics, interval=interval)

    def diagnostics(self) -> str:
        parts = [f"context: {self.context}"] if self.context else []
        if self.task_name:
            for argv in (("query-status", self.task_name), ("show-ddl-locks", self.task_name)):
                try:
                    rc, doc = self.ctl(*argv)
                    parts.append(f"$ shardctl {' '.join(argv)} -> {rc}\n"
                                 + (json.dumps(doc, indent=1) if isinstance(doc, dict) else str(doc))[:6000])
                except Exception as e:  # noqa: BLE001 — diagnostics must not hide the failure
                    parts.append(f"{argv}: {e!r}")
        for p in self.procs():
            parts.append(f"---- {p.name} (alive={p.alive()}) log tail:\n{p.tail()}")
        return "\n".join(parts)


@contextlib.contextmanager
def running(make, etcd_client, name: str, work: Path):
    """A cluster of real processes under a fresh etcd prefix, stopped and its prefix deleted at
    the end; ``make(prefix, work)`` builds it (before ``start``)."""
    prefix = f"/shardmerge-test/{name}-{uuid.uuid4().hex[:10]}/"
    c = make(prefix, work)
    try:
        c.start()
        yield c
    finally:
        c.stop()
        etcd_client.delete_prefix(prefix)
