"""Benchmark: the master's HTTP port under abuse without credentials.

One master (``shardctl master`` with ``--metrics-addr``, the local etcd).  For the whole run an
attacker keeps 100 connections that each announce a 1 MiB body and send half of it (held bodies)
and 300 slowloris connections that send a request line and then one header line every 5 s,
reconnecting whenever the master cuts or refuses one, all from 127.0.0.1.  Meanwhile
``query-status`` is called over gRPC every 0.5 s, and ``GET /api/v1/tasks`` over HTTP from another
address (127.0.0.2: one address may hold only its share of the port).  Printed: the master's peak
RSS against 150 MB and the slowest ``query-status`` and HTTP call against 1 s (the limits an
operator can live with), and how the HTTP port answered the attacker.

    .venv/bin/python bench/http_abuse.py [--seconds 90] [--short]
"""
from __future__ import annotations

import argparse
import socket
import sys
import threading
import time

import grpc

from _procs import BenchCluster, free_port

from protos import master_pb2 as pb
from protos import master_pb2_grpc as pbg

RSS_LIMIT_MB = 150.0
STATUS_LIMIT_S = 1.0
HELD, SLOW = 100, 300
BODY = 1 << 20


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Attacker:
    """The held-body and slowloris connections, kept up from one thread (a refused or cut one is
    opened again on the next round); counts what the master answered."""

    def __init__(self, port: int):
        self.port = port
        self.stop = threading.Event()
        self.held: list[socket.socket | None] = [None] * HELD
        self.slow: list[socket.socket | None] = [None] * SLOW
        self.opened = self.refused = self.cut = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, first: bytes) -> socket.socket | None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=2)
        except OSError:
            self.refused += 1
            return None
        s.setblocking(False)
        try:
            s.send(first)          # as much as the socket takes now (a held body is never finished)
        except OSError:
            pass
        self.opened += 1
        return s

    def _alive(self, s: socket.socket | None) -> bool:
        """False when the master answered (a 503 at the cap, a 408/close at the deadline)."""
        if s is None:
            return False
        try:
            data = s.recv(200)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if data.startswith(b"HTTP/1.1 503"):
            self.refused += 1
        else:
            self.cut += 1
        s.close()
        return False

    def _run(self) -> None:
        held_head = (f"POST /api/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {BODY}\r\n\r\n").encode() + b"x" * (BODY // 2)
        n = 0
        while not self.stop.is_set():
            for i, s in enumerate(self.held):
                if not self._alive(s):
                    self.held[i] = self._open(held_head)
            for i, s in enumerate(self.slow):
                if not self._alive(s):
                    self.slow[i] = self._open(b"GET /api/v1/tasks HTTP/1.1\r\n")
                elif n % 5 == 0:
                    try:
                        s.send(f"X-Slow-{n}: 1\r\n".encode())    # type: ignore[union-attr]
                    except OSError:
                        pass
            n += 1
            self.stop.wait(1.0)
        for s in self.held + self.slow:
            if s is not None:
                s.close()


def http_get(port: int) -> bool:
    """``GET /api/v1/tasks`` from 127.0.0.2; True when answered 200."""
    with socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0)) as s:
        s.sendall(b"GET /api/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        return s.recv(100).startswith(b"HTTP/1.1 200")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--short", action="store_true", help="CI form: 20 s (the 30 s request deadline is tests/foundation/test_http_limits.py's)")
    a = ap.parse_args()
    seconds = 20.0 if a.short else a.seconds
    cl = BenchCluster("httpabuse")
    addr, http = f"127.0.0.1:{free_port()}", free_port()
    try:
        proc = cl.master("master", addr, "--metrics-addr", f"127.0.0.1:{http}")
        cl.wait_master(addr)
        stub = pbg.MasterStub(grpc.insecure_channel(addr))
        stub.QueryStatus(pb.QueryStatusRequest(), timeout=5)
        base = rss_mb(proc.pid)
        att = Attacker(http)
        att.thread.start()
        lat: list[float] = []
        web: list[float] = []
        peak = base
        failed = web_failed = 0
        t_end = time.monotonic() + seconds
        next_print = time.monotonic() + 10
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            try:
                stub.QueryStatus(pb.QueryStatusRequest(), timeout=5)
                lat.append(time.monotonic() - t0)
            except grpc.RpcError:
                failed += 1
            t0 = time.monotonic()
            try:
                ok = http_get(http)
            except OSError:
                ok = False
            if ok:
                web.append(time.monotonic() - t0)
            else:
                web_failed += 1
            peak = max(peak, rss_mb(proc.pid))
            if time.monotonic() >= next_print:
                print(f"[bench] http abuse: {seconds - (t_end - time.monotonic()):.0f}/{seconds:.0f} s, RSS {peak:.0f} MB, "
                      f"{att.opened} connections opened, {att.refused} refused, {att.cut} cut", flush=True)
                next_print += 10
            time.sleep(0.5)
        att.stop.set()
        att.thread.join(10)
        worst = max(lat) if lat else float("inf")
        p99 = sorted(lat)[int(0.99 * (len(lat) - 1))] if lat else worst
        print(f"[bench] http abuse ({HELD} held {BODY >> 10} KiB bodies + {SLOW} slowloris, {seconds:.0f} s): "
              f"master RSS {base:.0f} -> peak {peak:.0f} MB = {peak / RSS_LIMIT_MB:.2f}x the {RSS_LIMIT_MB:.0f} MB limit; "
              f"query-status over gRPC p99 {p99 * 1000:.0f} ms, max {worst * 1000:.0f} ms = "
              f"{worst / STATUS_LIMIT_S:.2f}x the {STATUS_LIMIT_S:.0f} s limit ({len(lat)} calls, {failed} failed); "
              f"HTTP API from another address max {max(web, default=float('inf')) * 1000:.0f} ms = "
              f"{max(web, default=float('inf')) / STATUS_LIMIT_S:.2f}x ({len(web)} answered 200, {web_failed} not); "
              f"HTTP: {att.opened} connections opened, {att.refused} refused (503 at the cap), {att.cut} cut "
              f"at the deadline", flush=True)
        return 0 if failed == 0 and web_failed == 0 else 1
    finally:
        cl.stop()


if __name__ == "__main__":
    sys.exit(main())
