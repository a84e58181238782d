"""Finding 4: load client hangs and crashes.

A chunk size of ``-6`` looped forever eating memory, ``--timeout`` was ignored; ``{"choices":"x"}``,
``[1]`` and ``completion_tokens: 1e12`` crashed the run (exit 5, no records.jsonl); a header flood
ran 30 s past the timeout. Now each is one request's recorded error with its kind, within the
timeout, and the run keeps its records. Property tests drive the HTTP and SSE parsers with
arbitrary bytes and split points: only their own typed errors escape and buffers stay bounded."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.load.client import ClientOptions, RequestResult, StreamClient
from harness.load.http import MAX_HEAD_BYTES, ProtocolError, ResponseParser
from harness.load.records import read_records
from harness.load.runner import LoadConfig, run_load
from harness.load.spec import RequestSpec
from harness.load.sse import MAX_EVENT_BYTES, SSEDecoder, StreamTimeline
from tests.load.sse_server import SSE_HEAD, ScriptedServer, chunk, completion_chunk, event

SPEC = RequestSpec("req-1", "alpha beta gamma", 3, 4)


def _one(server: ScriptedServer, timeout: float = 5.0) -> tuple[RequestResult, float]:
    async def go() -> RequestResult:
        async with StreamClient(server.url, ClientOptions(model="m", timeout_s=timeout), max_connections=1) as c:
            return await c.request(SPEC)

    t0 = time.monotonic()
    res = asyncio.run(go())
    return res, time.monotonic() - t0


def test_negative_chunk_size_is_a_protocol_error_not_a_loop() -> None:
    with ScriptedServer() as server:
        server.script = lambda r: [SSE_HEAD, b"-6\r\nabcdef\r\n", ("sleep", 30)]
        res, took = _one(server)
    assert res.error_kind == "protocol_error" and "chunk-size" in (res.error or "") and took < 3


def test_header_flood_and_trickle_end_within_the_timeout() -> None:
    with ScriptedServer() as server:
        server.script = lambda r: [b"HTTP/1.1 200 OK\r\n"] + [b"X-Flood: " + b"a" * 1000 + b"\r\n"] * 200 + [
            ("sleep", 30)]
        res, took = _one(server)
        assert res.error_kind == "protocol_error" and "longer than" in (res.error or "") and took < 3
        server.script = lambda r: [b"HTTP/1.1 100 Continue\r\n\r\n"] * 50 + [("sleep", 30)]
        res, took = _one(server)
        assert res.error_kind == "protocol_error" and "interim" in (res.error or "")
        server.script = lambda r: [a for _ in range(200) for a in (b"X", ("sleep", 0.05))]
        res, took = _one(server, timeout=1.0)
        assert res.error_kind == "timeout" and took < 2.5


def test_bad_shapes_are_recorded_errors_and_the_run_keeps_its_records(tmp_path: Path) -> None:
    bodies: list[Any] = [{"choices": "x"}, [1], {"choices": [1]},
                         {"choices": [{"text": "a"}], "usage": {"completion_tokens": 10**12}},
                         {"choices": [{"text": "a"}], "usage": {"completion_tokens": 1e12}},
                         {"choices": [{"text": ["a"]}]}]
    with ScriptedServer() as server:
        n = {"i": 0}

        def script(r: Any) -> list[Any]:
            body = bodies[n["i"] % len(bodies)]
            n["i"] += 1
            return [SSE_HEAD, chunk(event(completion_chunk("ok "))), chunk(b"data: " + json.dumps(body).encode()
                                                                          + b"\n\n"), b"0\r\n\r\n"]

        server.script = script
        cfg = LoadConfig(endpoint=server.url, model="m", progress=False, concurrency=1, run_warmup=False,
                         workload_params={"num_requests": len(bodies), "input_len": 4, "output_len": 2})
        summary = run_load(cfg, tmp_path)
    recs = read_records(tmp_path / "records.jsonl")
    assert len(recs) == len(bodies) and summary["failed"] == len(bodies)
    assert {r["error_kind"] for r in recs} == {"bad_response"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096), st.lists(st.integers(min_value=0, max_value=4096), max_size=20))
def test_response_parser_takes_arbitrary_bytes(data: bytes, cuts: list[int]) -> None:
    p = ResponseParser(max_body=1 << 16)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    try:
        for a, b in zip(points, points[1:]):
            p.feed(data[a:b], 1)
            assert len(p.buf) <= MAX_HEAD_BYTES and p.body_bytes <= 1 << 16
        p.eof()
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"HTTP/1.1 200 OK\r\n", b"Transfer-Encoding: chunked\r\n", b"\r\n",
                                 b"Content-Length: 5\r\n", b"5\r\nhello\r\n", b"-6\r\n", b"0\r\n\r\n",
                                 b"ffffffffffffffffff\r\n", b"HTTP/1.1 100 Continue\r\n\r\n", b"x", b"\r"]),
                max_size=30), st.integers(min_value=1, max_value=7))
def test_response_parser_takes_framing_fragments(parts: list[bytes], step: int) -> None:
    data = b"".join(parts)
    p = ResponseParser(max_body=1 << 16)
    try:
        for i in range(0, len(data), step):
            p.feed(data[i:i + step], i)
    except ProtocolError:
        pass
    assert p.body_bytes <= 1 << 16


_json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                            lambda c: st.lists(c, max_size=3) | st.dictionaries(
                                st.sampled_from(["choices", "text", "delta", "content", "usage",
                                                 "completion_tokens", "prompt_tokens", "error",
                                                 "finish_reason"]), c, max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(_json_values, max_size=6), st.sampled_from(["completions", "chat"]))
def test_timeline_takes_arbitrary_json_shapes(values: list[Any], api: str) -> None:
    body = b"".join(b"data: " + json.dumps(v).encode() + b"\n\n" for v in values)
    tl = StreamTimeline(api)
    try:
        tl.feed_pieces([(i + 1, body[i:i + 7]) for i in range(0, len(body), 7)])
    except ValueError:
        pass  # ResponseShapeError / malformed JSON: the client records it as the request's error
    assert tl.counted <= 1_000_000


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048), st.integers(min_value=1, max_value=64))
def test_sse_decoder_takes_arbitrary_bytes(data: bytes, step: int) -> None:
    dec = SSEDecoder()
    tl = StreamTimeline("completions")
    try:
        for i in range(0, len(data), step):
            for block in dec.feed(data[i:i + step]):
                tl.on_event(i, block)
        for block in dec.flush():
            tl.on_event(0, block)
    except ValueError:
        pass


def test_sse_event_size_is_bounded() -> None:
    dec = SSEDecoder()
    try:
        for _ in range(MAX_EVENT_BYTES // 65536 + 2):
            dec.feed(b"data: " + b"a" * 65536)
    except ValueError as exc:
        assert "longer than" in str(exc)
    else:
        raise AssertionError("an endless event was buffered without limit")
