"""A long-lived Spark apply job: its tasks take chunk after chunk over a socket.

Each chunk used to be one Spark job (``parallelize(parts).mapPartitions(apply).collect()``),
and a job costs ~80-110 ms on the dev machine before a single row is written (scheduling,
closure and task serialization, Python worker hand-over, result collection): more than the
apply itself of a 5,000-row chunk.  :class:`ApplyStream` starts ONE job of ``n`` tasks when a
syncer first needs Spark in a run of batches; each task (:func:`serve_apply`) connects back to
the driver, keeps one downstream connection, and applies whatever partition the driver sends
it, one downstream transaction per partition, answering with the same acknowledgement
``apply_partition`` returns.  Rows go driver -> task in one pickle, not through the JVM.

The guarantees are the per-chunk job's: the driver sends a chunk's partitions and waits for
every acknowledgement before the next chunk, so one key's changes are applied in binlog order
whichever task takes which partition; a task that fails or vanishes fails the chunk (the
syncer then replays the batch in safe mode, as after any failed apply).  Tasks are never
retried inside a stream, so ``attempt`` is always 0.

The job holds ``n`` executor cores while it lives.  The syncer closes it after an error and at
the end of a batch once it has lived :data:`MAX_LIFE` seconds, so other jobs of the same Spark
application (another subtask's syncer, a full load) get the cores at those points.  When its
source is caught up (idle) the syncer *parks* it (:func:`park`): for :data:`GRACE` seconds the
next syncer of the application that needs a stream adopts it (:func:`adopt`) instead of paying
for a new job (~70 ms and ~0.15 s of CPU on the dev machine).  The task arguments (downstream,
fence epoch) travel with the chunks, so an adopted stream serves its new syncer's downstream.
A parked stream is closed at once when another stream waits for cores, and
:func:`free_cores` closes it before any other job of the application (full load, Spark reader,
per-chunk apply jobs).  The ``spark`` binlog reader runs its
reads as Spark jobs while the apply is busy, so it keeps one job per chunk (a stream holding
every core would starve the read it waits for).
"""
from __future__ import annotations

import functools
import hmac
import pickle
import secrets
import selectors
import socket
import struct
import threading
import time
import weakref
from typing import BinaryIO, cast

from coordinator.obs import logger
from worker.sync.apply import apply_changes, connect_downstream

log = logger("worker.sync.apply_stream")

MAX_LIFE = 5.0          # seconds; then closed at the next batch end (others get the cores)
GRACE = 1.0             # seconds a parked (idle) stream waits to be adopted, then it is closed
CONNECT_TIMEOUT = 10.0  # a task's connect back to the driver
CANCEL_AFTER = 5.0      # a closed stream's job still running then is cancelled
_LEN = struct.Struct("!Q")
_TOKEN_BYTES = 16


class StreamError(Exception):
    """The stream cannot apply the chunk (task lost, job failed); ``cause`` as
    ``"<ExceptionClass>: message"`` when a task reported an error."""

    def __init__(self, cause: str):
        super().__init__(cause)
        self.cause = cause


def _send(sock: socket.socket, obj) -> None:
    data = pickle.dumps(obj, protocol=5)
    sock.sendall(_LEN.pack(len(data)))
    sock.sendall(data)


def _recv_exact(f, n: int) -> bytes | None:
    data = f.read(n)
    if data is None or len(data) < n:
        return None
    return data


def _recv(f):
    """The next message from buffered reader ``f``; None at EOF."""
    head = _recv_exact(f, _LEN.size)
    if head is None:
        return None
    body = _recv_exact(f, _LEN.unpack(head)[0])
    if body is None:
        return None
    return pickle.loads(body)


def _driver_address(sc) -> tuple[str, str]:
    """(address to listen on, host name the tasks connect to): Spark's own driver settings
    (``spark.driver.bindAddress`` / ``spark.driver.host``, as ``deploy/k8s/worker.yaml`` sets
    them), loopback in local mode."""
    if sc.master.startswith("local"):
        return "127.0.0.1", "127.0.0.1"
    conf = sc.getConf()
    host = conf.get("spark.driver.host") or socket.gethostname()
    return conf.get("spark.driver.bindAddress") or host, host


# ------------------------------------------------------------------ task side
def serve_apply(indexes, *, address: tuple[str, int], token: bytes, **kw):
    """Spark ``mapPartitions`` function of the stream job: connect to the driver, then apply
    each partition it sends (``apply_changes`` on one kept connection) and answer with its
    acknowledgement, or with ``("error", "<Class>: message")`` and stop.  A ``("kw", args)``
    message replaces the apply arguments (a syncer adopted the stream, or restarted under a new
    fence epoch); a new downstream or time zone gets a new connection."""
    for _ in indexes:
        pass
    try:
        sock = socket.create_connection(address, timeout=CONNECT_TIMEOUT)
    except OSError:
        return iter(())      # the stream closed before this task started: nothing to do
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = None
    try:
        try:
            sock.sendall(token)
            f = sock.makefile("rb")
        except OSError:
            return iter(())
        try:     # while the driver plans the first chunk; a failure is met again, and reported, below
            conn = connect_downstream(kw["db_kwargs"], time_zone=kw.get("time_zone"))
        except Exception:  # noqa: BLE001
            conn = None
        while True:
            try:
                changes = _recv(f)
            except OSError:      # reset: the stream closed before it accepted this task
                break
            if changes is None:
                break
            if isinstance(changes, tuple):       # ("kw", the new apply arguments)
                new = changes[1]
                if conn is not None and (new["db_kwargs"], new.get("time_zone")) != \
                        (kw["db_kwargs"], kw.get("time_zone")):
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001
                        pass
                    conn = None
                kw = new
                continue
            try:
                if conn is None:
                    conn = connect_downstream(kw["db_kwargs"], time_zone=kw.get("time_zone"))
                ack = apply_changes(changes, conn=conn, **kw)
            except BaseException as e:  # noqa: BLE001 — reported to the driver, which fails the chunk
                try:
                    _send(sock, ("error", f"{type(e).__name__}: {e}"))
                except OSError:
                    pass         # the driver is gone: nobody waits for the answer
                break
            try:
                _send(sock, ("ok", ack))
            except OSError:      # the driver closed the stream (its chunk failed elsewhere)
                break
    finally:
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass
        sock.close()
    return iter(())


# ------------------------------------------------------------------ driver side
class ApplyStream:
    """The driver's end: a listening socket, the job's thread, the connected tasks."""

    def __init__(self, session, n: int, kw: dict, *, job_group: str):
        self.n, self.opened, self.kw = n, time.monotonic(), dict(kw)   # kw: the tasks' apply arguments
        sc = session.sparkContext
        free_cores(sc)      # a parked stream holds the cores this one needs
        bind, host = _driver_address(sc)
        self._listener = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET)
        try:
            self._listener.bind((bind, 0))
        except OSError:
            self._listener.bind(("", 0))
        self._listener.listen(n + 4)
        self._listener.setblocking(False)
        self._token = secrets.token_bytes(_TOKEN_BYTES)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ)
        self._idle: list[socket.socket] = []
        self._files: dict[socket.socket, BinaryIO] = {}
        self._task_kw: dict[socket.socket, dict] = {}   # the arguments each connected task applies with
        self._error: BaseException | None = None
        self._closed = False
        self._group = job_group
        self.address = address = (host, self._listener.getsockname()[1])
        fn = functools.partial(serve_apply, address=address, token=self._token, **kw)
        self._thread = threading.Thread(target=self._run_job, args=(sc, fn), name=f"apply-stream-{job_group}",
                                        daemon=True)
        self._thread.start()
        with _pool_lock:
            _LIVE.add(self)

    def _run_job(self, sc, fn) -> None:
        try:
            sc.setJobGroup(self._group, "shardmerge apply stream", interruptOnCancel=True)
            sc.parallelize(range(self.n), self.n).mapPartitions(fn).collect()
        except BaseException as e:  # noqa: BLE001 — seen by apply() if it is waiting on the job
            if not self._closed:
                self._error = e

    @property
    def age(self) -> float:
        return time.monotonic() - self.opened

    def _accept(self) -> None:
        try:
            s, _ = self._listener.accept()
        except BlockingIOError:
            return
        s.setblocking(True)
        s.settimeout(CONNECT_TIMEOUT)
        try:
            got = s.recv(_TOKEN_BYTES, socket.MSG_WAITALL)
        except OSError:
            got = b""
        if not hmac.compare_digest(got, self._token):
            s.close()
            return
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._files[s] = s.makefile("rb")
        self._task_kw[s] = self.kw
        self._sel.register(s, selectors.EVENT_READ)
        self._idle.append(s)

    @property
    def connected(self) -> int:
        """Tasks connected (and not dropped)."""
        return len(self._files)

    def accept_pending(self) -> None:
        """Take the tasks that connected since the last chunk (they are accepted while a chunk
        is applied, so a task that came up after the last one is still in the backlog)."""
        if self._closed:
            return
        while self._sel.select(timeout=0) and self.connected < self.n:
            before = self.connected
            self._accept()
            if self.connected == before:
                break

    @property
    def usable(self) -> bool:
        """Every task connected and the job running: worth parking for another syncer."""
        return not self._closed and self._error is None and self._thread.is_alive() and self.connected == self.n

    def apply(self, parts: list[list], kw: dict | None = None) -> list[dict]:
        """Apply one chunk's partitions (with apply arguments ``kw``, default: the stream's);
        their acknowledgements.  Raises :class:`StreamError`."""
        if self._closed:
            raise StreamError("ApplyError: the apply stream is closed")
        if kw is not None:
            self.kw = dict(kw)
        acks: list = [None] * len(parts)
        todo = list(range(len(parts)))
        busy: dict[socket.socket, int] = {}
        while todo or busy:
            while todo and self._idle:
                s, i = self._idle.pop(), todo.pop(0)
                try:
                    if self._task_kw.get(s) != self.kw:
                        _send(s, ("kw", self.kw))
                        self._task_kw[s] = self.kw
                    _send(s, parts[i])
                except OSError as e:
                    self._drop(s)
                    raise StreamError(f"ApplyError: apply task lost while sending a partition: {e}") from e
                busy[s] = i
            for key, _ in self._sel.select(timeout=0.5):
                if key.fileobj is self._listener:
                    self._accept()
                    continue
                s = cast(socket.socket, key.fileobj)     # registered: the listener and task sockets
                msg = _recv(self._files[s])
                sent = busy.pop(s, None)
                if msg is None:
                    self._drop(s)
                    if sent is not None:
                        raise StreamError("ApplyError: apply task lost (its connection closed) "
                                          "before acknowledging a partition")
                    continue
                if msg[0] == "error":
                    self._drop(s)
                    raise StreamError(msg[1])
                if sent is None:
                    raise StreamError("ApplyError: an apply task acknowledged a partition it was not sent")
                acks[sent] = msg[1]
                self._idle.append(s)
            if not self._thread.is_alive() and not busy and todo and not self._idle:
                err = self._error
                cause = f"{type(err).__name__}: {err}" if err is not None else (
                    f"ApplyError: the apply stream's Spark job ended before taking the chunk: its tasks could "
                    f"not connect back to the driver at {self.address[0]}:{self.address[1]} (executors must reach "
                    f"the driver host on any port; else set `apply-mode: job` in the task's syncer config)")
                raise StreamError(cause)
        return acks

    def _drop(self, s: socket.socket) -> None:
        try:
            self._sel.unregister(s)
        except (KeyError, ValueError):
            pass
        self._task_kw.pop(s, None)
        f = self._files.pop(s, None)
        if f is not None:
            f.close()
        s.close()
        if s in self._idle:
            self._idle.remove(s)

    def close(self, sc=None, wait: bool = False) -> None:
        """End the job without waiting for it (``wait``: until it ended): started tasks see EOF
        and return, tasks not started yet find no listener and return; a job still running
        after :data:`CANCEL_AFTER` seconds (a task stuck in the downstream) is cancelled."""
        if self._closed:
            return
        self._closed = True
        with _pool_lock:
            _LIVE.discard(self)
        for s in list(self._files):
            self._drop(s)
        self._sel.unregister(self._listener)
        self._listener.close()
        self._sel.close()

        def reap():
            self._thread.join(CANCEL_AFTER)
            if self._thread.is_alive() and sc is not None:
                sc.cancelJobGroup(self._group)
        if wait:
            reap()
            self._thread.join()
        else:
            threading.Thread(target=reap, name=f"apply-stream-reap-{self._group}", daemon=True).start()


# ------------------------------------------------------------------ parking between syncers
_LIVE: "weakref.WeakSet[ApplyStream]" = weakref.WeakSet()   # streams not closed yet (under _pool_lock)
_pool_lock = threading.Lock()
_parked: dict[int, tuple[ApplyStream, object]] = {}        # id(SparkContext) -> (idle stream, sc)


def park(stream: ApplyStream, sc) -> None:
    """Keep an idle ``stream`` :data:`GRACE` seconds for the next syncer of this Spark
    application (:func:`adopt`); closed instead when it is not whole (a task missing, the job
    ended) or another stream waits for cores, and closed when nobody adopted it in time."""
    stream.accept_pending()
    with _pool_lock:         # another syncer's thread may be opening or closing a stream
        waiting = any(o is not stream and not o._closed and o.connected < o.n for o in list(_LIVE))
    if waiting or not stream.usable:
        stream.close(sc)
        return
    with _pool_lock:
        old = _parked.pop(id(sc), None)
        _parked[id(sc)] = (stream, sc)
    if old is not None and old[0] is not stream:
        old[0].close(sc)

    def expire():
        with _pool_lock:
            entry = _parked.get(id(sc))
            if entry is None or entry[0] is not stream:
                return              # adopted (or replaced) meanwhile
            del _parked[id(sc)]
        stream.close(sc)
    t = threading.Timer(GRACE, expire)
    t.daemon = True
    t.start()


def adopt(sc, n: int) -> ApplyStream | None:
    """The stream parked for this Spark application, if it has ``n`` tasks and is still whole
    (anything else parked is closed: a new stream needs its cores)."""
    with _pool_lock:
        entry = _parked.pop(id(sc), None)
    if entry is None:
        return None
    stream = entry[0]
    if stream.n == n and stream.usable:
        return stream
    stream.close(sc)
    return None


def free_cores(sc) -> None:
    """Close the parked stream of this Spark application (before a job that needs its cores)."""
    with _pool_lock:
        entry = _parked.pop(id(sc), None)
    if entry is not None:
        entry[0].close(sc)
