"""Long context: prompts built lazily (the same words as the eager build, little memory until
sent), their construction time recorded, the request on the wire exactly the built prompt."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

from harness.load.records import read_records
from harness.load.runner import LoadConfig, run_load
from harness.load.workloads import LAZY_MIN_WORDS, LazyRequests, build_workload
from tests.load.sse_server import ScriptedServer

# sha256 of "id|input_tokens|max_tokens|prompt" lines (warm-up then measured), computed with the
# eager builders as they were before prompts became lazy: lazy prompts must not drift from them
GOLDEN = {
    "long-doc": ({"num_docs": 3, "doc_len": 2000, "num_queries": 6, "hit_ratio": 0.5, "output_len": 4},
                 "75fe94155179c7c653ffd8b588774a56bcf71d12c58d30265f8020dbdbf5d9a7"),
    "random": ({"num_requests": 6, "input_len": 1200, "output_len": 4, "range_ratio": 0.5, "warmup": 2},
               "7a0e617469224ee2a36ca8fd7546a71a07f894b55cb0019e8fa1f8c2be305a8a"),
}


def test_lazy_prompts_are_the_eager_prompts() -> None:
    for kind, (params, digest) in GOLDEN.items():
        wl = build_workload(kind, params, seed=5)
        assert isinstance(wl.measured, LazyRequests)
        assert any(r.deferred for r in wl.measured.recipes)  # the long parts really are deferred
        h = hashlib.sha256()
        for s in list(wl.warmup) + list(wl.measured):
            h.update(f"{s.request_id}|{s.input_tokens}|{s.max_tokens}|{s.prompt}\n".encode())
        assert h.hexdigest() == digest, kind
    # a recipe's token count is known without building it
    wl = build_workload("long-doc", GOLDEN["long-doc"][0], seed=5)
    assert isinstance(wl.measured, LazyRequests)
    assert [r.input_tokens for r in wl.measured.recipes] == [s.input_tokens for s in wl.measured]


def test_a_128k_workload_holds_no_prompt_text_until_sent() -> None:
    tracemalloc.start()
    try:
        wl = build_workload("long-doc", {"num_docs": 6, "doc_len": 131072, "num_queries": 6, "output_len": 8},
                            seed=0)
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # eager, the 6 documents alone were 6 x ~650 KB of text (and each query prompt a copy);
    # lazily, a packed generator state (2.5 KB) per document
    assert held < 512 * 1024, held
    spec = wl.measured[0]
    assert spec.input_tokens == 131072 + 16 == len(spec.prompt.split())
    assert LAZY_MIN_WORDS <= 131072


def test_runner_sends_built_prompts_and_records_their_build_time(server: ScriptedServer, tmp_path: Path) -> None:
    wl = build_workload("long-doc", {"num_docs": 2, "doc_len": 3000, "num_queries": 3, "hit_ratio": 0.5,
                                     "output_len": 2}, seed=4)
    expected = {s.request_id: s.prompt for s in list(wl.warmup) + list(wl.measured)}
    summary = run_load(LoadConfig(endpoint=server.url, model="m", concurrency=2, progress=False,
                                  api_key_env=None), tmp_path, workload=wl)
    assert summary["completed"] == 3
    got = {r.headers["x-request-id"]: r.body["prompt"] for r in server.received}
    assert got == expected  # warm-up and measured, each exactly its prompt
    recs = read_records(tmp_path / "records.jsonl") + read_records(tmp_path / "warmup.jsonl")
    assert len(recs) == 5 and all(r["build_ms"] > 0 for r in recs)
    assert summary["mean_prompt_build_ms"] > 0 and summary["max_prompt_build_ms"] >= summary["median_prompt_build_ms"]


def test_short_prompts_are_not_timed_as_built_at_send(server: ScriptedServer, tmp_path: Path) -> None:
    wl = build_workload("random", {"num_requests": 3, "input_len": 16, "output_len": 2}, seed=0)
    summary = run_load(LoadConfig(endpoint=server.url, model="m", progress=False, api_key_env=None), tmp_path,
                       workload=wl)
    assert summary["completed"] == 3
    assert all(r["build_ms"] is None for r in read_records(tmp_path / "records.jsonl"))
    assert "mean_prompt_build_ms" not in summary.to_dict()


def test_128k_context_against_the_emulator(tmp_path: Path) -> None:
    """Real HTTP server at its 131072-token limit: the lazily built 128K prompt is served whole
    (the server's own prompt count), the warmed document's second pass is a prefix-cache hit, and
    one token more is refused by the server as a real engine refuses it."""
    from harness.load.workloads import Workload
    from tests.sim.simhelpers import start_sim

    sim = start_sim(tmp_path, args=["--prefill-tokens-per-s", "5000000", "--decode-tokens-per-s", "2000",
                                    "--hbm-tokens", "262144", "--max-model-len", "131072"])
    try:
        wl = build_workload("long-doc", {"num_docs": 1, "doc_len": 130992, "num_queries": 1, "output_len": 64}, seed=1)
        cfg = LoadConfig(endpoint=f"http://127.0.0.1:{sim.port}", model="test/model", progress=False,
                         api_key_env=None)
        h0 = sim.metric("vllm:prefix_cache_hits_total")
        summary = run_load(cfg, tmp_path / "ok", workload=wl)
        hits = sim.metric("vllm:prefix_cache_hits_total") - h0
        over = build_workload("long-doc", {"num_docs": 1, "doc_len": 130993, "num_queries": 1, "output_len": 64},
                              seed=2)
        refused = run_load(cfg, tmp_path / "over", workload=Workload("over", {}, 0, over.measured))
    finally:
        sim.stop()
    assert summary["completed"] == 1 and summary["failed"] == 0
    rec = read_records(tmp_path / "ok" / "records.jsonl")[0]
    assert rec["input_tokens"] == 131008 and rec["server_usage"] and rec["build_ms"] > 0
    assert hits >= 130992 // 256 * 256  # the document, warmed first, came from the prefix cache
    assert refused["completed"] == 0 and refused["errors_by_kind"] == {"http_400": 1}


def test_hash_trace_prompts_are_built_lazily_and_unchanged() -> None:
    from harness.load import hashtrace

    snippet = Path(__file__).resolve().parents[1] / "data" / "load" / "mooncake_snippet.jsonl"
    wl = build_workload("hash-trace", {"path": str(snippet), "block_size": 512}, seed=3)
    assert isinstance(wl.measured, LazyRequests) and all(r.deferred for r in wl.measured.recipes)
    reqs = hashtrace.parse_trace(snippet, block_size=512, time_unit="ms")
    assert [s.prompt for s in wl.measured] == [hashtrace.build_prompt(r, 512, 3) for r in reqs]
    assert [r.input_tokens for r in wl.measured.recipes] == [r.input_length for r in reqs]


def test_a_large_body_is_written_in_pieces_and_arrives_whole(server: ScriptedServer) -> None:
    """A ~1 MB request goes out in 64 KB pieces with the event loop run between them (another
    coroutine runs between every two pieces), and the real server reads it intact."""
    import asyncio

    from harness.load.client import ClientOptions, StreamClient, _write_in_pieces
    from harness.load.spec import RequestSpec

    prompt = " ".join(f"w{i}" for i in range(150_000))
    raw = prompt.encode()
    ticks = 0
    writes: list[tuple[bytes, int]] = []

    class Spy:
        def write(self, data: bytes) -> None:
            writes.append((bytes(data), ticks))

    async def ticker() -> None:
        nonlocal ticks
        for _ in range(1000):
            ticks += 1
            await asyncio.sleep(0)

    async def pieces() -> None:
        t = asyncio.ensure_future(ticker())
        await _write_in_pieces(Spy(), raw)  # type: ignore[arg-type]
        t.cancel()

    asyncio.run(pieces())
    assert b"".join(w for w, _ in writes) == raw and len(writes) == -(-len(raw) // (64 * 1024))
    assert all(a[1] < b[1] for a, b in zip(writes, writes[1:]))  # the loop ran between pieces

    async def go() -> str:
        async with StreamClient(server.url, ClientOptions(model="m"), max_connections=1) as c:
            return (await c.request(RequestSpec("big", prompt, 150_000, 2))).status

    assert asyncio.run(go()) == "ok"
    assert server.received[-1].body["prompt"] == prompt
