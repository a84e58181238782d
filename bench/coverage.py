"""Coverage and false-PASS rates of kvgate's G3 intervals, with their Monte Carlo standard errors.

Every figure is a proportion over simulated comparisons with a known true effect, printed with its
Monte Carlo standard error (sqrt(p (1 - p) / trials)); every figure uses at least 2,000 trials.

* TTFT p50 reduction (``ttft_p50_reduction``): log TTFT = mu_arm + u_rep + e_req with
  between-repetition share (intra-class correlation) ICC, 5 repetitions x 16 requests per arm.
  The gate's interval is the cluster-level t on per-repetition log p50s with the candidate's
  spread standing in for the G2-filtered baseline's
  (``harness.gates.stats.cluster_t_half_width(..., b_filtered=True)``, the gate's own formula, run
  here on numpy arrays of trials). Printed: coverage of the nominal 95% interval unconditionally
  (``--trials`` baselines) and among baselines that pass G2's repeatability filter (per-repetition
  p50 CV <= 10%: the only baselines G3 ever sees; drawn until ``--trials`` of them passed), and the
  false-PASS rate at a true 24% reduction against the 25% threshold (the interval's low end >=
  25%; a one-sided 2.5% is allowed), both ways; beside them Welch on both arms' spreads (what an
  unfiltered pair gets), and the case the gate does not cover: a baseline truly noisier than the
  candidate (``--noisier``). ``--bootstrap-trials N`` adds the old hierarchical bootstrap
  (repetitions, then requests) on N trials for comparison (slow).
* Throughput capacity (``throughput_gain``): both arms plateau over k = 1, 4 and 8 concurrencies
  (every point's true mean equal), the candidate's exactly 29% above the baseline's (the
  threshold), per-repetition throughput lognormal with CV 5%, 5 repetitions per point. The
  false-PASS rate of the gate's capacity interval (``stats.capacity_interval`` through
  ``bootstrap_interval``, the gate's code) beside the old decision (the candidate's best point
  against the baseline at the same point, Welch t), which grows with k.
* Soak drift (G4's ``ttft_drift``): windows whose log TTFT wanders as a slow plus a fast AR(1)
  (``DRIFT_MODELS``: one fitted to two demo soaks, a heavier one, the old AR(1)), at the demo's
  168 steady windows and at 540; the gate's interval (``drift_leaf`` + ``bootstrap_interval``:
  batch means) beside the moving-block bootstrap with Carlstein's block length it replaced (on a
  fifth of the trials: a pure-Python bootstrap per trial). Printed: coverage and PASS at no drift,
  false FAIL at a true +8% (inside the 10% bound), false PASS at a true +15%.

Usage: ``python bench/coverage.py [--trials 20000] [--capacity-trials 2000] [--drift-trials 2000]``
(``make bench-coverage``); about 7 minutes on one core (411 s measured), most of it the old drift
method's bootstrap.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.gates.stats import (  # noqa: E402
    block_length,
    bootstrap_interval,
    cluster_t_half_width,
    parse_sample_spec,
)
from harness.pipelines.g4.soakdata import DRIFT_BATCHES, drift_leaf  # noqa: E402

REPS, REQUESTS, ICC = 5, 16, 0.3
G2_CV = 0.10  # G2's ttft_p50_cv threshold
TTFT_TRUE, TTFT_THRESHOLD, TTFT_NEAR = 0.30, 0.25, 0.24
GAIN_THRESHOLD, GAIN_CV, PLATEAUS = 0.29, 0.05, (1, 4, 8)
# Soak wander: (share of the variance in the slow component, its lag-1 autocorrelation, the fast
# one's). "fitted": least squares on the pooled autocorrelation (lags 1-24) of two `make demo` soaks'
# 168 steady windows (log TTFT p50, sd 0.13) on this project's VM; "heavier": the memory a sample
# autocorrelation of 168 windows understates (it is biased low at long lags: the demo soak's
# long-run variance was 8x its variance, the fitted model's 5.6x); "AR(1) 0.5": the old assumption.
DRIFT_MODELS = {"fitted": (0.335, 0.864, 0.206), "heavier": (0.4, 0.95, 0.3), "AR(1) 0.5": (0.0, 0.5, 0.5)}
DRIFT_LENGTHS = (168, 540)  # the demo soak's steady windows; a soak about three times longer
DRIFT_TRUE, DRIFT_INSIDE, DRIFT_THRESHOLD, DRIFT_SD = 0.15, 0.08, 0.10, 0.13


def _rate(hits: np.ndarray) -> str:
    n = int(hits.size)
    if n == 0:
        return "   n/a (no trial)"
    p = float(hits.mean())
    return f"{100 * p:5.2f}% +- {100 * math.sqrt(p * (1 - p) / n):.2f} (n={n})"


def _arm(rng: np.random.Generator, trials: int, mu: float, sigma: float) -> np.ndarray:
    sb, sw = sigma * math.sqrt(ICC), sigma * math.sqrt(1.0 - ICC)
    u = rng.normal(0.0, sb, (trials, REPS, 1))
    return np.exp(mu + u + rng.normal(0.0, sw, (trials, REPS, REQUESTS)))


def _cluster_bounds(cand: np.ndarray, base: np.ndarray, filtered: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The gate's 95% interval of the reduction, per trial (low, high); ``filtered``: the G3
    baseline (it passed G2), else Welch on both arms' spreads."""
    la, lb = np.log(np.median(cand, axis=2)), np.log(np.median(base, axis=2))
    est = la.mean(axis=1) - lb.mean(axis=1)
    half = cluster_t_half_width(la.var(axis=1, ddof=1), REPS, lb.var(axis=1, ddof=1), REPS, 0.025,
                                b_filtered=filtered)
    return 1.0 - np.exp(est + half), 1.0 - np.exp(est - half)


def _g2_passes(base: np.ndarray) -> np.ndarray:
    p50 = np.median(base, axis=2)
    return p50.std(axis=1, ddof=1) / p50.mean(axis=1) <= G2_CV


def _g2_baselines(rng: np.random.Generator, trials: int, sigma: float) -> tuple[np.ndarray, float]:
    """``trials`` baselines that pass G2's filter (drawn in batches), and the share that passed."""
    kept, drawn = [], 0
    while sum(len(k) for k in kept) < trials:
        batch = _arm(rng, 20_000, math.log(100.0), sigma)
        drawn += len(batch)
        kept.append(batch[_g2_passes(batch)])
    got = np.concatenate(kept)
    return got[:trials], len(got) / drawn


def _bootstrap_bounds(rng: np.random.Generator, cand: np.ndarray, base: np.ndarray,
                      resamples: int) -> tuple[np.ndarray, np.ndarray]:
    """The old hierarchical percentile bootstrap (repetitions, then requests within them)."""
    def stat(x: np.ndarray) -> np.ndarray:  # x: (reps, requests) -> (resamples,) medians
        reps = rng.integers(0, REPS, (resamples, REPS))
        idx = rng.integers(0, REQUESTS, (resamples, REPS, REQUESTS))
        return np.median(x[reps[:, :, None], idx].reshape(resamples, -1), axis=1)

    lows, highs = [], []
    for a, b in zip(cand, base):
        r = 1.0 - stat(a) / stat(b)
        lo, hi = np.percentile(r, [2.5, 97.5])
        lows.append(lo)
        highs.append(hi)
    return np.array(lows), np.array(highs)


def _ttft_rates(rng: np.random.Generator, base: np.ndarray, sigma: float,
                filtered: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per trial: did the interval cover a true 30% reduction; did a true 24% one PASS."""
    n = len(base)
    cand = _arm(rng, n, math.log(100.0 * (1 - TTFT_TRUE)), sigma)
    near = _arm(rng, n, math.log(100.0 * (1 - TTFT_NEAR)), sigma)
    lo, hi = _cluster_bounds(cand, base, filtered)
    lo_n, _ = _cluster_bounds(near, base, filtered)
    return (lo <= TTFT_TRUE) & (TTFT_TRUE <= hi), lo_n >= TTFT_THRESHOLD


def ttft_section(trials: int, sigma: float, seed: int, boot_trials: int, resamples: int) -> None:
    rng = np.random.default_rng(seed)
    base = _arm(rng, trials, math.log(100.0), sigma)
    cover, false_pass = _ttft_rates(rng, base, sigma)
    g2_base, share = _g2_baselines(rng, trials, sigma)
    g2_cover, g2_false_pass = _ttft_rates(rng, g2_base, sigma)
    print(f"  sd(log TTFT) {sigma}: {100 * share:.1f}% of baselines pass G2's CV <= {100 * G2_CV:.0f}%")
    print(f"    coverage, true {100 * TTFT_TRUE:.0f}% (target 94-96%):                {_rate(cover)}")
    print(f"    coverage among G2-passing baselines (target >= 93%):  {_rate(g2_cover)}")
    print(f"    false PASS at a true {100 * TTFT_NEAR:.0f}% (target <= 2.5%):             {_rate(false_pass)}")
    print(f"      among G2-passing baselines (target <= 2.5%):        {_rate(g2_false_pass)}")
    welch_cover, welch_fp = _ttft_rates(rng, base, sigma, filtered=False)
    w2_cover, w2_fp = _ttft_rates(rng, g2_base, sigma, filtered=False)
    print(f"    for comparison, Welch on both arms' spreads (unfiltered arms, e.g. recompute): coverage "
          f"{_rate(welch_cover)}, among G2-passing {_rate(w2_cover)}; false PASS {_rate(welch_fp)}, "
          f"among G2-passing {_rate(w2_fp)}")
    if boot_trials:
        k = min(boot_trials, trials)
        cand = _arm(rng, k, math.log(100.0 * (1 - TTFT_TRUE)), sigma)
        near = _arm(rng, k, math.log(100.0 * (1 - TTFT_NEAR)), sigma)
        blo, bhi = _bootstrap_bounds(rng, cand, base[:k], resamples)
        nlo, _ = _bootstrap_bounds(rng, near, base[:k], resamples)
        bcover = (blo <= TTFT_TRUE) & (TTFT_TRUE <= bhi)
        g2 = _g2_passes(base[:k])
        print(f"    old hierarchical bootstrap ({resamples} resamples): coverage {_rate(bcover)}, among G2-passing "
              f"{_rate(bcover[g2])}; false PASS {_rate(nlo >= TTFT_THRESHOLD)}, among G2-passing "
              f"{_rate((nlo >= TTFT_THRESHOLD)[g2])}")


def noisier_baseline_section(trials: int, sigma: float, ratio: float, seed: int) -> None:
    """What the gate does not cover: a baseline truly noisier than the candidate."""
    rng = np.random.default_rng(seed)
    base = _arm(rng, trials, math.log(100.0), sigma * ratio)
    cover, false_pass = _ttft_rates(rng, base, sigma)
    g2_base, share = _g2_baselines(rng, trials, sigma * ratio)
    g2_cover, g2_false_pass = _ttft_rates(rng, g2_base, sigma)
    w_cover, w_fp = _ttft_rates(rng, base, sigma, filtered=False)
    print(f"  limitation: baseline sd(log TTFT) {ratio}x the candidate's {sigma} ({100 * share:.1f}% pass G2): "
          f"coverage {_rate(cover)}, among G2-passing {_rate(g2_cover)}; false PASS {_rate(false_pass)}, "
          f"among G2-passing {_rate(g2_false_pass)}; Welch (were the baseline unfiltered): coverage "
          f"{_rate(w_cover)}, false PASS {_rate(w_fp)}")


def _plateau(rng: random.Random, level: float, k: int) -> dict[str, list[float]]:
    sd = math.sqrt(math.log(1 + GAIN_CV ** 2))
    return {str(8 * 2 ** i): [level * math.exp(rng.gauss(-sd * sd / 2, sd)) for _ in range(REPS)] for i in range(k)}


def _capacity_trial(seed: int, k: int) -> tuple[bool, bool]:
    """(gate false PASS, old same-point false PASS) at a true capacity gain of exactly 29%."""
    rng = random.Random(seed)
    a, b = _plateau(rng, 1000.0 * (1 + GAIN_THRESHOLD), k), _plateau(rng, 1000.0, k)
    spec = parse_sample_spec({"kind": "capacity", "a_points": a, "b_points": b, "transform": "gain"})
    low, _ = bootstrap_interval(spec, confidence=0.95, resamples=1, rng=rng)
    best = max(a, key=lambda c: sum(a[c]))
    old = parse_sample_spec({"kind": "ratio", "a": a[best], "b": b[best], "stat": "mean", "transform": "gain"})
    old_low, _ = bootstrap_interval(old, confidence=0.95, resamples=1, rng=rng)
    return low >= GAIN_THRESHOLD - 1e-12, old_low >= GAIN_THRESHOLD - 1e-12


def capacity_section(trials: int, seed: int) -> None:
    print(f"  throughput capacity at a true gain of exactly {100 * GAIN_THRESHOLD:.0f}% (the threshold), "
          f"CV {100 * GAIN_CV:.0f}%, {REPS} repetitions per point: false PASS (target <= 5%)")
    for k in PLATEAUS:
        res = np.array([_capacity_trial(seed * 100_003 + i, k) for i in range(trials)])
        print(f"    k={k} plateau points: gate (peak vs peak, Bonferroni) {_rate(res[:, 0])}; "
              f"old (best point vs same point) {_rate(res[:, 1])}")


def _wander(rng: np.random.Generator, trials: int, windows: int, model: tuple[float, float, float]) -> np.ndarray:
    """log TTFT of ``windows`` windows per trial: a slow and a fast AR(1) wander summed (share ``w``
    of the variance in the slow one), total sd ``DRIFT_SD``; each starts in its stationary law."""
    w, phi_slow, phi_fast = model
    out = np.zeros((trials, windows))
    for share, phi in ((w, phi_slow), (1.0 - w, phi_fast)):
        sd = DRIFT_SD * math.sqrt(share)
        x = rng.normal(0.0, sd, trials)
        eps = rng.normal(0.0, sd * math.sqrt(1.0 - phi * phi), (trials, windows))
        for i in range(windows):
            x = x if i == 0 else phi * x + eps[:, i]
            out[:, i] += x
    return out


def _drift_bounds(series: np.ndarray, true: float, resamples: int, old: bool) -> tuple[np.ndarray, np.ndarray]:
    """The gate's interval of each trial's TTFT drift (``drift_leaf`` + ``bootstrap_interval``); with
    ``old``, the moving-block bootstrap with Carlstein's block length it replaced, on the same windows."""
    lows, highs = [], []
    n = series.shape[1] // 3
    for t, logs in enumerate(series):
        ttft = 15.0 * np.exp(logs)
        ttft[-n:] *= 1.0 + true
        wins = [{"index": i + 1, "ttft_p50_ms": float(v)} for i, v in enumerate(ttft)]
        samples = dict(drift_leaf(wins, "ttft_p50_ms", "gain", "TTFT p50")["samples"])
        if old:
            samples.pop("batches")
            samples["block"] = block_length([samples["a"], samples["b"]], len(samples["a"]))
        lo, hi = bootstrap_interval(parse_sample_spec(samples), confidence=0.95, resamples=resamples,
                                    rng=random.Random(t))
        lows.append(lo)
        highs.append(hi)
    return np.array(lows), np.array(highs)


def _drift_line(series: dict[float, np.ndarray], resamples: int, old: bool) -> str:
    lo0, hi0 = _drift_bounds(series[0.0], 0.0, resamples, old)
    lo_in, _ = _drift_bounds(series[DRIFT_INSIDE], DRIFT_INSIDE, resamples, old)
    _, hi_out = _drift_bounds(series[DRIFT_TRUE], DRIFT_TRUE, resamples, old)
    return (f"coverage at 0% {_rate((lo0 <= 0) & (hi0 >= 0))}; PASS at 0% {_rate(hi0 <= DRIFT_THRESHOLD)}; "
            f"false FAIL at +{100 * DRIFT_INSIDE:.0f}% {_rate(lo_in > DRIFT_THRESHOLD)}; "
            f"false PASS at +{100 * DRIFT_TRUE:.0f}% {_rate(hi_out <= DRIFT_THRESHOLD)}")


def drift_section(trials: int, seed: int, resamples: int) -> None:
    print(f"  soak drift (G4 ttft_drift, threshold {100 * DRIFT_THRESHOLD:.0f}%, nominal 95%; one-sided 2.5% "
          "allowed for a false FAIL or PASS): log TTFT per window wanders as a slow + a fast AR(1), "
          f"sd {DRIFT_SD}")
    rng = np.random.default_rng(seed)
    for name, model in DRIFT_MODELS.items():
        for windows in DRIFT_LENGTHS:
            series = {d: _wander(rng, trials, windows, model) for d in (0.0, DRIFT_INSIDE, DRIFT_TRUE)}
            print(f"    {name}, {windows} windows ({windows // 3} a third):")
            print(f"      batch means, {DRIFT_BATCHES} batches a third (gate): {_drift_line(series, resamples, False)}")
            few = {d: s[: max(trials // 5, 1)] for d, s in series.items()}
            print(f"      moving blocks, Carlstein's length (before):  {_drift_line(few, resamples, True)}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=20000, help="TTFT comparisons per setting (default 20000)")
    p.add_argument("--sigmas", type=float, nargs="+", default=[0.2, 0.3], help="sd(log TTFT) settings")
    p.add_argument("--capacity-trials", type=int, default=2000, help="capacity comparisons per k (default 2000)")
    p.add_argument("--bootstrap-trials", type=int, default=0,
                   help="also run the old hierarchical bootstrap on this many trials (slow; default 0)")
    p.add_argument("--drift-trials", type=int, default=2000,
                   help="soak drift trials per model, length and true drift (0: skip; the old method gets a fifth)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (old TTFT method, drift)")
    p.add_argument("--noisier", type=float, default=1.5,
                   help="also show a baseline this many times noisier than the candidate (0: skip)")
    p.add_argument("--seed", type=int, default=11)
    a = p.parse_args(argv)
    t0 = time.monotonic()
    print(f"G3 intervals, nominal 95%: {REPS} repetitions x {REQUESTS} requests per arm, ICC {ICC}")
    print("  TTFT p50 reduction: cluster-level t on per-repetition log p50s, the candidate's spread for both "
          "arms (gate; the baseline passed G2)")
    for i, sigma in enumerate(a.sigmas):
        ttft_section(a.trials, sigma, a.seed + i, a.bootstrap_trials, a.resamples)
    if a.noisier:
        noisier_baseline_section(a.trials, a.sigmas[0], a.noisier, a.seed + 97)
    if a.capacity_trials:
        capacity_section(a.capacity_trials, a.seed)
    if a.drift_trials:
        drift_section(a.drift_trials, a.seed, a.resamples)
    print(f"({time.monotonic() - t0:.0f} s; figures are proportions +- their Monte Carlo standard error)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
