"""Where one chunk's row changes are applied: in the driver, in a long-lived apply stream, or in
one Spark job per chunk (``syncer.apply-mode``).

The syncer plans nothing here and checkpoints nothing: it hands over the chunk's parts (split by
target and key hash, :meth:`ChunkApplier.split`) and gets back each task's acknowledgements,
which it merges into table points (:func:`merge_acks`).  This module owns the Spark side: the
session (which may still be starting), the stream's life and the job-per-chunk fallback.
"""
from __future__ import annotations

import functools
import time
from typing import Any

from prometheus_client import Counter

from worker.downstream import fetch_generated, fetch_keys, fetch_serial
from worker.events import Position
from worker.sync import apply_stream
from worker.errors import KeyCollision
from worker.sync.apply import Partitioner, apply_changes, apply_partition
from worker.sync.apply_stream import ApplyStream, StreamError
from worker.sync.errors import ReplicationKeyCollision, SyncError
from worker.sync.fence import FencedOut

SPARK_JOBS = Counter("shardmerge_worker_spark_apply_jobs_total",
                     "Spark jobs started by the apply: one per apply stream (many chunks) or, with "
                     "apply-mode: job, one per chunk (small chunks, and all while Spark starts, apply in the driver)",
                     ["task", "source"])


class ChunkApplier:
    """The Spark side of one syncer's apply.  ``spark`` is a session or a
    ``worker.spark_session.SparkStarter``; ``streamed``: chunks go to a long-lived apply job."""

    def __init__(self, spark, *, task: str, source: str, parallelism: int, local_apply_rows: int,
                 streamed: bool, log):
        self.spark, self.task, self.source, self.log = spark, task, source, log
        self.parallelism, self.local_apply_rows, self.streamed = parallelism, local_apply_rows, streamed
        self.stream: ApplyStream | None = None     # the long-lived apply job (syncer.apply-mode: stream)
        # the downstream targets' key and generated columns ("schema.table" -> columns): the split
        self.keys: dict[str, list[str]] = {}
        self.generated: dict[str, set[str]] = {}
        self.serial: frozenset[str] = frozenset()    # targets with another unique index: one partition
        self._parts: Partitioner | None = None
        self._parts_keys: tuple[dict, dict, frozenset] | None = None
        self._driver_apply_noted = False

    def load_keys(self, conn) -> None:
        """Every downstream table's key and generated columns (at start)."""
        self.keys, self.generated = fetch_keys(conn), fetch_generated(conn)
        self.serial = frozenset(fetch_serial(conn))

    def refresh_target(self, conn, target: tuple[str, str]) -> None:
        """Re-read one downstream table's key and generated columns (after a DDL that may have
        changed them, or on a shard's CREATE of a target another source may have made)."""
        name = f"{target[0]}.{target[1]}"
        key, gen = fetch_keys(conn, target).get(name), fetch_generated(conn, target).get(name)
        if key != self.keys.get(name):      # new maps: the partitioner is rebuilt on identity change
            self.keys = {k: v for k, v in self.keys.items() if k != name} | ({name: key} if key else {})
        if gen != self.generated.get(name):
            self.generated = {k: v for k, v in self.generated.items() if k != name} | ({name: gen} if gen else {})
        serial = bool(fetch_serial(conn, target))
        if serial != (name in self.serial):
            self.serial = (self.serial | {name}) if serial else (self.serial - {name})

    def split(self, txns, **kw) -> list:
        """The chunk's changes in parts by (target, key hash); ``kw`` as ``Partitioner.split``."""
        keys, generated, serial = self.keys, self.generated, self.serial
        # the maps themselves, compared by identity: an id() of a freed map can come back
        # for a later one and keep a stale partitioner
        built = self._parts_keys
        if (self._parts is None or built is None or built[0] is not keys or built[1] is not generated
                or built[2] is not serial):
            self._parts = Partitioner(keys, self.parallelism, generated, serial)
            self._parts_keys = (keys, generated, serial)
        return self._parts.split(txns, **kw)

    def apply(self, parts: list, kw: dict, position: Position | None) -> list[dict]:
        """One Spark job: the parts, one downstream transaction per task (up to
        ``local_apply_rows`` changes: the same parts applied in the driver, no job).  Returns the
        tasks' acknowledgements; a failure is raised as the syncer's typed error at ``position``."""
        if not parts:
            return []
        session = self.session() if sum(len(p) for p in parts) > self.local_apply_rows else None
        if session is None:
            # a trickle (a few rows, e.g. before a DDL): scheduling a Spark job costs more than the
            # apply; or the worker's Spark session is still starting.  The same function runs in
            # the driver, one downstream transaction per part
            try:
                return [apply_changes(changes, attempt=0, **kw) for changes in parts]
            except FencedOut:
                raise
            except KeyCollision as e:
                raise ReplicationKeyCollision(f"applying changes failed: KeyCollision: {e}", task=self.task,
                                              source=self.source, position=str(position)) from e
            except Exception as e:
                raise SyncError(f"applying changes failed: {type(e).__name__}: {e}", task=self.task,
                                source=self.source, position=str(position)) from e
        try:
            if self.streamed:
                return self.open_stream(session, kw).apply(parts, kw)
            apply_stream.free_cores(session.sparkContext)
            fn = functools.partial(apply_partition, **kw)
            acks = session.sparkContext.parallelize(parts, len(parts)).mapPartitions(fn).collect()
            SPARK_JOBS.labels(self.task, self.source).inc()
            return acks
        except Exception as e:
            self.close_stream()
            cause = _root_apply_error(e.cause if isinstance(e, StreamError) else e)
            cls = ReplicationKeyCollision if cause.startswith("KeyCollision:") else \
                FencedOut if cause.startswith("FencedOut:") else SyncError
            raise cls(f"applying changes failed: {cause}", task=self.task, source=self.source,
                      position=str(position)) from e

    def open_stream(self, session, kw: dict) -> ApplyStream:
        """This syncer's stream: its own, the one another syncer parked (the chunks carry the
        apply arguments, ``kw``), or a new Spark job."""
        if self.stream is None:
            self.stream = apply_stream.adopt(session.sparkContext, self.parallelism)
        if self.stream is None:
            group = f"shardmerge-apply-{self.task}-{self.source}-{time.monotonic_ns()}"
            self.stream = ApplyStream(session, self.parallelism, kw, job_group=group)
            SPARK_JOBS.labels(self.task, self.source).inc()
        return self.stream

    def close_stream(self, park: bool = False) -> None:
        """End the apply stream's Spark job (its cores go back to the application); ``park``:
        an idle point, the stream may serve the application's next syncer for a moment
        (``apply_stream.park``)."""
        stream, self.stream = self.stream, None
        if stream is not None:
            session = self.session()
            sc = session.sparkContext if session is not None else None
            if park and sc is not None:
                apply_stream.park(stream, sc)
            else:
                stream.close(sc)

    def free_cores(self) -> None:
        """Before a read that is a Spark job: no idle stream of the application in its way."""
        session = self.session()
        if session is not None:
            apply_stream.free_cores(session.sparkContext)

    def session(self) -> Any:
        """The Spark session for a job, or None while a background start is still under way."""
        if hasattr(self.spark, "sparkContext"):
            return self.spark
        session = self.spark.peek()
        if session is None and not self._driver_apply_noted:
            self._driver_apply_noted = True
            self.log.info("applying in the driver until the Spark session is up")
        return session


def merge_acks(acks: list[dict]) -> dict[tuple[str, str], list]:
    """The tasks' acknowledgements as one ``[file, pos, gtid, rows, missing]`` per table: the
    furthest position any task reached, the rows and the updates of missing rows summed."""
    merged: dict[tuple[str, str], list] = {}
    for ack in acks:
        for k, (f, p, g, n, gone) in ack.items():
            cur = merged.get(k)
            if cur is None or Position(cur[0], cur[1]) <= Position(f, p):
                merged[k] = [f, p, g, n + (cur[3] if cur else 0), gone + (cur[4] if cur else 0)]
            else:
                cur[3] += n
                cur[4] += gone
    return merged


def _root_apply_error(e: BaseException | str) -> str:
    text = str(e)
    for marker in ("KeyCollision:", "FencedOut:", "ApplyError:", "pymysql.err."):
        i = text.rfind(marker)
        if i >= 0:
            return text[i:].splitlines()[0][:500]
    return text.splitlines()[0][:500] if text else type(e).__name__
