"""End to end: a short Mooncake-format snippet replayed against the real KV emulator process; the
hit rate from the emulator's own counters is within 5 points of the trace's expected reuse for
the tier size the emulator was given (its HBM prefix cache, an LRU, sized in the trace's blocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.load.runner import LoadConfig, run_load
from harness.load.workloads import build_workload
from tests.sim.simhelpers import start_sim

SNIPPET = Path(__file__).resolve().parents[1] / "data" / "load" / "mooncake_snippet.jsonl"
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
    print(f"snippet via the HBM prefix cache of {tier_blocks} blocks ({replay}): expected {expected:.4f}, "
          f"measured {measured:.4f}")
    assert summary["kvgate"]["workload"]["expected"]["reuse"]["expected_hit_rate"] == expected
    assert summary["kvgate"]["mode"] == ("open" if replay == "timestamps" else "closed")
    # the tier size matters: the small tier's expected reuse is far below the unbounded one
    assert (expected < 0.25) if tier_blocks == 12 else (expected > 0.5)


def test_snippet_replay_through_the_lmcache_cpu_tier_matches_expected_reuse(tmp_path: Path) -> None:
    """The done-when of issue 19 with the tier an offload integration configures: LMCache's CPU tier
    sized at 12 of the trace's 512-token blocks (emulator HBM off), the hit rate read per tier from
    the emulator's counters (harness.pipelines.shared.tierhits), within 5 points of the trace's expected
    reuse under an LRU of 12 blocks."""
    from harness.engines.prometheus import MetricsSnapshot
    from harness.pipelines.shared.tierhits import tier_hits, tier_rates
    from tests.sim.simhelpers import CONNECTOR, lmcache_yaml

    tier_blocks, kv_per_token = 12, 64  # a 512-token chunk file = 32 KiB; 12 of them = 3 * 2**17 B
    cfg = lmcache_yaml(tmp_path / "lmcache.yaml", chunk_size=BLOCK, local_cpu=True,
                       max_local_cpu_size=tier_blocks * BLOCK * kv_per_token / 2**30)
    wl = build_workload("hash-trace", {"path": str(SNIPPET), "block_size": BLOCK, "replay": "closed",
                                       "lru_blocks": tier_blocks}, seed=1)
    expected = wl.expected["reuse"]["expected_hit_rate"]
    sim = start_sim(tmp_path, args=["--kv-transfer-config", CONNECTOR, "--hbm-tokens", "1", "--kv-bytes-per-token",
                                    str(kv_per_token), "--prefill-tokens-per-s", "400000",
                                    "--decode-tokens-per-s", "2000"],
                    env={"LMCACHE_CONFIG_FILE": str(cfg)})
    try:
        before = MetricsSnapshot.from_text(sim.metrics())
        summary = run_load(LoadConfig(endpoint=f"http://127.0.0.1:{sim.port}", model="test/model", concurrency=1,
                                      progress=False, api_key_env=None), tmp_path / "out", workload=wl)
        after = MetricsSnapshot.from_text(sim.metrics())
    finally:
        sim.stop()
    assert summary["completed"] == 16 and summary["failed"] == 0
    hits = tier_hits([before], [after], BLOCK)
    rates = tier_rates(hits)
    assert hits["queried"] == wl.expected["reuse"]["prompt_tokens"]
    assert hits["hbm"] == 0  # the engine's own cache was off: every hit came through the CPU tier
    assert hits["local_cpu"] == hits["offload"] and hits["local_disk"] == 0
    measured = rates["total"]
    assert measured is not None and abs(measured - expected) <= 0.05, (measured, expected)
    print(f"snippet via the CPU tier of {tier_blocks} blocks: expected {expected:.4f}, measured {measured:.4f}")
    # an unbounded LRU expects far more reuse: the tier size is what the figure depends on
    unbounded = build_workload("hash-trace", {"path": str(SNIPPET), "block_size": BLOCK, "replay": "closed"}, seed=1)
    assert unbounded.expected["reuse"]["expected_hit_rate"] > expected + 0.2
