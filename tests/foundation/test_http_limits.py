"""The HTTP port's limits on real sockets: connections beyond the cap are answered 503 at once
(no thread), a connection that trickles its request is cut at its deadline, and a body over the
limit gets 413 naming it."""
from __future__ import annotations

import socket
import time

from coordinator.obs import MAX_BODY, ObsServer


class _Echo:
    def admit(self, method, path, headers, peer_cn=None):
        return None

    def handle(self, method, path, headers, body, peer_cn=None):
        return 200, b"ok", "text/plain", {}


def _conn(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    return s


def _status(s: socket.socket) -> bytes:
    s.settimeout(5)
    return s.recv(200).split(b"\r\n", 1)[0]


def _slow(port: int, n: int) -> list[socket.socket]:
    """``n`` slowloris connections: a request line, then nothing."""
    held = []
    for _ in range(n):
        s = _conn(port)
        s.sendall(b"GET /x HTTP/1.1\r\n")
        held.append(s)
    time.sleep(0.3)
    return held


def test_connections_beyond_the_cap_are_refused_at_once_and_slow_ones_are_cut():
    srv = ObsServer("127.0.0.1", 0, app=_Echo(), max_connections=3, deadline=1.5).start()
    held = []
    try:
        held = _slow(srv.port, 3)
        extra = _conn(srv.port)
        assert _status(extra) == b"HTTP/1.1 503 Service Unavailable"
        extra.close()
        # the deadline cuts the trickling ones: their sockets close without an answer
        for s in held:
            s.settimeout(5)
            assert s.recv(100) == b""
        # and their slots are free again (once their threads have ended)
        deadline = time.monotonic() + 10
        while True:
            ok = _conn(srv.port)
            ok.sendall(b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
            got = _status(ok)
            ok.close()
            if got == b"HTTP/1.1 200 OK" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert got == b"HTTP/1.1 200 OK"
    finally:
        for s in held:
            s.close()
        srv.stop()


def test_a_body_over_the_limit_is_413_naming_it():
    srv = ObsServer("127.0.0.1", 0, app=_Echo()).start()
    try:
        s = _conn(srv.port)
        s.sendall(f"POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n".encode())
        s.settimeout(5)
        data = b""
        while chunk := s.recv(500):            # the server closes the connection after the answer
            data += chunk
        assert data.startswith(b"HTTP/1.1 413") and f"{MAX_BODY}-byte limit".encode() in data, data
        s.close()
    finally:
        srv.stop()


class _Slow(_Echo):
    def handle(self, method, path, headers, body, peer_cn=None):
        time.sleep(2.5)                       # a slow answer (a precheck, a DDL preview)
        return 200, b"done", "text/plain", {}


def test_the_deadline_counts_receiving_a_request_not_answering_it():
    srv = ObsServer("127.0.0.1", 0, app=_Slow(), deadline=1.0).start()
    try:
        s = _conn(srv.port)
        body = b'{"a": 1}'
        s.settimeout(10)
        data = b""
        for n, req in enumerate((b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                                 b"POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 8\r\n\r\n" + body), 1):
            s.sendall(req)                    # two requests on one kept-alive connection
            while data.count(b"done") < n:    # each answer whole, 2.5 s after its request
                chunk = s.recv(500)
                assert chunk, f"connection cut after {n - 1} answer(s): {data!r}"
                data += chunk
        assert data.count(b"HTTP/1.1 200 OK") == 2, data
        s.close()
    finally:
        srv.stop()


def test_one_client_address_cannot_take_every_slot():
    """Slow connections from one address fill its share; another address is still served."""
    srv = ObsServer("127.0.0.1", 0, app=_Echo(), max_connections=8, max_per_peer=3).start()
    held = []
    try:
        held = _slow(srv.port, 3)
        same = _conn(srv.port)
        assert _status(same) == b"HTTP/1.1 503 Service Unavailable"
        same.close()
        other = socket.create_connection(("127.0.0.1", srv.port), timeout=5, source_address=("127.0.0.2", 0))
        other.sendall(b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
        assert _status(other) == b"HTTP/1.1 200 OK"
        other.close()
    finally:
        for s in held:
            s.close()
        srv.stop()
