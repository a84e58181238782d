"""SNIA-style steady-state criteria: range within 20% of the mean, slope excursion within 10%."""

from __future__ import annotations

import pytest

from harness.probes.steady import check_steady_state, least_squares_slope


def test_flat_window_is_steady() -> None:
    v = check_steady_state([100.0, 102.0, 98.0, 101.0, 99.0], source="t")
    assert v.steady and v.range_ratio == pytest.approx(4 / 100) and v.slope_excursion_ratio < 0.02


def test_wide_range_is_not_steady() -> None:
    v = check_steady_state([100.0, 125.0, 100.0, 125.0, 100.0], source="t")
    assert not v.steady and "range" in v.reason and v.range_ratio == pytest.approx(25 / 110)


def test_rising_trend_is_not_steady_even_within_range() -> None:
    # range 18% of the mean (inside 20%) but the fitted line climbs 18% over the window
    values = [91.0, 95.5, 100.0, 104.5, 109.0]
    v = check_steady_state(values, source="t")
    assert v.range_ratio < 0.20
    assert v.slope_excursion_ratio == pytest.approx(18 / 100)
    assert not v.steady and "slope" in v.reason


def test_slope_of_exact_line() -> None:
    assert least_squares_slope([1.0, 3.0, 5.0, 7.0]) == pytest.approx(2.0)


def test_too_few_samples_is_not_steady() -> None:
    v = check_steady_state([1.0, 1.0], source="t")
    assert not v.steady and "at least 3" in v.reason
