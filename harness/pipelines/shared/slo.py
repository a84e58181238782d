"""SLO capacity (pure): the highest swept concurrency whose every repetition meets the profile's
``load.slo``, each arm's goodput there, and the capacity gain at the SLO.

Rules:

* A repetition meets the SLO when its TTFT p90 (from its measured requests) and its inter-token
  latency p90 (``p90_itl_ms`` of its summary) are within the bounds that are set; a bound whose
  figure is missing makes the repetition's answer unknown, which never counts as meeting it.
* A concurrency meets the SLO only when every repetition does.
* The search is bounded by the profile's sweep: walking up the swept concurrencies, the sweep's
  capacity is the last one met before the first that is not (a later point that happens to meet it
  again does not count: latency only grows with load, a dip is noise).
* Confirmation (a two-stage design): the sweep chose the point, so its own repetitions favour it
  (the best-looking of several noisy points). The arm's gate then measures
  ``slo.confirm_repetitions`` fresh repetitions at that concurrency (numbered after the sweep's:
  ``sweep/<arm>/c<N>/rep<R+1>...``); the capacity is confirmed only if every one of them meets the
  SLO, else the search steps down to the next lower swept concurrency and confirms there, at most
  once per swept point (:func:`confirm_order`, :func:`confirmed_capacity`; the runs are in
  ``pipelines/shared/sloconfirm.py``). G2 confirms the baseline's, G3 the candidate's.
* ``capacity_gain_at_slo``: the candidate's mean output throughput over its confirmation
  repetitions at its confirmed capacity against the baseline's over its own, as ``capacity``
  samples (one point each), so the gate decides on a Welch t interval of the log ratio of fresh
  repetitions. An arm that meets the SLO at no swept concurrency, or whose capacity no
  confirmation repetition confirmed (none recorded: a G2 run without ``load.slo``), leaves the gain
  unmeasured (NOT_RUN, with the reason).
* Goodput (``request_goodput`` of the summaries): requests per second whose TTFT and time per
  output token were within the bounds (vLLM's definition, per request), over the confirmation
  repetitions.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Optional

from harness.config.profile import SloSpec
from harness.gates.stats import percentile
from harness.pipelines.shared.sweepdata import Repetition, Sweep, measurement

__all__ = ["repetition_meets", "slo_capacity", "confirm_order", "confirmed_capacity", "capacity_gain_at_slo"]


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


def confirm_order(sweep: Sweep, slo: SloSpec) -> list[int]:
    """The concurrencies the confirmation may visit, in order: the sweep's SLO capacity, then each
    lower swept concurrency (empty when the sweep meets the SLO nowhere)."""
    top = slo_capacity(sweep, slo)
    return [] if top is None else sorted((c for c in sweep if c <= top), reverse=True)


def confirmed_capacity(sweep: Sweep, confirmations: Sweep, slo: SloSpec) -> Optional[int]:
    """The highest concurrency whose confirmation repetitions all meet ``slo``, walking
    :func:`confirm_order`; None when the walk reaches a point with no confirmation recorded, or
    none confirms."""
    for conc in confirm_order(sweep, slo):
        if not confirmations.get(conc):
            return None
        if _meets(confirmations[conc], slo):
            return conc
    return None


def _goodput(reps: Sequence[Repetition]) -> Optional[float]:
    vals = [float(r.summary["request_goodput"]) for r in reps
            if isinstance(r.summary.get("request_goodput"), (int, float))]
    return statistics.fmean(vals) if vals else None


def _thr(reps: Sequence[Repetition]) -> list[float]:
    return [r.output_throughput for r in reps if r.completed]


def _arm_at_slo(name: str, sweep: Sweep, confirmations: Sweep, slo: SloSpec) -> tuple[Optional[int], str]:
    """The arm's confirmed SLO capacity and a sentence saying how it was found (or why not)."""
    found = slo_capacity(sweep, slo)
    if found is None:
        return None, (f"{name} meets the SLO at no swept concurrency (from c{min(sweep)})" if sweep
                      else f"{name}: no sweep")
    conc = confirmed_capacity(sweep, confirmations, slo)
    tried = [c for c in confirm_order(sweep, slo) if confirmations.get(c)]
    failed = ", ".join(f"c{c}" for c in tried if c != conc)
    if conc is None:
        if not tried:
            return None, (f"{name} met the SLO up to c{found} in the sweep, but no confirmation repetition was "
                          "recorded (each arm's gate runs them when the profile sets load.slo: G2 the baseline's)")
        return None, f"{name} met the SLO up to c{found} in the sweep; fresh repetitions did not confirm {failed}"
    reps = confirmations[conc]
    good = _goodput(reps)
    return conc, (f"{name} up to c{conc} (sweep c{found}"
                  + (f"; not confirmed at {failed}" if failed else "")
                  + f"; {len(reps)} confirmation repetitions): {statistics.fmean(_thr(reps) or [0.0]):.1f} tok/s"
                  + (f", goodput {good:.2f} req/s" if good is not None else ""))


def capacity_gain_at_slo(candidate: Sweep, baseline: Sweep, slo: SloSpec,
                         cand_confirm: Sweep, base_confirm: Sweep) -> dict[str, Any]:
    """The ``compare.capacity_gain_at_slo`` leaf (see the module rules): each arm's sweep found its
    SLO capacity, its confirmation repetitions decide it and carry the throughputs compared."""
    ca, da = _arm_at_slo("candidate", candidate, cand_confirm, slo)
    cb, db = _arm_at_slo("baseline", baseline, base_confirm, slo)
    detail = f"{da}; {db}"
    if ca is None or cb is None:
        return measurement(None, detail=detail)
    a, b = _thr(cand_confirm[ca]), _thr(base_confirm[cb])
    if len(a) < 2 or len(b) < 2 or min(a + b) <= 0:
        return measurement(None, detail=detail + "; fewer than 2 confirmation repetitions with throughput")
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    leaf = measurement(ma / mb - 1, text=f"baseline c{cb} {mb:.1f} -> candidate c{ca} {ma:.1f} tok/s at the SLO",
                       detail=detail)
    # the baseline's confirmations are the ones G2 kept (every one had to meet the SLO): a filtered arm
    leaf["samples"] = {"kind": "capacity", "a_points": {str(ca): a}, "b_points": {str(cb): b}, "transform": "gain",
                       "b_filtered": True}
    return leaf
