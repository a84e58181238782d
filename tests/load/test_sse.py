"""SSE splitting at any byte and the timing derived from dated events."""

from __future__ import annotations

import json

import pytest

from harness.load.sse import SSEDecoder, StreamTimeline, parse_event
from tests.load.sse_server import chat_chunk, completion_chunk, event, sse_body, usage_event


def _events(pieces: list[bytes]) -> list[tuple[str, bytes]]:
    dec = SSEDecoder()
    out = [parse_event(b) for p in pieces for b in dec.feed(p)]
    out += [parse_event(b) for b in dec.flush()]
    return [e for e in out if e[1]]  # an event without data (a comment) is not dispatched


@pytest.mark.parametrize("sep", [b"\n", b"\r\n", b"\r"])
def test_events_identical_whatever_the_split(sep: bytes) -> None:
    text = (b": keep-alive comment\n\n"
            b"data: {\"a\": 1}\n\n"
            b"event: error\ndata: {\"error\": {\"message\": \"x\"}}\n\n"
            b"data: line1\ndata:line2\n\n"
            + "data: {\"t\": \"\u00e9\u4e16\"}\n\n".encode()
            + b"data: [DONE]\n\n").replace(b"\n", sep)
    want = _events([text])
    assert want == [("message", b'{"a": 1}'), ("error", b'{"error": {"message": "x"}}'),
                    ("message", b"line1\nline2"), ("message", '{"t": "\u00e9\u4e16"}'.encode()),
                    ("message", b"[DONE]")]
    for cut in range(1, len(text)):
        assert _events([text[:cut], text[cut:]]) == want, cut
    assert _events([text[i:i + 1] for i in range(len(text))]) == want


def _timeline(events: list[tuple[int, bytes]], api: str = "completions") -> StreamTimeline:
    tl = StreamTimeline(api, keep_text=True)
    tl.feed_pieces(events)
    return tl


def test_multi_token_chunks_count_each_word_and_spread_itl() -> None:
    ms = 1_000_000
    tl = _timeline([(10 * ms, event(completion_chunk("a b "))),
                    (20 * ms, event(completion_chunk("c d e "))),
                    (30 * ms, usage_event(5, 5) + b"data: [DONE]\n\n")])
    assert tl.first_ns == 10 * ms and tl.counted == 5 and tl.output_tokens == 5
    assert tl.itl_ns == [0.0] + [10 * ms / 3] * 3  # first chunk: 1 extra token; then 3 tokens over 10 ms
    assert sum(tl.itl_ns) == pytest.approx(10 * ms) and len(tl.itl_ns) == tl.counted - 1
    assert tl.done and tl.prompt_tokens == 5 and "".join(tl.text_parts) == "a b c d e "


def test_usage_deltas_win_over_word_counts() -> None:
    c1 = completion_chunk("xy", usage={"prompt_tokens": 2, "completion_tokens": 2})
    c2 = completion_chunk("z", usage={"prompt_tokens": 2, "completion_tokens": 5})
    tl = _timeline([(1, event(c1)), (7, event(c2))])
    assert tl.counted == 5 and tl.itl_ns == [0.0, 2.0, 2.0, 2.0]


def test_role_only_first_chunk_is_not_the_first_token() -> None:
    tl = _timeline([(1, event(chat_chunk(None, role="assistant"))), (2, event(chat_chunk(""))),
                    (5, event(chat_chunk("hi"))), (9, event(chat_chunk(" there")))], api="chat")
    assert tl.first_ns == 5 and tl.counted == 2 and tl.itl_ns == [4.0]
    assert tl.first_token_ns == 2  # the empty delta after the role is a token whose text was held back


def test_a_first_token_without_text_still_ends_the_prefill() -> None:
    """vLLM streams a chunk per generated token; one whose text the detokenizer holds back (a
    partial UTF-8 sequence, a special token) has text "". ``vllm bench serve`` stamps TTFT at that
    chunk; stamping at the first text would add an inter-token gap to TTFT."""
    tl = _timeline([(3, event(completion_chunk(""))), (8, event(completion_chunk("a"))),
                    (12, event(completion_chunk(" b")))])
    assert (tl.first_token_ns, tl.first_ns, tl.counted) == (3, 8, 2)
    # a stream with no text at all is still no output (the client records an error)
    tl = _timeline([(3, event(completion_chunk(""))), (4, b"data: [DONE]\n\n")])
    assert tl.first_token_ns == 3 and tl.first_ns == 0


def test_error_event_mid_stream_is_captured() -> None:
    tl = _timeline([(1, event(completion_chunk("a "))),
                    (2, event({"error": {"message": "engine died", "code": 500}}))])
    assert tl.error == "engine died (500)" and tl.counted == 1


def test_malformed_json_is_an_error() -> None:
    with pytest.raises(ValueError, match="malformed JSON"):
        _timeline([(1, b"data: {not json\n\n")])


def test_full_body_from_the_server_helper() -> None:
    body = sse_body(["one ", "two three "], prompt_tokens=4)
    tl = _timeline([(1, body)])
    assert tl.output_tokens == 3 and tl.prompt_tokens == 4 and tl.done
    assert json.loads(body.split(b"\n\n")[0][6:])["choices"][0]["text"] == "one "
