"""Change detection over a metric's history: has this run got worse than the recent past, and where
did the series change?

Rules a reader must keep:

* Only runs of one series (one workload fingerprint) are ever given to these functions; the
  caller keys series by fingerprint so unlike runs are never compared.
* **This run vs the recent window** (:func:`compare_to_window`), as asv does: a one-sided
  Mann-Whitney U rank test (scipy) of this run's samples against the window runs' pooled samples,
  AND a minimum relative effect on the medians (per metric; defaults in :data:`DEFAULT_MIN_EFFECT`).
  A regression needs both: significant and large enough. An improvement is reported the same way,
  and is never a failure. Too little history, or too few samples to reach significance at all, is
  ``NOT_ENOUGH_HISTORY`` (the nightly exits 3), never a pass on no evidence.
* The size of a change is the relative change of the medians (this run / window - 1) with a
  seeded bootstrap percentile interval (numpy), so a result is reproducible.
* **Change points over the whole series** (:func:`change_points`): penalised kernel change-point
  detection (``ruptures.KernelCPD``, linear kernel: shifts of the mean, as e-divisive *means*
  looks for; its C implementation takes ~1 ms for a year of nights, the RBF kernel ~20x that) on
  medians scaled by a robust noise estimate (the MAD of successive differences, which level shifts
  do not inflate), then each candidate is confirmed by a two-sided rank test
  on the segments either side at ``CP_ALPHA`` and the minimum effect; unconfirmed candidates (an
  outlier night, a small drift) are dropped. We call the library; the algorithm is not ours.
  The exact penalised search costs O(n^2) (2.2 s for 10,000 nights of one metric), so a long
  series is searched in overlapping tiles of :data:`CP_TILE` runs (half a tile apart), as Apache
  Otava runs e-divisive over windows: each tile is penalised for its own length, and a
  breakpoint is kept from the tile whose centre is nearest to it (never near a tile edge); two
  tiles that see one shift either side of their border give one candidate (candidates closer
  than ``min_size`` are merged). A series up to one tile long is searched whole. Confirmation
  compares at most one tile of runs either side, so a change is judged against its
  neighbourhood. (MongoDB's signal-processing-algorithms e-divisive was weighed and not taken:
  its significance test permutes the window hundreds of times, each an O(n^2) statistic, where
  one rank test per candidate confirms it here.)
* ``better`` is ``"lower"`` (latency) or ``"higher"`` (bandwidth, throughput): "worse" follows it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

__all__ = [
    "CP_TILE", "DEFAULT_MIN_EFFECT", "FALLBACK_MIN_EFFECT", "ChangePoint", "Status", "WindowComparison",
    "change_points", "compare_to_window", "min_effect_for", "what_changed",
]

# Minimum relative effect per metric family (matched on the metric name's last parts).
DEFAULT_MIN_EFFECT: dict[str, float] = {"ttft_p50": 0.05, "throughput": 0.05, "read_bw": 0.05}
FALLBACK_MIN_EFFECT = 0.10
# Significance of the window rank test (one-sided). 0.01, not 0.05: a night tracks tens of metrics,
# and at 0.05 one of them would cross by chance most nights (the minimum effect filters more).
ALPHA = 0.01
CP_ALPHA = 0.01  # significance needed to confirm a change point (two-sided)
CP_TILE = 100  # runs per change-point search tile (Otava searches windows of 50 either side)
BOOTSTRAP_RESAMPLES = 2000


class Status(str, enum.Enum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_CHANGE = "no change"
    NOT_ENOUGH_HISTORY = "not enough history"
    NOT_MEASURED = "not measured"


@dataclass
class WindowComparison:
    metric: str
    status: Status
    better: str
    min_effect: float
    current_median: Optional[float] = None
    window_median: Optional[float] = None
    effect: Optional[float] = None  # this run's median / window median - 1
    effect_low: Optional[float] = None
    effect_high: Optional[float] = None
    p_value: Optional[float] = None  # one-sided, in the direction of the observed change
    n_current: int = 0
    n_window: int = 0
    window_runs: int = 0
    reason: str = ""


@dataclass
class ChangePoint:
    index: int  # first run of the new segment (the first bad run of a regression)
    before_median: float
    after_median: float
    effect: float  # after / before - 1
    p_value: float
    status: Status  # REGRESSION or IMPROVEMENT
    extra: dict[str, Any] = field(default_factory=dict)


def min_effect_for(metric: str, overrides: Optional[Mapping[str, float]] = None) -> float:
    """The minimum relative effect for ``metric``: an override whose key is contained in the name
    (longest key wins), else the family default, else :data:`FALLBACK_MIN_EFFECT`."""
    for table in (overrides or {}, DEFAULT_MIN_EFFECT):
        keys = sorted((k for k in table if k in metric), key=len, reverse=True)
        if keys:
            return float(table[keys[0]])
    return FALLBACK_MIN_EFFECT


def _finite(xs: Sequence[Optional[float]]) -> list[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(float(x))]


def _worse_sign(better: str) -> int:
    if better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', got {better!r}")
    return 1 if better == "lower" else -1


def _mwu_one_sided(a: Sequence[float], b: Sequence[float], alternative: str) -> float:
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(a, b, alternative=alternative, method="auto").pvalue)


def _min_p(n1: int, n2: int) -> float:
    """The smallest one-sided p-value an exact rank test can give with these sizes."""
    return 1.0 / math.comb(n1 + n2, n1)


def _effect_interval(current: Sequence[float], window: Sequence[float], *, seed: int,
                     confidence: float = 0.95) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    a = np.asarray(current, dtype=np.float64)
    b = np.asarray(window, dtype=np.float64)
    ra = np.median(a[rng.integers(0, len(a), size=(BOOTSTRAP_RESAMPLES, len(a)))], axis=1)
    rb = np.median(b[rng.integers(0, len(b), size=(BOOTSTRAP_RESAMPLES, len(b)))], axis=1)
    ok = rb != 0
    reps = ra[ok] / rb[ok] - 1.0
    lo, hi = np.quantile(reps, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(lo), float(hi)


def _interval_text(c: WindowComparison) -> str:
    if c.effect_low is None or c.effect_high is None:
        return ""
    return f" [{c.effect_low:+.1%}, {c.effect_high:+.1%}]"


def compare_to_window(metric: str, current: Sequence[Optional[float]], window: Sequence[Sequence[Optional[float]]],
                      *, better: str, min_effect: float, min_runs: int = 1, alpha: float = ALPHA,
                      seed: int = 0, detail: bool = True) -> WindowComparison:
    """This run's samples (``current``) against the samples of each earlier run of the window.

    ``detail=False`` (scans over many series) computes the effect's bootstrap interval only when a
    change is called, and skips the rank test when the effect is below the minimum (no change can
    be called then, whatever the p-value)."""
    sign = _worse_sign(better)
    cur = _finite(current)
    runs = [w for w in (_finite(x) for x in window) if w]
    pooled = [x for w in runs for x in w]
    out = WindowComparison(metric=metric, status=Status.NO_CHANGE, better=better, min_effect=min_effect,
                           n_current=len(cur), n_window=len(pooled), window_runs=len(runs))
    if not cur:
        out.status, out.reason = Status.NOT_MEASURED, "this run has no value for it"
        return out
    out.current_median = float(np.median(cur))
    if len(runs) < min_runs or not pooled:
        out.status = Status.NOT_ENOUGH_HISTORY
        out.reason = f"{len(runs)} earlier run(s) of this series with it; {min_runs} needed"
        return out
    out.window_median = float(np.median(pooled))
    if out.window_median == 0:
        out.status, out.reason = Status.NOT_ENOUGH_HISTORY, "the window's median is zero: no relative change"
        return out
    out.effect = out.current_median / out.window_median - 1.0
    if detail:
        out.effect_low, out.effect_high = _effect_interval(cur, pooled, seed=seed)
    if _min_p(len(cur), len(pooled)) >= alpha:
        out.status = Status.NOT_ENOUGH_HISTORY
        out.reason = (f"{out.effect:+.1%}{_interval_text(out)}, but {len(cur)} sample(s) now and {len(pooled)} "
                      f"before cannot reach significance {alpha:g} in a rank test")
        return out
    worse = out.effect * sign > 0  # lower-is-better: a rise is worse
    # Test in the direction the medians moved; "greater" means this run's values rank higher.
    alternative = "greater" if out.effect > 0 else "less"
    large = abs(out.effect) >= min_effect
    if not large and not detail:
        out.reason = f"{out.effect:+.1%}: under the minimum effect {min_effect:.0%}"
        return out
    out.p_value = _mwu_one_sided(cur, pooled, alternative) if out.effect != 0 else 1.0
    significant = out.p_value < alpha
    if significant and large:
        out.status = Status.REGRESSION if worse else Status.IMPROVEMENT
        if out.effect_low is None:
            out.effect_low, out.effect_high = _effect_interval(cur, pooled, seed=seed)
    out.reason = (f"median {out.current_median:.6g} vs {out.window_median:.6g} over {len(runs)} run(s): "
                  f"{out.effect:+.1%}{_interval_text(out)}, "
                  f"p={out.p_value:.3g} ({'significant' if significant else 'not significant'} at {alpha:g}), "
                  f"minimum effect {min_effect:.0%} ({'reached' if large else 'not reached'})")
    return out


def _noise_scale(xs: np.ndarray) -> float:
    """A robust estimate of the run-to-run noise (standard deviation) that level shifts do not
    inflate: the MAD of successive differences / sqrt(2); the plain MAD, then the standard deviation,
    when that is zero (a series of repeated values)."""
    for spread in (float(np.median(np.abs(np.diff(xs) - np.median(np.diff(xs))))) / math.sqrt(2),
                   float(np.median(np.abs(xs - np.median(xs))))):
        if spread > 0:
            return spread * 1.4826
    return float(np.std(xs)) or 1.0


def _tile_breakpoints(z: np.ndarray, *, min_size: int, penalty: Optional[float]) -> list[int]:
    """Breakpoints (first index of a new segment) of one tile of scaled values by penalised kernel
    CPD; ``penalty`` defaults to ``3 * log(len(z))``. (A linear kernel looks at mean shifts: the
    values need no centring.)"""
    import ruptures as rpt

    pen = penalty if penalty is not None else 3.0 * math.log(len(z))
    return [int(b) for b in rpt.KernelCPD(kernel="linear", min_size=min_size).fit(z).predict(pen=pen)][:-1]


def _candidates(xs: np.ndarray, *, min_size: int, penalty: Optional[float], tile: int) -> list[int]:
    n = len(xs)
    z = (xs / _noise_scale(xs)).reshape(-1, 1)
    if n <= tile:
        return _tile_breakpoints(z, min_size=min_size, penalty=penalty)
    step = max(1, tile // 2)
    starts = list(range(0, n - tile, step)) + [n - tile]
    centres = [s + tile / 2 for s in starts]
    out: list[int] = []
    for k, s in enumerate(starts):
        # this tile owns the runs nearer to its centre than to its neighbours'
        lo = 0 if k == 0 else (centres[k - 1] + centres[k]) / 2
        hi = n if k == len(starts) - 1 else (centres[k] + centres[k + 1]) / 2
        for b in _tile_breakpoints(z[s:s + tile], min_size=min_size, penalty=penalty):
            if lo <= s + b < hi:
                out.append(s + b)
    # one shift seen by two neighbouring tiles either side of their zones' border: keep the first
    merged: list[int] = []
    for b in sorted(set(out)):
        if not merged or b - merged[-1] >= min_size:
            merged.append(b)
    return merged


def change_points(values: Sequence[Optional[float]], *, better: str, min_effect: float, min_size: int = 3,
                  penalty: Optional[float] = None, alpha: float = CP_ALPHA, tile: int = CP_TILE) -> list[ChangePoint]:
    """Confirmed change points of a series of per-run medians (None or NaN for runs without a value).

    Indices refer to ``values``. ``penalty`` defaults to ``3 * log(n)`` on robustly scaled data, n
    being the length searched at once (the series, or one tile of ``tile`` runs)."""
    from scipy.stats import mannwhitneyu

    sign = _worse_sign(better)
    arr = np.asarray([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    idx = np.flatnonzero(np.isfinite(arr))
    xs = arr[idx]
    n = len(xs)
    if n < 2 * min_size:
        return []
    edges = [0] + _candidates(xs, min_size=min_size, penalty=penalty, tile=tile) + [n]
    out: list[ChangePoint] = []
    for k in range(1, len(edges) - 1):
        before = xs[max(edges[k - 1], edges[k] - tile):edges[k]]
        after = xs[edges[k]:min(edges[k + 1], edges[k] + tile)]
        mb, ma = float(np.median(before)), float(np.median(after))
        if mb == 0:
            continue
        effect = ma / mb - 1.0
        if abs(effect) < min_effect:
            continue
        p = float(mannwhitneyu(after, before, alternative="two-sided").pvalue)
        if p >= alpha:
            continue
        status = Status.REGRESSION if effect * sign > 0 else Status.IMPROVEMENT
        out.append(ChangePoint(index=int(idx[edges[k]]), before_median=mb, after_median=ma, effect=effect,
                               p_value=p, status=status))
    return out


def what_changed(good: Mapping[str, Any], bad: Mapping[str, Any]) -> list[str]:
    """What differs between two runs' provenance (``git_commit``, ``kvgate_version``, ``nodes``,
    ``versions``: node -> software -> version), as sentences; empty when nothing recorded differs."""
    out: list[str] = []
    for key, label in (("git_commit", "kvgate commit"), ("kvgate_version", "kvgate version")):
        if (good.get(key) or "") != (bad.get(key) or ""):
            out.append(f"{label}: {good.get(key) or '-'} -> {bad.get(key) or '-'}")
    gn, bn = list(good.get("nodes") or []), list(bad.get("nodes") or [])
    if sorted(gn) != sorted(bn):
        out.append(f"nodes: {', '.join(sorted(gn)) or '-'} -> {', '.join(sorted(bn)) or '-'}")
    gv: Mapping[str, Mapping[str, str]] = good.get("versions") or {}
    bv: Mapping[str, Mapping[str, str]] = bad.get("versions") or {}
    for node in sorted(set(gv) | set(bv)):
        a, b = gv.get(node) or {}, bv.get(node) or {}
        for sw in sorted(set(a) | set(b)):
            if a.get(sw) != b.get(sw):
                out.append(f"{node} {sw}: {a.get(sw) or '-'} -> {b.get(sw) or '-'}")
    return out
