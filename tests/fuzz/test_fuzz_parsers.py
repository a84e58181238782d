"""Every parser of outside input takes arbitrary input: only its own typed error escapes, never a
crash, a hang or unbounded memory. Inputs are random bytes/text and mutations of real captured
outputs (tests/data), so the fuzzer also reaches the deep paths."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from harness.config.yamlsource import mask_secret_values, parse_yaml
from harness.engines.prometheus import MetricsParseError, parse
from harness.errors import ConfigError
from harness.load.http import ProtocolError, ResponseParser
from harness.load.sse import StreamTimeline
from harness.probes.fio_parse import FioParseError, parse_fio_output
from harness.sim.http import HTTPError, Limits, read_request

DATA = Path(__file__).resolve().parent.parent / "data"
FIO_SAMPLES = sorted((DATA / "fio").glob("*.json"))
FIO_TEXTS = [p.read_text(errors="replace") for p in FIO_SAMPLES] or ['{"fio version": "fio-3.33", "jobs": []}']
PROM = """# HELP vllm:prefix_cache_hits_total Prefix cache hits.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 12.0
# TYPE lmcache:num_hit_tokens counter
lmcache:num_hit_tokens_total{worker="0"} 4096
# TYPE h histogram
h_bucket{le="0.1"} 1
h_bucket{le="+Inf"} 2
h_sum 0.3
h_count 2
"""
YAML = "cluster: c\ndefaults: {workdir: /var/tmp/k, passphrase: x}\nnodes:\n  - {name: n, host: h}\n"


def _mutate(text: str, edits: list[tuple[int, int, str]]) -> str:
    for pos, cut, ins in edits:
        p = pos % (len(text) + 1)
        text = text[:p] + ins + text[p + cut:]
    return text


_edits = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 8), st.text(max_size=6)), max_size=6)


@given(st.sampled_from(FIO_TEXTS), _edits)
def test_fio_parser(text: str, edits: list[tuple[int, int, str]]) -> None:
    try:
        parse_fio_output(_mutate(text, edits))
    except FioParseError:
        pass


@given(st.binary(max_size=2048))
def test_fio_parser_bytes(data: bytes) -> None:
    try:
        parse_fio_output(data)
    except FioParseError:
        pass


@given(st.one_of(st.text(max_size=600), st.builds(_mutate, st.just(YAML), _edits)))
def test_yaml_loader(text: str) -> None:
    try:
        parse_yaml(text, "fuzz.yaml")
    except ConfigError:
        pass
    try:
        mask_secret_values(text, "fuzz.yaml")
    except ConfigError:
        pass


@given(st.one_of(st.text(max_size=600), st.builds(_mutate, st.just(PROM), _edits)))
def test_prometheus_reader(text: str) -> None:
    try:
        parse(text, source="fuzz")
    except MetricsParseError:
        pass


_http = st.lists(st.sampled_from([b"HTTP/1.1 200 OK\r\n", b"Transfer-Encoding: chunked\r\n", b"\r\n",
                                  b"Content-Type: text/event-stream\r\n", b"Content-Length: 3\r\n",
                                  b"1a\r\n", b"data: {\"choices\":[{\"text\":\"a b\"}]}\n\n", b"-1\r\n",
                                  b"0\r\n\r\n", b"data: [DONE]\n\n", b"\r", b"\n", b"x"]), max_size=40)


@given(st.one_of(st.binary(max_size=3000), _http.map(b"".join)), st.integers(1, 97))
def test_http_and_sse_client_parsers(data: bytes, step: int) -> None:
    p = ResponseParser(max_body=1 << 16)
    try:
        for i in range(0, len(data), step):
            p.feed(data[i:i + step], i + 1)
        p.eof()
    except ProtocolError:
        return
    tl = StreamTimeline("completions")
    try:
        tl.feed_pieces(p.pieces)
    except ValueError:
        pass


_req = st.lists(st.sampled_from([b"POST /v1/completions HTTP/1.1\r\n", b"GET /health HTTP/1.1\r\n",
                                 b"Host: x\r\n", b"Content-Length: 2\r\n", b"Content-Length: -1\r\n",
                                 b"X-Request-Id: a\nb\r\n", b"Transfer-Encoding: chunked\r\n", b"\r\n", b"{}",
                                 b"bad line\r\n", b"\x00"]), max_size=12)

_LIMITS = Limits(idle_timeout_s=0.05, header_timeout_s=0.05, body_timeout_s=0.05, max_body=1024)


@given(st.one_of(st.binary(max_size=1024), _req.map(b"".join)))
def test_emulator_request_parser(data: bytes) -> None:
    async def go() -> None:
        reader = asyncio.StreamReader(limit=4096)
        reader.feed_data(data)
        reader.feed_eof()
        for _ in range(4):
            try:
                req = await read_request(reader, None, _LIMITS)
            except HTTPError as exc:
                assert 400 <= exc.status < 600
                return
            if req is None:
                return
            json.dumps(req.headers)  # plain strings

    asyncio.run(go())
