"""How the nightly says a comparison: its status word and its figures with their units.

A comparison the rank test did not call a change is "no change" only when its interval excludes a
change of the metric's minimum effect; an interval that still reaches that far either side (a
+345% median move with [-53%, +747%]) is "undecided", never "no change"."""

from __future__ import annotations

from harness.gates.regression import Status, WindowComparison
from harness.units import UnitKind, format_quantity

UNDECIDED = "undecided"
# units the nightly records its metrics in (``run._metric``) and their kinds
_KINDS = {"B/s": UnitKind.BANDWIDTH, "bytes": UnitKind.BYTES, "s": UnitKind.DURATION}


def undecided(c: WindowComparison) -> bool:
    """No change was called, but the interval does not exclude a change of the minimum effect."""
    if c.status is not Status.NO_CHANGE or c.effect_low is None or c.effect_high is None:
        return False
    return c.effect_low <= -c.min_effect or c.effect_high >= c.min_effect


def status_word(c: WindowComparison) -> str:
    return UNDECIDED if undecided(c) else c.status.value


def interval_text(c: WindowComparison) -> str:
    if c.effect_low is None or c.effect_high is None:
        return ""
    return f" [{c.effect_low:+.1%}, {c.effect_high:+.1%}] (95%)"


def summary_line(c: WindowComparison) -> str:
    """``metric: status +x% [low, high] (95%)``: what the terminal prints per metric."""
    effect = f" {c.effect:+.1%}" if c.effect is not None else ""
    return f"{c.metric}: {status_word(c)}{effect}{interval_text(c)}"


def figure(value: float, unit: str) -> str:
    """A median with its unit (bandwidth scaled: 1.19 GB/s, never 1.18567e+09)."""
    kind = _KINDS.get(unit)
    if kind is not None:
        return format_quantity(value, kind)
    try:
        return format_quantity(value, UnitKind(unit))
    except ValueError:
        return f"{value:.4g} {unit}".rstrip()


def reason(c: WindowComparison, unit: str) -> str:
    """The comparison's reason with every figure in its unit (the rank test's own reason, said
    again, where it holds medians)."""
    if c.current_median is None or c.window_median is None or c.effect is None or c.p_value is None:
        return c.reason
    large = abs(c.effect) >= c.min_effect
    text = (f"median {figure(c.current_median, unit)} vs {figure(c.window_median, unit)} over "
            f"{c.window_runs} run(s): {c.effect:+.1%}{interval_text(c)}, p={c.p_value:.3g}, minimum effect "
            f"{c.min_effect:.0%} ({'reached' if large else 'not reached'})")
    if undecided(c):
        text += (f"; undecided: the interval does not exclude a change of {c.min_effect:.0%} "
                 "(more runs or repetitions would decide)")
    return text
