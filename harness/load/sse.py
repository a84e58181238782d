"""Server-sent events of an OpenAI-compatible stream, and what they say about timing.

``SSEDecoder`` splits a byte stream into events wherever the pieces were cut (inside a field
name, between ``\\r`` and ``\\n``, in the middle of a UTF-8 sequence). ``StreamTimeline`` reads
the events of one response, each dated by the arrival of the piece that completed it, and derives
TTFT, per-token ITL, E2EL, token counts, usage and mid-stream errors.

Token counting rule (documented in the record as ``token_rule``):

1. ``usage`` in a chunk that also carries choices (vLLM ``continuous_usage_stats``): the chunk
   holds ``completion_tokens`` minus the previous value tokens (exact).
2. Otherwise a chunk holding generated text counts ``max(1, number of whitespace-separated words)``
   tokens: exact for the kvgate KV emulator (one word = one token) and for vLLM's usual one token
   per chunk; a multi-word chunk counts each word.
3. The final ``usage.completion_tokens`` (``stream_options.include_usage``), when the server sends
   it, is the request's ``output_tokens``; the per-chunk counts only spread the ITL.

Per-token ITL: a chunk with k tokens that arrives g after the previous text chunk adds k values of
g/k; extra tokens in the first text chunk add zeros (they arrived with the first token). So
``sum(itl) == last text chunk - first text chunk`` and ``len(itl) == counted tokens - 1``.
"""

from __future__ import annotations

import json
from typing import Any, Optional

# Limits on what one stream may claim (a hostile or broken server gets a recorded error, never
# unbounded memory): one SSE event, and the tokens one request may report.
MAX_EVENT_BYTES = 4 * 2**20
MAX_COMPLETION_TOKENS = 1_000_000


class ResponseShapeError(ValueError):
    """A JSON value in the stream that is not shaped like an OpenAI completion chunk."""


def _count(value: Any, what: str) -> Optional[int]:
    """A token count from ``usage``: a non-negative int within bounds, None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResponseShapeError(f"usage.{what} is {value!r}, not an integer")
    if not 0 <= value <= MAX_COMPLETION_TOKENS:
        raise ResponseShapeError(f"usage.{what} = {value} is outside 0..{MAX_COMPLETION_TOKENS}")
    return value


class SSEDecoder:
    """Incremental splitter of an event stream into raw event blocks (lines joined by ``\\n``)."""

    __slots__ = ("_buf", "_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._cr = False  # the last piece ended in "\r": it may be half of "\r\n"

    def feed(self, data: bytes) -> list[bytes]:
        if self._cr:
            data = b"\r" + data
            self._cr = False
        if b"\r" in data:
            if data.endswith(b"\r"):
                data = data[:-1]
                self._cr = True
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._buf:
            data = self._buf + data
        if b"\n\n" not in data:
            if len(data) > MAX_EVENT_BYTES:
                raise ResponseShapeError(f"an SSE event longer than {MAX_EVENT_BYTES} bytes")
            self._buf = data
            return []
        parts = data.split(b"\n\n")
        self._buf = parts.pop()
        if len(self._buf) > MAX_EVENT_BYTES:
            raise ResponseShapeError(f"an SSE event longer than {MAX_EVENT_BYTES} bytes")
        return [p for p in parts if p.strip(b"\n")]

    def flush(self) -> list[bytes]:
        """Events left at the end of the stream without their blank line (lenient)."""
        rest = self._buf + (b"\n" if self._cr else b"")
        self._buf = b""
        self._cr = False
        return [rest] if rest.strip(b"\n") else []


def parse_event(block: bytes) -> tuple[str, bytes]:
    """``(event type, data)`` of one raw event block; comment lines are skipped."""
    if block.startswith(b"data: ") and b"\n" not in block:
        return "message", block[6:]
    event = "message"
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value.decode("utf-8", "replace")
    return event, b"\n".join(data)


def _error_text(obj: Any) -> str:
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or json.dumps(err)[:300]
            code = err.get("code") or err.get("type")
            return f"{msg} ({code})" if code else str(msg)
        return str(err)
    return str(obj)


_raw_decode = json.JSONDecoder().raw_decode


def _json(data: bytes) -> Any:
    """``json.loads`` without its per-call overhead (encoding sniffing, regex whitespace skips):
    the decoder's C scanner on the text, then nothing but whitespace may follow."""
    text = data.decode("utf-8").strip()
    obj, end = _raw_decode(text)
    if end != len(text):
        raise ValueError("extra data after the JSON value")
    return obj


def _coalesced(pieces: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Join pieces that arrived together (one socket read holding several HTTP chunks)."""
    if len(pieces) < 2:
        return pieces
    out: list[tuple[int, bytes]] = []
    group: list[bytes] = []
    cur = pieces[0][0]
    for t, b in pieces:
        if t != cur:
            out.append((cur, b"".join(group) if len(group) > 1 else group[0]))
            group = []
            cur = t
        group.append(b)
    out.append((cur, b"".join(group) if len(group) > 1 else group[0]))
    return out


class StreamTimeline:
    """Timing and content of one streamed completion, built from dated SSE events."""

    __slots__ = ("api", "first_ns", "first_token_ns", "last_text_ns", "last_choice_ns", "itl_ns", "counted", "chunks",
                 "prompt_tokens", "completion_tokens", "done", "error", "text_parts", "keep_text",
                 "_usage_ct", "finish_reason")

    def __init__(self, api: str, keep_text: bool = False) -> None:
        self.api = api
        self.first_ns = 0  # the first chunk with text
        # The first chunk that carries a generated token, with text or not: a token whose text the
        # server holds back (an incomplete UTF-8 sequence, a special token) still ends the prefill.
        # ``vllm bench serve`` stamps TTFT there; stamping at the first text added one inter-token
        # gap whenever the first token had no text of its own (a random-weights model's often has
        # none). A chat stream's role-only chunk is not a token: some servers send it before the
        # prefill.
        self.first_token_ns = 0
        self.last_text_ns = 0
        self.last_choice_ns = 0
        self.itl_ns: list[float] = []
        self.counted = 0
        self.chunks = 0
        self.prompt_tokens: Optional[int] = None
        self.completion_tokens: Optional[int] = None
        self.done = False
        self.error: Optional[str] = None
        self.keep_text = keep_text
        self.text_parts: list[str] = []
        self._usage_ct = 0
        self.finish_reason: Optional[str] = None

    def feed_pieces(self, pieces: list[tuple[int, bytes]]) -> None:
        """Decode a whole body given as ``(arrival_ns, bytes)`` pieces."""
        dec = SSEDecoder()
        t = 0
        for t, piece in _coalesced(pieces):
            for block in dec.feed(piece):
                self.on_event(t, block)
        for block in dec.flush():
            self.on_event(t, block)

    def on_event(self, t: int, block: bytes) -> None:
        event, data = parse_event(block)
        if not data:
            return
        if data == b"[DONE]":
            self.done = True
            return
        try:
            obj = _json(data)
        except ValueError:
            if event == "error":
                self.error = data.decode("utf-8", "replace")[:500]
                return
            raise ValueError(f"malformed JSON in SSE event: {data[:80]!r}") from None
        if event == "error" or (isinstance(obj, dict) and "error" in obj and not obj.get("choices")):
            if self.error is None:
                self.error = _error_text(obj)[:500]
            return
        if not isinstance(obj, dict):
            raise ResponseShapeError(f"a stream chunk is a JSON {type(obj).__name__}, not an object")
        usage = obj.get("usage")
        if usage is not None and not isinstance(usage, dict):
            raise ResponseShapeError(f"usage is {type(usage).__name__}, not an object")
        choices = obj.get("choices")
        if choices is not None and not isinstance(choices, list):
            raise ResponseShapeError(f"choices is {type(choices).__name__}, not a list")
        if choices:
            self._on_choice(t, choices[0], usage)
        if usage:
            pt = _count(usage.get("prompt_tokens"), "prompt_tokens")
            ct = _count(usage.get("completion_tokens"), "completion_tokens")
            if pt is not None:
                self.prompt_tokens = pt
            if ct is not None:
                self.completion_tokens = ct

    def _on_choice(self, t: int, c0: Any, usage: Optional[dict[str, Any]]) -> None:
        """The first choice of a chunk: its text (the delta's for chat), finish reason, first token."""
        self.last_choice_ns = t
        if not isinstance(c0, dict):
            raise ResponseShapeError(f"choices[0] is {type(c0).__name__}, not an object")
        if self.api == "chat":
            delta = c0.get("delta") or {}
            if not isinstance(delta, dict):
                raise ResponseShapeError(f"choices[0].delta is {type(delta).__name__}, not an object")
            text = delta.get("content") or delta.get("reasoning_content") or ""
        else:
            text = c0.get("text") or ""
        if not isinstance(text, str):
            raise ResponseShapeError(f"the generated text is {type(text).__name__}, not a string")
        reason = c0.get("finish_reason")
        if reason:
            self.finish_reason = str(reason)[:64]
        if not self.first_token_ns and (text or not (self.api == "chat" and "role" in (c0.get("delta") or {}))):
            self.first_token_ns = t
        if text:
            self._on_text(t, text, usage)

    def _on_text(self, t: int, text: str, usage: Optional[dict[str, Any]]) -> None:
        """Count the chunk's tokens (the usage's completion count when it grows, else its words) and
        spread the gap since the last text over them (ITL per token)."""
        self.chunks += 1
        ct = _count(usage.get("completion_tokens"), "completion_tokens") if usage else None
        if ct is not None and ct > self._usage_ct:
            k = ct - self._usage_ct
            self._usage_ct = ct
        else:
            k = len(text.split()) or 1
        if self.counted + k > MAX_COMPLETION_TOKENS:
            raise ResponseShapeError(f"more than {MAX_COMPLETION_TOKENS} tokens in one response")
        if self.keep_text:
            self.text_parts.append(text)
        if not self.first_ns:
            self.first_ns = t
            if k > 1:
                self.itl_ns.extend([0.0] * (k - 1))
        else:
            gap = (t - self.last_text_ns) / k
            self.itl_ns.extend([gap] * k)
        self.last_text_ns = t
        self.counted += k

    @property
    def output_tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None else self.counted
