"""Coverage of kvgate's TTFT and throughput intervals when repetitions are correlated.

Simulates G3 comparisons with a known true effect and prints how often the nominal 95% interval
(``harness.gates.stats.bootstrap_interval``, the gate's own code) covers the truth:

* TTFT p50 reduction: log TTFT = mu_arm + u_rep + e_req, with between-repetition variance share
  (intra-class correlation) ICC; the true reduction is 1 - exp(mu_a - mu_b). Hierarchical
  (two-stage) bootstrap over the samples grouped by repetition, side by side with the pooled
  bootstrap that treats every request as independent.
* Throughput gain at a point: each request's output rate is lognormal with the same ICC (the
  repetition's level shared by its requests), a repetition's throughput is the mean of its
  requests' rates; the true gain is the ratio of the arms' expected rates minus 1. The gate's
  interval (one figure per repetition, the design's unit: the Welch t interval of the log
  ratio of means) side by side with the pooled bootstrap over the requests' rates as if they were
  independent.
* Soak drift (G4's ``ttft_drift``): 72 windows whose log TTFT wanders as an AR(1) series (rho 0,
  0.5, 0.8: a shared disk's latency drifts over many windows), the last third truly 15% slower
  against the 10% threshold. How often the interval's upper end falls below 10% (a false PASS;
  a one-sided 95% bound allows 2.5%), with the windows resampled in moving blocks (the gate,
  ``soakdata.drift_leaf``) and resampled singly.

Usage: ``python bench/coverage.py [--trials 400] [--reps 10] [--requests 12] [--icc 0.3]``
(``make bench-coverage``). Trials run on every core; a couple of minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.gates.stats import bootstrap_interval, parse_sample_spec  # noqa: E402
from harness.pipelines.soakdata import drift_leaf  # noqa: E402

DRIFT_RHOS = (0.0, 0.5, 0.8)
DRIFT_WINDOWS, DRIFT_TRUE, DRIFT_THRESHOLD, DRIFT_SD = 72, 0.15, 0.10, 0.15

TRUE_TTFT_RATIO = 0.7  # candidate p50 / baseline p50: a 30% reduction
TRUE_THR_RATIO = 1.35  # candidate / baseline throughput: a 35% gain


def _arm(rng: random.Random, mu: float, reps: int, n: int, sb: float, sw: float) -> list[list[float]]:
    out = []
    for _ in range(reps):
        u = rng.gauss(0.0, sb)
        out.append([math.exp(mu + u + rng.gauss(0.0, sw)) for _ in range(n)])
    return out


def trial(args: tuple[int, int, int, float, float, int]) -> tuple[bool, bool, bool, bool, float, float, float, float]:
    seed, reps, n, icc, sigma, resamples = args
    rng = random.Random(seed)
    sb, sw = sigma * math.sqrt(icc), sigma * math.sqrt(1.0 - icc)
    base = _arm(rng, math.log(100.0), reps, n, sb, sw)
    cand = _arm(rng, math.log(100.0 * TRUE_TTFT_RATIO), reps, n, sb, sw)
    truth = 1.0 - TRUE_TTFT_RATIO
    grouped = parse_sample_spec({"kind": "ratio", "a_groups": cand, "b_groups": base, "stat": "p50",
                                 "transform": "reduction"})
    pooled = parse_sample_spec({"kind": "ratio", "a": [x for g in cand for x in g],
                                "b": [x for g in base for x in g], "stat": "p50", "transform": "reduction"})
    lo_h, hi_h = bootstrap_interval(grouped, confidence=0.95, resamples=resamples, rng=random.Random(seed + 1))
    lo_p, hi_p = bootstrap_interval(pooled, confidence=0.95, resamples=resamples, rng=random.Random(seed + 2))
    # throughput: per-request output rates with the same ICC; one figure per repetition (its mean)
    rate_b = _arm(rng, math.log(20.0), reps, n, sb, sw)
    rate_a = _arm(rng, math.log(20.0 * TRUE_THR_RATIO), reps, n, sb, sw)
    thr = parse_sample_spec({"kind": "ratio", "a": [sum(g) / len(g) for g in rate_a],
                             "b": [sum(g) / len(g) for g in rate_b], "stat": "mean", "transform": "gain"})
    thr_pooled = parse_sample_spec({"kind": "ratio", "a": [x for g in rate_a for x in g],
                                    "b": [x for g in rate_b for x in g], "stat": "mean", "transform": "gain"})
    lo_t, hi_t = bootstrap_interval(thr, confidence=0.95, resamples=resamples, rng=random.Random(seed + 3))
    lo_tp, hi_tp = bootstrap_interval(thr_pooled, confidence=0.95, resamples=resamples, rng=random.Random(seed + 4))
    gain = TRUE_THR_RATIO - 1
    return (lo_h <= truth <= hi_h, lo_p <= truth <= hi_p, lo_t <= gain <= hi_t, lo_tp <= gain <= hi_tp,
            hi_h - lo_h, hi_p - lo_p, hi_t - lo_t, hi_tp - lo_tp)


def drift_trial(args: tuple[int, float, int]) -> tuple[bool, bool, int]:
    """(false PASS with blocks, false PASS with single windows, block length) of one soak."""
    seed, rho, resamples = args
    rng = random.Random(seed)
    x, wins = 0.0, []
    for i in range(DRIFT_WINDOWS):
        x = rho * x + rng.gauss(0.0, DRIFT_SD * math.sqrt(1.0 - rho * rho))
        slow = 1.0 + DRIFT_TRUE if i >= DRIFT_WINDOWS - DRIFT_WINDOWS // 3 else 1.0
        wins.append({"index": i + 1, "ttft_p50_ms": 15.0 * slow * math.exp(x)})
    samples = dict(drift_leaf(wins, "ttft_p50_ms", "gain", "TTFT p50")["samples"])
    out = []
    for spec in (samples, {**samples, "block": 1}):
        _, high = bootstrap_interval(parse_sample_spec(spec), confidence=0.95, resamples=resamples,
                                     rng=random.Random(seed))
        out.append(high <= DRIFT_THRESHOLD)
    return out[0], out[1], int(samples["block"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=400, help="simulated comparisons (default 400)")
    p.add_argument("--reps", type=int, default=10, help="repetitions per arm (default 10)")
    p.add_argument("--requests", type=int, default=12, help="requests per repetition (default 12)")
    p.add_argument("--icc", type=float, default=0.3, help="intra-class correlation of log TTFT (default 0.3)")
    p.add_argument("--sigma", type=float, default=0.3, help="total sd of log TTFT (default 0.3)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per interval (default 1000)")
    p.add_argument("--seed", type=int, default=11)
    a = p.parse_args(argv)
    jobs = [(a.seed * 1_000_003 + i * 7, a.reps, a.requests, a.icc, a.sigma, a.resamples) for i in range(a.trials)]
    t0 = time.monotonic()
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(trial, jobs, chunksize=max(1, a.trials // 40)))
    secs = time.monotonic() - t0
    n = len(results)

    def cov(i: int) -> str:
        k = sum(1 for r in results if r[i])
        p_hat = k / n
        half = 1.96 * math.sqrt(p_hat * (1 - p_hat) / n)
        return f"{100 * p_hat:5.1f}% ({k}/{n}, +-{100 * half:.1f})"

    w_h, w_p, w_t, w_tp = (sum(r[i] for r in results) / n for i in (4, 5, 6, 7))
    print(f"coverage of nominal 95% intervals, {n} trials, {a.reps} repetitions x {a.requests} requests per arm, "
          f"ICC {a.icc}, sd(log TTFT) {a.sigma}, {a.resamples} resamples ({secs:.0f} s)")
    print(f"  TTFT p50 reduction (true {100 * (1 - TRUE_TTFT_RATIO):.0f}%)")
    print(f"    hierarchical bootstrap (repetitions, then requests): {cov(0)}  mean width {100 * w_h:.1f} pts")
    print(f"    pooled bootstrap (requests as independent):          {cov(1)}  mean width {100 * w_p:.1f} pts")
    print(f"    width ratio hierarchical / pooled: {w_h / w_p:.2f}x")
    print(f"  throughput gain (true {100 * (TRUE_THR_RATIO - 1):.0f}%)")
    print(f"    Welch t of the log ratio over repetitions (gate):      {cov(2)}  mean width {100 * w_t:.1f} pts")
    print(f"    pooled bootstrap (requests' rates as independent):    {cov(3)}  mean width {100 * w_tp:.1f} pts")
    print("  target: the gate's intervals (hierarchical TTFT, throughput over repetitions) cover the truth "
          "in 93-97% of trials")
    print(f"  soak drift: {DRIFT_WINDOWS} windows, last third {100 * DRIFT_TRUE:.0f}% slower, threshold "
          f"{100 * DRIFT_THRESHOLD:.0f}%: false PASS (one-sided 95% bound: 2.5% allowed)")
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for rho in DRIFT_RHOS:
            res = list(pool.map(drift_trial, [(a.seed * 7_919 + i, rho, a.resamples) for i in range(a.trials)],
                                chunksize=max(1, a.trials // 40)))
            k_b, k_s = sum(r[0] for r in res), sum(r[1] for r in res)
            print(f"    AR(1) rho {rho}: moving blocks (gate, mean block {sum(r[2] for r in res) / len(res):.1f}) "
                  f"{100 * k_b / len(res):.1f}% ({k_b}/{len(res)}), single windows {100 * k_s / len(res):.1f}% "
                  f"({k_s}/{len(res)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
