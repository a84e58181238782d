"""A minimal HTTP/1.1 server layer on asyncio streams: keep-alive, Content-Length bodies,
chunked responses for server-sent events. Just what an OpenAI-compatible endpoint needs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Callable, Optional

MAX_HEADERS = 100
MAX_BODY = 256 * 1024 * 1024

REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
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

    def _head(self, status: int, headers: Mapping[str, str]) -> bytes:
        self.status = status
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        all_headers = dict(headers)
        all_headers.update(self.extra_headers)
        all_headers["connection"] = "keep-alive" if self.keep_alive else "close"
        lines += [f"{k}: {v}" for k, v in all_headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def send(self, status: int, body: bytes, content_type: str) -> None:
        head = self._head(status, {"content-type": content_type, "content-length": str(len(body))})
        self.writer.write(head + body)
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
        if data:
            self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await self.writer.drain()

    async def end_stream(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()
        self.finished = True


Handler = Callable[[Request, Response], Awaitable[None]]


async def read_request(
    reader: asyncio.StreamReader, writer: Optional[asyncio.StreamWriter] = None
) -> Optional[Request]:
    """One request from the connection; None at a clean end of the connection."""
    try:
        line = await reader.readuntil(b"\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise HTTPError(400, "incomplete request line") from None
        return None
    except asyncio.LimitOverrunError:
        raise HTTPError(431, "request line too long") from None
    parts = line.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HTTPError(400, "malformed request line")
    method, target, version = parts
    headers: dict[str, str] = {}
    while True:
        try:
            hline = await reader.readuntil(b"\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            raise HTTPError(400, "malformed headers") from None
        if hline in (b"\r\n", b"\n"):
            break
        if len(headers) >= MAX_HEADERS:
            raise HTTPError(431, "too many headers")
        name, sep, value = hline.decode("latin-1").partition(":")
        if not sep:
            raise HTTPError(400, f"malformed header line {name.strip()!r}")
        headers[name.strip().lower()] = value.strip()
    body = b""
    if "transfer-encoding" in headers:
        raise HTTPError(411, "chunked request bodies are not supported; send Content-Length")
    if "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise HTTPError(400, "invalid Content-Length") from None
        if length < 0 or length > MAX_BODY:
            raise HTTPError(413, f"body of {length} bytes is too large")
        if writer is not None and length and headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits for this before a large body
            await writer.drain()
        try:
            body = await reader.readexactly(length)
        except asyncio.IncompleteReadError:
            raise HTTPError(400, "body shorter than Content-Length") from None
    return Request(method, target, version, headers, body)
