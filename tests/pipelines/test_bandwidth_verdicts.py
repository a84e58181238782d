"""A sweep point's verdicts are the gate engine's on G3's and G1's own checks: a rate the kernel did
not deliver (or above its cap: the cap was not in effect) is an error point; a TTFT reduction that
clears G3's bar on a restore the engine's counters do not prove cold is never a PASS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.config.inventory import StorageTarget
from harness.config.loader import load_gate
from harness.pipelines.bandwidth.verdicts import evaluate_point, g3_subset, rate_check, rate_error, unfiltered
from harness.pipelines.shared.sweepdata import Repetition, compare_measured, failed_ratio, measurement
from harness.records.outcome import Verdict

REPO = Path(__file__).resolve().parents[2]
G1 = load_gate(REPO / "gates" / "G1.yaml")
G3 = g3_subset(load_gate(REPO / "gates" / "G3.yaml"))
TARGET = StorageTarget(name="fast-disk", path="/var/tmp/x", provisioned={"read": "75 MB/s"}, enforce="blk-throttle")


def _read(rounds: list[float]) -> dict[str, Any]:
    return {"value": sorted(rounds)[len(rounds) // 2], "samples": {"kind": "percentile", "q": 50, "x": rounds}}


def test_a_rate_the_kernel_did_not_deliver_is_an_error_point() -> None:
    ok = rate_check(G1, TARGET, "local", _read([74.8e6, 75.1e6, 75.0e6, 74.9e6, 75.2e6]))
    assert ok.verdict is Verdict.PASS and rate_error(ok) is None
    short = rate_check(G1, TARGET, "local", _read([40e6, 41e6, 40.5e6, 39.8e6, 40.2e6]))  # the device gave 54%
    assert short.verdict is Verdict.FAIL
    assert "not delivered" in (rate_error(short) or "") and "an error, not a point" in (rate_error(short) or "")
    uncapped = rate_check(G1, TARGET, "local", _read([1.5e9, 1.6e9, 1.55e9, 1.52e9, 1.58e9]))  # cap not in effect
    assert uncapped.verdict is Verdict.INCONCLUSIVE and rate_error(uncapped) is not None
    nothing = rate_check(G1, TARGET, "local", {"value": None, "detail": "fio did not run"})
    assert nothing.verdict is Verdict.NOT_RUN and rate_error(nothing) is not None


def _sweep(arm: str, ttft: float, thr: float) -> dict[int, list[Repetition]]:
    reps = []
    for r in range(1, 6):
        base = ttft * (1 + 0.01 * r)
        reps.append(Repetition(arm, 2, r, {"completed": 16, "failed": 0, "output_throughput": thr * (1 + 0.01 * r)},
                               [base * (1 + 0.02 * i) for i in range(16)]))
    return {2: reps}


def _measured(cold: dict[str, Any]) -> dict[str, Any]:
    cand, base = _sweep("cand", 60.0, 300.0), _sweep("base", 210.0, 125.0)
    return {"candidate": {"failed_ratio": failed_ratio(cand), "cold_restore": cold},
            "compare": unfiltered(compare_measured(cand, base, base)),
            "recompute": {"cold_restore": {"offload_hit_tokens": {"c2": measurement(0.0)}}}}


COLD = {"offload_hit_tokens": {"c2": measurement(65536.0)}, "offload_hit_vs_expected": {"c2": measurement(1.0)},
        "engine_prefix_hit_excess": {"c2": measurement(0.0)}, "memory_tier_hit_requests": {"c2": measurement(0.0)},
        "restore_bandwidth_ratio": {"c2": measurement(0.9)}}


def test_the_curve_verdicts_are_g3s_and_need_a_proven_cold_restore() -> None:
    checks, verdicts = evaluate_point(G3, _measured(COLD), [], seed=7)
    assert {c.id: c.verdict for c in checks}["ttft_p50_reduction"] is Verdict.PASS
    assert verdicts == {"ttft_p50_reduction": "PASS", "throughput_gain": "PASS"}
    # the wrong-PASS scenarios: the same clear TTFT reduction on a restore served from host memory,
    # faster than its storage, or with no counters at all
    for key, value, expected in (("memory_tier_hit_requests", 3.0, "FAIL"), ("restore_bandwidth_ratio", 2.0, "FAIL"),
                                 ("offload_hit_tokens", None, "NOT_RUN")):
        cold = {**COLD, key: {"c2": measurement(value)}}
        checks, verdicts = evaluate_point(G3, _measured(cold), [], seed=7)
        assert {c.id: c.verdict for c in checks}["ttft_p50_reduction"] is Verdict.PASS  # the check alone
        assert verdicts["ttft_p50_reduction"] == expected, key  # the point: never PASS


def test_the_sweeps_own_baseline_is_not_treated_as_g2_filtered() -> None:
    compare = unfiltered(compare_measured(_sweep("c", 60.0, 300.0), _sweep("b", 210.0, 125.0)))
    assert compare["ttft_p50_reduction"]["c2"]["samples"]["b_filtered"] is False
    assert compare["capacity_gain"]["samples"]["b_filtered"] is False
