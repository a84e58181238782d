"""SNIA-style steady-state criteria: range within 20% of the mean, slope excursion within 10%."""

from __future__ import annotations

import pytest

from harness.probes.steady import check_steady_state, least_squares_slope, rounds_until_steady


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


def test_rounds_stop_at_the_first_steady_window_and_the_figure_is_its_median_round() -> None:
    bws = iter([10.0, 50.0, 99.0, 101.0, 100.0, 98.0, 102.0, 500.0])
    rounds = rounds_until_steady(lambda: (object(), next(bws)), 10, "reads")
    assert rounds.bws == (10.0, 50.0, 99.0, 101.0, 100.0, 98.0, 102.0)  # the 7th round made it steady
    assert rounds.steady.steady and rounds.steady.source == "last 5 of 7 reads"
    assert rounds.bws[rounds.median] == 100.0 and len(rounds.taken) == 7


def test_rounds_never_steady_stop_at_the_limit_and_say_so() -> None:
    bws = iter([100.0, 40.0] * 10)
    rounds = rounds_until_steady(lambda: ("r", next(bws)), 6, "writes")
    assert len(rounds.bws) == 6 and not rounds.steady.steady
    assert rounds.steady.source == "last 5 of 6 writes"
    assert rounds.bws[rounds.median] == 40.0  # the window 40, 100, 40, 100, 40: its middle value


def test_fewer_rounds_than_the_window_are_never_steady() -> None:
    rounds = rounds_until_steady(lambda: (1, 100.0), 3, "reads")
    assert len(rounds.bws) == 3 and not rounds.steady.steady and rounds.steady.source == "no round"
