"""The nightly never says "no change" for an interval that does not exclude a change of the
metric's minimum effect (the +345% [-53%, +747%] of issue 53 is "undecided"), and its medians
carry units."""

from __future__ import annotations

from harness.gates.regression import Status, WindowComparison, compare_to_window
from harness.pipelines.nightly import wording
from harness.pipelines.nightly.run import _check


def _wide() -> WindowComparison:
    # two noisy runs of fio read bandwidth: the median moved a lot, but the samples overlap
    current = [9.0e8, 6.5e9, 1.2e9, 4.1e9, 5.0e9]
    window = [[1.0e9, 1.4e9, 2.9e8, 6.0e9], [8.0e8, 1.1e9, 5.5e9]]
    return compare_to_window("candidate.fio.seq_read_bw", current, window, better="higher", min_effect=0.05)


def test_a_wide_interval_is_undecided_never_no_change() -> None:
    c = _wide()
    assert c.status is Status.NO_CHANGE, c.reason  # the rank test called nothing
    assert c.effect_low is not None and c.effect_high is not None
    assert c.effect_low < -0.05 and c.effect_high > 0.05, (c.effect_low, c.effect_high)
    line = wording.summary_line(c)
    assert "undecided" in line and "no change" not in line, line
    assert f"[{c.effect_low:+.1%}, {c.effect_high:+.1%}]" in line
    check = _check(c, "B/s")
    text = check.observations[0].measured_text or ""
    assert "undecided" in text and "no change" not in text
    assert "GB/s" in check.reason and "e+09" not in check.reason, check.reason
    assert check.unit_kind == "percent"  # the interval reads [-53.2%, +746.8%], not [-0.53x, 7.47x]


def test_a_narrow_interval_inside_the_minimum_effect_is_no_change() -> None:
    current = [1.000e9, 1.001e9, 0.999e9, 1.0005e9, 1.0002e9, 0.9995e9]
    window = [[1.0e9, 1.0008e9, 0.9992e9, 1.0003e9], [1.0001e9, 0.9997e9, 1.0004e9]]
    c = compare_to_window("candidate.fio.seq_read_bw", current, window, better="higher", min_effect=0.05)
    assert c.status is Status.NO_CHANGE
    assert c.effect_low is not None and -0.05 < c.effect_low and c.effect_high is not None and c.effect_high < 0.05
    assert wording.status_word(c) == "no change"
    assert "no change" in wording.summary_line(c)


def test_figures_have_units() -> None:
    assert wording.figure(1.18567e9, "B/s") == "1.19 GB/s"
    assert wording.figure(210.0, "ms") == "210 ms"
    assert wording.figure(512.3, "tok/s") == "512.3 tok/s"
