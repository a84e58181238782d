"""The streaming client: stdlib asyncio, HTTP/1.1 keep-alive, OpenAI-compatible SSE.

Why not asyncio streams or aiohttp: at hundreds of concurrent streams the time between a byte
arriving and the client noticing it is the TTFT error. Each connection is an ``asyncio.Protocol``
whose ``data_received`` stamps ``time.perf_counter_ns()`` first, then only does HTTP framing (a few
``bytes.find``); SSE and JSON decoding run once the response is complete, on the pieces with
their arrival stamps. So a busy event loop delays the stamp of one segment by the framing cost of
the others, not by their JSON decoding.

Connections are kept alive in a pool sized to the concurrency (no hidden cap); a request that
meets a keep-alive connection the server has just closed (no byte received) is retried once on a
fresh one. The API key is held only as a pre-rendered header and redacted from any error text.

Failed requests are results, never exceptions: ``status`` is ``"ok"``, ``"error"`` or
``"cancelled"`` and ``error_kind`` one of ``connect_failed``, ``http_<code>``, ``timeout``,
``connection_dropped``, ``error_event``, ``no_output``, ``protocol_error``, ``cancelled``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter_ns
from typing import Any, Optional, Union

from harness.load.errors import LoadInputError
from harness.load.http import Endpoint, ProtocolError, ResponseParser, build_request
from harness.load.spec import RequestSpec
from harness.load.sse import ResponseShapeError, StreamTimeline
from harness.load.vocabulary import VOCABULARY

TOKEN_RULE = "usage-delta|words"  # see harness.load.sse


def load_api_key(env_name: Optional[str] = "OPENAI_API_KEY", key_file: Optional[str] = None) -> Optional[str]:
    """The API key from a file (first line) or an environment variable; None when neither is set.
    The key is never logged, recorded or put in an error message."""
    if key_file:
        try:
            text = Path(key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise LoadInputError(f"API key file {key_file}: {exc.strerror or exc}") from None
        if not text:
            raise LoadInputError(f"API key file {key_file} is empty")
        return text.splitlines()[0].strip()
    if env_name:
        value = os.environ.get(env_name, "").strip()
        return value or None
    return None


def make_ssl_context(*, ca_file: Optional[str] = None, insecure: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca_file)
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


# Ids below the byte alphabet's size: a token in every byte-level BPE vocabulary (and a byte-fallback
# token in SentencePiece ones), never a special token past the first few.
TOKEN_ID_RANGE = (4, 250)
_WORD_INDEX = {w: i for i, w in enumerate(VOCABULARY)}


def token_ids(prompt: str, id_range: tuple[int, int] = TOKEN_ID_RANGE) -> list[int]:
    """One token id per word of ``prompt``: a vocabulary word by its index, any other word by its
    CRC-32, folded into ``id_range``. Deterministic, so equal prefixes give equal ids."""
    lo, hi = id_range
    span = hi - lo
    out = []
    for w in prompt.split():
        i = _WORD_INDEX.get(w)
        out.append(lo + ((i if i is not None else zlib.crc32(w.encode("utf-8", "surrogatepass"))) % span))
    return out


@dataclass
class ClientOptions:
    """How requests are made. ``api_key`` is excluded from ``repr``."""

    model: str
    api: str = "completions"  # or "chat"
    timeout_s: float = 600.0  # whole request
    idle_timeout_s: Optional[float] = None  # no byte for this long: timeout
    ignore_eos: bool = True  # like vllm bench serve's random dataset: generate max_tokens
    continuous_usage: bool = False  # ask vLLM for usage in every chunk (exact per-chunk tokens)
    extra_body: dict[str, Any] = field(default_factory=dict)
    keep_text: bool = False
    api_key: Optional[str] = field(default=None, repr=False)
    ca_file: Optional[str] = None
    insecure_tls: bool = False
    # "token_ids": the completions prompt goes as a list of token ids, one per workload word, so the
    # served model counts exactly the tokens the workload means (text would be re-tokenized by the
    # model's tokenizer: 1 word is 1-5 tokens); equal words give equal ids, so shared prefixes stay
    # shared. "text" sends the words (exact for the KV emulator only).
    prompt_format: str = "text"
    token_id_range: tuple[int, int] = TOKEN_ID_RANGE

    def __post_init__(self) -> None:
        if self.api not in ("completions", "chat"):
            raise LoadInputError(f"api {self.api!r}: expected 'completions' or 'chat'")
        if self.prompt_format not in ("text", "token_ids"):
            raise LoadInputError(f"prompt_format {self.prompt_format!r}: expected 'text' or 'token_ids'")
        if self.prompt_format == "token_ids" and self.api != "completions":
            raise LoadInputError("prompt_format 'token_ids' needs api 'completions' (the chat API takes text only)")
        lo, hi = self.token_id_range
        if not 0 <= lo < hi:
            raise LoadInputError(f"token_id_range {self.token_id_range}: expected 0 <= low < high")
        if self.timeout_s <= 0:
            raise LoadInputError(f"timeout_s {self.timeout_s}: expected a positive number of seconds")


@dataclass
class RequestResult:
    """What happened to one request. Times are ``perf_counter_ns`` (CLOCK_MONOTONIC on Linux)."""

    request_id: str
    status: str
    start_ns: int
    end_ns: int
    error_kind: Optional[str] = None
    error: Optional[str] = None
    http_status: Optional[int] = None
    first_token_ns: Optional[int] = None
    ttft_ms: Optional[float] = None
    e2el_ms: Optional[float] = None
    tpot_ms: Optional[float] = None
    itl_ms: list[float] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    counted_tokens: int = 0
    chunks: int = 0
    server_usage: bool = False
    connect_ms: float = 0.0
    retried: bool = False
    text: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _Lost(Exception):
    """The connection closed before the response was complete."""


class _Timeout(Exception):
    pass


class _Exchange:
    """One request/response on a connection."""

    __slots__ = ("parser", "future", "error")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.parser = ResponseParser()
        self.future = future
        self.error: Optional[BaseException] = None

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


class _Connection(asyncio.Protocol):
    __slots__ = ("transport", "exchange", "closed", "uses", "lost")

    def __init__(self) -> None:
        self.transport: Optional[asyncio.Transport] = None
        self.exchange: Optional[_Exchange] = None
        self.closed = False
        self.uses = 0
        self.lost = False  # connection_lost has run: the socket is really closed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        t = perf_counter_ns()  # first: the arrival stamp, before any parsing
        ex = self.exchange
        if ex is None:
            self.close()  # bytes with no request outstanding: the connection is unusable
            return
        try:
            if ex.parser.feed(data, t) and not ex.future.done():
                ex.future.set_result(None)
        except ProtocolError as exc:
            ex.fail(exc)
            self.close()

    def eof_received(self) -> Optional[bool]:
        return False

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        self.lost = True
        ex = self.exchange
        if ex is not None and not ex.future.done():
            if ex.parser.eof():
                ex.future.set_result(None)
            else:
                ex.fail(_Lost(str(exc) if exc else "closed by the server"))

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _Pool:
    """Idle keep-alive connections to one endpoint (LIFO: the warmest first)."""

    def __init__(self, endpoint: Endpoint, ssl_ctx: Optional[ssl.SSLContext], max_idle: int) -> None:
        self.endpoint = endpoint
        self.ssl_ctx = ssl_ctx
        self.max_idle = max_idle
        self.idle: list[_Connection] = []
        self.all: list[_Connection] = []
        self.opened = 0

    async def connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        ep = self.endpoint
        _, proto = await loop.create_connection(
            _Connection, ep.host, ep.port, ssl=self.ssl_ctx,
            server_hostname=ep.host if self.ssl_ctx is not None else None,
        )
        self.opened += 1
        self.all = [c for c in self.all if not c.lost]
        self.all.append(proto)
        return proto

    async def acquire(self, timeout_s: float) -> tuple[_Connection, bool]:
        """An idle connection (returned without yielding to the loop, so the request is written
        before a close already on its way can be processed unseen), else a new one within
        ``timeout_s`` (connect and TLS handshake)."""
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed:
                return conn, True
        return await asyncio.wait_for(self.connect(), timeout_s), False

    def release(self, conn: _Connection) -> None:
        conn.exchange = None
        if conn.closed or len(self.idle) >= self.max_idle:
            conn.close()
        else:
            self.idle.append(conn)

    def close(self) -> None:
        for conn in self.all:
            conn.close()
        self.idle.clear()

    async def aclose(self, grace: float = 1.0) -> None:
        """Close every connection and wait until their sockets are closed (a TLS close_notify
        needs the event loop), aborting those still open after ``grace`` seconds."""
        self.close()
        deadline = asyncio.get_running_loop().time() + grace
        while any(not c.lost for c in self.all) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.005)
        for c in self.all:
            if not c.lost and c.transport is not None:
                c.transport.abort()
        await asyncio.sleep(0)
        self.all.clear()


class StreamClient:
    """``async with StreamClient(url, options, max_connections=C) as c: r = await c.request(spec)``."""

    def __init__(self, endpoint: str, options: ClientOptions, *, max_connections: int) -> None:
        self.endpoint = Endpoint.parse(endpoint)
        self.options = options
        self.path = self.endpoint.path_for(options.api)
        ctx = make_ssl_context(ca_file=options.ca_file, insecure=options.insecure_tls) \
            if self.endpoint.tls else None
        self._pool = _Pool(self.endpoint, ctx, max(1, max_connections))
        self._auth = (f"Authorization: Bearer {options.api_key}\r\n".encode("latin-1")
                      if options.api_key else None)
        self._secret = options.api_key
        self.partial: dict[str, RequestResult] = {}  # results of requests cancelled mid-flight

    def __repr__(self) -> str:
        return f"StreamClient({self.endpoint.scheme}://{self.endpoint.host_header}{self.path})"

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Close every connection now (their sockets close on the next loop iterations)."""
        self._pool.close()

    async def aclose(self) -> None:
        """Close every connection and wait for the sockets to be closed."""
        await self._pool.aclose()

    @property
    def connections_opened(self) -> int:
        return self._pool.opened

    async def warm(self, n: int, *, parallel: int = 32) -> int:
        """Open up to ``n`` idle connections before measuring, ``parallel`` at a time (a burst
        of hundreds of SYNs overflows a listen backlog and costs a 1 s retransmit). Returns how
        many are open; connect errors are left for the requests to report."""
        sem = asyncio.Semaphore(parallel)
        conns: list[_Connection] = []

        async def one() -> None:
            async with sem:
                try:
                    conns.append(await self._pool.connect())
                except OSError:
                    pass

        await asyncio.gather(*(one() for _ in range(max(0, n - len(self._pool.idle)))))
        for c in conns:
            self._pool.release(c)
        return len(self._pool.idle)

    def body_for(self, spec: RequestSpec) -> bytes:
        o = self.options
        body: dict[str, Any] = {"model": o.model, "max_tokens": spec.max_tokens, "stream": True}
        opts: dict[str, Any] = {"include_usage": True}
        if o.continuous_usage:
            opts["continuous_usage_stats"] = True
        body["stream_options"] = opts
        if o.api == "chat":
            body["messages"] = list(spec.messages) if spec.messages else [
                {"role": "user", "content": spec.prompt}]
        elif o.prompt_format == "token_ids":
            body["prompt"] = token_ids(spec.prompt, o.token_id_range)
        else:
            body["prompt"] = spec.prompt
        if o.ignore_eos:
            body["ignore_eos"] = True
        body.update(o.extra_body)
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    async def request(self, spec: RequestSpec) -> RequestResult:
        """Send ``spec`` and read its stream to the end. Never raises for a failed request;
        on cancellation the partial result is left in ``self.partial[spec.request_id]``."""
        loop = asyncio.get_running_loop()
        raw = build_request(self.endpoint, self.path, self.body_for(spec), spec.request_id, self._auth)
        retried = False
        while True:
            t0 = perf_counter_ns()
            got = await self._connect(spec, t0)
            if isinstance(got, RequestResult):
                return got
            conn, reused = got
            connect_ns = perf_counter_ns() - t0
            ex = _Exchange(loop.create_future())
            conn.exchange = ex
            conn.uses += 1
            start = perf_counter_ns()
            assert conn.transport is not None
            try:
                await _write_in_pieces(conn.transport, raw)
            except asyncio.CancelledError:
                conn.close()  # a request half written: the connection is unusable
                self.partial[spec.request_id] = self._fail(spec, start, "cancelled", "cancelled while sending")
                raise
            timer = loop.call_later(self.options.timeout_s, ex.fail, _Timeout(
                f"no complete response within {self.options.timeout_s:g} s"))
            idle = self._watch_idle(loop, ex, start) if self.options.idle_timeout_s else None
            try:
                await ex.future
            except _Lost as exc:
                if reused and not ex.parser.first_byte_ns and not retried:
                    retried = True  # a stale keep-alive connection: the request never left
                    conn.close()
                    continue
                res = self._finish(spec, ex, start, connect_ns, retried, kind="connection_dropped",
                                   message=f"connection dropped after {ex.parser.body_bytes} body bytes: {exc}")
                conn.close()
                return res
            except _Timeout as exc:
                conn.close()
                return self._finish(spec, ex, start, connect_ns, retried, kind="timeout", message=str(exc))
            except ProtocolError as exc:
                conn.close()
                return self._finish(spec, ex, start, connect_ns, retried, kind="protocol_error",
                                    message=str(exc))
            except asyncio.CancelledError:
                conn.close()
                self.partial[spec.request_id] = self._finish(
                    spec, ex, start, connect_ns, retried, kind="cancelled", message="stopped by the runner")
                raise
            finally:
                timer.cancel()
                if idle is not None:
                    idle.cancel()
            keep = ex.parser.keep_alive
            res = self._finish(spec, ex, start, connect_ns, retried)
            self._hand_back(conn, keep)
            return res

    def _hand_back(self, conn: _Connection, keep_alive: bool) -> None:
        if keep_alive:
            self._pool.release(conn)
        else:
            conn.close()

    async def _connect(self, spec: RequestSpec, t0: int) -> Union[tuple[_Connection, bool], RequestResult]:
        """A connection (and whether it was reused), or the failed request's result. An idle
        connection comes back without yielding to the loop (``_Pool.acquire``)."""
        try:
            # the timeout covers the connection (and TLS handshake) too
            return await self._pool.acquire(self.options.timeout_s)
        except asyncio.CancelledError:
            self.partial[spec.request_id] = self._fail(spec, t0, "cancelled", "cancelled before sending")
            raise
        except asyncio.TimeoutError:
            return self._fail(spec, t0, "timeout", f"no connection to {self.endpoint.host_header} within "
                                                   f"{self.options.timeout_s:g} s")
        except (OSError, ssl.SSLError) as exc:
            return self._fail(spec, t0, "connect_failed", f"connect to {self.endpoint.host_header}: {exc}")

    def _watch_idle(self, loop: asyncio.AbstractEventLoop, ex: _Exchange, start: int) -> asyncio.TimerHandle:
        limit = self.options.idle_timeout_s or 0.0
        holder: list[asyncio.TimerHandle] = []

        def check() -> None:
            last = ex.parser.last_byte_ns or start
            quiet = (perf_counter_ns() - last) / 1e9
            if quiet >= limit:
                ex.fail(_Timeout(f"no byte for {limit:g} s (idle timeout)"))
            else:
                holder[0] = loop.call_later(limit - quiet, check)

        holder.append(loop.call_later(limit, check))

        class _Cancel:
            def cancel(self) -> None:
                holder[0].cancel()

        return _Cancel()  # type: ignore[return-value]

    def _fail(self, spec: RequestSpec, t0: int, kind: str, message: str) -> RequestResult:
        now = perf_counter_ns()
        return RequestResult(request_id=spec.request_id, status="cancelled" if kind == "cancelled" else "error",
                             start_ns=t0, end_ns=now, error_kind=kind, error=self._redact(message),
                             input_tokens=spec.input_tokens)

    def _finish(self, spec: RequestSpec, ex: _Exchange, start: int, connect_ns: int, retried: bool,
                *, kind: Optional[str] = None, message: Optional[str] = None) -> RequestResult:
        p = ex.parser
        end = p.last_byte_ns or perf_counter_ns()
        res = RequestResult(request_id=spec.request_id, status="ok", start_ns=start, end_ns=end,
                            http_status=p.status or None, input_tokens=spec.input_tokens,
                            connect_ms=connect_ns / 1e6, retried=retried)
        if p.status and p.status != 200:
            res.status, res.error_kind = "error", f"http_{p.status}"
            res.error = self._redact(_http_error_text(p))
            return res
        tl = StreamTimeline(self.options.api, keep_text=self.options.keep_text)
        try:
            if "text/event-stream" in p.headers.get("content-type", "") or not p.headers_done:
                tl.feed_pieces(p.pieces)
            else:
                _non_streaming(tl, p)
        except ResponseShapeError as exc:
            kind = kind or "bad_response"
            message = message or str(exc)
        except ValueError as exc:
            kind = kind or "protocol_error"
            message = message or str(exc)
        except (TypeError, AttributeError, KeyError, IndexError, RecursionError, OverflowError) as exc:
            # whatever a server sends is a recorded error of this request, never a crash of the run
            kind = kind or "bad_response"
            message = message or f"unreadable response: {type(exc).__name__}: {str(exc)[:200]}"
        self._timeline_into(res, tl, start)
        if kind is None:
            if tl.error is not None:
                kind, message = "error_event", f"error event mid-stream: {tl.error}"
            elif not tl.first_ns:
                kind, message = "no_output", "the stream ended without any generated text"
        if kind is not None:
            res.status = "cancelled" if kind == "cancelled" else "error"
            res.error_kind = kind
            res.error = self._redact(message or kind)
        return res

    def _timeline_into(self, res: RequestResult, tl: StreamTimeline, start: int) -> None:
        if tl.prompt_tokens is not None:
            res.input_tokens = tl.prompt_tokens
        res.server_usage = tl.completion_tokens is not None
        res.output_tokens = tl.output_tokens
        res.counted_tokens = tl.counted
        res.chunks = tl.chunks
        if tl.keep_text:
            res.text = "".join(tl.text_parts)
        if tl.first_ns:
            first = tl.first_token_ns or tl.first_ns  # the token chunk comes at or before the first text
            res.first_token_ns = first
            res.ttft_ms = (first - start) / 1e6
            last = max(tl.last_choice_ns, tl.last_text_ns)
            res.e2el_ms = (last - start) / 1e6
            res.itl_ms = [x / 1e6 for x in tl.itl_ns]
            if res.output_tokens > 1:
                res.tpot_ms = (res.e2el_ms - res.ttft_ms) / (res.output_tokens - 1)


_WRITE_PIECE = 64 * 1024


async def _write_in_pieces(transport: asyncio.Transport, raw: bytes) -> None:
    """Write a request; a large one (a 128K-token prompt is ~700 KB) in pieces with the loop run
    between them: on loopback one write of the whole body held the loop for tens of milliseconds,
    and every stream in flight was stamped late behind it (``make bench-ttft``, 128K row). The
    first piece is written without yielding (see ``_Pool.acquire``)."""
    if len(raw) <= _WRITE_PIECE:
        transport.write(raw)
        return
    view = memoryview(raw)
    for at in range(0, len(raw), _WRITE_PIECE):
        if at:
            await asyncio.sleep(0)
        transport.write(view[at:at + _WRITE_PIECE])


def _http_error_text(p: ResponseParser) -> str:
    body = p.body()[:4096].decode("utf-8", "replace")
    detail = body.strip()[:300]
    try:
        obj = json.loads(body)
        if isinstance(obj, dict):
            err = obj.get("error", obj)
            if isinstance(err, dict):
                detail = str(err.get("message") or err.get("detail") or err)[:300]
            else:
                detail = str(err)[:300]
    except ValueError:
        pass
    return f"HTTP {p.status} {p.reason}: {detail}".rstrip(": ")


def _non_streaming(tl: StreamTimeline, p: ResponseParser) -> None:
    """A server that ignored ``stream: true`` and sent one JSON body: one chunk at its last byte."""
    obj = json.loads(p.body() or b"{}")
    for choice in obj.get("choices") or () if isinstance(obj, dict) else ():
        if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
            choice["delta"] = choice["message"]  # a chat completion: read its message as one delta
    block = b"data: " + json.dumps(obj).encode()
    tl.on_event(p.last_byte_ns, block)
