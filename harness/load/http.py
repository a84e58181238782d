"""HTTP/1.1 pieces of the streaming client: endpoint URLs, request bytes and an incremental
response-framing parser (status line, headers, then a chunked, length-delimited or
close-delimited body).

The parser keeps body bytes as ``(arrival_ns, bytes)`` pieces: the arrival time is stamped by the
caller when the bytes came off the socket, before any parsing, and travels with the bytes so the
SSE layer can date each event by the piece that completed it.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Optional

from harness.load.errors import LoadInputError


class ProtocolError(Exception):
    """The server sent something that is not valid HTTP/1.1 framing, or more than the limits below."""


# Limits on what a server may send (a broken or hostile server must give a recorded error, never a
# hang, a crash or unbounded memory). Generous for any real completion stream.
MAX_HEAD_BYTES = 65536  # status line + headers
MAX_HEADERS = 128
MAX_INTERIM = 8  # 1xx responses before the real one
MAX_BODY_BYTES = 64 * 2**20  # a completion stream of 64 MiB is hundreds of thousands of tokens
_HEX = frozenset(b"0123456789abcdefABCDEF")


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: scheme, host, port and the API path prefix (``/v1`` by default)."""

    scheme: str
    host: str
    port: int
    base_path: str

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def host_header(self) -> str:
        default = 443 if self.tls else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    def path_for(self, api: str) -> str:
        suffix = "/chat/completions" if api == "chat" else "/completions"
        return self.base_path + suffix

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        """``http://host:port`` or ``http://host:port/v1`` (a trailing ``/completions`` or
        ``/chat/completions`` is dropped: the API kind is chosen separately)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise LoadInputError(f"endpoint {url!r}: expected http://HOST:PORT[/v1] or https://...")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise LoadInputError(f"endpoint {url!r}: bad port ({exc})") from None
        path = parts.path.rstrip("/")
        for tail in ("/chat/completions", "/completions"):
            if path.endswith(tail):
                path = path[: -len(tail)]
                break
        if not path:
            path = "/v1"
        return cls(parts.scheme, parts.hostname, port, path)


def build_request(endpoint: Endpoint, path: str, body: bytes, request_id: str,
                  auth_header: Optional[bytes]) -> bytes:
    """The bytes of one POST request, written to the socket in a single call."""
    head = (
        f"POST {path} HTTP/1.1\r\n"
        f"Host: {endpoint.host_header}\r\n"
        "User-Agent: kvgate-load\r\n"
        "Accept: text/event-stream\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"X-Request-Id: {request_id}\r\n"
        "Connection: keep-alive\r\n"
    ).encode("latin-1")
    if auth_header:
        head += auth_header
    return head + b"\r\n" + body


_HEAD, _SIZE, _DATA, _CRLF, _TRAILER, _LENGTH, _CLOSE, _DONE = range(8)


class ResponseParser:
    """Incremental parser of one HTTP/1.1 response. ``feed`` returns True once it is complete."""

    __slots__ = ("state", "buf", "status", "reason", "headers", "pieces", "remaining",
                 "keep_alive", "body_bytes", "first_byte_ns", "last_byte_ns", "max_body", "interim", "_scanned")

    def __init__(self, max_body: int = MAX_BODY_BYTES) -> None:
        self.max_body = max_body
        self.interim = 0
        self._scanned = 0  # bytes of ``buf`` already searched for the end of the head
        self.state = _HEAD
        self.buf = b""
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.pieces: list[tuple[int, bytes]] = []
        self.remaining = 0
        self.keep_alive = True
        self.body_bytes = 0
        self.first_byte_ns = 0
        self.last_byte_ns = 0

    @property
    def done(self) -> bool:
        return self.state == _DONE

    @property
    def headers_done(self) -> bool:
        return self.state != _HEAD

    @property
    def close_delimited(self) -> bool:
        return self.state == _CLOSE

    def body(self) -> bytes:
        return b"".join(p for _, p in self.pieces)

    def eof(self) -> bool:
        """The peer closed: completes a close-delimited body; False if the response is cut."""
        if self.state == _CLOSE:
            self.state = _DONE
            self.keep_alive = False
            return True
        return self.state == _DONE

    def feed(self, data: bytes, t_ns: int) -> bool:
        if not self.first_byte_ns:
            self.first_byte_ns = t_ns
        self.last_byte_ns = t_ns
        if self.buf:
            data = self.buf + data
            self.buf = b""
        pos = 0
        n = len(data)
        while pos < n:
            state = self.state
            if state == _DATA or state == _LENGTH:
                take = min(self.remaining, n - pos)
                piece = data[pos:pos + take] if (pos or take != n) else data
                self.pieces.append((t_ns, piece))
                self.body_bytes += take
                self.remaining -= take
                pos += take
                if self.remaining == 0:
                    if state == _LENGTH:
                        self.state = _DONE
                    else:
                        self.state = _CRLF
            elif state == _SIZE:
                pos = self._chunk_size(data, pos, t_ns)
                if pos < 0:
                    return False
            elif state == _CRLF:
                if n - pos < 2:
                    self.buf = data[pos:]
                    return False
                if data[pos:pos + 2] != b"\r\n":
                    raise ProtocolError("chunk data not followed by CRLF")
                pos += 2
                self.state = _SIZE
            elif state == _TRAILER:
                pos = self._trailer(data, pos)
                if pos < 0:
                    return False
            elif state == _HEAD:
                pos = self._head_at(data, pos)
                if pos < 0:
                    return False
            elif state == _CLOSE:
                piece = data[pos:] if pos else data
                if self.body_bytes + len(piece) > self.max_body:
                    raise ProtocolError(f"response body larger than {self.max_body} bytes")
                self.pieces.append((t_ns, piece))
                self.body_bytes += len(piece)
                pos = n
            else:  # _DONE: bytes after the end of the response
                raise ProtocolError(f"{n - pos} unexpected bytes after the end of the response")
        return self.state == _DONE

    # Each reads one part of the response at ``pos`` and returns where the next begins, or -1 when
    # the part is not all here yet (what there is of it is kept in ``buf``).

    def _chunk_size(self, data: bytes, pos: int, t_ns: int) -> int:
        end = data.find(b"\r\n", pos)
        if end < 0:
            self._stash(data, pos, 1024, "chunk-size line")
            return -1
        line = data[pos:end].split(b";", 1)[0].strip(b" \t")
        # hex digits only: int() would also take "-6", "+6", "0x6" or "6_0"
        if not line or len(line) > 16 or not _HEX.issuperset(line):
            raise ProtocolError(f"bad chunk-size line {line[:40]!r}")
        size = int(line, 16)
        if self.body_bytes + size > self.max_body:
            raise ProtocolError(f"response body larger than {self.max_body} bytes")
        pos = end + 2
        if size == 0:
            self.state = _TRAILER
        elif len(data) - pos >= size + 2 and data[pos + size:pos + size + 2] == b"\r\n":
            # the whole chunk and its CRLF are here (the usual case): take it at once
            self.pieces.append((t_ns, data[pos:pos + size]))
            self.body_bytes += size
            pos += size + 2
        else:
            self.remaining = size
            self.state = _DATA
        return pos

    def _trailer(self, data: bytes, pos: int) -> int:
        if data.startswith(b"\r\n", pos):
            self.state = _DONE
            return pos + 2
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            self._stash(data, pos, 65536, "trailer")
            return -1
        self.state = _DONE
        return end + 4

    def _head_at(self, data: bytes, pos: int) -> int:
        # search only the new bytes (and 3 before them): a head trickled byte by byte
        # costs linear time, not quadratic
        end = data.find(b"\r\n\r\n", max(pos, pos + self._scanned - 3))
        if end < 0:
            self._stash(data, pos, MAX_HEAD_BYTES, "response head")
            self._scanned = len(self.buf)
            return -1
        self._scanned = 0
        self._head(data[pos:end])
        return end + 4

    def _stash(self, data: bytes, pos: int, limit: int, what: str) -> None:
        rest = data[pos:]
        if len(rest) > limit:
            raise ProtocolError(f"{what} longer than {limit} bytes")
        self.buf = rest

    def _head(self, raw: bytes) -> None:
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or parts[0] not in ("HTTP/1.1", "HTTP/1.0"):
            raise ProtocolError(f"bad status line {lines[0][:80]!r}")
        if len(parts[1]) != 3 or not parts[1].isdigit() or not 100 <= int(parts[1]) <= 599:
            raise ProtocolError(f"bad status code in {lines[0][:80]!r}")
        status = int(parts[1])
        if len(lines) - 1 > MAX_HEADERS:
            raise ProtocolError(f"more than {MAX_HEADERS} header lines")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise ProtocolError(f"bad header line {line[:80]!r}")
            key = name.lower()
            value = value.strip()
            if key == "content-length" and key in headers and headers[key] != value:
                raise ProtocolError("conflicting Content-Length headers")
            headers[key] = value if key == "content-length" else (
                f"{headers[key]}, {value}" if key in headers else value)
        if 100 <= status < 200:
            self.interim += 1
            if self.interim > MAX_INTERIM:
                raise ProtocolError(f"more than {MAX_INTERIM} interim (1xx) responses")
            return  # an interim response (100 Continue): the real one follows
        self.status = status
        self.reason = parts[2] if len(parts) > 2 else ""
        self.headers = headers
        conn = headers.get("connection", "").lower()
        self.keep_alive = ("close" not in conn) and (parts[0] != "HTTP/1.0" or "keep-alive" in conn)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.state = _SIZE
        elif "content-length" in headers:
            length = headers["content-length"]
            if not length.isascii() or not length.isdigit() or len(length) > 19:
                raise ProtocolError(f"bad Content-Length {length[:40]!r}")
            self.remaining = int(length)
            if self.remaining > self.max_body:
                raise ProtocolError(f"Content-Length {self.remaining} is larger than {self.max_body} bytes")
            self.state = _LENGTH if self.remaining > 0 else _DONE
        elif status in (204, 304):
            self.state = _DONE
        else:
            self.state = _CLOSE
            self.keep_alive = False
