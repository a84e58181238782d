"""End to end: a short Mooncake-format snippet replayed against the real KV emulator process; the
hit rate from the emulator's own counters is within 5 points of the trace's expected reuse for
the tier size the emulator was given (its HBM prefix cache, an LRU, sized in the trace's blocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.load.runner import LoadConfig, run_load
from harness.load.workloads import build_workload
from tests.sim.simhelpers import start_sim

SNIPPET = Path(__file__).parent / "data" / "mooncake_snippet.jsonl"
BLOCK = 512


@pytest.mark.parametrize(("tier_blocks", "replay"), [(12, "timestamps"), (64, "closed")])
def test_snippet_replay_hit_rate_matches_expected_reuse(tmp_path: Path, tier_blocks: int, replay: str) -> None:
    wl = build_workload("hash-trace", {"path": str(SNIPPET), "block_size": BLOCK, "replay": replay,
                                       "speed": 2.0, "lru_blocks": tier_blocks}, seed=1)
    expected = wl.expected["reuse"]["expected_hit_rate"]
    sim = start_sim(tmp_path, args=["--hbm-tokens", str(tier_blocks * BLOCK), "--prefill-tokens-per-s", "400000",
                                    "--decode-tokens-per-s", "2000"])
    try:
        q0 = sim.metric("vllm:prefix_cache_queries_total")
        h0 = sim.metric("vllm:prefix_cache_hits_total")
        # one request at a time: the order the emulator serves them is the trace's
        summary = run_load(LoadConfig(endpoint=f"http://127.0.0.1:{sim.port}", model="test/model", concurrency=1,
                                      progress=False, api_key_env=None), tmp_path / "out", workload=wl)
        queries = sim.metric("vllm:prefix_cache_queries_total") - q0
        hits = sim.metric("vllm:prefix_cache_hits_total") - h0
    finally:
        sim.stop()
    assert summary["completed"] == 16 and summary["failed"] == 0
    assert queries == wl.expected["reuse"]["prompt_tokens"]  # the trace's lengths reached the engine
    measured = hits / queries
    assert abs(measured - expected) <= 0.05, (measured, expected)
    assert summary["kvgate"]["workload"]["expected"]["reuse"]["expected_hit_rate"] == expected
    assert summary["kvgate"]["mode"] == ("open" if replay == "timestamps" else "closed")
    # the tier size matters: the small tier's expected reuse is far below the unbounded one
    assert (expected < 0.25) if tier_blocks == 12 else (expected > 0.5)
