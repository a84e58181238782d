"""The streaming client against a real HTTP server on 127.0.0.1, one edge case per test."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.load.client import ClientOptions, RequestResult, StreamClient, load_api_key
from harness.load.errors import LoadInputError
from harness.load.spec import RequestSpec
from tests.load.sse_server import (
    END,
    SSE_HEAD,
    ScriptedServer,
    chat_chunk,
    chunk,
    completion_chunk,
    event,
    json_response,
    sse_body,
    stream,
    usage_event,
)

SPEC = RequestSpec("req-1", "alpha beta gamma", 3, 4)


def _run(url: str, specs: Sequence[RequestSpec] = (SPEC,), **opts: Any) -> list[RequestResult]:
    max_conn = opts.pop("max_connections", 4)
    options = ClientOptions(model="m", **opts)

    async def go() -> list[RequestResult]:
        async with StreamClient(url, options, max_connections=max_conn) as c:
            return [await c.request(s) for s in specs]

    return asyncio.run(go())


def test_normal_stream_sends_id_and_reuses_the_connection(server: ScriptedServer) -> None:
    server.script = lambda r: stream(["one ", "two ", "three ", "four "], prompt_tokens=3)
    res = _run(server.url, [SPEC.with_id(f"r{i}") for i in range(3)])
    assert [r.status for r in res] == ["ok"] * 3
    r = res[0]
    assert r.output_tokens == 4 and r.input_tokens == 3 and r.server_usage and len(r.itl_ms) == 3
    assert r.ttft_ms is not None and r.e2el_ms is not None and 0 < r.ttft_ms <= r.e2el_ms
    assert r.tpot_ms == pytest.approx((r.e2el_ms - r.ttft_ms) / 3)
    assert [q.headers["x-request-id"] for q in server.received] == ["r0", "r1", "r2"]
    body = server.received[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["prompt"] == "alpha beta gamma" and body["max_tokens"] == 4 and body["ignore_eos"] is True
    assert server.connections == 1  # keep-alive


def test_split_at_every_byte_offset_gives_the_same_result(server: ScriptedServer) -> None:
    payload = sse_body(["hello ", "wide world "], prompt_tokens=2)
    raw = SSE_HEAD + chunk(payload) + END
    offsets = list(range(1, len(raw)))
    cut = iter(offsets)

    def script(_: Any) -> list[Any]:
        k = next(cut)
        return [raw[:k], ("sleep", 0.002), raw[k:]]

    server.script = script
    res = _run(server.url, [SPEC.with_id(f"s{k}") for k in offsets], keep_text=True)
    for k, r in zip(offsets, res):
        assert (r.status, r.output_tokens, r.counted_tokens, r.text) == ("ok", 3, 3, "hello wide world "), k
        assert len(r.itl_ms) == 2
    assert server.connections == 1


def test_first_token_time_is_the_arrival_of_the_text_chunk(server: ScriptedServer) -> None:
    server.script = lambda r: [SSE_HEAD, ("sleep", 0.06), chunk(event(completion_chunk("a "))), ("sleep", 0.04),
                               chunk(event(completion_chunk("b c ")) + b"data: [DONE]\n\n"), END]
    r = _run(server.url)[0]
    # only what the server's sleeps guarantee: the first text came 60 ms after the headers, the last
    # 40 ms after it was sent. The gap the client saw between the two arrivals can be anything down to
    # 0 (a first chunk read late on a loaded machine: 35.6 ms seen beside a CPU hog); it is split over
    # the second chunk's two tokens
    assert r.ttft_ms is not None and r.e2el_ms is not None and 55 <= r.ttft_ms <= r.e2el_ms and r.e2el_ms >= 95
    assert r.counted_tokens == 3 and len(r.itl_ms) == 2 and r.itl_ms[0] == r.itl_ms[1]
    assert r.e2el_ms == pytest.approx(r.ttft_ms + sum(r.itl_ms), abs=0.01)


def test_role_only_first_chunk_chat(server: ScriptedServer) -> None:
    server.script = lambda r: [SSE_HEAD, chunk(event(chat_chunk(None, role="assistant"))), ("sleep", 0.05),
                               chunk(event(chat_chunk("Hi"))), chunk(event(chat_chunk(" there"))),
                               chunk(usage_event(5, 2)), chunk(b"data: [DONE]\n\n"), END]
    r = _run(server.url, api="chat")[0]
    assert r.status == "ok" and r.ttft_ms is not None and r.ttft_ms >= 45
    assert r.output_tokens == 2 and r.input_tokens == 5
    assert server.received[0].path == "/v1/chat/completions"
    assert server.received[0].body["messages"] == [{"role": "user", "content": "alpha beta gamma"}]


def test_error_event_mid_stream(server: ScriptedServer) -> None:
    server.script = lambda r: [SSE_HEAD, chunk(event(completion_chunk("a "))),
                               chunk(event({"error": {"message": "KV cache exhausted", "code": 503}})),
                               chunk(b"data: [DONE]\n\n"), END]
    r = _run(server.url)[0]
    assert (r.status, r.error_kind) == ("error", "error_event")
    assert r.error is not None and "KV cache exhausted" in r.error and r.counted_tokens == 1


@pytest.mark.parametrize("status", [400, 404, 429, 500, 503])
def test_http_errors_with_json_bodies(server: ScriptedServer, status: int) -> None:
    replies = iter([[json_response(status, {"error": {"message": f"failure {status}", "type": "x"}})],
                    stream(["ok "])])
    server.script = lambda r: next(replies)
    r1, r2 = _run(server.url, [SPEC, SPEC.with_id("after")])
    assert (r1.status, r1.error_kind, r1.http_status) == ("error", f"http_{status}", status)
    assert r1.error is not None and f"failure {status}" in r1.error
    assert r2.ok and server.connections == 1  # the error response kept the connection usable


def test_stall_times_out(server: ScriptedServer) -> None:
    server.script = lambda r: [SSE_HEAD, chunk(event(completion_chunk("a "))), ("sleep", 5)]
    r = _run(server.url, timeout_s=0.3)[0]
    assert (r.status, r.error_kind) == ("error", "timeout") and r.counted_tokens == 1


def test_idle_timeout_fires_on_silence_not_on_a_slow_steady_stream(server: ScriptedServer) -> None:
    steady = [SSE_HEAD] + [a for i in range(6) for a in (chunk(event(completion_chunk(f"w{i} "))), ("sleep", 0.05))]
    server.script = lambda r: steady + [END] if r.headers["x-request-id"] == "steady" else \
        [SSE_HEAD, ("sleep", 5)]
    ok, stalled = _run(server.url, [SPEC.with_id("steady"), SPEC.with_id("stall")], idle_timeout_s=0.2)
    assert ok.ok and ok.counted_tokens == 6
    assert stalled.error_kind == "timeout" and stalled.error is not None and "idle" in stalled.error


def test_dropped_connection_mid_stream(server: ScriptedServer) -> None:
    server.script = lambda r: [SSE_HEAD, chunk(event(completion_chunk("a b "))), ("close",)]
    r = _run(server.url)[0]
    assert (r.status, r.error_kind) == ("error", "connection_dropped") and r.counted_tokens == 2


def test_stale_keep_alive_connection_is_retried_once(server: ScriptedServer) -> None:
    server.script = lambda r: stream(["x "]) + [("close",)]  # closes without announcing it
    res = _run(server.url, [SPEC, SPEC.with_id("second")])
    assert all(r.ok for r in res)
    assert server.connections == 2 and len(server.received) == 2


def test_connect_refused() -> None:
    r = _run("http://127.0.0.1:1/v1")[0]
    assert (r.status, r.error_kind) == ("error", "connect_failed")


def test_no_output_and_non_streaming_servers(server: ScriptedServer) -> None:
    replies = iter([[SSE_HEAD, chunk(b"data: [DONE]\n\n"), END],
                    [json_response(200, {"choices": [{"text": "full answer here"}],
                                         "usage": {"prompt_tokens": 3, "completion_tokens": 3}}, "OK")]])
    server.script = lambda r: next(replies)
    empty, whole = _run(server.url, [SPEC, SPEC.with_id("b")])
    assert empty.error_kind == "no_output"
    assert whole.ok and whole.output_tokens == 3 and whole.ttft_ms == whole.e2el_ms
    server.script = lambda r: [json_response(200, {"choices": [{"message": {"role": "assistant",
                                                                            "content": "chat answer"}}]}, "OK")]
    chat = _run(server.url, api="chat")[0]
    assert chat.ok and chat.output_tokens == 2


def test_api_key_from_file_is_sent_and_never_echoed(server: ScriptedServer, tmp_path: Path) -> None:
    key = "sk-test-SECRET-1234"
    (tmp_path / "key").write_text(key + "\n")
    seen: list[str] = []

    def script(r: Any) -> list[Any]:
        seen.append(r.headers.get("authorization", ""))
        return [json_response(401, {"error": {"message": f"bad key {r.headers.get('authorization')}"}})]

    server.script = script
    loaded = load_api_key(None, str(tmp_path / "key"))
    r = _run(server.url, api_key=loaded)[0]
    assert seen == [f"Bearer {key}"]
    assert r.error_kind == "http_401" and r.error is not None and key not in r.error and "***" in r.error
    assert key not in repr(ClientOptions(model="m", api_key=key))


def test_api_key_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVGATE_TEST_KEY", " k1 ")
    assert load_api_key("KVGATE_TEST_KEY") == "k1"
    assert load_api_key("KVGATE_UNSET_VAR") is None
    (tmp_path / "empty").write_text("")
    with pytest.raises(LoadInputError, match="empty"):
        load_api_key(None, str(tmp_path / "empty"))
    with pytest.raises(LoadInputError, match="missing"):
        load_api_key(None, str(tmp_path / "missing"))


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",  # noqa: S603
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def test_https_with_a_ca_file_and_refusal_without(tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    with ScriptedServer(ssl_context=ctx) as s:
        s.script = lambda r: stream(["secure ", "stream "])
        ok = _run(s.url, ca_file=str(cert))[0]
        assert ok.ok and ok.output_tokens == 2
        refused = _run(s.url)[0]  # the self-signed certificate is not in the default trust store
        assert refused.error_kind == "connect_failed" and refused.error is not None
        assert "CERTIFICATE" in refused.error.upper()
        assert _run(s.url, insecure_tls=True)[0].ok


def test_many_concurrent_streams_each_get_their_own_connection(server: ScriptedServer) -> None:
    server.script = lambda r: [SSE_HEAD, ("sleep", 0.05)] + stream(["a ", "b "])[1:]
    specs = [SPEC.with_id(f"c{i}") for i in range(64)]
    options = ClientOptions(model="m")

    async def go() -> list[RequestResult]:
        async with StreamClient(server.url, options, max_connections=64) as c:
            assert await c.warm(64) == 64
            return await asyncio.gather(*(c.request(s) for s in specs))

    res = asyncio.run(go())
    assert all(r.ok for r in res) and server.connections == 64
    ttfts = [r.ttft_ms for r in res if r.ttft_ms is not None]
    assert len(ttfts) == 64 and max(ttfts) < 1000  # concurrent, not serialised (64 x 50 ms = 3.2 s)


