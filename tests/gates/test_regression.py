"""Change detection: window rank test + minimum effect, change points, provenance diff."""

from __future__ import annotations

import random

import pytest

from harness.gates.regression import (
    Status,
    change_points,
    compare_to_window,
    min_effect_for,
    what_changed,
)


def _nights(n: int, centre: float, spread: float, per: int = 5, seed: int = 1) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.gauss(centre, spread) for _ in range(per)] for _ in range(n)]


def test_slower_ttft_is_a_regression_with_size_and_interval() -> None:
    window = _nights(10, 100.0, 2.0)
    cur = [r + 20 for r in _nights(1, 100.0, 2.0, seed=9)[0]]
    c = compare_to_window("sweep.c2.ttft_p50_ms", cur, window, better="lower", min_effect=0.05)
    assert c.status is Status.REGRESSION
    assert c.effect is not None and 0.15 < c.effect < 0.25
    assert c.effect_low is not None and c.effect_high is not None and c.effect_low <= c.effect <= c.effect_high
    assert c.p_value is not None and c.p_value < 0.05


def test_faster_ttft_is_an_improvement_never_a_regression() -> None:
    window = _nights(10, 100.0, 2.0)
    cur = [r - 20 for r in _nights(1, 100.0, 2.0, seed=9)[0]]
    assert compare_to_window("ttft_p50", cur, window, better="lower", min_effect=0.05).status is Status.IMPROVEMENT


def test_lower_bandwidth_is_a_regression_for_higher_is_better() -> None:
    window = _nights(10, 1000.0, 10.0)
    cur = [900.0, 905.0, 899.0]
    assert compare_to_window("read_bw", cur, window, better="higher", min_effect=0.05).status is Status.REGRESSION


def test_significant_but_small_change_is_not_a_regression() -> None:
    """A 2% shift with tiny noise is significant; under the 5% minimum effect it is no regression."""
    window = _nights(10, 100.0, 0.1)
    cur = [102.0, 102.1, 101.9, 102.05, 102.0]
    c = compare_to_window("ttft_p50", cur, window, better="lower", min_effect=0.05)
    assert c.p_value is not None and c.p_value < 0.05
    assert c.status is Status.NO_CHANGE


def test_large_but_noisy_change_is_not_a_regression() -> None:
    window = [[50.0, 150.0, 100.0]] * 3
    cur = [110.0, 60.0, 160.0]
    c = compare_to_window("ttft_p50", cur, window, better="lower", min_effect=0.05)
    assert c.status is Status.NO_CHANGE


def test_no_history_or_no_power_is_not_enough_history_never_a_pass() -> None:
    assert compare_to_window("m", [1.0, 2.0], [], better="lower", min_effect=0.05).status is Status.NOT_ENOUGH_HISTORY
    # one sample now, one before: no rank test can reach 0.05
    c = compare_to_window("m", [500.0], [[1.0]], better="lower", min_effect=0.05)
    assert c.status is Status.NOT_ENOUGH_HISTORY
    assert compare_to_window("m", [], [[1.0]], better="lower", min_effect=0.05).status is Status.NOT_MEASURED
    c = compare_to_window("m", [1.0] * 5, _nights(2, 1.0, 0.1), better="lower", min_effect=0.05, min_runs=3)
    assert c.status is Status.NOT_ENOUGH_HISTORY and "3 needed" in c.reason


def test_min_effect_defaults_and_overrides() -> None:
    assert min_effect_for("sweep.c2.ttft_p50_ms") == 0.05
    assert min_effect_for("sweep.c2.output_throughput") == 0.05
    assert min_effect_for("fio.n1.tier.seq_read_bw") == 0.05
    assert min_effect_for("fio.n1.tier.seq_write_bw") == 0.10
    assert min_effect_for("sweep.c2.ttft_p50_ms", {"ttft_p50": 0.02, "c2.ttft_p50": 0.03}) == 0.03


def test_change_point_found_and_named_as_regression() -> None:
    rng = random.Random(3)
    series = [rng.gauss(100, 1.5) for _ in range(30)] + [rng.gauss(112, 1.5) for _ in range(15)]
    cps = change_points(series, better="lower", min_effect=0.05)
    assert len(cps) == 1
    assert cps[0].index in (29, 30, 31) and cps[0].status is Status.REGRESSION
    assert cps[0].effect == pytest.approx(0.12, abs=0.03)


def test_no_change_point_in_noise_or_below_min_effect() -> None:
    rng = random.Random(4)
    assert change_points([rng.gauss(100, 3) for _ in range(60)], better="lower", min_effect=0.05) == []
    small = [rng.gauss(100, 0.1) for _ in range(30)] + [rng.gauss(102, 0.1) for _ in range(30)]
    assert change_points(small, better="lower", min_effect=0.05) == []


def test_change_point_indices_skip_missing_values() -> None:
    rng = random.Random(5)
    vals: list[float | None] = [rng.gauss(10, 0.1) for _ in range(20)] + [None] + [rng.gauss(8, 0.1) for _ in range(20)]
    cps = change_points(vals, better="higher", min_effect=0.05)
    assert [c.index for c in cps] == [21] and cps[0].status is Status.REGRESSION


def test_what_changed_between_runs() -> None:
    good = {"git_commit": "aaa", "kvgate_version": "0.1", "nodes": ["n1"], "versions": {"n1": {"vllm": "0.8"}}}
    bad = {"git_commit": "bbb", "kvgate_version": "0.1", "nodes": ["n1", "n2"],
           "versions": {"n1": {"vllm": "0.9"}}}
    assert what_changed(good, bad) == ["kvgate commit: aaa -> bbb", "nodes: n1 -> n1, n2", "n1 vllm: 0.8 -> 0.9"]
    assert what_changed(good, good) == []


def test_long_series_searched_in_tiles_finds_each_shift_once() -> None:
    """Over 2,000 runs (20 tiles) the search still finds every planted shift where it is, once,
    including one exactly on a border between two tiles' zones, and nothing in plain noise."""
    from harness.gates.regression import CP_TILE

    rng = random.Random(11)
    # tiles start every CP_TILE / 2 runs, so the 2nd and 3rd are centred on CP_TILE and 3 CP_TILE / 2:
    # the border between the runs each owns is halfway
    border = CP_TILE * 5 // 4
    level = [100.0 if i < border else 112.0 if i < 1200 else 100.0 for i in range(2000)]
    series = [rng.gauss(v, 1.0) for v in level]
    cps = change_points(series, better="lower", min_effect=0.05)
    assert [(cp.index, cp.status.value) for cp in cps] == [(border, "regression"), (1200, "improvement")]
    noise = [rng.gauss(100.0, 1.0) for _ in range(2000)]
    assert change_points(noise, better="lower", min_effect=0.05) == []
