"""HTTP/1.1 response framing, fed in every possible split."""

from __future__ import annotations

import pytest

from harness.load.errors import LoadInputError
from harness.load.http import Endpoint, ProtocolError, ResponseParser, build_request
from tests.load.sse_server import END, SSE_HEAD, chunk, json_response, sse_body


def _feed_split(raw: bytes, cuts: list[int]) -> ResponseParser:
    p = ResponseParser()
    bounds = [0, *cuts, len(raw)]
    done = False
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        done = p.feed(raw[a:b], 1000 + i)
    assert done and p.done
    return p


def test_chunked_stream_at_every_two_way_split() -> None:
    payload = sse_body(["hello ", "big world "])
    raw = SSE_HEAD + chunk(payload[:40]) + chunk(payload[40:]) + END
    for cut in range(1, len(raw)):
        p = _feed_split(raw, [cut])
        assert p.status == 200 and p.body() == payload, cut
        assert p.keep_alive


def test_every_three_way_split_of_a_small_response() -> None:
    raw = SSE_HEAD + chunk(b"data: 1\n\n") + chunk(b"data: [DONE]\n\n") + b"0\r\nX-Trailer: 1\r\n\r\n"
    for a in range(1, len(raw) - 1, 3):
        for b in range(a + 1, len(raw)):
            assert _feed_split(raw, [a, b]).body() == b"data: 1\n\ndata: [DONE]\n\n"


def test_pieces_carry_their_arrival_stamp() -> None:
    p = ResponseParser()
    p.feed(SSE_HEAD + chunk(b"data: a\n\n")[:5], 1)
    p.feed(chunk(b"data: a\n\n")[5:], 2)
    assert [t for t, _ in p.pieces] == [1, 2]
    assert p.first_byte_ns == 1 and p.last_byte_ns == 2


def test_content_length_and_close_delimited_bodies() -> None:
    p = _feed_split(json_response(400, {"error": {"message": "bad"}}), [30])
    assert p.status == 400 and b"bad" in p.body()
    p = ResponseParser()
    assert not p.feed(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n", 1)
    assert p.close_delimited and p.eof() and p.body() == b"data: x\n\n" and not p.keep_alive


def test_interim_100_continue_is_skipped_and_connection_close_honoured() -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
    p = _feed_split(raw, [10])
    assert p.status == 200 and p.body() == b"ok" and not p.keep_alive


def test_cut_response_is_not_complete_on_eof() -> None:
    p = ResponseParser()
    p.feed(SSE_HEAD + b"10\r\nabc", 1)
    assert not p.eof()


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY",
    b"SMTP ready\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab",
])
def test_protocol_errors(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        ResponseParser().feed(raw, 1)


def test_endpoint_parsing_and_request_bytes() -> None:
    ep = Endpoint.parse("http://127.0.0.1:8000")
    assert ep.path_for("completions") == "/v1/completions" and ep.path_for("chat") == "/v1/chat/completions"
    assert Endpoint.parse("https://h/v1/chat/completions").base_path == "/v1"
    assert Endpoint.parse("https://h").port == 443 and Endpoint.parse("https://h").host_header == "h"
    raw = build_request(ep, "/v1/completions", b"{}", "req-7", b"Authorization: Bearer k\r\n")
    head, body = raw.split(b"\r\n\r\n")
    assert b"X-Request-Id: req-7" in head and b"Content-Length: 2" in head and body == b"{}"
    for bad in ("ftp://h", "127.0.0.1:8000", "http://h:notaport"):
        with pytest.raises(LoadInputError):
            Endpoint.parse(bad)
