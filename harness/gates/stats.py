"""Statistics for gate checks: point estimates and bootstrap confidence intervals over samples.

Sample specs (produced by the pipelines, see the brief's "measured results" contract)::

    {"kind": "ratio", "a": [...], "b": [...], "stat": "p50"|"mean"|"median",
     "transform": "reduction"|"gain"|"ratio"}
        value = 1 - s(a)/s(b)  (reduction),  s(a)/s(b) - 1  (gain),  s(a)/s(b)  (ratio)
        a = candidate, b = baseline; the two groups are resampled independently.
    {"kind": "ratio", "a_groups": [[...], ...], "b_groups": [[...], ...], "stat": ..., "transform": ...,
     "b_filtered": true, "members": "requests"|"rounds"}
        the same, with the samples grouped by repetition (clustered; ``members`` names what a group
        holds, for the report: a load run's requests, by default, or an fio run's rounds). For a median (``p50``) with
        two or more repetitions per arm: the estimate is exp(mean of per-repetition log p50s of a -
        the same of b) and the interval the cluster-level t (:func:`cluster_t_half_width`); else
        the estimate is computed on the pooled samples, the interval by a hierarchical (two-stage)
        bootstrap. ``b_filtered`` (default false) says ``b``'s repetitions were kept only because
        they agreed (G2's repeatability check): their spread is then not used (see
        :func:`cluster_t_half_width`).
    {"kind": "ratio", "a": [...], "b": [...], "stat": ..., "transform": ..., "block": L}
        the same, with ``a`` and ``b`` each a time series (a soak's windows, in order) whose
        neighbours are correlated: each group is resampled by the circular moving-block bootstrap
        (blocks of ``L`` consecutive values), so the interval keeps the series' slow wander.
    {"kind": "ratio", "a": [...], "b": [...], "stat": ..., "transform": ..., "batches": k,
     "long_memory": true}
        the same, with ``a`` and ``b`` each a time series (a soak's windows, in order) cut into ``k``
        batches of consecutive values (sizes differing by at most one): the spec's statistic of each
        batch is one figure, and the interval is the Welch t interval of the log ratio of the mean
        batch figures (batch means, see "Windows of a soak" below); ``long_memory`` (default false)
        widens it for the Hurst exponent the series show.
    A capacity spec may carry ``"b_filtered": true`` too (see :func:`_pooled_log`).
    {"kind": "percentile", "x": [...], "q": 50}
    {"kind": "binomial", "k": 3, "n": 80, "groups": 5}
        ``k`` events (outputs that diverged) in ``n`` trials (compared requests), pooled from
        ``groups`` repetitions: the estimate is ``k / n``, the interval Clopper-Pearson's exact one.
    {"kind": "capacity", "a_points": {"8": [...], "16": [...]}, "b_points": {...}, "transform": "gain"}
        each arm's per-repetition throughput at each of its operating points: the estimate is the
        arm's peak mean against the other's (each at its own best point), the interval accounts for
        having chosen the peaks (see :func:`capacity_interval`).

Windows of a soak are not independent either: a shared disk or a neighbour's load wanders over
tens of windows, so window ``i`` predicts window ``i+1``, and on this project's VM its level still
predicts windows 10-20 later (autocorrelation 0.2-0.3 out to lag 12; the long-run variance of a
demo soak's window TTFTs was 8x their variance). A ``block`` spec resamples runs of ``L``
consecutive windows (Kuensch 1989, circular as Politis and Romano 1992) with ``L`` from the lag-1
autocorrelation (:func:`block_length`); that rule assumes an AR(1), and on wander fitted to demo
soaks it covered 79.5% at a nominal 95% (61% on a heavier wander; ``make bench-coverage``): false
FAILs of steady soaks and false PASSes of a 15% slowdown. A ``batches`` spec is what the drift
checks use instead: batch means (Schmeiser 1982) with a fixed number of batches, whose t interval
stays valid for any correlation shorter than a batch (fixed-b asymptotics, Kiefer and Vogelsang
2005) without a model of the wander (89.8% on the fitted wander at the demo's 56 windows a third).
Wander with a long memory (fractional Gaussian noise: batches of a third correlated) is too slow
for batch means alone (74-84% at Hurst 0.8-0.9, at any length): a ``long_memory`` spec (the drift
checks') widens the interval for the Hurst exponent the windows show (see :func:`_local_whittle`,
:func:`memory_inflation`). What it costs is width: a soak too short for its storage's wander is
INCONCLUSIVE, naming the memory and the windows that would likely decide. ``block`` stays for
the trend, which is reported, not checked. docs/ARCHITECTURE.md "Soak drift interval" has the table.

Requests of one repetition are not independent (same engine warm state, same page cache, same
neighbours): pooling them and resampling requests makes the interval too narrow, and a noisy
candidate could pass by luck. For grouped samples each resample first draws repetitions with
replacement, then requests with replacement within each drawn repetition (the two-stage
bootstrap), so the spread between repetitions is in the interval. ``n`` of a grouped spec is the
number of repetitions of the smaller group: that is what limits the interval.

The two-stage bootstrap of a median was still too narrow with 5 repetitions (it covered 90-94%,
and 84-88% among the baselines G2's repeatability filter lets through: the filter keeps baselines
that happen to look tight), so a median of grouped samples gets a cluster-level t interval
instead: one figure per repetition (its log p50), a t interval of the difference of their means;
when the baseline passed G2's filter, the candidate's spread stands in for both arms (see
:func:`cluster_t_half_width`).
``bench/coverage.py`` (``make bench-coverage``) prints its coverage, unconditional and among
G2-passing baselines, and its false-PASS rate.

The interval is the bootstrap *percentile* interval: draw ``resamples`` resamples with
replacement (default 2000, the gate file's ``statistic.resamples``), compute the statistic on each,
and take the (1-c)/2 and (1+c)/2 quantiles of those replicates.

A ratio of *means* of ungrouped samples (the throughput gain: one figure per repetition, so a few
values per arm) gets the Welch t interval of the log ratio instead (:func:`interval_method` names
the method). With ten values per arm the percentile interval of a ratio is too narrow: the
bootstrap's spread of a mean is the plug-in one (biased low by (n-1)/n) and it uses normal rather
than t quantiles, so a nominal 95% interval covered the truth in about 90% of trials
(``make bench-coverage``). A studentized bootstrap (bootstrap-t) fixed the coverage but not its
stability: at 5 repetitions a resample whose values are nearly equal has a near-zero standard
error, its pivot explodes, and the interval of a 758% gain reached from -24% to +1077%
(INCONCLUSIVE: a false non-PASS). The Welch interval is
``estimate +- t(1 - alpha, df) * se`` on the log scale, with ``se`` the delta-method standard error
``sqrt(u_a + u_b)``, ``u = var / (n mean^2)`` (sample variances), and the Welch-Satterthwaite
``df = (u_a + u_b)^2 / (u_a^2 / (n_a - 1) + u_b^2 / (n_b - 1))``, then mapped through the transform
(the log scale makes the ratio's skew symmetric). Only the means enter the log: a repetition
that served nothing (a throughput of 0) is a measured figure in them; a side that served nothing
at all is a measured ratio of 0, a baseline mean of 0 an error. The method never depends on the
values (see :func:`_studentized`). The random generator is
``random.Random`` seeded from the caller's seed and the metric path, so a result file is
reproducible bit for bit. Percentiles use linear interpolation between order statistics (numpy's
default, which ``vllm bench serve`` uses), so p50 of an even count is the mean of the middle two.

Output identity (``binomial``): the divergence rate is a proportion of independent requests
pooled over repetitions; the Clopper-Pearson interval (beta quantiles) covers at least its nominal
level for every true rate, so a FAIL (the whole interval above the allowed rate) is not a false
alarm at 1 divergence in 80, and a PASS is not a small-sample accident.

Capacity (``capacity``, the throughput gain peak against peak): see :func:`capacity_interval` and
docs/ARCHITECTURE.md "Capacity peak against peak".

Pure Python on purpose: 2000 resamples of 100 samples take a few tens of milliseconds.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

from harness.errors import KvgateError
from harness.load.stats import percentile_sorted

__all__ = [
    "MIN_INTERVAL_SAMPLES",
    "SampleSpecError",
    "SampleSpec",
    "percentile",
    "parse_sample_spec",
    "point_estimate",
    "bootstrap_interval",
    "block_length",
    "block_resample_indices",
    "batch_values",
    "needed_samples",
    "achieved_power",
    "binomial_power",
    "binomial_trials_for_power",
    "capacity_interval",
    "cluster_t_half_width",
    "clopper_pearson",
    "peak_values",
    "interval_method",
    "repetitions_for_power",
    "power_scale",
    "POWER_TARGET",
]

# Below this many samples per group a bootstrap interval is not a statement of uncertainty (one
# sample resamples to itself: an interval of zero width). Such a check is INCONCLUSIVE.
MIN_INTERVAL_SAMPLES = 5
# The power the report plans repetitions for (the usual 80%).
POWER_TARGET = 0.8


class SampleSpecError(KvgateError):
    """A sample spec in the measured results is malformed (a pipeline bug or a bad input file)."""


def percentile(xs: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``xs`` with linear interpolation (numpy's default), computed
    by the one percentile (``harness.load.stats``); a gate never takes a percentile of nothing."""
    if not xs:
        raise SampleSpecError("percentile of no samples")
    return _percentile_sorted(sorted(xs), q)


_percentile_sorted = percentile_sorted


def _median(xs: Sequence[float]) -> float:
    return _percentile_sorted(sorted(xs), 50.0)


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs)


_STATS: dict[str, Callable[[Sequence[float]], float]] = {"p50": _median, "median": _median, "mean": _mean}
_TRANSFORMS = ("reduction", "gain", "ratio")
_MEMBERS = ("requests", "rounds")


@dataclass(frozen=True)
class SampleSpec:
    """A validated sample spec."""

    kind: str  # "ratio" | "percentile"
    a: tuple[float, ...] = ()
    b: tuple[float, ...] = ()
    stat: str = "p50"
    transform: str = "ratio"
    x: tuple[float, ...] = ()
    q: float = 50.0
    a_groups: tuple[tuple[float, ...], ...] = ()
    b_groups: tuple[tuple[float, ...], ...] = ()
    block: int = 1  # > 1: a and b are time series, resampled in blocks of this many values
    batches: int = 0  # >= 2: a and b are time series, each cut into this many batches (batch means)
    long_memory: bool = False  # batches: widen the interval for the series' estimated long memory
    k: int = 0  # binomial: events
    trials: int = 0  # binomial: trials
    groups: int = 0  # binomial: repetitions the trials were pooled from (0: not known)
    a_points: tuple[tuple[str, tuple[float, ...]], ...] = ()  # capacity: (point, per-repetition values)
    b_points: tuple[tuple[str, tuple[float, ...]], ...] = ()
    b_filtered: bool = False  # grouped ratio: b's repetitions passed a repeatability filter
    members: str = "requests"  # grouped ratio: what one group holds (a run's requests, or its fio rounds)

    @property
    def clustered(self) -> bool:
        return bool(self.a_groups)

    @property
    def n(self) -> int:
        """The sample size that limits the interval (the smaller group of a ratio; repetitions when
        the samples are grouped)."""
        if self.clustered:
            return min(len(self.a_groups), len(self.b_groups))
        if self.kind == "binomial":
            return self.trials
        if self.kind == "capacity":
            return min(len(v) for _, v in self.a_points + self.b_points)
        return min(len(self.a), len(self.b)) if self.kind == "ratio" else len(self.x)


def _floats(name: str, v: Any) -> tuple[float, ...]:
    if not isinstance(v, (list, tuple)):
        raise SampleSpecError(f"samples {name!r} must be a list of numbers, got {type(v).__name__}")
    out: list[float] = []
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise SampleSpecError(f"samples {name}[{i}] is not a number: {x!r}")
        if not math.isfinite(x):
            raise SampleSpecError(f"samples {name}[{i}] is not a finite number ({x!r})")
        out.append(float(x))
    if not out:
        raise SampleSpecError(f"samples {name!r} is empty")
    return tuple(out)


def _groups(name: str, v: Any) -> tuple[tuple[float, ...], ...]:
    if not isinstance(v, (list, tuple)) or not v:
        raise SampleSpecError(f"samples {name!r} must be a non-empty list of lists of numbers")
    return tuple(_floats(f"{name}[{i}]", g) for i, g in enumerate(v))


def _two_stage(rng: random.Random, groups: Sequence[Sequence[float]]) -> list[float]:
    """One hierarchical resample: repetitions with replacement, then requests within each."""
    out: list[float] = []
    for g in rng.choices(groups, k=len(groups)):
        out.extend(rng.choices(g, k=len(g)))
    return out


def parse_sample_spec(spec: Mapping[str, Any]) -> SampleSpec:
    """Validate a sample spec dict; raise :class:`SampleSpecError` naming what is wrong."""
    if not isinstance(spec, Mapping):
        raise SampleSpecError(f"samples must be a mapping, got {type(spec).__name__}")
    kind = spec.get("kind")
    if kind == "ratio":
        extra = set(spec) - {"kind", "a", "b", "stat", "transform", "a_groups", "b_groups", "block", "b_filtered",
                             "members", "batches", "long_memory"}
        if extra:
            raise SampleSpecError(f"ratio samples: unknown keys {sorted(extra)}")
        stat = spec.get("stat", "p50")
        if stat not in _STATS:
            raise SampleSpecError(f"ratio samples: stat {stat!r} is not one of {sorted(_STATS)}")
        transform = spec.get("transform", "ratio")
        if transform not in _TRANSFORMS:
            raise SampleSpecError(f"ratio samples: transform {transform!r} is not one of {list(_TRANSFORMS)}")
        if "a_groups" in spec or "b_groups" in spec:
            if "a" in spec or "b" in spec:
                raise SampleSpecError("ratio samples: give a/b or a_groups/b_groups, not both")
            for key in ("block", "batches", "long_memory"):
                if key in spec:
                    raise SampleSpecError(f"ratio samples: {key} applies to a/b time series, not to a_groups/b_groups")
            filtered = spec.get("b_filtered", False)
            if not isinstance(filtered, bool):
                raise SampleSpecError(f"ratio samples: b_filtered must be true or false, got {filtered!r}")
            members = spec.get("members", "requests")
            if members not in _MEMBERS:
                raise SampleSpecError(f"ratio samples: members {members!r} is not one of {list(_MEMBERS)}")
            ga, gb = _groups("a_groups", spec.get("a_groups")), _groups("b_groups", spec.get("b_groups"))
            return SampleSpec("ratio", a=tuple(x for g in ga for x in g), b=tuple(x for g in gb for x in g),
                              stat=stat, transform=transform, a_groups=ga, b_groups=gb, b_filtered=filtered,
                              members=members)
        for key in ("b_filtered", "members"):
            if key in spec:
                raise SampleSpecError(f"ratio samples: {key} applies to a_groups/b_groups, not to a/b")
        a, b = _floats("a", spec.get("a")), _floats("b", spec.get("b"))
        block = _series_option(spec, "block", 1, min(len(a), len(b)), absent=1)
        batches = _series_option(spec, "batches", 2, min(len(a), len(b)), absent=0)
        if "block" in spec and "batches" in spec:
            raise SampleSpecError("ratio samples: give block or batches, not both")
        memory = spec.get("long_memory", False)
        if not isinstance(memory, bool) or (memory and not batches):
            raise SampleSpecError(f"ratio samples: long_memory must be true or false and needs batches, got {memory!r}")
        return SampleSpec("ratio", a=a, b=b, stat=stat, transform=transform, block=block, batches=batches,
                          long_memory=memory)
    if kind == "percentile":
        extra = set(spec) - {"kind", "x", "q"}
        if extra:
            raise SampleSpecError(f"percentile samples: unknown keys {sorted(extra)}")
        q = spec.get("q", 50)
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:
            raise SampleSpecError(f"percentile samples: q must be a number in 0..100, got {q!r}")
        return SampleSpec("percentile", x=_floats("x", spec.get("x")), q=float(q))
    if kind == "binomial":
        return _parse_binomial(spec)
    if kind == "capacity":
        return _parse_capacity(spec)
    raise SampleSpecError(f"samples kind {kind!r} is not one of 'ratio', 'percentile', 'binomial', 'capacity'")


def _series_option(spec: Mapping[str, Any], key: str, low: int, high: int, *, absent: int) -> int:
    """A time-series option of a/b ratio samples (``block``, ``batches``): a whole number from
    ``low`` to the smaller group's size, or ``absent`` when the spec does not give it."""
    if key not in spec:
        return absent
    v = spec[key]
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise SampleSpecError(f"ratio samples: {key} must be a whole number from {low} to the smaller group's "
                              f"size ({high}), got {v!r}")
    return v


def _count(spec: Mapping[str, Any], key: str, low: int) -> int:
    v = spec.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise SampleSpecError(f"binomial samples: {key} must be a whole number >= {low}, got {v!r}")
    return v


def _parse_binomial(spec: Mapping[str, Any]) -> SampleSpec:
    extra = set(spec) - {"kind", "k", "n", "groups"}
    if extra:
        raise SampleSpecError(f"binomial samples: unknown keys {sorted(extra)}")
    k, n = _count(spec, "k", 0), _count(spec, "n", 1)
    if k > n:
        raise SampleSpecError(f"binomial samples: k ({k}) exceeds n ({n})")
    groups = _count(spec, "groups", 1) if "groups" in spec else 0
    return SampleSpec("binomial", k=k, trials=n, groups=groups)


def _points(name: str, v: Any) -> tuple[tuple[str, tuple[float, ...]], ...]:
    if not isinstance(v, Mapping) or not v:
        raise SampleSpecError(f"capacity samples: {name!r} must be a non-empty mapping of point -> numbers")
    out = []
    for point, xs in v.items():
        vals = _floats(f"{name}[{point}]", xs)
        if len(vals) < 2 or min(vals) <= 0:
            raise SampleSpecError(f"capacity samples: {name}[{point}] needs at least 2 positive values")
        out.append((str(point), vals))
    return tuple(out)


def _parse_capacity(spec: Mapping[str, Any]) -> SampleSpec:
    extra = set(spec) - {"kind", "a_points", "b_points", "transform", "b_filtered"}
    if extra:
        raise SampleSpecError(f"capacity samples: unknown keys {sorted(extra)}")
    transform = spec.get("transform", "gain")
    if transform not in _TRANSFORMS:
        raise SampleSpecError(f"capacity samples: transform {transform!r} is not one of {list(_TRANSFORMS)}")
    filtered = spec.get("b_filtered", False)
    if not isinstance(filtered, bool):
        raise SampleSpecError(f"capacity samples: b_filtered must be true or false, got {filtered!r}")
    return SampleSpec("capacity", stat="mean", transform=transform,
                      a_points=_points("a_points", spec.get("a_points")),
                      b_points=_points("b_points", spec.get("b_points")), b_filtered=filtered)


def _ratio_value(sa: float, sb: float, transform: str) -> float:
    if sb == 0:
        raise SampleSpecError("the baseline statistic is zero: a ratio to it is undefined")
    r = sa / sb
    if transform == "reduction":
        return 1.0 - r
    if transform == "gain":
        return r - 1.0
    return r


def point_estimate(spec: SampleSpec) -> float:
    """The statistic computed on the samples as measured."""
    if spec.batches:
        ba, bb = _batch_pair(spec)
        return _ratio_value(_mean(ba), _mean(bb), spec.transform)
    if _cluster_t(spec):
        return _ratio_value(math.exp(_log_ratio_of_clusters(spec)), 1.0, spec.transform)
    if spec.kind == "ratio":
        f = _STATS[spec.stat]
        return _ratio_value(f(spec.a), f(spec.b), spec.transform)
    if spec.kind == "binomial":
        return spec.k / spec.trials
    if spec.kind == "capacity":
        return _ratio_value(_mean(peak_values(spec.a_points)[1]), _mean(peak_values(spec.b_points)[1]),
                            spec.transform)
    return percentile(spec.x, spec.q)


def peak_values(points: Sequence[tuple[str, Sequence[float]]]) -> tuple[str, Sequence[float]]:
    """The point with the highest mean (the first of equal ones) and its values."""
    best = points[0]
    for p in points[1:]:
        if _mean(p[1]) > _mean(best[1]):
            best = p
    return best


def _resampled_stat(rng: random.Random, xs: Sequence[float],
                    stat: Callable[[Sequence[float]], float]) -> float:
    return stat(rng.choices(xs, k=len(xs)))


def block_resample_indices(rng: random.Random, n: int, block: int) -> list[int]:
    """The indices of one circular moving-block resample of a series of ``n`` values: blocks of
    ``block`` consecutive indices from uniform starts (wrapping at the end), cut to ``n``."""
    out: list[int] = []
    while len(out) < n:
        start = rng.randrange(n)
        out.extend((start + j) % n for j in range(block))
    return out[:n]


def _block_resample(rng: random.Random, xs: Sequence[float], block: int) -> list[float]:
    return [xs[i] for i in block_resample_indices(rng, len(xs), block)]


def batch_values(xs: Sequence[float], batches: int, stat: str) -> list[float]:
    """``stat`` ("p50", "median" or "mean") of each of ``batches`` runs of consecutive values of
    ``xs``, in order; batch ``i`` holds ``xs[round(i n / k):round((i + 1) n / k)]``, so sizes differ
    by at most one and every value is in exactly one batch."""
    n = len(xs)
    if not 1 <= batches <= n:
        raise SampleSpecError(f"cannot cut {n} values into {batches} batches")
    f = _STATS[stat]
    cuts = [round(i * n / batches) for i in range(batches + 1)]
    return [f(xs[cuts[i]:cuts[i + 1]]) for i in range(batches)]


def _batch_pair(spec: SampleSpec) -> tuple[list[float], list[float]]:
    """The batch figures of ``a`` and ``b``; ``b``'s mean is the ratio's denominator."""
    ba, bb = batch_values(spec.a, spec.batches, spec.stat), batch_values(spec.b, spec.batches, spec.stat)
    if _mean(bb) <= 0 or _mean(ba) < 0:
        raise SampleSpecError("a batch-means interval needs a positive mean of the baseline's batch figures "
                              f"and a non-negative one of the other side's (means {_mean(bb):g} and {_mean(ba):g})")
    return ba, bb


def _batch_interval(spec: SampleSpec, alpha: float) -> tuple[float, float]:
    ba, bb = _batch_pair(spec)
    if max(ba) == 0:  # nothing at all on that side (a third that served no token): the ratio is 0, measured
        return _from_log_ratio(-_LOG_CAP, -_LOG_CAP, spec.transform)
    lo, hi = _welch_log(ba, bb, alpha)
    if spec.long_memory:
        est = math.log(_mean(ba) / _mean(bb))
        widen = math.sqrt(memory_inflation(hurst_bound(spec), len(spec.b), spec.batches))
        lo, hi = est - (est - lo) * widen, est + (hi - est) * widen
    return _from_log_ratio(lo, hi, spec.transform)


# Long memory (issue 52 item 4). Batch means assume the batches of a third are nearly independent;
# a wander with long memory (fractional Gaussian noise: storage background work, a neighbour's
# load) correlates them, and the third-against-third difference then varies more than the batches'
# spread says: 73-84% coverage at Hurst 0.8-0.9 whatever the soak's length (self-similarity: the
# ratio of the two variances does not depend on it). So the soak's own windows estimate the
# Hurst exponent H (the local Whittle estimator, Robinson 1995, on each third's windows relative to
# the third's mean, the objective pooled over both thirds, m = n^0.65 Fourier frequencies each;
# standard error 1 / (2 sqrt(m_total))), its estimate plus one standard error (at least 0.5, at most
# 0.99) is taken as the memory, and the batch-means interval is widened by the square root of the
# ratio of the difference's variance to the batch variance's expectation under fractional Gaussian
# noise with that H (exact for the batch layout, :func:`memory_inflation`); never narrowed.
# Measured (``make bench-coverage``): coverage 94-99.9% at no drift for AR(1) up to 0.8 and fGn up
# to H 0.9 at 168 and 4,320 windows. What it costs: a 168-window soak's windows cannot show short
# memory (the estimate of H is +-0.13 there), so drift-free demo soaks PASS far less often.
HURST_Z = 1.0  # standard errors added to the estimate of H
_HURST_GRID = tuple(0.5 + i / 100 for i in range(50))  # 0.50 .. 0.99


def _local_whittle(series: Sequence[Sequence[float]]) -> tuple[float, float]:
    """The local Whittle estimate of the Hurst exponent pooled over ``series`` (each made relative
    to its mean), on the grid 0.50-0.99, and its standard error."""
    import numpy as np  # noqa: PLC0415

    lams, pers = [], []
    for xs in series:
        x = np.asarray(xs, dtype=float)
        n = len(x)
        m = max(2, int(n ** 0.65))
        rel = x / x.mean() - 1.0 if x.mean() > 0 else x - x.mean()
        pers.append(np.abs(np.fft.fft(rel)[1:m + 1]) ** 2)
        lams.append(2 * np.pi * np.arange(1, m + 1) / n)
    lam, per = np.concatenate(lams), np.concatenate(pers)
    if not per.any():  # a constant series shows no memory
        return 0.5, 0.0
    mean_log = float(np.log(lam).mean())
    objective = [math.log(float((lam ** (2 * h - 1) * per).mean())) - (2 * h - 1) * mean_log for h in _HURST_GRID]
    best = _HURST_GRID[min(range(len(objective)), key=objective.__getitem__)]
    return best, 1.0 / (2.0 * math.sqrt(len(lam)))


def hurst_estimate(spec: SampleSpec) -> tuple[float, float]:
    """The Hurst exponent the windows of a ``long_memory`` spec show, and its standard error."""
    return _local_whittle([spec.b, spec.a])


def hurst_bound(spec: SampleSpec) -> float:
    """The memory the interval is widened for: the estimate plus ``HURST_Z`` standard errors."""
    h, se = hurst_estimate(spec)
    return min(max(h + HURST_Z * se, 0.5), 0.99)


def memory_inflation(hurst: float, n: int, batches: int) -> float:
    """Var(mean of the last third's batch means - the first's) over the expectation of the
    batch-means variance estimate (each side's batch sample variance / batches, summed), for
    fractional Gaussian noise of Hurst exponent ``hurst``, thirds of ``n`` windows with the last
    starting ``2n`` after the first, each cut as :func:`batch_values` cuts; at least 1."""
    def f(x: int) -> float:  # Var(sum of x consecutive windows) of unit fractional Gaussian noise
        return float(abs(x) ** (2 * hurst))

    def cov(p: tuple[int, int], q: tuple[int, int]) -> float:  # covariance of two runs of windows' means
        return 0.5 * (f(q[1] - p[0]) + f(q[0] - p[1]) - f(q[0] - p[0]) - f(q[1] - p[1])) / (
            (p[1] - p[0]) * (q[1] - q[0]))

    cuts = [round(i * n / batches) for i in range(batches + 1)]
    first = [(cuts[i], cuts[i + 1]) for i in range(batches)]
    last = [(2 * n + s, 2 * n + e) for s, e in first]

    def expected_var(side: list[tuple[int, int]]) -> float:
        total = sum(cov(p, q) for p in side for q in side)
        return (sum(cov(p, p) for p in side) - total / batches) / (batches - 1)

    diff = sum(cov(p, q) for p in first for q in first) + sum(cov(p, q) for p in last for q in last) \
        - 2 * sum(cov(p, q) for p in first for q in last)
    bm = (expected_var(first) + expected_var(last)) / batches
    return max(diff / batches ** 2 / bm, 1.0) if bm > 0 else 1.0


def memory_needed(n: int, low: float, high: float, estimate: float, threshold: float, hurst: float) -> int | None:
    """:func:`needed_samples` for a long-memory interval, whose half-width shrinks as n^(H - 1), not
    n^(-1/2): ``ceil(n (arm / distance) ^ (1 / (1 - H)))``."""
    dist = abs(estimate - threshold)
    arm = (estimate - low) if threshold < estimate else (high - estimate)
    if dist <= 0 or not math.isfinite(arm) or arm <= 0:
        return None
    # on the log scale: at H 0.99 the exponent is 100, and the power of a ratio over 1 overflows
    grow = min(math.log(arm / dist) / (1.0 - min(hurst, 0.99)), 30.0)
    need = math.ceil(max(n, 1) * math.exp(grow))
    return max(need, max(n, 1) + 1, MIN_INTERVAL_SAMPLES)


def block_length(series: Sequence[Sequence[float]], n: int) -> int:
    """The moving-block length for groups of ``n`` values of a time series, from the lag-1
    autocorrelation ``rho`` of ``series`` (one or more runs of the series, each de-meaned on its own
    so a drift between runs is not taken for correlation): Carlstein's (1986) rule for an AR(1)
    process, ``(2 rho / (1 - rho^2))^(2/3) * n^(1/3)``, rounded, at least 1 and at most ``n // 2``
    (a block as long as the group resamples nothing)."""
    num = den = 0.0
    for run in series:
        if len(run) < 2:
            continue
        m = _mean(run)
        d = [x - m for x in run]
        num += math.fsum(d[i] * d[i + 1] for i in range(len(d) - 1))
        den += math.fsum(x * x for x in d)
    if den == 0 or num <= 0 or n < 4:
        return 1
    # Not bias-corrected for short series on purpose: the corrected estimate gave longer blocks,
    # and a block near half the group resamples too few distinct series (the moving-block
    # variance is biased low by about block / n): false PASS rose from 9% to 10.5% in 200
    # AR(1) trials (rho 0.8, 48 windows, the last third 15% slower against 10%).
    rho = min(num / den, 0.99)
    length = int(round(math.pow(2.0 * rho / (1.0 - rho * rho), 2.0 / 3.0) * math.pow(n, 1.0 / 3.0)))
    return max(1, min(length, n // 2))


# Which interval a spec gets is decided by its shape (kind, statistic, grouping, series option),
# never by its values: one request reporting a TTFT of 0 once moved the TTFT reduction from the
# cluster-level t to the two-stage bootstrap, and the false PASS rate at a true 24% among
# G2-passing baselines rose from 1.7% to 5.9% (issue 52). A value the method cannot use is an
# error of the samples (:class:`SampleSpecError`), never a reason to pick another method.
def _studentized(spec: SampleSpec) -> bool:
    return (spec.kind == "ratio" and spec.stat == "mean" and not spec.clustered and spec.block == 1
            and not spec.batches)


def _cluster_t(spec: SampleSpec) -> bool:
    """A median of grouped samples, two or more groups per arm: the cluster-level t."""
    return spec.clustered and spec.stat in ("p50", "median") and min(len(spec.a_groups), len(spec.b_groups)) >= 2


def _log_medians(groups: Sequence[Sequence[float]], arm: str = "a") -> list[float]:
    out = []
    for i, g in enumerate(groups):
        m = _median(g)
        if m <= 0:
            raise SampleSpecError(f"ratio samples: the median of {arm}_groups[{i}] is {m:g}; a ratio of medians "
                                  "needs every repetition's median above 0")
        out.append(math.log(m))
    return out


def _log_ratio_of_clusters(spec: SampleSpec) -> float:
    return _mean(_log_medians(spec.a_groups, "a")) - _mean(_log_medians(spec.b_groups, "b"))


def _sample_var(xs: Sequence[float]) -> float:
    m = _mean(xs)
    return math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def cluster_t_half_width(var_a: Any, n_a: int, var_b: Any, n_b: int, alpha: float, *,
                         b_filtered: bool = False, spread_ratio: Any = 1.0) -> Any:
    """The half-width, on the log scale, of the cluster-level t interval of a difference of mean
    per-repetition log medians (``alpha`` per tail); numbers or numpy arrays (bench/coverage.py
    runs the gate's own formula over many trials at once).

    Unfiltered arms: Welch's interval, ``sqrt(var_a / n_a + var_b / n_b)`` with the
    Welch-Satterthwaite degrees of freedom.

    ``b_filtered`` (the G3 baseline: G2 kept it only because its repetitions' p50s agreed within a
    10% CV): ``var_b`` is not used. Among such baselines the sample variance is biased low, and
    without bound: a truncated sample variance cannot bound the true one from above (its likelihood
    is flat for large variances), so no correction of ``var_b`` itself is honest. The candidate's
    variance, which no filter chose, stands in for both arms (the arms run the same workload on the
    same node and differ in the storage target): ``sqrt(var_a (1/n_a + 1/n_b))`` with ``n_a - 1``
    degrees of freedom, the only information there is. Welch on the filtered ``var_b`` covered
    89% (5 repetitions, ICC 0.3, sd(log TTFT) 0.3); flooring ``var_b`` at ``var_a`` with Welch's
    degrees of freedom 92% (the floor copies ``var_a``, so Satterthwaite counted its 4 degrees of
    freedom twice); with ``n_a - 1`` they covered 94% among G2-passing baselines but 97% of all,
    since the larger of two variances is biased high.

    A baseline truly noisier than the candidate (1.5x the spread) that still passed G2 was then
    covered in 90.4-91.0% and false-PASSed a true 24% in 3.5-4.0% (issue 52): the candidate's
    spread understated the baseline's. What the filter leaves informative about the baseline's
    noise is its spread *within* repetitions (G2 filters the repetitions' p50s, not their
    requests): ``spread_ratio`` is the baseline's over the candidate's within-repetition spread
    (:func:`within_spread`), and the baseline's term is the candidate's variance scaled by it,
    never below 1: ``sqrt(var_a (1/n_a + max(1, spread_ratio)/n_b))``, so the baseline's
    between-repetition variance is taken to scale with its within-repetition one (the same
    intra-class correlation as the candidate's). Coverage then 94.8-95.3% and false PASS
    2.0-2.3% at 1.5x (among G2-passing baselines); at equal spreads the max(1, .) costs a little
    power (a true 30% PASSes in 9.8% of trials instead of 10.7% at sd 0.2). Not covered: a
    baseline whose extra noise is all between repetitions. docs/ARCHITECTURE.md "Statistics" has
    the table (``make bench-coverage``)."""
    import numpy as np  # noqa: PLC0415 - scipy needs it anyway
    from scipy.stats import t as student_t  # noqa: PLC0415

    va, vb = np.asarray(var_a, dtype=float), np.asarray(var_b, dtype=float)
    if b_filtered:
        # a candidate whose repetitions agree exactly says nothing about the spread: the baseline's
        spread = np.where(va > 0, va, vb)
        scale = np.maximum(np.asarray(spread_ratio, dtype=float), 1.0)
        half = student_t.ppf(1.0 - alpha, n_a - 1) * np.sqrt(spread * (1.0 / n_a + scale / n_b))
    else:
        u_a, u_b = va / n_a, vb / n_b
        total = u_a + u_b
        with np.errstate(divide="ignore", invalid="ignore"):
            df = np.where(total > 0, total ** 2 / (u_a ** 2 / (n_a - 1) + u_b ** 2 / (n_b - 1)), 1.0)
        half = student_t.ppf(1.0 - alpha, df) * np.sqrt(total)
    return float(half) if np.ndim(half) == 0 else half


def _cluster_t_interval(spec: SampleSpec, alpha: float) -> tuple[float, float]:
    la, lb = _log_medians(spec.a_groups, "a"), _log_medians(spec.b_groups, "b")
    est = _mean(la) - _mean(lb)
    ratio = _spread_ratio(within_spread(spec.b_groups), within_spread(spec.a_groups)) if spec.b_filtered else 1.0
    half = cluster_t_half_width(_sample_var(la), len(la), _sample_var(lb), len(lb), alpha,
                                b_filtered=spec.b_filtered, spread_ratio=ratio)
    return _from_log_ratio(est - half, est + half, spec.transform)


def within_spread(groups: Any) -> Any:
    """The mean over repetitions of the squared relative interquartile range ``((q75 - q25) /
    q50)^2`` of each repetition's values (a repetition of fewer than 2 values gives 0): the
    within-repetition spread of the TTFTs, on a scale (about ``(1.349 sd(log))^2`` for lognormal
    TTFTs) that needs no log and so takes any value. ``groups`` is a list of repetitions, or a
    numpy array (trials, repetitions, requests) for bench/coverage.py (then one figure per trial)."""
    import numpy as np  # noqa: PLC0415

    if isinstance(groups, np.ndarray):
        q75, q50, q25 = np.percentile(groups, [75, 50, 25], axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.mean(np.where(q50 > 0, ((q75 - q25) / q50) ** 2, 0.0), axis=1)
    out = []
    for g in groups:
        xs = sorted(g)
        mid = _percentile_sorted(xs, 50.0)
        out.append(((_percentile_sorted(xs, 75.0) - _percentile_sorted(xs, 25.0)) / mid) ** 2
                   if len(xs) > 1 and mid > 0 else 0.0)
    return _mean(out)


def _spread_ratio(b: float, a: float) -> float:
    """b's within-repetition spread over a's: 1 when both are 0, unbounded when only a's is."""
    if a > 0:
        return b / a
    return 1.0 if b == 0 else math.inf


def interval_method(spec: SampleSpec) -> str:
    """The name of the interval :func:`bootstrap_interval` computes for this spec (for result.json)."""
    if spec.batches:
        method = f"batch-means-welch-t-log-ratio ({spec.batches} batches of consecutive values a side)"
        if spec.long_memory:
            h, se = hurst_estimate(spec)
            method += (f", widened for long memory: fractional Gaussian noise at Hurst {hurst_bound(spec):.2f} "
                       f"(local Whittle estimate {h:.2f} + {HURST_Z:g} SE {se:.2f})")
        return method
    if _studentized(spec):
        return "welch-t-log-ratio"
    if _cluster_t(spec):
        if spec.b_filtered:
            return ("cluster-t-log-p50 (per-repetition log medians; the candidate's spread for both arms, the "
                    "baseline's scaled by its within-repetition spread over the candidate's when larger: the "
                    "baseline's repetitions passed G2's repeatability filter)")
        return "cluster-t-log-p50 (per-repetition log medians, Welch)"
    if spec.kind == "binomial":
        return "clopper-pearson"
    if spec.kind == "capacity":
        how = ("t-log-ratio on the candidate's pooled spread for both arms (the baseline's passed G2's "
               "repeatability filter)" if spec.b_filtered else "welch-t-log-ratio")
        return (f"peak-vs-peak {how}, bonferroni over {len(spec.a_points)} candidate / "
                f"{len(spec.b_points)} baseline points")
    if spec.block > 1:
        return f"moving-block-bootstrap-percentile (block {spec.block})"
    return "hierarchical-bootstrap-percentile" if spec.clustered else "bootstrap-percentile"


def _log_ratio_parts(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """log(mean a / mean b) and the delta-method variance components u_a, u_b of that log."""
    ma, mb = _mean(a), _mean(b)
    va = math.fsum((x - ma) ** 2 for x in a) / (len(a) - 1)
    vb = math.fsum((x - mb) ** 2 for x in b) / (len(b) - 1)
    return math.log(ma / mb), va / (len(a) * ma * ma), vb / (len(b) * mb * mb)


def _log_ratio_se(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """log(mean a / mean b) and its delta-method standard error (sample variances)."""
    est, ua, ub = _log_ratio_parts(a, b)
    return est, math.sqrt(ua + ub)


_LOG_CAP = 700.0  # exp(700) ~ 1e304: a degenerate pivot gives a huge but finite (JSON-able) end


def _from_log_ratio(lo: float, hi: float, transform: str) -> tuple[float, float]:
    lo, hi = max(-_LOG_CAP, min(lo, _LOG_CAP)), max(-_LOG_CAP, min(hi, _LOG_CAP))
    if transform == "reduction":  # 1 - r decreases with r: the ends swap
        return 1.0 - math.exp(hi), 1.0 - math.exp(lo)
    if transform == "gain":
        return math.exp(lo) - 1.0, math.exp(hi) - 1.0
    return math.exp(lo), math.exp(hi)


def _welch_log(a: Sequence[float], b: Sequence[float], alpha: float) -> tuple[float, float]:
    """The Welch t interval of log(mean a / mean b), ``alpha`` in each tail."""
    if min(len(a), len(b)) < 2:
        raise SampleSpecError("a Welch t interval needs at least 2 samples per group")
    est, ua, ub = _log_ratio_parts(a, b)
    if ua + ub == 0:
        return est, est
    df = (ua + ub) ** 2 / (ua * ua / (len(a) - 1) + ub * ub / (len(b) - 1))
    from scipy.stats import t as student_t  # noqa: PLC0415 - only these intervals need scipy

    half = float(student_t.ppf(1.0 - alpha, df)) * math.sqrt(ua + ub)
    return est - half, est + half


def _welch_t(spec: SampleSpec, alpha: float) -> tuple[float, float]:
    ma, mb = _mean(spec.a), _mean(spec.b)
    if mb <= 0 or ma < 0:
        raise SampleSpecError("a ratio of means needs a positive mean of b and a non-negative one of a "
                              f"(means {mb:g} and {ma:g})")
    if max(spec.a) == 0:  # every repetition of a served nothing: the ratio is 0, measured
        return _from_log_ratio(-_LOG_CAP, -_LOG_CAP, spec.transform)
    return _from_log_ratio(*_welch_log(spec.a, spec.b, alpha), spec.transform)


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial proportion, ``alpha`` in each tail."""
    from scipy.stats import beta  # noqa: PLC0415

    low = 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1.0 - alpha, k + 1, n - k))
    return low, high


def capacity_interval(spec: SampleSpec, alpha: float) -> tuple[float, float]:
    """The interval of the capacity gain log(max_c mu_a(c) / max_c mu_b(c)), ``alpha`` per tail.

    Low end: the candidate's chosen peak ``c_a`` (highest mean) against every baseline point, the
    lowest of the Welch lower bounds, each at ``alpha / k_a`` (``k_a`` candidate points). Having
    picked ``c_a`` out of ``k_a`` noisy points is paid for by Bonferroni over them; needing the
    bound against *every* baseline point (an intersection-union test) costs no correction and
    covers the baseline's true peak wherever it is. High end: symmetric, every candidate point
    against the baseline's chosen peak at ``alpha / k_b``. So each tail misses with chance at
    most ``alpha`` whichever points are the true peaks, and equal peaks never clear a positive
    threshold (the low end is at most the estimate, which is 0 there)."""
    ca, xa = peak_values(spec.a_points)
    cb, xb = peak_values(spec.b_points)
    ka, kb = len(spec.a_points), len(spec.b_points)
    pair = _pooled_log(spec.a_points) if spec.b_filtered else _welch_log
    low = min(pair(xa, xs, alpha / ka)[0] for _, xs in spec.b_points)
    high = max(pair(xs, xb, alpha / kb)[1] for _, xs in spec.a_points)
    return _from_log_ratio(low, high, spec.transform)


def _pooled_log(points: Sequence[tuple[str, Sequence[float]]]) -> Callable[..., tuple[float, float]]:
    """The interval of log(mean a / mean b) for a baseline G2 filtered (``b_filtered``): its
    repetitions were kept because they agreed (throughput CV <= 10% at every point), so their
    spread is biased low (Welch on it false-PASSed a true +29% in 2.9-4.1% at k=1, CV 9-12%; issue
    52). The candidate's squared CV, pooled over its points (no filter chose them), stands in for
    both arms, with the pooled degrees of freedom: ``t(sum(n_i - 1)) sqrt(s^2 (1/n_a + 1/n_b))``
    on the log scale (the delta method, as :func:`_welch_log`)."""
    dof = sum(len(xs) - 1 for _, xs in points)
    s2 = math.fsum((len(xs) - 1) * _sample_var(xs) / _mean(xs) ** 2 for _, xs in points) / dof

    def interval(a: Sequence[float], b: Sequence[float], alpha: float) -> tuple[float, float]:
        from scipy.stats import t as student_t  # noqa: PLC0415

        est = math.log(_mean(a) / _mean(b))
        half = float(student_t.ppf(1.0 - alpha, dof)) * math.sqrt(s2 * (1.0 / len(a) + 1.0 / len(b)))
        return est - half, est + half

    return interval


def bootstrap_interval(spec: SampleSpec, *, confidence: float, resamples: int,
                       rng: random.Random) -> tuple[float, float]:
    """Bootstrap interval of the spec's statistic at ``confidence`` (0.5..1): the percentile
    interval (two-stage for grouped samples), or the Welch t interval of the log ratio for a ratio
    of means (see the module docstring and :func:`interval_method`; it draws no resamples)."""
    if not 0.5 < confidence < 1.0:
        raise SampleSpecError(f"confidence must be in (0.5, 1), got {confidence}")
    if resamples < 1:
        raise SampleSpecError(f"resamples must be positive, got {resamples}")
    if spec.batches:
        return _batch_interval(spec, (1.0 - confidence) / 2.0)
    if _studentized(spec):
        return _welch_t(spec, (1.0 - confidence) / 2.0)
    if _cluster_t(spec):
        return _cluster_t_interval(spec, (1.0 - confidence) / 2.0)
    if spec.kind == "binomial":
        return clopper_pearson(spec.k, spec.trials, (1.0 - confidence) / 2.0)
    if spec.kind == "capacity":
        return capacity_interval(spec, (1.0 - confidence) / 2.0)
    reps: list[float] = []
    if spec.kind == "ratio":
        f = _STATS[spec.stat]
        zero = 0
        for _ in range(resamples):
            if spec.clustered:
                sb = f(_two_stage(rng, spec.b_groups))
                sa = f(_two_stage(rng, spec.a_groups))
            elif spec.block > 1:
                sb = f(_block_resample(rng, spec.b, spec.block))
                sa = f(_block_resample(rng, spec.a, spec.block))
            else:
                sb = _resampled_stat(rng, spec.b, f)
                sa = _resampled_stat(rng, spec.a, f)
            if sb == 0:
                zero += 1
                continue
            reps.append(_ratio_value(sa, sb, spec.transform))
        if zero:
            # Dropping those replicates would bias the interval; refuse instead.
            raise SampleSpecError(
                f"the baseline statistic was zero in {zero} of {resamples} resamples: the ratio is undefined")
    else:
        q = spec.q
        for _ in range(resamples):
            reps.append(_percentile_sorted(sorted(rng.choices(spec.x, k=len(spec.x))), q))
    reps.sort()
    alpha = (1.0 - confidence) / 2.0
    return _percentile_sorted(reps, 100.0 * alpha), _percentile_sorted(reps, 100.0 * (1.0 - alpha))


def needed_samples(n: int, low: float, high: float, estimate: float, threshold: float) -> int | None:
    """A likely deciding sample size for an INCONCLUSIVE interval.

    The arm of the interval that faces the threshold (``estimate - low`` when the threshold is
    below the estimate, ``high - estimate`` otherwise) shrinks roughly as 1/sqrt(n); the interval
    stops straddling the threshold once that arm is shorter than the distance from the estimate to
    the threshold, so ``n_needed = ceil(n * (arm / distance) ** 2)``, at least ``n + 1``. It is an
    estimate for planning, not a promise. None when the estimate sits on the threshold (no finite
    sample size is expected to decide)."""
    dist = abs(estimate - threshold)
    arm = (estimate - low) if threshold < estimate else (high - estimate)
    if dist <= 0 or not math.isfinite(arm) or arm <= 0:
        return None
    need = math.ceil(max(n, 1) * (arm / dist) ** 2)
    return max(need, max(n, 1) + 1, MIN_INTERVAL_SAMPLES)


def achieved_power(low: float, high: float, estimate: float, threshold: float, confidence: float) -> float | None:
    """The chance that an interval of this width, around a true value equal to ``estimate``, would
    clear ``threshold`` (normal approximation: the standard error is the interval's half-width over
    z). A figure for the report: how likely this many repetitions are to decide, not a verdict.

    Formula: ``se = (high - low) / (2 z)`` with ``z`` the normal quantile of ``(1 + confidence) / 2``,
    ``power = Phi(|estimate - threshold| / se - z)``. For grouped samples the interval is the
    hierarchical one, so ``se`` carries the measured between-repetition variance at this number of
    repetitions; the ``Phi(-|d|/se - z)`` tail (clearing on the wrong side) is left out."""
    z = _z(0.5 + confidence / 2.0)
    se = (high - low) / (2.0 * z)
    if not math.isfinite(se) or se <= 0:
        return None
    return _phi(abs(estimate - threshold) / se - z)


def power_scale(spec: SampleSpec, *values: float) -> tuple[float, ...]:
    """``values`` (an interval's ends, an estimate, a threshold) on the scale where the spec's
    interval is symmetric, for :func:`achieved_power` and :func:`repetitions_for_power`: the log
    ratio for a Welch t interval (its ends are symmetric there, not on the gain scale), else
    unchanged. A value outside the transform's domain (a gain of -100% or less) maps to -inf."""
    if not (_studentized(spec) or _cluster_t(spec) or spec.batches or spec.kind == "capacity"):
        return values
    out = []
    for v in values:
        r = 1.0 - v if spec.transform == "reduction" else (1.0 + v if spec.transform == "gain" else v)
        out.append(math.log(r) if r > 0 else -math.inf)
    return tuple(out)


def repetitions_for_power(n: int, low: float, high: float, estimate: float, threshold: float,
                          confidence: float, power: float = 0.8) -> int | None:
    """Repetitions (samples per group) that would give ``power`` under :func:`achieved_power`'s model.

    The standard error shrinks as 1/sqrt(n): ``se_m = se sqrt(n / m)``; solving
    ``Phi(d / se_m - z) = power`` gives ``m = n (se (z + z_power) / d) ** 2`` with ``d = |estimate -
    threshold|`` (rounded up, at least ``MIN_INTERVAL_SAMPLES``). None when the estimate sits on the
    threshold (no number of repetitions is expected to decide) or the interval has no width."""
    if not 0.5 < power < 1.0:
        raise SampleSpecError(f"power must be in (0.5, 1), got {power}")
    z = _z(0.5 + confidence / 2.0)
    se = (high - low) / (2.0 * z)
    d = abs(estimate - threshold)
    if not math.isfinite(se) or se <= 0 or d <= 0:
        return None
    m = max(n, 1) * (se * (z + _z(power)) / d) ** 2
    return max(math.ceil(m - 1e-9), MIN_INTERVAL_SAMPLES)


def _first_k(n: int, ok: Callable[[int], bool]) -> int:
    """The smallest k in 0..n+1 with ``ok(k)`` for a predicate false-then-true in k."""
    lo, hi = 0, n + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def binomial_power(n: int, p: float, threshold: float, confidence: float) -> float | None:
    """The chance that ``n`` trials at a true rate ``p`` give a Clopper-Pearson interval wholly on
    ``p``'s side of ``threshold`` (exact: summed over the binomial law). None when ``p`` is on it.
    Both ends of the interval grow with k, so the deciding counts are found by bisection."""
    from scipy.stats import binom  # noqa: PLC0415

    alpha = (1.0 - confidence) / 2.0
    if p < threshold:  # PASS: upper end below, k up to (first k whose upper end reaches it) - 1
        k = _first_k(n, lambda k: k > n or clopper_pearson(k, n, alpha)[1] >= threshold) - 1
        return float(binom.cdf(k, n, p)) if k >= 0 else 0.0
    if p > threshold:  # FAIL: lower end above, from the first k whose lower end clears it
        k = _first_k(n, lambda k: k > n or clopper_pearson(k, n, alpha)[0] > threshold)
        return float(binom.sf(k - 1, n, p)) if k <= n else 0.0
    return None


def binomial_trials_for_power(p: float, threshold: float, confidence: float, power: float = POWER_TARGET,
                              limit: int = 20_000) -> int | None:
    """The fewest trials whose :func:`binomial_power` reaches ``power`` (searched by doubling, then
    bisection; the power of a discrete test wobbles with n, so this is a planning figure); None
    when ``p`` is on the threshold or ``limit`` trials do not reach it."""
    if p == threshold or not 0.0 <= p <= 1.0:
        return None
    hi = MIN_INTERVAL_SAMPLES
    while (binomial_power(hi, p, threshold, confidence) or 0.0) < power:
        if hi >= limit:
            return None
        hi = min(hi * 2, limit)
    lo = max(hi // 2, 1)
    while lo < hi:
        mid = (lo + hi) // 2
        if (binomial_power(mid, p, threshold, confidence) or 0.0) >= power:
            hi = mid
        else:
            lo = mid + 1
    return hi


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _z(p: float) -> float:
    """The standard normal quantile (bisection on erf; p in (0.5, 1))."""
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2.0
        if _phi(mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0
