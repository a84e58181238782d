"""Expected vs measured and the advisory check ``estimate_agreement``: a disagreement beyond the
factor fails, a missing prediction or measurement is NOT_RUN (never PASS), and the block a gate
pipeline records is built from the profile, the inventory and the fio figure alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.loader import load_gate, load_inventory, load_profile
from harness.estimate.compare import agreement_factor, agreement_measured, expected_vs_measured
from harness.estimate.gatehook import expected_block
from harness.gates.evaluate import evaluate_gate
from harness.store.schema import Verdict

ROOT = Path(__file__).resolve().parents[2]


def _check(measured: dict) -> list:
    spec = load_gate(ROOT / "gates" / "G3.yaml")
    results = [c for c in evaluate_gate(spec, measured) if c.id == "estimate_agreement"]
    assert len(results) == 1
    return results


def _est(pred_s: float) -> dict:
    return {"arms": {"candidate": {"offload": True, "points": {"4": {"ttft_s": pred_s, "output_tokens_per_s": 1.0,
                                                                     "bottleneck": "tier bandwidth"}}}}}


def test_factor_is_symmetric() -> None:
    assert agreement_factor(1.0, 2.0) == agreement_factor(2.0, 1.0) == 2.0


@pytest.mark.parametrize(("pred_s", "meas_ms", "verdict"), [
    (1.0, 1500.0, Verdict.PASS),
    (1.0, 3000.0, Verdict.FAIL),  # measured 3x slower
    (1.0, 300.0, Verdict.FAIL),  # measured 3.3x faster: page cache?
])
def test_agreement_check_passes_only_within_the_factor(pred_s: float, meas_ms: float, verdict: Verdict) -> None:
    table = expected_vs_measured(_est(pred_s), {"candidate": {"4": {"ttft_p50_ms": meas_ms}}})
    [check] = _check({"estimate": agreement_measured(table)})
    assert check.verdict is verdict
    if verdict is Verdict.FAIL:
        assert table["rows"][0]["cause"]


def test_faster_than_the_tier_names_the_page_cache() -> None:
    table = expected_vs_measured(_est(1.0), {"candidate": {"4": {"ttft_p50_ms": 100.0}}})
    assert "page cache" in table["rows"][0]["cause"]


def test_recompute_like_candidate_names_missing_hits() -> None:
    est = _est(1.0)
    est["arms"]["recompute"] = {"offload": False, "points": {"4": {"ttft_s": 5.0, "output_tokens_per_s": 1.0}}}
    table = expected_vs_measured(est, {"candidate": {"4": {"ttft_p50_ms": 5200.0}}}, arms=["candidate"],
                                 recompute_arm="recompute")
    assert "no KV hits" in table["rows"][0]["cause"]


def test_no_prediction_is_not_run_never_pass() -> None:
    # the wrong-PASS scenario: an arm with no bandwidth (no prediction) must not count as agreeing
    est = {"arms": {"candidate": {"offload": True, "points": {}, "missing": "no read bandwidth"}}}
    table = expected_vs_measured(est, {"candidate": {"4": {"ttft_p50_ms": 900.0}}})
    [check] = _check({"estimate": agreement_measured(table)})
    assert check.verdict is Verdict.NOT_RUN
    # nor an arm that was not measured at all
    table = expected_vs_measured(_est(1.0), {"candidate": {"4": {"ttft_p50_ms": None}}})
    [check] = _check({"estimate": agreement_measured(table)})
    assert check.verdict is Verdict.NOT_RUN
    # nor a gate whose pipeline recorded no estimate
    [check] = _check({})
    assert check.verdict is Verdict.NOT_RUN


def test_expected_block_of_the_demo_profile() -> None:
    profile = load_profile(ROOT / "profiles" / "demo.yaml")
    inventory = load_inventory(ROOT / "inventory" / "localhost.yaml")
    sweeps = {"baseline": {"2": {"ttft_p50_ms": 212.7, "output_throughput": 125.0}},
              "candidate": {"2": {"ttft_p50_ms": 30.0, "output_throughput": 300.0}}}
    leaves, block = expected_block(profile, inventory, {"candidate": 1.0e9}, sweeps)
    assert block["available"]
    rows = {(r["arm"], r["concurrency"]): r for r in block["rows"]}
    # baseline = recompute in the demo: 4112 tokens at 20,000 tok/s alone
    assert rows[("baseline", 2)]["predicted_ttft_p50_ms"] == pytest.approx(4112 / 20000 * 1000, rel=1e-6)
    # candidate: 16 chunks of 256 tokens x 2048 B from a 1 GB/s tier + 16 tokens recomputed, and
    # the two clients share the tier: with restore D, tail t and decode d (15 tokens at 400 tok/s),
    # mean value analysis has the second request find the first restoring D / (t + D + d) of the
    # time, so its restore takes D x (1 + D / (t + D + d))
    restore, tail, decode = 16 * 256 * 2048 / 1e9, 16 / 20000, 15 / 400
    assert rows[("candidate", 2)]["predicted_ttft_p50_ms"] == pytest.approx(
        (tail + restore * (1 + restore / (tail + restore + decode))) * 1000, rel=1e-6)
    assert set(leaves["estimate"]["ttft_p50_factor"]) == {"baseline-c2", "candidate-c2"}
    assert block["compare"]["2"]["measured_reduction"] == pytest.approx(1 - 30.0 / 212.7)


def test_expected_block_without_bandwidth_is_not_run() -> None:
    profile = load_profile(ROOT / "profiles" / "demo.yaml")
    inventory = load_inventory(ROOT / "inventory" / "localhost.yaml")
    leaves, block = expected_block(profile, inventory, {}, {"candidate": {"2": {"ttft_p50_ms": 30.0}}})
    assert leaves["estimate"]["ttft_p50_factor"]["candidate-c2"]["value"] is None
    [check] = _check(leaves)
    assert check.verdict is Verdict.NOT_RUN


def test_prediction_never_depends_on_the_measurement_it_is_compared_with() -> None:
    # the wrong-PASS scenario: a "prediction" fitted to the sweep would always agree
    profile = load_profile(ROOT / "profiles" / "demo.yaml")
    inventory = load_inventory(ROOT / "inventory" / "localhost.yaml")
    preds = []
    for measured_ms in (10.0, 100.0, 1000.0):
        _, block = expected_block(profile, inventory, {"candidate": 1.0e9},
                                  {"candidate": {"2": {"ttft_p50_ms": measured_ms}}})
        preds.append(block["rows"][0]["predicted_ttft_p50_ms"])
    assert preds[0] == preds[1] == preds[2]


def test_slower_than_the_tier_names_the_bandwidth_below_fio() -> None:
    # 5x slower than predicted, and nowhere near the recompute arm's prediction (50 s): the tier
    # delivered less than its fio figure
    est = _est(1.0)
    est["arms"]["recompute"] = {"offload": False, "points": {"4": {"ttft_s": 50.0, "output_tokens_per_s": 1.0}}}
    table = expected_vs_measured(est, {"candidate": {"4": {"ttft_p50_ms": 5000.0}}}, arms=["candidate"],
                                 recompute_arm="recompute")
    row = table["rows"][0]
    assert "less than its fio bandwidth" in row["cause"]
    [check] = _check({"estimate": agreement_measured(table)})
    assert check.verdict is Verdict.FAIL


def test_slower_than_the_tier_names_the_probe_the_prediction_rests_on() -> None:
    est = _est(1.0)
    est["arms"]["candidate"].update(read_bw=1.02e9, read_bw_source="fio seq-read of its target in this campaign")
    table = expected_vs_measured(est, {"candidate": {"4": {"ttft_p50_ms": 2500.0}}}, arms=["candidate"])
    cause = table["rows"][0]["cause"]
    assert "2.5x slower than predicted from 1.02 GB/s (fio seq-read of its target in this campaign)" in cause
    assert "no verdict depends on it" in cause


def test_recompute_arm_far_off_names_the_compute_figures() -> None:
    est = {"arms": {"recompute": {"offload": False, "points": {"4": {"ttft_s": 10.0, "output_tokens_per_s": 1.0}}}}}
    slow = expected_vs_measured(est, {"recompute": {"4": {"ttft_p50_ms": 50_000.0}}})
    assert "efficiency or peak figure is too high" in slow["rows"][0]["cause"]
    fast = expected_vs_measured(est, {"recompute": {"4": {"ttft_p50_ms": 2_000.0}}})
    assert "efficiency or peak figure is too low" in fast["rows"][0]["cause"]
