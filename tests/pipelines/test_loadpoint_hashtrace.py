"""A hash-trace load in a gate profile (issue 19): what the profile accepts, what a sweep point
sends, and the expected reuse set beside the measured hit rate (no engine: fast)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness.config.profile import LoadSpec, Profile
from harness.load import hashtrace
from harness.load.workloads import LazyRequests
from harness.pipelines.shared.instances import split_lazily, split_requests
from harness.pipelines.shared.loadpoint import expected_reuse_table, point_expected_reuse, point_workload
from tests.pipelines.conftest import small_profile

SNIPPET = Path(__file__).resolve().parents[1] / "data" / "load" / "mooncake_snippet.jsonl"


def profile(**load: Any) -> Profile:
    data = small_profile(18999)
    data["load"] = {"workload": "hash-trace", "trace": str(SNIPPET), "output_len": 4, "concurrency": [2],
                    "prompts_per_point": 8, "repetitions": 1, "seed": 3, **load}
    return Profile.model_validate(data)


def test_a_hash_trace_load_needs_its_trace_runs_closed_loop_and_validates_its_parameters() -> None:
    with pytest.raises(ValidationError, match="workload 'hash-trace' needs 'trace'"):
        LoadSpec(workload="hash-trace")
    with pytest.raises(ValidationError, match="runs closed loop"):
        LoadSpec(workload="hash-trace", trace="t.jsonl", mode="open", request_rate=2.0)
    for bad in ({"trace_sample": 0}, {"trace_sample": 1.5}, {"lru_blocks": -1}, {"trace_block_size": 0},
                {"trace_time_unit": "us"}, {"trace_max_context": -1}):
        with pytest.raises(ValidationError):
            LoadSpec(workload="hash-trace", trace="t.jsonl", **bad)
    assert LoadSpec(workload="hash-trace", trace="t.jsonl").longest_request_tokens() is None


def test_a_point_replays_the_first_requests_of_the_trace_and_populates_with_them() -> None:
    wl = point_workload(profile())
    reqs = hashtrace.parse_trace(SNIPPET, block_size=512)[:8]
    assert [s.input_tokens for s in wl.measure] == [r.input_length for r in reqs]
    assert [s.request_id for s in wl.populate] == [f"pop-{s.request_id}" for s in wl.measure]
    assert [s.prompt for s in wl.populate] == [s.prompt for s in wl.measure]
    assert wl.description["kind"] == "hash-trace" and "expected_per_point" in wl.description


def test_expected_reuse_follows_the_points_protocol_and_the_lru_capacity() -> None:
    unbounded = point_expected_reuse(profile())
    after, cold = unbounded["after_populate"], unbounded["cold"]
    # after the populate pass every full block is there; from cold, only the reuse inside the pass
    assert after["expected_hit_rate"] > cold["expected_hit_rate"] > 0
    small = point_expected_reuse(profile(lru_blocks=4))["after_populate"]
    assert small["lru_capacity_blocks"] == 4 and small["expected_hit_rate"] < after["expected_hit_rate"]
    # without cold restore: from an empty cache after the warm-up requests
    warm = point_expected_reuse(profile(cold_restore=False, warmup=2))
    assert set(warm) == {"lru_capacity_blocks", "block_size", "cold"}
    assert warm["cold"]["prompt_tokens"] == after["prompt_tokens"]


def test_the_table_never_invents_a_measured_rate_and_uses_each_arms_basis() -> None:
    prof = profile()
    tiers = {"baseline": [{"point": "c2 rep1", "rates": {"total": None}}],
             "candidate": [{"point": "c2 rep1", "rates": {"total": 0.5}}]}
    table = expected_reuse_table(prof, tiers)
    base, cand = table["baseline"][0], table["candidate"][0]
    exp = point_expected_reuse(prof)
    # the recompute arm (no tier) keeps nothing across the evict: only the within-pass reuse
    assert base["basis"] == "cold" and base["expected_hit_rate"] == exp["cold"]["expected_hit_rate"]
    assert base["measured_hit_rate"] is None and base["difference"] is None  # no counters: no agreement
    assert cand["basis"] == "after_populate"
    assert cand["difference"] == pytest.approx(0.5 - exp["after_populate"]["expected_hit_rate"])
    data = small_profile(18999)
    assert expected_reuse_table(Profile.model_validate(data), tiers) == {}  # no trace: no promise


def test_a_points_prompts_stay_lazy_until_sent_and_split_as_the_eager_lists() -> None:
    wl = point_workload(profile())
    assert isinstance(wl.measure, LazyRequests) and isinstance(wl.populate, LazyRequests)
    for n in (1, 2, 3):
        for offset in (0, 1, 2):
            lazy = split_lazily(wl.measure, n, offset)
            assert all(isinstance(p, LazyRequests) for p in lazy)
            assert [list(p) for p in lazy] == split_requests(list(wl.measure), n, offset)
