"""Reference streaming server for bench/ttft_accuracy.py (run as its own process).

OpenAI completions SSE in vLLM's chunk format over HTTP/1.1 chunked keep-alive. For each request
it sends the first token ``--delay-ms`` after the request body has arrived, then one token every
``--interval-ms`` (absolute deadlines on the event loop's timer heap: no busy-wait, no drift), and
records the CLOCK_MONOTONIC time (``time.monotonic_ns``) right before handing each first token to
the kernel, keyed by the request's ``X-Request-Id``: the ground truth for TTFT. With both delays 0
the whole stream goes in one write (the ingest test).

``GET /log`` returns ``{"first_send_ns": {id: ns}, "late_ms": [...]}`` and clears it; ``late_ms``
is how far behind its own schedule the server sent each first token (it shares the machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Optional


def _event(obj: dict[str, object]) -> bytes:
    data = b"data: " + json.dumps(obj, separators=(", ", ": ")).encode() + b"\n\n"
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _token_chunk(i: int) -> bytes:
    return _event({"id": "cmpl-bench", "object": "text_completion", "created": 1700000000, "model": "bench",
                   "choices": [{"index": 0, "text": f" tok{i}", "logprobs": None, "finish_reason": None,
                                "stop_reason": None}], "usage": None})


HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"transfer-encoding: chunked\r\n\r\n")


class _Server:
    def __init__(self, delay_ns: int, interval_ns: int, tokens: int) -> None:
        self.delay_ns = delay_ns
        self.interval_ns = interval_ns
        self.tokens = tokens
        self.chunks = [_token_chunk(i) for i in range(tokens)]
        done = b"data: [DONE]\n\n"
        usage = _event({"id": "cmpl-bench", "object": "text_completion", "created": 1700000000, "model": "bench",
                        "choices": [], "usage": {"prompt_tokens": 8, "total_tokens": 8 + tokens,
                                                 "completion_tokens": tokens}})
        self.tail = usage + b"%x\r\n" % len(done) + done + b"\r\n" + b"0\r\n\r\n"
        self.whole = HEAD + b"".join(self.chunks) + self.tail
        self.first_send: dict[str, int] = {}
        self.late_ms: list[float] = []


class _Proto(asyncio.Protocol):
    def __init__(self, srv: _Server) -> None:
        self.srv = srv
        self.buf = b""
        self.transport: Optional[asyncio.Transport] = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            rid = ""
            for line in head.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                k = k.strip().lower()
                if k == "content-length":
                    length = int(v)
                elif k == "x-request-id":
                    rid = v.strip()
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length:]
            if head.startswith("GET /log"):
                self._log()
            else:
                self._stream(rid, now)

    def _log(self) -> None:
        body = json.dumps({"first_send_ns": self.srv.first_send, "late_ms": self.srv.late_ms}).encode()
        self.srv.first_send = {}
        self.srv.late_ms = []
        assert self.transport is not None
        self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                             % len(body) + body)

    def _stream(self, rid: str, body_ns: int) -> None:
        srv = self.srv
        tr = self.transport
        assert tr is not None
        if srv.delay_ns == 0 and srv.interval_ns == 0:
            srv.first_send[rid] = time.monotonic_ns()
            tr.write(srv.whole)
            return
        tr.write(HEAD)
        # loop.time() is CLOCK_MONOTONIC seconds, the same clock as monotonic_ns
        t0 = body_ns / 1e9 + srv.delay_ns / 1e9
        self.loop.call_at(t0, self._send, rid, 0, t0)

    def _send(self, rid: str, i: int, due: float) -> None:
        srv = self.srv
        tr = self.transport
        if tr is None or tr.is_closing():
            return
        if i == 0:
            now = time.monotonic_ns()  # just before the write: bytes cannot arrive earlier
            srv.first_send[rid] = now
            srv.late_ms.append((now / 1e9 - due) * 1e3)
        tr.write(srv.chunks[i])
        if i + 1 < srv.tokens:
            nxt = due + srv.interval_ns / 1e9
            self.loop.call_at(nxt, self._send, rid, i + 1, nxt)
        else:
            tr.write(srv.tail)


async def _main(args: argparse.Namespace) -> None:
    srv = _Server(int(args.delay_ms * 1e6), int(args.interval_ms * 1e6), args.tokens)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Proto(srv), "127.0.0.1", args.port, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--delay-ms", type=float, default=50.0)
    p.add_argument("--interval-ms", type=float, default=5.0)
    p.add_argument("--tokens", type=int, default=32)
    args = p.parse_args()
    if time.get_clock_info("monotonic").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        sys.exit("this benchmark needs CLOCK_MONOTONIC for time.monotonic")
    try:
        asyncio.run(_main(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
