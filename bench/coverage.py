"""Coverage and false PASS/FAIL rates of kvgate's interval checks, with Monte Carlo standard errors.

Every figure is a proportion over simulated comparisons with a known truth, printed as
``p% +- SE (n=trials)`` (SE = sqrt(p (1 - p) / trials)) with its target beside it; every scenario
runs at least 2,000 trials (``--trials``; the vectorised TTFT ones 20,000). Each interval is the
gate's own: ``harness.gates.stats`` run on the samples a pipeline would write (per trial through
``parse_sample_spec`` + ``bootstrap_interval``), or the gate's own formula on numpy arrays of
trials (``cluster_t_half_width``, ``within_spread``), or, for the drift, a vectorised copy checked
against ``drift_leaf`` + ``bootstrap_interval`` on the first trials of every cell (the run stops if
they differ).

* TTFT p50 reduction (``ttft_p50_reduction``): log TTFT = mu_arm + u_rep + e_req, intra-class
  correlation ICC, 5 repetitions x 16 requests per arm; the baseline unconditionally and among
  baselines that pass G2's repeatability filter (per-repetition p50 CV <= 10%: the only ones G3
  sees). Coverage of a true 30% reduction, false PASS at a true 24% (threshold 25%), PASS rate
  (power) at a true 30%. Scenarios: equal spreads (sd 0.2, 0.3); one candidate request with a TTFT
  of 0 (issue 52 item 1: upstream it is an error record; here the zero reaches the interval, which
  must not change method); a baseline 1.5x noisier than the candidate (ICC 0.3 and 0.6).
* Capacity (``throughput_gain``, peak against peak; ``capacity_gain_at_slo`` is its k=1 case): both
  arms plateau over k = 1, 4, 8 concurrencies, the candidate exactly 29% above (the threshold),
  per-repetition throughput lognormal with CV 5-12%, 5 repetitions per point, the baseline kept
  only when G2's throughput CV <= 10% holds at every point. False PASS.
* Soak drift (G4 ``ttft_drift``): log TTFT per window (sd 0.13) as the wander fitted to demo soaks,
  a heavier one, AR(1) 0.5 and 0.8, fractional Gaussian noise H 0.8 and 0.9; at 168 windows (the
  demo) and 4,320 (72 hours at 1 min). Coverage and PASS at no drift, false FAIL at a true +8%,
  false PASS at a true +15% (threshold 10%).

Usage: ``python bench/coverage.py [--trials 2000] [--ttft-trials 20000] [--seed 11]``
(``make bench-coverage``); see docs/ARCHITECTURE.md "Statistics" for the measured run time.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.gates.stats import (  # noqa: E402
    _HURST_GRID,
    HURST_Z,
    bootstrap_interval,
    cluster_t_half_width,
    memory_inflation,
    parse_sample_spec,
    within_spread,
)
from harness.pipelines.g4.soakdata import DRIFT_BATCHES, drift_leaf  # noqa: E402

REPS, REQUESTS = 5, 16
G2_CV = 0.10  # G2's ttft_p50_cv and throughput_cv thresholds
TTFT_TRUE, TTFT_THRESHOLD, TTFT_NEAR = 0.30, 0.25, 0.24
GAIN_THRESHOLD, PLATEAUS, GAIN_CVS = 0.29, (1, 4, 8), (0.05, 0.09, 0.10, 0.12)
# Soak wander. ("ar2", share of the variance in the slow AR(1), its lag-1, the fast one's): "fitted"
# by least squares to the pooled autocorrelation (lags 1-24) of two `make demo` soaks' 168 steady
# windows on this project's VM; "heavier": the memory a 168-window sample autocorrelation
# understates. ("fgn", Hurst exponent): fractional Gaussian noise, the long memory of storage
# background work (issue 52 item 4).
DRIFT_MODELS: dict[str, tuple[str, tuple[float, ...]]] = {
    "fitted": ("ar2", (0.335, 0.864, 0.206)), "heavier": ("ar2", (0.4, 0.95, 0.3)),
    "AR(1) 0.5": ("ar2", (0.0, 0.5, 0.5)), "AR(1) 0.8": ("ar2", (0.0, 0.8, 0.8)),
    "fGn H 0.8": ("fgn", (0.8,)), "fGn H 0.9": ("fgn", (0.9,)),
}
DRIFT_LENGTHS = (168, 4320)
DRIFT_TRUE, DRIFT_INSIDE, DRIFT_THRESHOLD, DRIFT_SD = 0.15, 0.08, 0.10, 0.13
CHECKED = 20  # drift trials per cell also run through drift_leaf + bootstrap_interval


def _rate(hits: np.ndarray, target: str = "") -> str:
    n = int(hits.size)
    if n == 0:
        return "   n/a (no trial)"
    p = float(hits.mean())
    figure = f"{100 * p:5.2f}% +- {100 * math.sqrt(p * (1 - p) / n):.2f} (n={n})"
    return figure + (f" [target {target}]" if target else "")


def _arm(rng: np.random.Generator, trials: int, mu: float, sigma: float, icc: float) -> np.ndarray:
    u = rng.normal(0.0, sigma * math.sqrt(icc), (trials, REPS, 1))
    return np.exp(mu + u + rng.normal(0.0, sigma * math.sqrt(1.0 - icc), (trials, REPS, REQUESTS)))


def _g2_passes(base: np.ndarray) -> np.ndarray:
    p50 = np.median(base, axis=2)
    return p50.std(axis=1, ddof=1) / p50.mean(axis=1) <= G2_CV


def _g2_baselines(rng: np.random.Generator, trials: int, sigma: float, icc: float) -> tuple[np.ndarray, float]:
    """``trials`` baselines that pass G2's filter (drawn in batches), and the share that passed."""
    kept, drawn = [], 0
    while sum(len(k) for k in kept) < trials:
        batch = _arm(rng, 20_000, math.log(100.0), sigma, icc)
        drawn += len(batch)
        kept.append(batch[_g2_passes(batch)])
    got = np.concatenate(kept)
    return got[:trials], len(got) / drawn


def _cluster_bounds(cand: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The gate's 95% interval of the reduction per trial (the G3 baseline passed G2): its formula."""
    la, lb = np.log(np.median(cand, axis=2)), np.log(np.median(base, axis=2))
    est = la.mean(axis=1) - lb.mean(axis=1)
    ratio = within_spread(base) / within_spread(cand)
    half = cluster_t_half_width(la.var(axis=1, ddof=1), REPS, lb.var(axis=1, ddof=1), REPS, 0.025,
                                b_filtered=True, spread_ratio=ratio)
    return 1.0 - np.exp(est + half), 1.0 - np.exp(est - half)


def _ttft_line(rng: np.random.Generator, base: np.ndarray, sigma: float, icc: float) -> str:
    n = len(base)
    lo, hi = _cluster_bounds(_arm(rng, n, math.log(100.0 * (1 - TTFT_TRUE)), sigma, icc), base)
    lo_n, _ = _cluster_bounds(_arm(rng, n, math.log(100.0 * (1 - TTFT_NEAR)), sigma, icc), base)
    return (f"coverage {_rate((lo <= TTFT_TRUE) & (TTFT_TRUE <= hi), '>= 93%')}; false PASS at "
            f"{100 * TTFT_NEAR:.0f}% {_rate(lo_n >= TTFT_THRESHOLD, '<= 2.5%')}; PASS at "
            f"{100 * TTFT_TRUE:.0f}% {_rate(lo >= TTFT_THRESHOLD)}")


def ttft_section(trials: int, seed: int) -> None:
    print(f"TTFT p50 reduction ({REPS} x {REQUESTS} per arm; cluster-t on per-repetition log p50s, the "
          "candidate's spread for both arms scaled by the within-repetition spreads; nominal 95%)")
    cases = [(0.2, 0.3, 1.0), (0.3, 0.3, 1.0), (0.3, 0.6, 1.0), (0.2, 0.3, 1.5), (0.3, 0.3, 1.5), (0.3, 0.6, 1.5)]
    for i, (sigma, icc, ratio) in enumerate(cases):
        rng = np.random.default_rng(seed + i)
        base = _arm(rng, trials, math.log(100.0), sigma * ratio, icc)
        g2, share = _g2_baselines(rng, trials, sigma * ratio, icc)
        what = "equal spreads" if ratio == 1 else f"baseline {ratio}x noisier"
        print(f"  {what}, sd(log TTFT) {sigma}, ICC {icc}: all baselines: {_ttft_line(rng, base, sigma, icc)}")
        print(f"    among G2-passing ({100 * share:.1f}% pass): {_ttft_line(rng, g2, sigma, icc)}")
def _zero_trial(rng: random.Random, base: list[list[float]], mu: float, zero: bool) -> tuple[float, float]:
    """The gate's interval (through the sample spec) for one candidate at ``mu``, with one TTFT of 0."""
    cand = [[math.exp(mu + u + rng.gauss(0.0, 0.3 * math.sqrt(0.7))) for _ in range(REQUESTS)]
            for u in (rng.gauss(0.0, 0.3 * math.sqrt(0.3)) for _ in range(REPS))]
    if zero:
        cand[2][7] = 0.0
    spec = parse_sample_spec({"kind": "ratio", "a_groups": cand, "b_groups": base, "stat": "p50",
                              "transform": "reduction", "b_filtered": True})
    return bootstrap_interval(spec, confidence=0.95, resamples=1, rng=rng)


def zero_section(trials: int, seed: int) -> None:
    """Issue 52 item 1: one candidate TTFT of 0 (G2-passing baselines, sd 0.3, ICC 0.3)."""
    rng = np.random.default_rng(seed)
    bases, _ = _g2_baselines(rng, trials, 0.3, 0.3)
    for zero in (False, True):
        r = random.Random(seed)
        cover, near = [], []
        for base in bases:
            b = base.tolist()
            lo, hi = _zero_trial(r, b, math.log(100.0 * (1 - TTFT_TRUE)), zero)
            cover.append(lo <= TTFT_TRUE <= hi)
            near.append(_zero_trial(r, b, math.log(100.0 * (1 - TTFT_NEAR)), zero)[0] >= TTFT_THRESHOLD)
        what = "one candidate TTFT of 0" if zero else "no zero (the same draws)"
        print(f"  {what}, G2-passing, through parse_sample_spec + bootstrap_interval: coverage "
              f"{_rate(np.array(cover), '>= 93%')}; false PASS at {100 * TTFT_NEAR:.0f}% "
              f"{_rate(np.array(near), '<= 2.5%')}")


def _plateaus(rng: np.random.Generator, trials: int, k: int, level: float, cv: float) -> np.ndarray:
    sd = math.sqrt(math.log(1 + cv * cv))
    return level * np.exp(rng.normal(-sd * sd / 2, sd, (trials, k, REPS)))


def _g2_plateaus(rng: np.random.Generator, trials: int, k: int, cv: float) -> np.ndarray:
    """Baselines whose throughput CV passes G2 (<= 10%) at every point."""
    kept, got = [], 0
    while got < trials:
        b = _plateaus(rng, 200_000 // k, k, 1000.0, cv)
        ok = (b.std(axis=2, ddof=1) / b.mean(axis=2) <= G2_CV).all(axis=1)
        kept.append(b[ok])
        got += int(ok.sum())
    return np.concatenate(kept)[:trials]


def _capacity_low(a: np.ndarray, b: np.ndarray) -> float:
    pts = lambda x: {str(8 * 2 ** i): list(map(float, row)) for i, row in enumerate(x)}  # noqa: E731
    spec = parse_sample_spec({"kind": "capacity", "a_points": pts(a), "b_points": pts(b), "transform": "gain",
                              "b_filtered": True})
    return bootstrap_interval(spec, confidence=0.95, resamples=1, rng=random.Random(0))[0]


def capacity_section(trials: int, seed: int) -> None:
    print(f"Capacity peak against peak (throughput_gain; capacity_gain_at_slo is k=1): a true gain of exactly "
          f"{100 * GAIN_THRESHOLD:.0f}% (the threshold), {REPS} repetitions per point, baseline passed G2's CV <= 10%")
    rng = np.random.default_rng(seed)
    for cv in GAIN_CVS:
        cells = []
        for k in PLATEAUS:
            base = _g2_plateaus(rng, trials, k, cv)
            cand = _plateaus(rng, trials, k, 1000.0 * (1 + GAIN_THRESHOLD), cv)
            fp = np.array([_capacity_low(a, b) >= GAIN_THRESHOLD - 1e-12 for a, b in zip(cand, base)])
            cells.append(f"k={k} {_rate(fp)}")
        print(f"  CV {100 * cv:.0f}%: false PASS [target <= 2.5%] " + "; ".join(cells))


def _ar2(rng: np.random.Generator, trials: int, windows: int, params: tuple[float, ...]) -> np.ndarray:
    w, phi_slow, phi_fast = params
    out = np.zeros((trials, windows))
    for share, phi in ((w, phi_slow), (1.0 - w, phi_fast)):
        if share <= 0:
            continue
        sd = math.sqrt(share)
        x = rng.normal(0.0, sd, trials)
        eps = rng.normal(0.0, sd * math.sqrt(1.0 - phi * phi), (trials, windows))
        for i in range(windows):
            x = x if i == 0 else phi * x + eps[:, i]
            out[:, i] += x
    return out


def _fgn(rng: np.random.Generator, trials: int, windows: int, params: tuple[float, ...]) -> np.ndarray:
    """Fractional Gaussian noise of unit variance (Davies and Harte 1987: circulant embedding)."""
    (hurst,) = params
    k = np.arange(windows + 1, dtype=float)
    gamma = 0.5 * (np.abs(k + 1) ** (2 * hurst) - 2 * k ** (2 * hurst) + np.abs(k - 1) ** (2 * hurst))
    eig = np.fft.fft(np.concatenate([gamma, gamma[-2:0:-1]])).real
    eig = np.sqrt(np.maximum(eig, 0.0) / (2 * windows))
    out = []
    for start in range(0, trials, 250):
        m = min(250, trials - start)
        z = rng.normal(size=(m, 2 * windows)) + 1j * rng.normal(size=(m, 2 * windows))
        out.append(np.fft.fft(eig * z, axis=1).real[:, :windows])
    return np.concatenate(out)


def _batch_bounds(series: np.ndarray, memory: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The gate's drift interval per trial, vectorised: each third cut into DRIFT_BATCHES batches,
    the median of each, the Welch t interval of the log ratio of the mean batch figures, widened for
    the long memory the windows show (``memory``; without it, the batch means alone, as before)."""
    n = series.shape[1] // 3
    cuts = [round(i * n / DRIFT_BATCHES) for i in range(DRIFT_BATCHES + 1)]

    def figs(x: np.ndarray) -> np.ndarray:
        return np.stack([np.median(x[:, cuts[i]:cuts[i + 1]], axis=1) for i in range(DRIFT_BATCHES)], axis=1)

    fa, fb = figs(series[:, -n:]), figs(series[:, :n])
    ma, mb = fa.mean(axis=1), fb.mean(axis=1)
    ua = fa.var(axis=1, ddof=1) / (DRIFT_BATCHES * ma ** 2)
    ub = fb.var(axis=1, ddof=1) / (DRIFT_BATCHES * mb ** 2)
    df = (ua + ub) ** 2 / (ua ** 2 / (DRIFT_BATCHES - 1) + ub ** 2 / (DRIFT_BATCHES - 1))
    half = student_t.ppf(0.975, df) * np.sqrt(ua + ub)
    est = np.log(ma / mb)
    if memory:
        bound = np.clip(_whittle(series[:, :n], series[:, -n:]) + HURST_Z * 1.0 / (2.0 * math.sqrt(2 * _m(n))),
                        0.5, 0.99)
        widen = {h: math.sqrt(memory_inflation(float(h), n, DRIFT_BATCHES)) for h in np.unique(bound)}
        half = half * np.vectorize(widen.__getitem__)(bound)
    return np.exp(est - half) - 1.0, np.exp(est + half) - 1.0


def _m(n: int) -> int:
    return max(2, int(n ** 0.65))


def _whittle(first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The gate's local Whittle estimate of the Hurst exponent per trial (``stats._local_whittle``)."""
    n, m = first.shape[1], _m(first.shape[1])
    lam = np.tile(2 * np.pi * np.arange(1, m + 1) / n, 2)
    per = np.concatenate([np.abs(np.fft.fft(x / x.mean(axis=1, keepdims=True) - 1.0, axis=1)[:, 1:m + 1]) ** 2
                          for x in (first, last)], axis=1)
    grid = np.array(_HURST_GRID)
    objective = np.stack([np.log((lam ** (2 * h - 1) * per).mean(axis=1)) - (2 * h - 1) * np.log(lam).mean()
                          for h in grid])
    return grid[objective.argmin(axis=0)]


def _checked_bounds(series: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = _batch_bounds(series)
    for t, row in enumerate(series[:CHECKED]):
        wins = [{"index": i + 1, "ttft_p50_ms": float(v)} for i, v in enumerate(row)]
        spec = parse_sample_spec(drift_leaf(wins, "ttft_p50_ms", "gain", "TTFT p50")["samples"])
        glo, ghi = bootstrap_interval(spec, confidence=0.95, resamples=1, rng=random.Random(t))
        if not (math.isclose(glo, lo[t], rel_tol=1e-9, abs_tol=1e-12)
                and math.isclose(ghi, hi[t], rel_tol=1e-9, abs_tol=1e-12)):
            raise SystemExit(f"bench drift interval differs from the gate's: {(glo, ghi)} vs {(lo[t], hi[t])}")
    return lo, hi


def _drift_rates(out: dict[float, tuple[np.ndarray, np.ndarray]]) -> str:
    (lo0, hi0), (lo_in, _), (_, hi_out) = out[0.0], out[DRIFT_INSIDE], out[DRIFT_TRUE]
    return (f"coverage at 0 {_rate((lo0 <= 0) & (hi0 >= 0), '>= 93%')}; PASS at 0 {_rate(hi0 <= DRIFT_THRESHOLD)}; "
            f"false FAIL at +{100 * DRIFT_INSIDE:.0f}% {_rate(lo_in > DRIFT_THRESHOLD, '<= 2.5%')}; false PASS at "
            f"+{100 * DRIFT_TRUE:.0f}% {_rate(hi_out <= DRIFT_THRESHOLD, '<= 2.5%')}")


def drift_section(trials: int, seed: int) -> None:
    print(f"Soak drift (G4 ttft_drift: batch means, {DRIFT_BATCHES} batches a third, widened for the Hurst "
          f"exponent the windows show (local Whittle + {HURST_Z:g} SE); threshold "
          f"{100 * DRIFT_THRESHOLD:.0f}%, nominal 95%), log TTFT sd {DRIFT_SD}")
    rng = np.random.default_rng(seed)
    gens: dict[str, Callable[..., np.ndarray]] = {"ar2": _ar2, "fgn": _fgn}
    for name, (kind, params) in DRIFT_MODELS.items():
        for windows in DRIFT_LENGTHS:
            out, plain = {}, {}
            for d in (0.0, DRIFT_INSIDE, DRIFT_TRUE):
                logs = DRIFT_SD * gens[kind](rng, trials, windows, params)
                ttft = 15.0 * np.exp(logs)
                ttft[:, -(windows // 3):] *= 1.0 + d
                out[d] = _checked_bounds(ttft)
                plain[d] = _batch_bounds(ttft, memory=False)
            print(f"  {name}, {windows} windows: gate {_drift_rates(out)}")
            print(f"    batch means alone (before): {_drift_rates(plain)}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=2000,
                   help="trials per scenario of the per-trial sections (zero TTFT, capacity, drift; default 2000)")
    p.add_argument("--ttft-trials", type=int, default=20000, help="trials per vectorised TTFT scenario")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--only", choices=("ttft", "zero", "capacity", "drift"), nargs="+",
                   help="run only these sections")
    a = p.parse_args(argv)
    t0 = time.monotonic()
    load = os.getloadavg()[0]
    sections: dict[str, Callable[[], None]] = {
        "ttft": lambda: ttft_section(a.ttft_trials, a.seed),
        "zero": lambda: zero_section(a.trials, a.seed + 50),
        "capacity": lambda: capacity_section(a.trials, a.seed + 60),
        "drift": lambda: drift_section(a.trials, a.seed + 70),
    }
    for name, run in sections.items():
        if a.only is None or name in a.only:
            start = time.monotonic()
            run()
            print(f"  ({name}: {time.monotonic() - start:.0f} s)", flush=True)
    print(f"({time.monotonic() - t0:.0f} s, load average {load:.1f} at the start and {os.getloadavg()[0]:.1f} at "
          f"the end on {os.cpu_count()} cores; figures are proportions +- their Monte Carlo standard error)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
