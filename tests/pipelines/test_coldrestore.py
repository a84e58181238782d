"""Cold-restore validity from engine counters: expectations from the requests, leaves per point."""

from __future__ import annotations

from harness.load.spec import RequestSpec
from harness.pipelines.shared.coldrestore import Expectation, cold_restore_measured, expectation, point_counters
from harness.pipelines.shared.sweepdata import Repetition


def _spec(i: int, words: list[str]) -> RequestSpec:
    prompt = " ".join(words)
    return RequestSpec(f"r{i}", prompt, len(words), 4)


def _doc(tag: str, n: int) -> list[str]:
    return [f"{tag}{k}" for k in range(n)]


def test_expected_share_counts_whole_stored_chunks_only() -> None:
    docs = [_doc(f"d{i}x", 512) for i in range(2)]
    populate = [_spec(i, d + ["q"]) for i, d in enumerate(docs)]
    measure = [_spec(i, d + _doc(f"m{i}y", 10)) for i, d in enumerate(docs)]
    exp = expectation(populate, measure, chunk_size=256)
    assert exp.offload_share == (2 * 512) / (2 * 522)
    assert exp.shared_share == 0.0  # no two measured requests share a prefix
    assert expectation(populate, measure, chunk_size=1000).offload_share == 0.0  # no whole chunk stored


def test_shared_prefixes_among_measured_requests_are_allowed_engine_hits() -> None:
    prefix = _doc("p", 64)
    measure = [_spec(i, prefix + _doc(f"s{i}z", 36)) for i in range(3)]
    exp = expectation([], measure, chunk_size=256)
    # the first request loads the prefix; the other two may take it from the engine's cache
    assert exp.offload_share == 0.0 and exp.shared_share == (2 * 64) / 300


def test_shared_prefixes_are_restored_once_from_the_tiers() -> None:
    # tp4x2's shape: groups sharing a chunk-aligned prefix, every prompt populated first
    groups = [(_doc(f"g{g}p", 512), [_doc(f"g{g}s{i}x", 256) for i in range(4)]) for g in range(2)]
    measure = [_spec(10 * g + i, p + s) for g, (p, sufs) in enumerate(groups) for i, s in enumerate(sufs)]
    exp = expectation(measure, measure, chunk_size=256)
    # per group: one request restores 767 tokens, three restore their 255-token suffix only
    assert exp.offload_share == (2 * (767 + 3 * 255)) / (8 * 768)
    assert exp.shared_share == (2 * 3 * 512) / (8 * 768)


def _rep(r: int, **counters: float | None) -> Repetition:
    return Repetition("candidate", 2, r, {"completed": 6}, [1.0], [], dict(counters))


def test_leaves_take_the_worst_repetition_and_name_missing_counters() -> None:
    exp = Expectation(offload_share=0.5, shared_share=0.0)
    good = dict(offload_hit_tokens=500.0, engine_prefix_hit_tokens=0.0, prompt_tokens_queried=1000.0)
    sweep = {2: [_rep(1, **good), _rep(2, **{**good, "offload_hit_tokens": 0.0, "engine_prefix_hit_tokens": 64.0})]}
    out = cold_restore_measured(sweep, [2, 4], exp, offload=True)
    assert out["offload_hit_tokens"]["c2"]["value"] == 0.0
    assert out["offload_hit_vs_expected"]["c2"]["value"] == 0.0
    assert out["engine_prefix_hit_excess"]["c2"]["value"] == 64.0
    assert out["offload_hit_tokens"]["c4"]["value"] is None  # a concurrency never measured is not a pass
    missing = {2: [_rep(1, **{**good, "engine_prefix_hit_tokens": None})]}
    out = cold_restore_measured(missing, [2], exp, offload=True)
    leaf = out["engine_prefix_hit_excess"]["c2"]
    assert leaf["value"] is None and "vllm:prefix_cache_hits" in leaf["detail"]
    assert out["offload_hit_vs_expected"]["c2"]["value"] == 1.0


def test_point_counters_sum_instances_and_never_turn_missing_into_zero() -> None:
    a = {"key_figures": {"offload_hit_tokens": 10.0, "engine_prefix_hit_tokens": 0.0, "prompt_tokens_queried": 20.0}}
    b = {"key_figures": {"offload_hit_tokens": 5.0, "engine_prefix_hit_tokens": None, "prompt_tokens_queried": 7.0}}
    # an engine without retrieval timing (offload_retrieve_seconds): None, never 0 seconds
    assert point_counters([a, a]) == {"offload_hit_tokens": 20.0, "engine_prefix_hit_tokens": 0.0,
                                      "prompt_tokens_queried": 40.0, "offload_retrieved_tokens": None,
                                      "offload_retrieve_seconds": None}
    timed = {"key_figures": {**a["key_figures"], "offload_retrieved_tokens": 512.0, "offload_retrieve_seconds": 0.25}}
    both = point_counters([timed, timed])
    assert both["offload_retrieved_tokens"] == 1024.0 and both["offload_retrieve_seconds"] == 0.5
    got = point_counters([a, b])
    assert got["engine_prefix_hit_tokens"] is None and got["offload_hit_tokens"] == 15.0
    assert point_counters([a, None]) == dict.fromkeys(got)
    assert point_counters([]) == dict.fromkeys(got)
