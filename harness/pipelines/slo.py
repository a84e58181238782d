"""SLO capacity (pure): the highest swept concurrency whose every repetition meets the profile's
``load.slo``, each arm's goodput there, and the capacity gain at the SLO.

Rules:

* A repetition meets the SLO when its TTFT p90 (from its measured requests) and its inter-token
  latency p90 (``p90_itl_ms`` of its summary) are within the bounds that are set; a bound whose
  figure is missing makes the repetition's answer unknown, which never counts as meeting it.
* A concurrency meets the SLO only when every repetition does (the repetitions confirm it).
* The search is bounded by the profile's sweep: walking up the swept concurrencies, the capacity
  is the last one met before the first that is not (a later point that happens to meet it again
  does not count: latency only grows with load, a dip is noise).
* ``capacity_gain_at_slo``: the candidate's mean output throughput at its SLO capacity against the
  baseline's at its own, with the per-repetition throughputs as ``capacity`` samples (one point
  each), so the gate decides on a Welch t interval of the log ratio. An arm that meets the SLO at
  no swept concurrency leaves the gain unmeasured (NOT_RUN, with the reason).
* Goodput (``request_goodput`` of the summaries): requests per second whose TTFT and time per
  output token were within the bounds (vLLM's definition, per request).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Optional

from harness.config.profile import SloSpec
from harness.gates.stats import percentile
from harness.pipelines.sweepdata import Repetition, Sweep, measurement

__all__ = ["repetition_meets", "slo_capacity", "capacity_gain_at_slo"]


def repetition_meets(rep: Repetition, slo: SloSpec) -> Optional[bool]:
    """Whether one repetition meets ``slo``; None when a bounded figure is missing."""
    if slo.ttft_p90 is not None:
        if not rep.ttft_ms:
            return None
        if percentile(rep.ttft_ms, 90) > slo.ttft_p90 * 1000.0:
            return False
    if slo.itl_p90 is not None:
        itl = rep.summary.get("p90_itl_ms")
        if not isinstance(itl, (int, float)):
            return None
        if float(itl) > slo.itl_p90 * 1000.0:
            return False
    return True


def _meets(reps: Sequence[Repetition], slo: SloSpec) -> bool:
    answers = [repetition_meets(r, slo) for r in reps if r.completed]
    return bool(answers) and all(a is True for a in answers)


def slo_capacity(sweep: Sweep, slo: SloSpec) -> Optional[int]:
    """The highest swept concurrency meeting ``slo`` with every lower one meeting it too."""
    best: Optional[int] = None
    for conc in sorted(sweep):
        if not _meets(sweep[conc], slo):
            break
        best = conc
    return best


def _goodput(reps: Sequence[Repetition]) -> Optional[float]:
    vals = [float(r.summary["request_goodput"]) for r in reps
            if isinstance(r.summary.get("request_goodput"), (int, float))]
    return statistics.fmean(vals) if vals else None


def _describe(name: str, sweep: Sweep, conc: Optional[int]) -> str:
    if conc is None:
        return f"{name} meets the SLO at no swept concurrency (from c{min(sweep)})" if sweep else f"{name}: no sweep"
    thr = statistics.fmean([r.output_throughput for r in sweep[conc] if r.completed])
    good = _goodput(sweep[conc])
    return (f"{name} up to c{conc}: {thr:.1f} tok/s"
            + (f", goodput {good:.2f} req/s" if good is not None else ""))


def capacity_gain_at_slo(candidate: Sweep, baseline: Sweep, slo: SloSpec) -> dict[str, Any]:
    """The ``compare.capacity_gain_at_slo`` leaf (see the module rules)."""
    ca, cb = slo_capacity(candidate, slo), slo_capacity(baseline, slo)
    detail = f"{_describe('candidate', candidate, ca)}; {_describe('baseline', baseline, cb)}"
    if ca is None or cb is None:
        return measurement(None, detail=detail)
    a = [r.output_throughput for r in candidate[ca] if r.completed]
    b = [r.output_throughput for r in baseline[cb] if r.completed]
    if len(a) < 2 or len(b) < 2 or min(a + b) <= 0:
        return measurement(None, detail=detail + "; fewer than 2 repetitions with throughput at an SLO point")
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    leaf = measurement(ma / mb - 1, text=f"baseline c{cb} {mb:.1f} -> candidate c{ca} {ma:.1f} tok/s at the SLO",
                       detail=detail)
    leaf["samples"] = {"kind": "capacity", "a_points": {str(ca): a}, "b_points": {str(cb): b}, "transform": "gain"}
    return leaf
