"""Pure sweep -> measured-results rules used by G2 and G3."""

from __future__ import annotations

import pytest

from harness.pipelines.sweepdata import (
    Repetition,
    baseline_measured,
    best_point,
    compare_measured,
    cv,
    sweep_table,
)


def rep(arm: str, c: int, r: int, ttft: list[float], thr: float, failed: int = 0) -> Repetition:
    return Repetition(arm, c, r, {"completed": len(ttft), "failed": failed, "output_throughput": thr,
                                  "request_throughput": 1.0}, ttft)


def test_cv_is_sample_stdev_over_mean() -> None:
    assert cv([10.0, 12.0, 14.0]) == pytest.approx(2.0 / 12.0)
    assert cv([5.0]) is None  # one repetition cannot show repeatability
    assert cv([0.0, 0.0]) is None


def test_baseline_complete_and_cv() -> None:
    sweep = {2: [rep("b", 2, 1, [100, 110], 50), rep("b", 2, 2, [100, 120], 55)],
             4: [rep("b", 4, 1, [200, 210], 80)]}
    m = baseline_measured(sweep, [2, 4], 2)
    assert m["complete"]["value"] is False
    assert "c4/rep2" in m["complete"]["detail"]
    assert m["ttft_p50_cv"]["c2"]["value"] == pytest.approx(cv([105.0, 110.0]))
    assert m["ttft_p50_cv"]["c4"]["value"] is None  # NOT_RUN, with the reason
    assert "at least 2 repetitions" in m["ttft_p50_cv"]["c4"]["detail"]
    assert m["failed_ratio"]["value"] == 0.0


def test_failed_requests_counted() -> None:
    sweep = {2: [rep("b", 2, 1, [100.0] * 9, 50, failed=1)]}
    assert baseline_measured(sweep, [2], 1)["failed_ratio"]["value"] == pytest.approx(0.1)


def test_compare_reduction_gain_and_speedup() -> None:
    base = {8: [rep("b", 8, 1, [1000.0] * 10, 100.0), rep("b", 8, 2, [1000.0] * 10, 100.0)],
            16: [rep("b", 16, 1, [2000.0] * 10, 150.0), rep("b", 16, 2, [2000.0] * 10, 150.0)]}
    cand = {8: [rep("c", 8, 1, [700.0] * 10, 130.0), rep("c", 8, 2, [700.0] * 10, 130.0)],
            16: [rep("c", 16, 1, [1400.0] * 10, 210.0), rep("c", 16, 2, [1400.0] * 10, 210.0)]}
    reco = {8: [rep("r", 8, 1, [7000.0] * 10, 10.0)], 16: [rep("r", 16, 1, [28000.0] * 10, 10.0)]}
    m = compare_measured(cand, base, reco)
    assert m["ttft_p50_reduction"]["c8"]["value"] == pytest.approx(0.30)
    assert m["ttft_p50_reduction"]["c16"]["samples"]["transform"] == "reduction"
    # grouped by repetition for the hierarchical bootstrap: 2 repetitions of 10 requests
    assert [len(g) for g in m["ttft_p50_reduction"]["c16"]["samples"]["a_groups"]] == [10, 10]
    assert best_point(cand) == 16
    assert m["throughput_gain_best"]["value"] == pytest.approx(0.40)
    assert m["recompute_speedup"]["c16"]["value"] == pytest.approx(20.0)


def test_compare_missing_side_is_not_run() -> None:
    base = {8: [rep("b", 8, 1, [1000.0], 1.0)]}
    m = compare_measured({}, base)
    assert m["ttft_p50_reduction"]["c8"]["value"] is None
    assert m["throughput_gain_best"]["value"] is None


def test_sweep_table_percentiles() -> None:
    t = sweep_table({2: [rep("b", 2, 1, [1.0, 2.0, 3.0, 4.0], 10.0)]})
    assert t["2"]["ttft_p50_ms"] == pytest.approx(2.5)
    assert t["2"]["completed"] == 4
