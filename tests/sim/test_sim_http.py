"""The emulator's one HTTP connection loop (``harness.sim.http.serve_connection``), used by the
OpenAI server and by the emulated LMCache server's HTTP port: keep-alive, ``Connection: close``,
refused requests answered with the server's own error body and the connection closed, idle
connections closed quietly, slow heads answered 408, a client that goes away ending the loop.

First in-process on a real asyncio server (port 0), then the same behaviour on both real server
processes, which differ only in their error body (OpenAI's ``{"error": {"message", "type",
"code"}}``, LMCache's ``{"error": message}``)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.ports import free_port
from harness.sim.http import Limits, Request, Response, serve_connection
from tests.sim.simhelpers import REPO, SimProc, read_until_closed, start_sim

LOW_ENV = {"KVGATE_SIM_IDLE_TIMEOUT": "1.0", "KVGATE_SIM_HEADER_TIMEOUT": "0.5"}
LOW = Limits(idle_timeout_s=1.0, header_timeout_s=0.5)
SLOW = Limits(idle_timeout_s=10.0, header_timeout_s=10.0)  # a close well before these is the loop's own


def _responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Split a byte stream of Content-Length responses into (status, headers, body)."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        n = int(headers["content-length"])
        out.append((int(lines[0].split(" ")[1]), headers, rest[:n]))
        data = rest[n:]
    return out


# --- in-process: the loop itself ----------------------------------------------------------------
async def _echo(req: Request, resp: Response) -> None:
    if req.path == "/drop":
        raise ConnectionResetError("client went away")  # as a write to a closed socket raises
    await resp.send_json(200, {"path": req.path, "method": req.method})


def _run_loop_server(script: bytes, *, limits: Limits = LOW, timeout: float = 15.0) -> tuple[bytes, float, bool]:
    """Start an asyncio server whose connections run ``serve_connection``; send ``script`` on one
    connection; return what came back, the seconds until the server closed it, and whether the
    connection handler returned (the loop ended and closed the connection)."""
    ended = asyncio.Event()

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await serve_connection(reader, writer, _echo, error_body=lambda e: {"refused": e.status, "why": e.message},
                                   limits=limits)
        finally:
            ended.set()

    async def main() -> tuple[bytes, float, bool]:
        server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        t0 = time.monotonic()
        writer.write(script)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout)  # until the server closes
        took = time.monotonic() - t0
        await asyncio.wait_for(ended.wait(), timeout)
        writer.close()
        server.close()
        await server.wait_closed()
        return data, took, ended.is_set()

    return asyncio.run(main())


def test_keep_alive_serves_requests_in_turn_until_connection_close() -> None:
    data, took, ended = _run_loop_server(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                                         b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
                                         b"GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                                         b"GET /never HTTP/1.1\r\nHost: x\r\n\r\n", limits=SLOW)
    got = _responses(data)
    assert [json.loads(b)["path"] for _, _, b in got] == ["/a", "/b", "/c"]  # /never: after the close
    assert [h["connection"] for _, h, _ in got] == ["keep-alive", "keep-alive", "close"]
    assert ended and took < 5  # closed right after /c, not by the idle timeout


def test_http_1_0_without_keep_alive_gets_one_answer() -> None:
    data, _, ended = _run_loop_server(b"GET /a HTTP/1.0\r\n\r\nGET /b HTTP/1.0\r\n\r\n")
    assert [json.loads(b)["path"] for _, _, b in _responses(data)] == ["/a"] and ended


def test_refused_request_gets_the_servers_error_body_and_the_connection_closes() -> None:
    data, _, ended = _run_loop_server(b"BROKEN\r\n\r\nGET /a HTTP/1.1\r\n\r\n")
    (status, headers, body), = _responses(data)
    assert status == 400 and headers["connection"] == "close"
    assert json.loads(body) == {"refused": 400, "why": "malformed request line"} and ended


def test_slow_head_gets_408_and_an_idle_connection_is_closed_quietly() -> None:
    data, took, ended = _run_loop_server(b"GET /a HTTP/1.1\r\nHost: x\r\n")  # the head never ends
    (status, _, body), = _responses(data)
    assert status == 408 and json.loads(body)["refused"] == 408 and 0.4 < took < 3 and ended
    data, took, ended = _run_loop_server(b"")  # connects, sends nothing
    assert data == b"" and 0.8 < took < 3 and ended


def test_a_client_gone_mid_request_ends_the_loop_without_an_answer() -> None:
    data, took, ended = _run_loop_server(b"GET /a HTTP/1.1\r\n\r\nGET /drop HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
                                         limits=SLOW)
    assert [json.loads(b)["path"] for _, _, b in _responses(data)] == ["/a"]
    assert ended and took < 5  # ended by the error, not by the idle timeout


def test_the_loop_stops_when_the_server_cancels_it() -> None:
    async def main() -> bool:
        task_box: list[asyncio.Task[None]] = []
        started = asyncio.Event()

        async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            task_box.append(task)
            started.set()
            await serve_connection(reader, writer, _echo, error_body=lambda e: {}, limits=Limits())

        server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        await asyncio.wait_for(started.wait(), 5)
        task_box[0].cancel()  # what SimServer.close() does to open connections
        await asyncio.wait_for(asyncio.gather(task_box[0], return_exceptions=True), 5)
        closed = await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        server.close()
        await server.wait_closed()
        return closed and task_box[0].done() and not task_box[0].cancelled()  # swallowed, connection closed

    assert asyncio.run(main())


# --- both real servers go through it ------------------------------------------------------------
@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[int, str]]]:
    """The OpenAI server and the LMCache server's HTTP port, with low timeouts: name -> (port,
    a GET path answering 200)."""
    tmp = Path(tmp_path_factory.mktemp("http"))
    sim: SimProc = start_sim(tmp, env=LOW_ENV)
    http_port, req_port = free_port(), free_port()
    log = open(tmp / "lmcache-server.log", "wb")  # noqa: SIM115 - closed in the finally below
    mp = subprocess.Popen([sys.executable, "-m", "harness.sim.cli", "lmcache-server", "--port", str(req_port),  # noqa: S603
                           "--http-port", str(http_port), "--l1-size-gb", "0.01"],
                          stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                          env={**os.environ, **LOW_ENV, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 15
        while True:
            assert mp.poll() is None, (tmp / "lmcache-server.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", http_port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the LMCache server's HTTP port never opened"
                time.sleep(0.1)
        yield {"openai": (sim.port, "/health"), "lmcache": (http_port, "/api/healthcheck")}
    finally:
        sim.stop()
        mp.terminate()
        try:
            mp.wait(timeout=10)
        finally:
            log.close()


@pytest.mark.parametrize("name", ["openai", "lmcache"])
def test_both_servers_keep_alive_refuse_and_time_out_alike(servers: dict[str, tuple[int, str]], name: str) -> None:
    port, ok_path = servers[name]
    get = f"GET {ok_path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # keep-alive, then close
        s.sendall(get + get.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        got = _responses(read_until_closed(s))
        assert [(st, h["connection"]) for st, h, _ in got] == [(200, "keep-alive"), (200, "close")]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # refused: its own error body
        s.sendall(b"BROKEN\r\n\r\n" + get)
        (status, headers, body), = _responses(read_until_closed(s))
        assert status == 400 and headers["connection"] == "close"
        error = json.loads(body)["error"]
        message = error["message"] if name == "openai" else error
        assert message == "malformed request line"
        if name == "openai":
            assert error["code"] == 400
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # slow head: 408
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        assert read_until_closed(s).startswith(b"HTTP/1.1 408 ")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # idle: closed quietly
        t0 = time.monotonic()
        assert read_until_closed(s) == b"" and 0.8 < time.monotonic() - t0 < 3

