"""Pure functions from sweep samples to the measured results the gate checks read.

A sweep is, per arm, per concurrency, a list of repetitions; each repetition is the summary of one
load run (``vllm bench serve`` key names) plus the TTFT of every successful measured request.
Nothing here does I/O, so every rule (what "complete" means, how the coefficient of variation is
computed, which point is "best") is tested on its own.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.gates.stats import percentile


@dataclass
class Repetition:
    """One measured repetition of one concurrency of one arm."""

    arm: str
    concurrency: int
    repetition: int
    summary: dict[str, Any]
    ttft_ms: list[float]
    evidence: list[str] = field(default_factory=list)
    # The engine's cold-restore counters over the measurement (harness.pipelines.shared.coldrestore).
    counters: dict[str, Optional[float]] = field(default_factory=dict)
    # Prompt tokens served per KV tier over the measurement (harness.pipelines.shared.tierhits).
    tiers: dict[str, Optional[float]] = field(default_factory=dict)
    # Why a figure above is None, by its key (e.g. memory_hit_requests on an engine without a split).
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def output_throughput(self) -> float:
        return float(self.summary.get("output_throughput") or 0.0)

    @property
    def completed(self) -> int:
        return int(self.summary.get("completed") or 0)

    @property
    def failed(self) -> int:
        return int(self.summary.get("failed") or 0)


Sweep = dict[int, list[Repetition]]  # concurrency -> repetitions


def point_key(concurrency: int) -> str:
    return f"c{concurrency}"


def pooled_ttft(reps: Sequence[Repetition]) -> list[float]:
    return [t for r in reps for t in r.ttft_ms]


def cv(values: Sequence[float]) -> Optional[float]:
    """Sample coefficient of variation (stdev with n-1 / mean); None below two values."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    if mean == 0:
        return None
    return statistics.stdev(values) / mean


def _m(value: Any, text: str = "", detail: str = "", evidence: Sequence[str] = (),
       samples: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    out: dict[str, Any] = {"value": value, "text": text, "detail": detail, "evidence": list(evidence)}
    if samples is not None:
        out["samples"] = samples
    return out


def _mean_of(values: Any) -> Optional[float]:
    nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.fmean(nums) if nums else None


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Optional[list[float]]:
    """[mean, low, high]: the t interval of the mean of per-repetition figures; None below two."""
    if len(values) < 2:
        return None
    from scipy.stats import t as student_t  # noqa: PLC0415 - scipy loads slowly; only tables need it

    m = statistics.fmean(values)
    q = float(student_t.ppf(0.5 + confidence / 2, len(values) - 1))
    half = q * statistics.stdev(values) / math.sqrt(len(values))
    return [m, m - half, m + half]


def sweep_table(sweep: Sweep) -> dict[str, dict[str, Any]]:
    """Per concurrency: pooled TTFT p50/p90/p99, mean throughput, counts (for charts and tables)."""
    table: dict[str, dict[str, Any]] = {}
    for conc in sorted(sweep):
        reps = sweep[conc]
        ttft = pooled_ttft(reps)
        thr = [r.output_throughput for r in reps]
        table[str(conc)] = {
            "ttft_p50_ms": percentile(ttft, 50) if ttft else None,
            "ttft_p90_ms": percentile(ttft, 90) if ttft else None,
            "ttft_p99_ms": percentile(ttft, 99) if ttft else None,
            "output_throughput": statistics.fmean(thr) if thr else None,
            "request_throughput": statistics.fmean([float(r.summary.get("request_throughput") or 0) for r in reps])
            if reps else None,
            "completed": sum(r.completed for r in reps),
            "failed": sum(r.failed for r in reps),
            "repetitions": len(reps),
            "mean_queue_ms": statistics.fmean([float(r.summary.get("mean_client_queue_time_ms") or 0) for r in reps])
            if reps else None,
            "request_goodput": _mean_of(r.summary.get("request_goodput") for r in reps),
            # per-repetition figures' mean and its 95% t interval [mean, low, high] (the TTFT chart)
            "ttft_p50_ci": mean_interval([percentile(r.ttft_ms, 50) for r in reps if r.ttft_ms]),
            "ttft_p90_ci": mean_interval([percentile(r.ttft_ms, 90) for r in reps if r.ttft_ms]),
            "output_throughput_ci": mean_interval([r.output_throughput for r in reps if r.completed]),
        }
    return table


def baseline_measured(sweep: Sweep, concurrencies: Sequence[int], repetitions: int) -> dict[str, Any]:
    """The G2 subtree ``baseline.*`` (without the probe figures, which the pipeline adds)."""
    missing = [f"c{c}/rep{r}" for c in concurrencies for r in range(1, repetitions + 1)
               if not any(x.repetition == r and x.completed > 0 for x in sweep.get(c, []))]
    out: dict[str, Any] = {
        "complete": _m(not missing, "all points measured" if not missing else f"{len(missing)} missing",
                       detail=("missing: " + ", ".join(missing)) if missing else
                       f"{len(concurrencies)} concurrencies x {repetitions} repetitions"),
    }
    total = sum(r.completed + r.failed for reps in sweep.values() for r in reps)
    failed = sum(r.failed for reps in sweep.values() for r in reps)
    out["failed_ratio"] = _m(failed / total if total else None, f"{failed} of {total}",
                             detail="" if total else "no request was sent")
    out["ttft_p50_cv"] = {}
    out["throughput_cv"] = {}
    for conc in concurrencies:
        reps = sweep.get(conc, [])
        p50s = [percentile(r.ttft_ms, 50) for r in reps if r.ttft_ms]
        thr = [r.output_throughput for r in reps if r.completed]
        for key, values, label in (("ttft_p50_cv", p50s, "TTFT p50 (ms)"),
                                   ("throughput_cv", thr, "output tok/s")):
            value = cv(values)
            detail = f"{label} per repetition: " + ", ".join(f"{v:.1f}" for v in values)
            if value is None:
                detail = f"needs at least 2 repetitions with a non-zero mean; have {len(values)}"
            out[key][point_key(conc)] = _m(value, detail=detail)
    return out


def best_point(sweep: Sweep) -> Optional[int]:
    """The candidate's best operating point: the concurrency with the highest mean output throughput."""
    best: Optional[int] = None
    best_thr = -math.inf
    for conc, reps in sweep.items():
        thr = [r.output_throughput for r in reps if r.completed]
        if thr and statistics.fmean(thr) > best_thr:
            best, best_thr = conc, statistics.fmean(thr)
    return best


def _without_ttft(candidate: Sequence[Repetition], baseline: Sequence[Repetition]) -> str:
    """Why a point's TTFT comparison is not run when a measured repetition was left with no TTFT
    (every request failed, or timed no measurement: ``harness.load.records``), else "". Dropping
    that repetition would compare what remained as if it had been the design."""
    gone = [f"{r.arm} c{r.concurrency} rep{r.repetition} ({r.failed} error record(s)"
            + (f": {_kinds(r)}" if _kinds(r) else "") + ")"
            for r in (*candidate, *baseline) if not r.ttft_ms]
    return ("no request with a valid TTFT in " + ", ".join(gone)) if gone else ""


def _kinds(r: Repetition) -> str:
    kinds = r.summary.get("errors_by_kind")
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) if isinstance(kinds, dict) else ""


def _groups(reps: Sequence[Repetition]) -> list[list[float]]:
    """TTFT samples grouped by repetition, for the hierarchical bootstrap (harness.gates.stats)."""
    return [list(r.ttft_ms) for r in reps if r.ttft_ms]


def compare_measured(candidate: Sweep, baseline: Sweep, recompute: Optional[Sweep] = None) -> dict[str, Any]:
    """The G3 subtree ``compare.*``: per-concurrency TTFT p50 reduction with its samples, the
    speed-up over the recompute arm, the throughput gain per concurrency, at the candidate's best
    point (same concurrency, reported) and capacity peak against peak (decided)."""
    out: dict[str, Any] = {"ttft_p50_reduction": {}, "recompute_speedup": {}}
    for conc in sorted(set(candidate) | set(baseline)):
        a = pooled_ttft(candidate.get(conc, []))
        b = pooled_ttft(baseline.get(conc, []))
        key = point_key(conc)
        empty = _without_ttft(candidate.get(conc, []), baseline.get(conc, []))
        if not a or not b or empty:
            out["ttft_p50_reduction"][key] = _m(
                None, detail=empty or f"no TTFT samples for the {'candidate' if not a else 'baseline'} at "
                                      f"concurrency {conc}")
            continue
        pa, pb = percentile(a, 50), percentile(b, 50)
        value = 1 - pa / pb if pb else None
        out["ttft_p50_reduction"][key] = _m(
            value, f"{pb / 1000:.3f} s -> {pa / 1000:.3f} s",
            detail=f"baseline p50 {pb:.1f} ms (n={len(b)}), candidate p50 {pa:.1f} ms (n={len(a)})",
            samples={"kind": "ratio", "a_groups": _groups(candidate.get(conc, [])),
                     "b_groups": _groups(baseline.get(conc, [])), "stat": "p50", "transform": "reduction",
                     # G3 runs only on a baseline G2 passed, whose TTFT repetitions had to agree
                     "b_filtered": True})
        if recompute is not None:
            r = pooled_ttft(recompute.get(conc, []))
            if r:
                pr = percentile(r, 50)
                out["recompute_speedup"][key] = _m(
                    pr / pa if pa else None, f"{pr / 1000:.3f} s -> {pa / 1000:.3f} s",
                    detail=f"recompute p50 {pr:.1f} ms (n={len(r)}), candidate p50 {pa:.1f} ms",
                    samples={"kind": "ratio", "a_groups": _groups(recompute.get(conc, [])),
                             "b_groups": _groups(candidate.get(conc, [])), "stat": "p50", "transform": "ratio"})
    out["throughput_gain_best"] = _same_point_gain(candidate, baseline)
    out["throughput_gain"] = throughput_gains(candidate, baseline)
    out["capacity_gain"] = capacity_gain(candidate, baseline)
    return out


def _thr(reps: Sequence[Repetition]) -> list[float]:
    return [r.output_throughput for r in reps if r.completed]


def _fmt_list(xs: Sequence[float]) -> str:
    return ", ".join(f"{x:.1f}" for x in xs)


def _same_point_gain(candidate: Sweep, baseline: Sweep) -> dict[str, Any]:
    """The gain at the candidate's best point against the baseline at the same concurrency: a
    reported figure (it favours the candidate: its best point, the baseline's maybe not)."""
    best = best_point(candidate)
    if best is None or not _thr(baseline.get(best, [])):
        return _m(None, detail="no throughput measured at a common operating point")
    a_thr, b_thr = _thr(candidate[best]), _thr(baseline[best])
    ma, mb = statistics.fmean(a_thr), statistics.fmean(b_thr)
    return _m(ma / mb - 1 if mb else None, f"c{best}: {mb:.1f} -> {ma:.1f} tok/s",
              detail=f"best point c{best} (highest candidate throughput), the baseline at the same concurrency; "
                     f"per-repetition output throughput baseline {_fmt_list(b_thr)}; candidate {_fmt_list(a_thr)}",
              samples={"kind": "ratio", "a": a_thr, "b": b_thr, "stat": "mean", "transform": "gain"})


def throughput_gains(candidate: Sweep, baseline: Sweep) -> dict[str, Any]:
    """Per concurrency: the output throughput gain with its per-repetition samples (the table)."""
    out: dict[str, Any] = {}
    for conc in sorted(set(candidate) | set(baseline)):
        a_thr, b_thr = _thr(candidate.get(conc, [])), _thr(baseline.get(conc, []))
        if not a_thr or not b_thr:
            side = "candidate" if not a_thr else "baseline"
            out[point_key(conc)] = _m(None, detail=f"no throughput measured for the {side} at concurrency {conc}")
            continue
        ma, mb = statistics.fmean(a_thr), statistics.fmean(b_thr)
        out[point_key(conc)] = _m(
            ma / mb - 1 if mb else None, f"{mb:.1f} -> {ma:.1f} tok/s",
            detail=f"per-repetition output throughput baseline {_fmt_list(b_thr)}; candidate {_fmt_list(a_thr)}",
            samples={"kind": "ratio", "a": a_thr, "b": b_thr, "stat": "mean", "transform": "gain"})
    return out


def _points(sweep: Sweep) -> dict[str, list[float]]:
    # a point needs two positive repetitions for its own spread (the capacity interval's unit)
    pts = {str(c): _thr(sweep[c]) for c in sorted(sweep)}
    return {c: xs for c, xs in pts.items() if len(xs) >= 2 and min(xs) > 0}


def capacity_gain(candidate: Sweep, baseline: Sweep) -> dict[str, Any]:
    """Capacity peak against peak: each arm's highest mean output throughput over its own sweep,
    with the per-point samples the selection-aware interval needs (``stats.capacity_interval``)."""
    a_pts, b_pts = _points(candidate), _points(baseline)
    if not a_pts or not b_pts:
        side = "candidate" if not a_pts else "baseline"
        return _m(None, detail=f"no concurrency of the {side} has two repetitions with throughput")
    ca = max(a_pts, key=lambda c: statistics.fmean(a_pts[c]))
    cb = max(b_pts, key=lambda c: statistics.fmean(b_pts[c]))
    ma, mb = statistics.fmean(a_pts[ca]), statistics.fmean(b_pts[cb])
    return _m(ma / mb - 1, f"baseline peak c{cb} {mb:.1f} -> candidate peak c{ca} {ma:.1f} tok/s",
              detail=f"each arm at its own best point, chosen from {len(a_pts)} candidate and {len(b_pts)} "
                     f"baseline concurrencies (the interval pays for the choice)",
              # G3 runs only on a baseline G2 passed, whose throughput repetitions had to agree
              samples={"kind": "capacity", "a_points": a_pts, "b_points": b_pts, "transform": "gain",
                       "b_filtered": True})


def failed_ratio(sweep: Sweep) -> dict[str, Any]:
    total = sum(r.completed + r.failed for reps in sweep.values() for r in reps)
    failed = sum(r.failed for reps in sweep.values() for r in reps)
    return _m(failed / total if total else None, f"{failed} of {total}",
              detail="" if total else "no request was sent")


def measurement(value: Any, text: str = "", detail: str = "", evidence: Sequence[str] = ()) -> dict[str, Any]:
    """A measured leaf in the form the gate evaluator reads."""
    return _m(value, text, detail, evidence)

