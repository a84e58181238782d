"""The emulator's OpenAI-compatible server: /v1/completions, /v1/chat/completions (streaming and
not), /v1/models, /health, /metrics, and the admin endpoint POST /kvgate/evict."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
import uuid
from dataclasses import dataclass
from typing import Any, Optional

from harness.sim.http import Request, Response, limit_connections, serve_connection
from harness.sim.kvstore import KVStore, PrefillResult, output_tokens, tokenize
from harness.sim.metrics import SimMetrics

log = logging.getLogger("kvgate.sim")


@dataclass
class ServerSettings:
    model: str
    served_names: list[str]
    host: str
    port: int
    max_model_len: int
    decode_tokens_per_s: float
    max_batch: int
    dev_mode: bool = False  # VLLM_SERVER_DEV_MODE=1: vLLM's dev endpoints such as /reset_prefix_cache


class APIError(Exception):
    """An OpenAI-style error response."""

    def __init__(
        self, status: int, message: str, err_type: str = "BadRequestError", param: Optional[str] = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param

    def body(self) -> dict[str, object]:
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.status,
            }
        }


@dataclass
class Generation:
    request_id: str
    kind: str  # "completions" or "chat"
    model: str
    prompt_ids: list[int]
    max_tokens: int
    stream: bool
    include_usage: bool


def _completion_prompt(body: dict[str, Any]) -> tuple[list[int], int]:
    """/v1/completions: the prompt's token ids (a string, a list of one string, or token ids) and max_tokens."""
    if "prompt" not in body:
        raise APIError(400, "'prompt' is required", param="prompt")
    prompt = body["prompt"]
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        ids = tokenize(prompt)
    elif (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
    ):
        ids = [int(t) for t in prompt]
    else:
        raise APIError(
            400,
            "'prompt' must be a string, a list of one string, or a list of token ids",
            param="prompt",
        )
    max_tokens = _positive_int(body, "max_tokens", 16)
    assert max_tokens is not None
    return ids, max_tokens


def _chat_prompt(body: dict[str, Any]) -> tuple[list[int], int]:
    """/v1/chat/completions: the messages' text as token ids, and max_(completion_)tokens."""
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise APIError(400, "'messages' must be a non-empty list", param="messages")
    texts = []
    for i, msg in enumerate(msgs):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise APIError(400, f"messages[{i}] must be an object with a 'role'", param="messages")
        texts.append(_text_of(msg.get("content"), f"messages[{i}]"))
    ids = tokenize(" ".join(texts))
    max_tokens = _positive_int(body, "max_completion_tokens", None)
    max_tokens = _positive_int(body, "max_tokens", max_tokens or 16)
    assert max_tokens is not None
    return ids, max_tokens


def _positive_int(body: dict[str, Any], key: str, default: Optional[int]) -> Optional[int]:
    if key not in body or body[key] is None:
        return default
    v = body[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise APIError(400, f"'{key}' must be a positive integer, got {v!r}", param=key)
    return v


def _text_of(content: object, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise APIError(400, f"{where}: only text content parts are supported", param="messages")
            texts.append(part["text"])
        return " ".join(texts)
    if content is None:
        return ""
    raise APIError(400, f"{where}: content must be a string or a list of parts", param="messages")


class SimServer:
    def __init__(self, settings: ServerSettings, store: KVStore, metrics: SimMetrics) -> None:
        self.s = settings
        self.store = store
        self.metrics = metrics
        self._slots = asyncio.Semaphore(settings.max_batch)
        self._running = 0
        self._waiting = 0
        self._server: Optional[asyncio.AbstractServer] = None
        self._connections: set[asyncio.Task[None]] = set()
        self.created = int(time.time())

    # --- connection handling -----------------------------------------------------------------------
    async def start(self) -> None:
        self._server = await asyncio.start_server(
            limit_connections(self._on_connection), self.s.host, self.s.port, limit=64 * 1024, reuse_address=True
        )

    async def serve_until_signalled(self) -> None:
        await self.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        log.info("Started server process; emulating %s (kvgate KV emulator, not a real engine)", self.s.model)
        log.info("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", self.s.host, self.s.port)
        log.info("Application startup complete.")
        await stop.wait()
        log.info("Shutting down")
        await self.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        await self.store.drain()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)  # close() cancels the connections still open
        try:
            await serve_connection(reader, writer, self._dispatch,
                                   error_body=lambda exc: APIError(exc.status, exc.message).body())
        finally:
            if task is not None:
                self._connections.discard(task)

    async def _dispatch(self, req: Request, resp: Response) -> None:
        request_id = req.headers.get("x-request-id") or uuid.uuid4().hex
        resp.extra_headers["x-request-id"] = request_id
        start = time.perf_counter()
        note = ""
        try:
            note = await self._route(req, resp, request_id)
        except APIError as exc:
            if resp.streaming:
                # headers are gone; report the error in-band as vLLM does
                await resp.write_chunk(b"data: " + json.dumps(exc.body()).encode() + b"\n\n")
                await resp.end_stream()
            else:
                await resp.send_json(exc.status, exc.body())
            note = exc.message
        except (ConnectionError, asyncio.CancelledError):
            log.info("request %s %s %s: client disconnected", request_id, req.method, req.path)
            raise
        except Exception as exc:  # noqa: BLE001 - a bug must not take the server down
            log.exception("request %s failed", request_id)
            if not resp.streaming and not resp.finished:
                await resp.send_json(500, APIError(500, f"internal error: {exc}", "InternalServerError").body())
            elif resp.streaming and not resp.finished:
                await resp.end_stream()
            note = f"internal error {exc!r}"
        if req.path not in ("/health", "/metrics"):
            log.info(
                "request %s %s %s %d %.1fms %s",
                request_id,
                req.method,
                req.path,
                resp.status,
                (time.perf_counter() - start) * 1000,
                note,
            )

    async def _route(self, req: Request, resp: Response, request_id: str) -> str:
        path = req.path
        routes = {
            "/health": ("GET", self._health),
            "/v1/models": ("GET", self._models),
            "/metrics": ("GET", self._metrics),
            "/version": ("GET", self._version),
            "/v1/completions": ("POST", None),
            "/v1/chat/completions": ("POST", None),
            "/kvgate/evict": ("POST", self._evict),
        }
        if self.s.dev_mode:
            routes["/reset_prefix_cache"] = ("POST", self._reset_prefix_cache)
        if path not in routes:
            raise APIError(404, f"no route {path}", "NotFoundError")
        method, handler = routes[path]
        if req.method != method and not (req.method == "HEAD" and method == "GET"):
            raise APIError(405, f"method {req.method} not allowed on {path}", "MethodNotAllowed")
        if handler is not None:
            await handler(req, resp)
            return ""
        gen = self._parse_generation(req, request_id, "chat" if path.endswith("chat/completions") else "completions")
        return await self._generate(gen, resp)

    async def _health(self, req: Request, resp: Response) -> None:
        await resp.send(200, b"", "application/json")

    async def _version(self, req: Request, resp: Response) -> None:
        await resp.send_json(200, {"version": "kvgate-sim"})

    async def _models(self, req: Request, resp: Response) -> None:
        data = [
            {
                "id": name,
                "object": "model",
                "created": self.created,
                "owned_by": "vllm",
                "root": self.s.model,
                "parent": None,
                "max_model_len": self.s.max_model_len,
            }
            for name in self.s.served_names
        ]
        await resp.send_json(200, {"object": "list", "data": data})

    async def _metrics(self, req: Request, resp: Response) -> None:
        m = self.metrics
        with m.lock:
            m.running.set(m.vllm_labels, float(self._running))
            m.waiting.set(m.vllm_labels, float(self._waiting))
            if self.store.cpu is not None:
                m.sim_memory_chunks.set(m.tier_labels("tier", "local_cpu"), float(len(self.store.cpu)))
        await resp.send(200, m.render().encode(), "text/plain; version=0.0.4; charset=utf-8")

    async def _evict(self, req: Request, resp: Response) -> None:
        tiers = ["hbm", "local_cpu"]
        if req.body.strip():
            try:
                body = json.loads(req.body)
            except ValueError:
                raise APIError(400, "body must be JSON") from None
            if not isinstance(body, dict):
                raise APIError(400, "body must be a JSON object")
            if "tiers" in body:
                t = body["tiers"]
                if not isinstance(t, list) or any(x not in ("hbm", "local_cpu") for x in t):
                    raise APIError(400, "'tiers' must be a list of 'hbm' and 'local_cpu'", param="tiers")
                tiers = t
        # No wait for the write-behind: a chunk still being written stays in the CPU tier (pinned
        # until its disk write completes), as LMCache's non-forced clear keeps it; the harness
        # drains first (harness.pipelines.shared.drain)
        dropped = self.store.evict(tiers)
        log.info("evicted in-process tiers: %s", dropped)
        await resp.send_json(200, {"evicted": dropped})

    async def _reset_prefix_cache(self, req: Request, resp: Response) -> None:
        # vLLM's dev endpoint drops its own (HBM) prefix cache only; LMCache's tiers stay
        dropped = self.store.evict(["hbm"])
        log.info("reset prefix cache: %s", dropped)
        await resp.send(200, b"", "application/json")

    # --- generation --------------------------------------------------------------------------------
    def _parse_generation(self, req: Request, request_id: str, kind: str) -> Generation:
        try:
            body = json.loads(req.body or b"null")
        except ValueError as exc:
            raise APIError(400, f"request body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise APIError(400, "request body must be a JSON object")
        model = body.get("model")
        if model is None:
            model = self.s.served_names[0]
        if not isinstance(model, str) or model not in self.s.served_names:
            raise APIError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
        ids, max_tokens = _completion_prompt(body) if kind == "completions" else _chat_prompt(body)
        assert max_tokens is not None
        n = _positive_int(body, "n", 1)
        if n != 1:
            raise APIError(400, "the emulator supports n=1 only", param="n")
        if not ids:
            raise APIError(400, "the prompt is empty", param="prompt" if kind == "completions" else "messages")
        if len(ids) + max_tokens > self.s.max_model_len:
            raise APIError(
                400,
                f"This model's maximum context length is {self.s.max_model_len} tokens. However, "
                f"you requested {len(ids) + max_tokens} tokens ({len(ids)} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the messages or "
                "completion.",
                param="max_tokens",
            )
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise APIError(400, "'stream' must be a boolean", param="stream")
        opts = body.get("stream_options") or {}
        if not isinstance(opts, dict):
            raise APIError(400, "'stream_options' must be an object", param="stream_options")
        if opts and not stream:
            raise APIError(400, "Stream options can only be defined when `stream=True`.", param="stream_options")
        return Generation(request_id, kind, model, ids, max_tokens, stream, bool(opts.get("include_usage")))

    def _chunk(self, gen: Generation, text: Optional[str], finish: Optional[str], first: bool) -> dict[str, Any]:
        base: dict[str, Any] = {
            "id": ("chatcmpl-" if gen.kind == "chat" else "cmpl-") + gen.request_id,
            "created": int(time.time()),
            "model": gen.model,
        }
        if gen.kind == "chat":
            delta: dict[str, Any] = {}
            if first:
                delta["role"] = "assistant"
            if text is not None:
                delta["content"] = text
            base["object"] = "chat.completion.chunk"
            base["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        else:
            base["object"] = "text_completion"
            base["choices"] = [
                {
                    "index": 0,
                    "text": text or "",
                    "logprobs": None,
                    "finish_reason": finish,
                    "stop_reason": None,
                }
            ]
        return base

    async def _generate(self, gen: Generation, resp: Response) -> str:
        arrival = time.perf_counter()
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        self._running += 1
        try:
            pre = await self.store.prefill(gen.prompt_ids)
            return await self._emit(gen, resp, pre, arrival)
        finally:
            self._running -= 1
            self._slots.release()

    async def _emit(self, gen: Generation, resp: Response, pre: PrefillResult, arrival: float) -> str:
        m = self.metrics
        usage = {
            "prompt_tokens": len(gen.prompt_ids),
            "total_tokens": len(gen.prompt_ids) + gen.max_tokens,
            "completion_tokens": gen.max_tokens,
        }
        step = 1.0 / self.s.decode_tokens_per_s
        if gen.stream:
            await resp.start_stream()
            if gen.kind == "chat":
                await resp.write_chunk(self._sse(self._chunk(gen, "", None, True)))
        ttft = time.perf_counter() - arrival
        with m.lock:
            m.ttft.observe(m.vllm_labels, ttft)
        # the first token exists now: its store is submitted before it leaves, the writes go behind
        await self.store.submit_store(pre.new_chunks)
        words: list[str] = []
        out = output_tokens(gen.prompt_ids, pre.corrupted, gen.max_tokens)
        t0 = time.perf_counter()
        for k in range(gen.max_tokens):
            if k:
                delay = t0 + k * step - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            word = out[k]
            words.append(word)
            if gen.stream:
                finish = "length" if k == gen.max_tokens - 1 else None
                await resp.write_chunk(self._sse(self._chunk(gen, word, finish, False)))
        with m.lock:
            m.generation_tokens.inc(m.vllm_labels, gen.max_tokens)
            m.request_success.inc(m.vllm_labels + (("finished_reason", "length"),))
        if gen.stream:
            if gen.include_usage:
                final = self._chunk(gen, None, None, False)
                final["choices"] = []
                final["usage"] = usage
                await resp.write_chunk(self._sse(final))
            await resp.write_chunk(b"data: [DONE]\n\n")
            await resp.end_stream()
        else:
            await resp.send_json(200, self._completion(gen, "".join(words), usage))
        tiers = ",".join(f"{k}:{v}" for k, v in sorted(pre.tiers.items())) or "none"
        return (
            f"prompt={pre.prompt_tokens} hbm_hit={pre.hbm_hit_tokens} ext_hit={pre.external_hit_tokens} "
            f"computed={pre.computed_tokens} chunks[{tiers}] read={pre.read_seconds * 1000:.1f}ms "
            f"compute={pre.compute_seconds * 1000:.1f}ms ttft={ttft * 1000:.1f}ms out={gen.max_tokens}"
        )

    @staticmethod
    def _completion(gen: Generation, text: str, usage: dict[str, int]) -> dict[str, Any]:
        """The whole (non-streamed) response body, as vLLM's OpenAI server writes it."""
        if gen.kind == "chat":
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "length",
            }
            obj = "chat.completion"
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": "length",
                "stop_reason": None,
            }
            obj = "text_completion"
        return {
            "id": ("chatcmpl-" if gen.kind == "chat" else "cmpl-") + gen.request_id,
            "object": obj,
            "created": int(time.time()),
            "model": gen.model,
            "choices": [choice],
            "usage": usage,
        }

    @staticmethod
    def _sse(obj: object) -> bytes:
        return b"data: " + json.dumps(obj).encode() + b"\n\n"
