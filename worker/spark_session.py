"""The worker's one Spark session, started in the background.

Starting a local Spark session takes 15-60 s on a busy 2-core machine, and a worker used to wait
for it before reading a single binlog event, so a restarted worker's sources stood still that
long.  :class:`SparkStarter` starts it on a thread at the first subtask; a syncer streaming in
the meantime applies its chunks in the driver (the same apply function on the same parts) and
takes Spark jobs once the session is up.  The full load and the Spark binlog reader need the
session and wait for it (:meth:`get`).
"""
from __future__ import annotations

import importlib
import os
import sys
import threading
from typing import TYPE_CHECKING

from coordinator.obs import logger
from coordinator import gc_tuning

if TYPE_CHECKING:     # pyspark is imported where the session is made (a JVM start)
    from pyspark.sql import SparkSession

_log = logger("worker.spark_session")

# Settings of every session the worker makes (and the benches and tests, so they measure the
# same thing).  Python workers talk to their JVM over a Unix domain socket: over TCP loopback
# each task's input stalled ~40 ms (small writes, delayed ACKs), a third of a small job.
# The driver JVM only compiles with C1 (``TieredStopAtLevel=1``): it schedules jobs and hands
# Python tasks their input, it does not crunch data, and C2's compiler threads were 40% of its
# CPU even after hundreds of jobs (a 2-task job cost ~150 ms of JVM CPU at first, ~50 ms with
# C1), CPU the decoder and the apply tasks need on a small box (docs/worker.md, "The driver JVM
# compiles with C1 only").
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.python.unix.domain.socket.enabled": "true",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    # no console progress bars: a process's log is one JSON line per record (coordinator.log_stream)
    "spark.ui.showConsoleProgress": "false",
}


def builder(app_name: str, master: str, **extra: str):
    """A ``SparkSession.Builder`` with :data:`SPARK_CONF` (plus ``extra``, dots as ``__``)."""
    from pyspark.sql import SparkSession   # pyspark (a JVM) only where a session is made
    # Spark's Python workers must run this interpreter (its venv has pymysql, the worker
    # package...): without this they start the first `python3` on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = SparkSession.builder.appName(app_name).master(master)
    for k, v in SPARK_CONF.items():
        b = b.config(k, v)
    for k, v in extra.items():
        b = b.config(k.replace("__", "."), v)
    return b


# The modules Spark tasks run (the apply stream, the full load's chunks): imported into the
# Python workers by :func:`warm_up` once the session is up, as each fresh Python worker paid
# ~0.1-0.25 s of CPU importing them inside the first apply or load.
TASK_MODULES = ("worker.sync.apply_stream", "worker.load.chunk")


def _import_task_modules(_it):
    for m in TASK_MODULES:
        importlib.import_module(m)
    return iter(())


def warm_up(session) -> None:
    """Start the session's Python workers with :data:`TASK_MODULES` imported (one task per
    default core).  A failure is logged, never raised: the first real job imports them then."""
    try:
        sc = session.sparkContext
        n = max(1, sc.defaultParallelism)
        sc.parallelize(range(n), n).mapPartitions(_import_task_modules).collect()
    except Exception as e:  # noqa: BLE001
        _log.warning("Spark warm-up job failed (the first apply imports its modules itself)", error=str(e))


GIVE_UP_AFTER = 3          # failed starts before get() raises (the thread keeps trying)
_BACKOFF = (2.0, 5.0, 15.0, 30.0, 60.0)


class SparkStarter:
    def __init__(self, app_name: str, master: str = ""):
        self.app_name, self.master = app_name, master or "local[2]"
        self._session: "SparkSession | None" = None
        self._error: BaseException | None = None   # the last failed start
        self.failures = 0
        self._done = threading.Event()             # up, or failed GIVE_UP_AFTER times
        self._closed = threading.Event()           # stop retrying (the worker is shutting down)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> "SparkStarter":
        """Begin creating the session (once); returns at once."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._create, name="spark-start", daemon=True)
                self._thread.start()
        return self

    def _create(self) -> None:
        while not self._closed.is_set():
            try:
                # pyspark (a JVM) only once a subtask needs Spark
                session = builder(self.app_name, self.master).getOrCreate()
                warm_up(session)     # before anyone runs a job on it (chunks apply in the driver meanwhile)
                self._session = session
                gc_tuning.tune()     # what the session loaded is long-lived
                _log.info("Spark session up", master=self.master, failed_starts=self.failures)
                self._done.set()
                return
            except Exception as e:  # noqa: BLE001 — retried; handed to get() after GIVE_UP_AFTER
                self._error = e
                self.failures += 1
                wait = _BACKOFF[min(self.failures, len(_BACKOFF)) - 1]
                _log.error(f"Spark session failed to start ({self.failures}): {e}; retrying in {wait:.0f} s"
                           " (chunks apply in the driver meanwhile)", master=self.master)
                if self.failures >= GIVE_UP_AFTER:
                    self._done.set()
                self._closed.wait(wait)

    def close(self, timeout: float = 5.0) -> None:
        """Stop retrying a failed start (a start under way still finishes)."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def started(self) -> bool:
        return self._session is not None

    def peek(self):
        """The session if it is up, else None (never waits, never raises: a failed start is
        being retried and the caller can apply in the driver)."""
        return self._session

    def get(self, timeout: float | None = None):
        """The session, waiting for it (and starting it if nobody did); raises the last start
        error once ``GIVE_UP_AFTER`` starts failed."""
        self.start()
        if not self._done.wait(timeout):
            raise TimeoutError(f"Spark session ({self.master}) not up after {timeout} s")
        if self._session is None and self._error is not None:
            raise self._error
        return self._session
