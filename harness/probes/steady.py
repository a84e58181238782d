"""Steady-state test over a window of bandwidth samples, as in SNIA's Performance Test
Specification: the range (max - min) of the window is within 20% of the window mean, and the
excursion of the least-squares line over the window (|slope| x window width) is within 10% of the
mean. Pure functions; the samples come from fio's ``steadystate`` data or its bandwidth logs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Optional, TypeVar

RANGE_TOLERANCE = 0.20
SLOPE_TOLERANCE = 0.10
MIN_SAMPLES = 3
STEADY_WINDOW = 5  # SNIA's measurement window: the last 5 rounds of a probe run in rounds

T = TypeVar("T")


@dataclass(frozen=True)
class SteadyState:
    """Verdict of the SNIA-style check on one window."""

    steady: bool
    samples: int
    mean: float
    range_ratio: float  # (max - min) / mean
    slope_excursion_ratio: float  # |slope| * (n - 1) / mean
    range_tolerance: float
    slope_tolerance: float
    source: str  # where the samples came from ("fio ss data", "bandwidth log", ...)
    reason: str

    def to_json(self) -> dict[str, object]:
        return {
            "steady": self.steady, "samples": self.samples, "mean": self.mean,
            "range_ratio": self.range_ratio, "slope_excursion_ratio": self.slope_excursion_ratio,
            "range_tolerance": self.range_tolerance, "slope_tolerance": self.slope_tolerance,
            "source": self.source, "reason": self.reason,
        }


def least_squares_slope(values: Sequence[float]) -> float:
    """Slope of the least-squares line through (i, values[i])."""
    n = len(values)
    if n < 2:
        return 0.0
    mean_x = (n - 1) / 2.0
    mean_y = sum(values) / n
    sxx = sum((i - mean_x) ** 2 for i in range(n))
    sxy = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(values))
    return sxy / sxx


def check_steady_state(values: Sequence[float], *, source: str, range_tolerance: float = RANGE_TOLERANCE,
                       slope_tolerance: float = SLOPE_TOLERANCE) -> SteadyState:
    """Apply the range and slope criteria to the whole of ``values`` (the measurement window)."""
    n = len(values)
    if n < MIN_SAMPLES:
        return SteadyState(False, n, sum(values) / n if n else 0.0, float("nan"), float("nan"),
                           range_tolerance, slope_tolerance, source,
                           f"only {n} sample(s) in the window; at least {MIN_SAMPLES} are needed")
    mean = sum(values) / n
    if mean <= 0:
        return SteadyState(False, n, mean, float("nan"), float("nan"), range_tolerance, slope_tolerance,
                           source, "mean bandwidth of the window is not positive")
    range_ratio = (max(values) - min(values)) / mean
    slope_ratio = abs(least_squares_slope(values)) * (n - 1) / mean
    problems = []
    if range_ratio > range_tolerance:
        problems.append(f"range {range_ratio:.1%} of the mean exceeds {range_tolerance:.0%}")
    if slope_ratio > slope_tolerance:
        problems.append(f"slope excursion {slope_ratio:.1%} of the mean exceeds {slope_tolerance:.0%}")
    steady = not problems
    reason = ("range and slope within bounds" if steady else "; ".join(problems))
    return SteadyState(steady, n, mean, range_ratio, slope_ratio, range_tolerance, slope_tolerance, source,
                       reason)


@dataclass(frozen=True)
class Rounds(Generic[T]):
    """A probe run in rounds: what each round returned, its bandwidth, the verdict on the window."""

    taken: tuple[T, ...]
    bws: tuple[float, ...]
    steady: SteadyState

    @property
    def median(self) -> int:
        """Index of the window's median round (the upper one of an even window): its figures are
        the probe's, a round that was measured rather than a mean no round had."""
        window = list(range(len(self.bws)))[-STEADY_WINDOW:]
        return sorted(window, key=lambda k: self.bws[k])[len(window) // 2]


def rounds_until_steady(take: Callable[[], tuple[T, float]], max_rounds: int, what: str,
                        on_round: Optional[Callable[[str], None]] = None) -> Rounds[T]:
    """Call ``take`` (one round: what it measured and its bandwidth) until the last STEADY_WINDOW
    rounds are steady or ``max_rounds`` were taken; ``what`` names the rounds in the verdict.
    ``on_round`` hears one line a round (its figure, and the steady state once judged): a probe
    of many rounds is never a silent stretch."""
    taken: list[T] = []
    bws: list[float] = []
    steady = check_steady_state([], source="no round")
    for i in range(1, max_rounds + 1):
        item, bw = take()
        taken.append(item)
        bws.append(bw)
        if i >= STEADY_WINDOW:
            steady = check_steady_state(bws[-STEADY_WINDOW:], source=f"last {STEADY_WINDOW} of {i} {what}")
        if on_round is not None:
            judged = f": {steady.reason}" if i >= STEADY_WINDOW else ""
            on_round(f"{what} round {i} of at most {max_rounds}: {bw / 1e6:.1f} MB/s{judged}")
        if i >= STEADY_WINDOW and steady.steady:
            break
    return Rounds(tuple(taken), tuple(bws), steady)
