"""Finding 7: the emulator as a well-behaved server.

3000 half-open connections held for 60 s made ``/health`` fail (EMFILE); four 250 MB bodies took
RSS to 7 GB; a newline in ``X-Request-Id`` injected a response header; HEAD returned a body. The
emulator now has idle and header timeouts, a connection cap that closes the oldest idle
connection (503 only when all are busy), a body cap (413) and a shared body budget (503), header
validation, and bodyless HEAD answers. The limits are lowered here (``KVGATE_SIM_*``) so that a
few dozen sockets prove the mechanism the defaults apply to thousands."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sim.simhelpers import SimProc, read_until_closed, start_sim

LOW = {"KVGATE_SIM_MAX_CONNECTIONS": "20", "KVGATE_SIM_IDLE_TIMEOUT": "1.0", "KVGATE_SIM_HEADER_TIMEOUT": "0.5",
       "KVGATE_SIM_MAX_BODY": str(1 << 20), "KVGATE_SIM_BODY_BUDGET": str(3 << 19), "KVGATE_SIM_BODY_TIMEOUT": "2"}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProc]:
    proc = start_sim(Path(tmp_path_factory.mktemp("sim")), env=LOW)
    try:
        yield proc
    finally:
        proc.stop()


def _connect(sim: SimProc) -> socket.socket:
    s = socket.create_connection((sim.host, sim.port), timeout=5)
    return s


_read_all = read_until_closed


def test_health_answers_while_idle_connections_exceed_the_cap(sim: SimProc) -> None:
    held = [_connect(sim) for _ in range(60)]
    try:
        time.sleep(0.2)
        t0 = time.monotonic()
        status, body, _ = sim.request("GET", "/health")
        assert status == 200 and time.monotonic() - t0 < 2
        closed = 0
        for s in held:
            s.settimeout(0.01)
            try:
                if s.recv(1) == b"":
                    closed += 1
            except TimeoutError:
                pass  # still open
            except ConnectionError:
                closed += 1
        assert closed >= 40  # the oldest idle ones made room
    finally:
        for s in held:
            s.close()


def test_idle_connection_is_closed_after_the_idle_timeout(sim: SimProc) -> None:
    s = _connect(sim)
    t0 = time.monotonic()
    assert _read_all(s, timeout=5) == b""
    assert 0.8 < time.monotonic() - t0 < 3
    s.close()


def test_slow_headers_get_408(sim: SimProc) -> None:
    s = _connect(sim)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never finishes its head
    out = _read_all(s, timeout=5)
    assert out.startswith(b"HTTP/1.1 408 ")
    s.close()


def test_oversized_body_is_refused_before_it_is_read(sim: SimProc) -> None:
    s = _connect(sim)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 262144000\r\n\r\n")
    out = _read_all(s, timeout=5)
    assert out.startswith(b"HTTP/1.1 413 ") and b"limit" in out
    s.close()


def test_concurrent_bodies_share_a_budget(sim: SimProc) -> None:
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n")
    a = _connect(sim)
    a.sendall(head + b"{")  # holds 1 MB of budget while its body trickles
    time.sleep(0.2)
    b = _connect(sim)
    b.sendall(head)
    out = _read_all(b, timeout=5)
    assert out.startswith(b"HTTP/1.1 503 ") and b"retry later" in out
    assert _read_all(a, timeout=5).startswith(b"HTTP/1.1 408 ")  # the trickle hits the body timeout
    a.close()
    b.close()


def test_newline_in_a_header_value_is_refused_not_echoed(sim: SimProc) -> None:
    s = _connect(sim)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Request-Id: abc\nInjected: yes\r\n\r\n")
    out = _read_all(s, timeout=5)
    assert out.startswith(b"HTTP/1.1 400 ") and b"\r\ninjected:" not in out.lower()
    s.close()


def test_head_has_no_body(sim: SimProc) -> None:
    conn = http.client.HTTPConnection(sim.host, sim.port, timeout=5)
    try:
        conn.request("HEAD", "/v1/models")
        r1 = conn.getresponse()
        assert r1.status == 200 and r1.read() == b""
        conn.request("GET", "/health")  # same connection: a stray HEAD body would corrupt this
        r2 = conn.getresponse()
        assert r2.status == 200
        r2.read()
    finally:
        conn.close()
