"""A scriptable OpenAI-compatible streaming server on 127.0.0.1 for the load tests.

It is a real HTTP/1.1 server (asyncio streams, keep-alive, chunked transfer) running its own event
loop in a thread. A test sets ``server.script = fn`` where ``fn(request) -> list[action]`` and an
action is ``bytes`` (written raw, then drained), ``("sleep", seconds)``, ``("hold", n, timeout)``
(answer nothing until ``n`` requests have arrived; a timeout is counted in ``hold_timeouts``, so a
test proves an ordering by events, not by a wall-clock bound) or ``("close",)``; helpers
build the usual actions, so every SSE edge case (a split at any byte, multi-token chunks, a
role-only first chunk, an error event, HTTP errors, stalls, drops) is a list of bytes on the wire.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional, Union

Action = Union[bytes, tuple[Any, ...]]


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    connection_id: int


def chunk(data: bytes) -> bytes:
    """One HTTP chunk."""
    return b"%x\r\n" % len(data) + data + b"\r\n"


END = b"0\r\n\r\n"
SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n")


def event(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def completion_chunk(text: str, usage: Optional[dict[str, int]] = None) -> dict[str, Any]:
    d: dict[str, Any] = {"id": "cmpl-1", "object": "text_completion",
                         "choices": [{"index": 0, "text": text, "finish_reason": None}]}
    if usage is not None:
        d["usage"] = usage
    return d


def chat_chunk(content: Optional[str], role: Optional[str] = None) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    return {"id": "chat-1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def usage_event(prompt: int, completion: int) -> bytes:
    return event({"id": "x", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                                      "total_tokens": prompt + completion}})


def sse_body(texts: list[str], *, prompt_tokens: int = 3, usage: bool = True, done: bool = True) -> bytes:
    """The SSE payload (not chunk-encoded) of a completions stream."""
    out = b"".join(event(completion_chunk(t)) for t in texts)
    if usage:
        out += usage_event(prompt_tokens, sum(len(t.split()) or 1 for t in texts))
    if done:
        out += b"data: [DONE]\n\n"
    return out


def stream(texts: list[str], **kw: Any) -> list[Action]:
    """A normal stream: one HTTP chunk per SSE event."""
    payload = sse_body(texts, **kw)
    events = [e + b"\n\n" for e in payload.split(b"\n\n") if e]
    return [SSE_HEAD] + [chunk(e) for e in events] + [END]


def json_response(status: int, obj: Any, reason: str = "Error") -> bytes:
    body = json.dumps(obj).encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


class ScriptedServer:
    """``with ScriptedServer() as s: s.script = ...; url = s.url``."""

    def __init__(self, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.ssl_context = ssl_context
        self.script: Callable[[Received], list[Action]] = lambda r: stream(["hello ", "world"])
        self.received: list[Received] = []
        self.connections = 0
        self.hold_timeouts = 0
        self.port = 0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._server: Optional[asyncio.base_events.Server] = None
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self._writers: set[asyncio.StreamWriter] = set()
        self._arrived: Optional[asyncio.Condition] = None

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._run, name="sse-test-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("test server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        assert loop is not None and self._thread is not None
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._arrived = asyncio.Condition()
        self._server = loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=1024, ssl=self.ssl_context))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for w in list(self._writers):
                w.close()
            loop.run_until_complete(self._server.wait_closed())
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        cid = self.connections
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                req = Received(method, path, headers, json.loads(body or b"{}"), cid)
                self.received.append(req)
                await self._announce_arrival()
                for action in self.script(req):
                    if isinstance(action, bytes):
                        writer.write(action)
                        await writer.drain()
                    elif action[0] == "sleep":
                        await asyncio.sleep(action[1])
                    elif action[0] == "hold":
                        await self._hold(action[1], action[2])
                    elif action[0] == "close":
                        writer.close()
                        return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _announce_arrival(self) -> None:
        assert self._arrived is not None
        async with self._arrived:
            self._arrived.notify_all()

    async def _hold(self, count: int, timeout: float) -> None:
        assert self._arrived is not None
        async with self._arrived:
            try:
                await asyncio.wait_for(self._arrived.wait_for(lambda: len(self.received) >= count), timeout)
            except asyncio.TimeoutError:
                self.hold_timeouts += 1


def chat_stream(texts: list[str], *, prompt_tokens: int = 3) -> list[Action]:
    """A chat stream: a role-only first chunk, the content chunks, usage, [DONE]."""
    events = [event(chat_chunk(None, role="assistant"))] + [event(chat_chunk(t)) for t in texts]
    events += [usage_event(prompt_tokens, sum(len(t.split()) or 1 for t in texts)), b"data: [DONE]\n\n"]
    return [SSE_HEAD] + [chunk(e) for e in events] + [END]
