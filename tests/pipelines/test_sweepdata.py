"""Pure sweep -> measured-results rules used by G2 and G3."""

from __future__ import annotations

import pytest

from harness.pipelines.shared.sweepdata import (
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
    # the baseline came through G2's repeatability filter: its own spread is not trusted; the
    # recompute arm was filtered by nothing
    assert m["ttft_p50_reduction"]["c16"]["samples"]["b_filtered"] is True
    assert "b_filtered" not in m["recompute_speedup"]["c16"]["samples"]
    assert best_point(cand) == 16
    assert m["throughput_gain_best"]["value"] == pytest.approx(0.40)
    assert m["recompute_speedup"]["c16"]["value"] == pytest.approx(20.0)
    # the table: the gain at every concurrency; capacity: each arm's own peak
    assert m["throughput_gain"]["c8"]["value"] == pytest.approx(0.30)
    assert m["throughput_gain"]["c16"]["samples"]["stat"] == "mean"
    assert m["capacity_gain"]["value"] == pytest.approx(0.40)
    assert m["capacity_gain"]["samples"]["a_points"] == {"8": [130.0, 130.0], "16": [210.0, 210.0]}


def test_compare_missing_side_is_not_run() -> None:
    base = {8: [rep("b", 8, 1, [1000.0], 1.0)]}
    m = compare_measured({}, base)
    assert m["ttft_p50_reduction"]["c8"]["value"] is None
    assert m["throughput_gain_best"]["value"] is None
    assert m["capacity_gain"]["value"] is None and "candidate" in m["capacity_gain"]["detail"]
    assert m["throughput_gain"]["c8"]["value"] is None


def _thr_sweep(arm: str, means: dict[int, float], reps: int = 5, cv: float = 0.03) -> dict[int, list[Repetition]]:
    wobble = [1 - 2 * cv, 1 - cv, 1.0, 1 + cv, 1 + 2 * cv][:reps]
    return {c: [rep(arm, c, r + 1, [100.0] * 4, m * wobble[r]) for r in range(reps)] for c, m in means.items()}


def test_equal_peaks_do_not_pass_the_throughput_gate() -> None:
    # issue 28: baseline c8 700 / c16 1000, candidate c8 1000 / c16 950: equal capacity. The old
    # check compared the candidate's best point (c8) with the baseline at c8 and said +42% PASS.
    from harness.config.loader import load_gate
    from harness.gates.evaluate import evaluate_check
    from harness.gates.outcome import Verdict
    from harness.paths import gates_dir

    m = compare_measured(_thr_sweep("c", {8: 1000.0, 16: 950.0}), _thr_sweep("b", {8: 700.0, 16: 1000.0}))
    g3 = load_gate(gates_dir() / "G3.yaml")
    assert m["throughput_gain_best"]["value"] == pytest.approx(1000 / 700 - 1)  # still reported
    assert m["capacity_gain"]["value"] == pytest.approx(0.0)
    gain = evaluate_check(g3.check("throughput_gain"), {"compare": m})
    assert gain.verdict is Verdict.FAIL, gain.observations[0].measured_text
    # a real capacity gain still passes, peak against peak
    m = compare_measured(_thr_sweep("c", {8: 1300.0, 16: 1450.0}), _thr_sweep("b", {8: 700.0, 16: 1000.0}))
    assert evaluate_check(g3.check("throughput_gain"), {"compare": m}).verdict is Verdict.PASS


def test_sweep_table_percentiles() -> None:
    t = sweep_table({2: [rep("b", 2, 1, [1.0, 2.0, 3.0, 4.0], 10.0)]})
    assert t["2"]["ttft_p50_ms"] == pytest.approx(2.5)
    assert t["2"]["completed"] == 4


def test_a_repetition_left_without_a_valid_ttft_makes_the_point_not_run() -> None:
    # Every request of the candidate's rep 2 timed no measurement (TTFT 0: error records, issue 52);
    # comparing the four that remain as if they were the design would be another experiment.
    base = {8: [rep("b", 8, r, [100.0, 110.0], 5.0) for r in range(1, 6)]}
    cand = {8: [rep("c", 8, r, [70.0, 75.0], 5.0) for r in range(1, 6)]}
    cand[8][1] = Repetition("c", 8, 2, {"completed": 0, "failed": 2, "errors_by_kind": {"invalid_timing": 2}}, [])
    leaf = compare_measured(cand, base)["ttft_p50_reduction"]["c8"]
    assert leaf["value"] is None and "samples" not in leaf
    assert leaf["detail"] == "no request with a valid TTFT in c c8 rep2 (2 error record(s): invalid_timing 2)"
    cand[8][1] = rep("c", 8, 2, [70.0], 5.0, failed=1)  # one left: a measured repetition
    assert compare_measured(cand, base)["ttft_p50_reduction"]["c8"]["value"] is not None
