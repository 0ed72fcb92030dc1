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

The job holds ``n`` executor cores while it lives.  The syncer closes it when its source is
caught up (idle), after an error, and at the end of a batch once it has lived
:data:`MAX_LIFE` seconds, so other jobs of the same Spark application (another subtask's
syncer, a full load) get the cores at those points.  The ``spark`` binlog reader runs its
reads as Spark jobs while the apply is busy, so it keeps one job per chunk (a stream holding
every core would starve the read it waits for).
"""
from __future__ import annotations

import collections
import functools
import hmac
import pickle
import secrets
import selectors
import socket
import struct
import threading
import time

from coordinator.obs import logger
from worker.sync.apply import apply_changes, connect_downstream

log = logger("worker.sync.apply_stream")

MAX_LIFE = 5.0          # seconds; then closed at the next batch end (others get the cores)
CONNECT_TIMEOUT = 10.0  # a task's connect back to the driver
CANCEL_AFTER = 5.0      # a closed stream's job still running then is cancelled
_LEN = struct.Struct("!Q")
_INDEX = struct.Struct("!I")
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
    acknowledgement, or with ``("error", "<Class>: message")`` and stop."""
    index = max(indexes, default=0)     # this task's one element: its partition index
    try:
        sock = socket.create_connection(address, timeout=CONNECT_TIMEOUT)
    except OSError:
        return iter(())      # the stream closed before this task started: nothing to do
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = None
    try:
        try:
            sock.sendall(token + _INDEX.pack(index))
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
        self._tasks: dict[int, socket.socket] = {}      # partition index -> its task's connection
        self._files: dict[socket.socket, object] = {}
        # per connection, the chunks whose partition it was sent and has not answered (in order)
        self._owed: dict[socket.socket, collections.deque] = {}
        self._chunks: collections.deque = collections.deque()   # submitted, not collected: [acks, left]
        self._error: BaseException | None = None
        self._closed = False
        self._group = job_group
        self.address = address = (host, self._listener.getsockname()[1])
        fn = functools.partial(serve_apply, address=address, token=self._token, **kw)
        self._thread = threading.Thread(target=self._run_job, args=(sc, fn), name=f"apply-stream-{job_group}",
                                        daemon=True)
        self._thread.start()

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
            got = s.recv(_TOKEN_BYTES + _INDEX.size, socket.MSG_WAITALL)
        except OSError:
            got = b""
        if len(got) != _TOKEN_BYTES + _INDEX.size or not hmac.compare_digest(got[:_TOKEN_BYTES], self._token):
            s.close()
            return
        (index,) = _INDEX.unpack(got[_TOKEN_BYTES:])
        if index >= self.n or index in self._tasks:
            s.close()
            return
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._files[s] = s.makefile("rb")
        self._owed[s] = collections.deque()
        self._sel.register(s, selectors.EVENT_READ)
        self._tasks[index] = s

    @property
    def pending(self) -> int:
        """Chunks submitted and not collected yet."""
        return len(self._chunks)

    def apply(self, parts: list) -> list[dict]:
        """Apply one chunk (``submit`` then ``collect``); its acknowledgements."""
        self.submit(parts)
        return self.collect()

    def submit(self, parts: list) -> None:
        """Send one chunk: ``parts[i]`` (partition ``i`` of ``n``; ``None``: nothing for it) to
        task ``i``.  Partition ``i`` always goes to task ``i``, which applies what it is sent in order,
        so a key's changes keep their binlog order even with an earlier chunk still applying.
        Raises :class:`StreamError`."""
        if self._closed:
            raise StreamError("ApplyError: the apply stream is closed")
        want = [i for i, p in enumerate(parts) if p is not None]
        while any(i not in self._tasks for i in want):
            self._wait(0.5)
            if not self._thread.is_alive() and any(i not in self._tasks for i in want):
                err = self._error
                raise StreamError(f"{type(err).__name__}: {err}" if err is not None else (
                    f"ApplyError: the apply stream's Spark job ended before taking the chunk: its tasks could "
                    f"not connect back to the driver at {self.address[0]}:{self.address[1]} (executors must reach "
                    f"the driver host on any port; else set `apply-mode: job` in the task's syncer config)"))
        chunk = [[None] * len(want), len(want)]
        self._chunks.append(chunk)
        for slot, i in enumerate(want):
            s = self._tasks[i]
            try:
                _send(s, parts[i])
            except OSError as e:
                self._drop(s)
                raise StreamError(f"ApplyError: apply task lost while sending a partition: {e}") from e
            self._owed[s].append((chunk, slot))

    def collect(self) -> list[dict]:
        """The acknowledgements of the oldest submitted chunk, once all are in.  Raises
        :class:`StreamError` (a task reported an error, or was lost with partitions owed)."""
        if not self._chunks:
            return []
        chunk = self._chunks[0]
        while chunk[1]:
            self._wait(0.5)
            if not self._thread.is_alive() and chunk[1] and not any(self._owed.values()):
                raise StreamError("ApplyError: the apply stream's Spark job ended with partitions unanswered")
        self._chunks.popleft()
        return chunk[0]

    def _wait(self, timeout: float) -> None:
        """One round of accepting tasks and reading answers."""
        for key, _ in self._sel.select(timeout=timeout):
            s = key.fileobj
            if s is self._listener:
                self._accept()
                continue
            msg = _recv(self._files[s])
            owed = self._owed.get(s)
            if msg is None:
                lost = bool(owed)
                self._drop(s)
                if lost:
                    raise StreamError("ApplyError: apply task lost (its connection closed) "
                                      "before acknowledging a partition")
                continue
            if msg[0] == "error":
                self._drop(s)
                raise StreamError(msg[1])
            if not owed:
                self._drop(s)
                raise StreamError("ApplyError: an apply task answered a partition it was not sent")
            chunk, slot = owed.popleft()
            chunk[0][slot] = msg[1]
            chunk[1] -= 1

    def _drop(self, s: socket.socket) -> None:
        try:
            self._sel.unregister(s)
        except (KeyError, ValueError):
            pass
        f = self._files.pop(s, None)
        if f is not None:
            f.close()
        s.close()
        self._owed.pop(s, None)
        for i, t in list(self._tasks.items()):
            if t is s:
                del self._tasks[i]

    def close(self, sc=None, wait: bool = False) -> None:
        """End the job without waiting for it (``wait``: until it ended): started tasks see EOF
        and return, tasks not started yet find no listener and return; a job still running
        after :data:`CANCEL_AFTER` seconds (a task stuck in the downstream) is cancelled."""
        if self._closed:
            return
        self._closed = True
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
