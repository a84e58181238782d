"""A minimal HTTP/1.1 server layer on asyncio streams: keep-alive, Content-Length bodies,
chunked responses for server-sent events. Just what an OpenAI-compatible endpoint needs.

It behaves as a well-kept server must with a hostile or broken client (``Limits``): an idle
keep-alive connection is closed after ``idle_timeout_s``; a request head must arrive within
``header_timeout_s`` and its body within ``body_timeout_s`` (else 408); header names and values
are validated (a CR, LF or NUL in a value is a 400, so nothing a client sends is echoed into a
response header); a body over ``max_body`` is refused with 413 before it is read, and all bodies
being read at once share ``body_budget`` bytes (503 beyond). ``limit_connections`` caps open
connections below the process's file-descriptor limit: at the cap the oldest connection that is
not being served (idle, or still sending its request) is closed to make room, and only when every
connection is busy is a new one answered 503. So ``/health`` stays answerable under thousands of
idle connections. A HEAD request gets the head of the GET response and no body.

The limits can be lowered for tests through ``KVGATE_SIM_*`` environment variables (see
``Limits.from_env``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Callable, Optional

MAX_HEADERS = 100
MAX_BODY = 32 * 1024 * 1024  # a 100k-token prompt is well under 1 MiB of JSON

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 field-name characters
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


@dataclass
class Limits:
    """What one emulator process tolerates from its clients."""

    idle_timeout_s: float = 60.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    max_body: int = MAX_BODY
    body_budget: int = 512 * 1024 * 1024
    max_connections: int = 1000

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> Limits:
        env = os.environ if env is None else env
        out = cls()
        for name, attr, conv in (("KVGATE_SIM_IDLE_TIMEOUT", "idle_timeout_s", float),
                                 ("KVGATE_SIM_HEADER_TIMEOUT", "header_timeout_s", float),
                                 ("KVGATE_SIM_BODY_TIMEOUT", "body_timeout_s", float),
                                 ("KVGATE_SIM_MAX_BODY", "max_body", int),
                                 ("KVGATE_SIM_BODY_BUDGET", "body_budget", int),
                                 ("KVGATE_SIM_MAX_CONNECTIONS", "max_connections", int)):
            raw = env.get(name)
            if raw:
                try:
                    value = conv(raw)
                except ValueError:
                    raise ValueError(f"{name}={raw!r}: expected a number") from None
                if value <= 0:
                    raise ValueError(f"{name}={raw!r}: expected a positive number")
                setattr(out, attr, value)
        return out


LIMITS = Limits.from_env()

REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, str]  # lower-case names
    body: bytes = b""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def keep_alive(self) -> bool:
        conn = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return conn == "keep-alive"
        return conn != "close"


@dataclass
class Response:
    """Writes one response on the connection: either ``send`` (whole body) or ``start_stream``
    followed by ``write_chunk`` calls and ``end_stream``."""

    writer: asyncio.StreamWriter
    keep_alive: bool
    extra_headers: dict[str, str] = field(default_factory=dict)
    status: int = 0
    streaming: bool = False
    finished: bool = False
    head_only: bool = False  # the answer to a HEAD request: headers, never a body

    def __post_init__(self) -> None:
        if _current_method.get(self.writer) == "HEAD":
            self.head_only = True

    def _head(self, status: int, headers: Mapping[str, str]) -> bytes:
        self.status = status
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        all_headers = dict(headers)
        all_headers.update(self.extra_headers)
        all_headers["connection"] = "keep-alive" if self.keep_alive else "close"
        # a header that could split the response (CR/LF) is dropped, never written
        lines += [f"{k}: {v}" for k, v in all_headers.items()
                  if _TOKEN.fullmatch(k) and not _BAD_VALUE.search(str(v))]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")

    async def send(self, status: int, body: bytes, content_type: str) -> None:
        head = self._head(status, {"content-type": content_type, "content-length": str(len(body))})
        self.writer.write(head if self.head_only else head + body)
        await self.writer.drain()
        self.finished = True

    async def send_json(self, status: int, obj: object) -> None:
        await self.send(status, json.dumps(obj).encode(), "application/json")

    async def start_stream(self, content_type: str = "text/event-stream; charset=utf-8") -> None:
        self.streaming = True
        self.writer.write(
            self._head(
                200,
                {"content-type": content_type, "transfer-encoding": "chunked", "cache-control": "no-cache"},
            )
        )
        await self.writer.drain()

    async def write_chunk(self, data: bytes) -> None:
        if data and not self.head_only:
            self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await self.writer.drain()

    async def end_stream(self) -> None:
        if not self.head_only:
            self.writer.write(b"0\r\n\r\n")
            await self.writer.drain()
        self.finished = True


Handler = Callable[[Request, Response], Awaitable[None]]


# Per connection (keyed by its writer): the method of the request being answered (for HEAD), and
# whether the connection is being served (not evictable) or waiting for / reading a request.
_current_method: dict[asyncio.StreamWriter, str] = {}
_open: dict[asyncio.StreamWriter, list[float]] = {}  # writer -> [opened at, 1.0 if being served]
_body_bytes_reading = [0]


async def read_request(
    reader: asyncio.StreamReader, writer: Optional[asyncio.StreamWriter] = None, limits: Optional[Limits] = None
) -> Optional[Request]:
    """One request from the connection; None at a clean end of the connection or when it stayed
    idle past the idle timeout. Raises HTTPError (408, 400, 413, 431, 503) for a request to refuse."""
    lim = limits or LIMITS
    state = _open.get(writer) if writer is not None else None
    if state is not None:
        state[1] = 0.0  # waiting: evictable when the server is full
    if writer is not None:
        _current_method.pop(writer, None)
    try:
        line = await asyncio.wait_for(reader.readuntil(b"\r\n"), lim.idle_timeout_s)
    except asyncio.TimeoutError:
        return None  # idle keep-alive connection: closed quietly, as servers do
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise HTTPError(400, "incomplete request line") from None
        return None
    except asyncio.LimitOverrunError:
        raise HTTPError(431, "request line too long") from None
    parts = line.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0") or not _TOKEN.fullmatch(parts[0]):
        raise HTTPError(400, "malformed request line")
    method, target, version = parts
    if writer is not None:
        _current_method[writer] = method
    try:
        headers = await asyncio.wait_for(_read_headers(reader), lim.header_timeout_s)
    except asyncio.TimeoutError:
        raise HTTPError(408, f"request headers not received within {lim.header_timeout_s:g} s") from None
    body = b""
    if "transfer-encoding" in headers:
        raise HTTPError(411, "chunked request bodies are not supported; send Content-Length")
    if "content-length" in headers:
        raw_len = headers["content-length"]
        if not raw_len.isascii() or not raw_len.isdigit() or len(raw_len) > 19:
            raise HTTPError(400, "invalid Content-Length")
        length = int(raw_len)
        if length > lim.max_body:
            raise HTTPError(413, f"body of {length} bytes is larger than the {lim.max_body}-byte limit")
        if _body_bytes_reading[0] + length > lim.body_budget:
            raise HTTPError(503, "too many request bodies being received at once; retry later")
        if writer is not None and length and headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits for this before a large body
            await writer.drain()
        _body_bytes_reading[0] += length
        try:
            body = await asyncio.wait_for(reader.readexactly(length), lim.body_timeout_s)
        except asyncio.IncompleteReadError:
            raise HTTPError(400, "body shorter than Content-Length") from None
        except asyncio.TimeoutError:
            raise HTTPError(408, f"request body not received within {lim.body_timeout_s:g} s") from None
        finally:
            _body_bytes_reading[0] -= length
    if state is not None:
        state[1] = 1.0  # being served: never evicted
    return Request(method, target, version, headers, body)


async def _read_headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    while True:
        try:
            hline = await reader.readuntil(b"\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            raise HTTPError(400, "malformed headers") from None
        if hline == b"\r\n":
            break
        if len(headers) >= MAX_HEADERS:
            raise HTTPError(431, "too many headers")
        name, sep, value = hline[:-2].decode("latin-1").partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            raise HTTPError(400, f"malformed header line {name.strip()[:40]!r}")
        value = value.strip(" \t")
        if _BAD_VALUE.search(value):
            raise HTTPError(400, f"header {name} contains a control character (CR, LF or NUL)")
        headers[name.lower()] = value
    return headers


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler, *,
                           error_body: Callable[[HTTPError], object], limits: Optional[Limits] = None) -> None:
    """Serve one client connection: read a request, let ``handler`` answer it, repeat while the
    client keeps the connection alive. A request refused by ``read_request`` (408, 400, 413, 431,
    503) is answered with ``error_body(exc)`` as JSON and the connection closed; an idle or cleanly
    ended connection is closed quietly; a client that goes away, or the server cancelling the
    task when it shuts down, ends the loop without an answer. The connection is always closed.
    The one connection loop of the emulator's OpenAI server and its LMCache server's HTTP port."""
    try:
        while True:
            try:
                req = await read_request(reader, writer, limits)
            except HTTPError as exc:
                await Response(writer, keep_alive=False).send_json(exc.status, error_body(exc))
                break
            if req is None:
                break
            resp = Response(writer, keep_alive=req.keep_alive)
            await handler(req, resp)
            if not req.keep_alive:
                break
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
        pass  # the client went away, or the server is closing: nothing to answer
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, asyncio.CancelledError):
            pass


ConnectionHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def fd_capacity(reserve: int = 64) -> int:
    """How many connections this process can hold: its soft descriptor limit raised to the hard
    limit, less ``reserve`` for files (tier I/O, logs)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        elif hard == resource.RLIM_INFINITY and soft < 65536:
            resource.setrlimit(resource.RLIMIT_NOFILE, (65536, hard))
            soft = 65536
    except (ImportError, ValueError, OSError):
        return 1024 - reserve
    return max(16, int(soft) - reserve)


def limit_connections(handler: ConnectionHandler, limits: Optional[Limits] = None) -> ConnectionHandler:
    """Wrap an ``asyncio.start_server`` handler with the connection cap (see the module docstring)."""
    lim = limits or LIMITS
    cap = min(lim.max_connections, fd_capacity())

    async def wrapped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(_open) >= cap:
            idle = sorted((st[0], w) for w, st in _open.items() if st[1] == 0.0)
            if idle:
                victim = idle[0][1]
                _open.pop(victim, None)
                transport = victim.transport
                if transport is not None:
                    transport.abort()
            else:
                try:
                    body = json.dumps({"error": {"message": f"server busy: {cap} connections are being served",
                                                 "type": "ServiceUnavailable", "code": 503}}).encode()
                    writer.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                                 b"retry-after: 1\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
                                 % (len(body), body))
                    await writer.drain()
                except ConnectionError:
                    pass
                finally:
                    writer.close()
                return
        _open[writer] = [time.monotonic(), 0.0]
        try:
            await handler(reader, writer)
        finally:
            _open.pop(writer, None)
            _current_method.pop(writer, None)

    return wrapped
