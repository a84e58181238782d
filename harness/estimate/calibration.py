"""The estimator held to a measured TTFT-vs-bandwidth curve (``measurements["bandwidth_curve"]``):
its predicted TTFT p50 at every point, a one-parameter calibration fitted on the curve, and the
calibration read back from a campaign for ``kvgate estimate --calibration``.

The parameter is the storage path's read efficiency ``read_efficiency``: the share of the
bandwidth fio measured on the tier (under the point's provisioned rate) that the engine's restores
get. The time model (``timing.predict_point``) then runs with ``read_efficiency x fio`` as the tier's
read bandwidth. It is fitted to make the worst |log(predicted / measured TTFT p50)| as small as
it can be (the goal is a bound at every point, so the fit is the minimax one; the least-squares
value is reported beside it as ``value_least_squares``) over the points that can carry it: a point
with an error, a NOT_RUN or ERROR verdict, no TTFT, or an
INCONCLUSIVE TTFT verdict (its interval straddles the threshold: a noisy figure) is never fitted on.
An INCONCLUSIVE point is still predicted and counts in the worst error, so a point the fit left out
cannot hide a miss.

It cannot be calibrated (``value`` None, ``reason`` says why) when nothing can be predicted (no
compute figure, no geometry), when no point can be fitted on, when no fitted point's TTFT depends on
the read rate (compute- or queue-bound everywhere: any efficiency fits), or when the fit runs to the
edge of its range. ``within_goal`` (every point within 15% once calibrated) needs two fitted points:
one point fits any one-parameter model exactly; and an efficiency above 1.5 (restores far faster
than the tier's fio allows: a cache) is never within the goal, however well it fits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.config.inventory import Inventory
from harness.config.profile import Profile
from harness.errors import InputError, KvgateError
from harness.estimate.geometry import ModelGeometry
from harness.estimate.timing import Engine, PointPrediction, Tier, Workload, predict_point

PARAMETER = "read_efficiency"
GOAL = 0.15  # issue 54: the calibrated estimator within 15% at every point
LOW, HIGH = 1e-3, 10.0  # the efficiencies the fit searches (an edge hit: the model cannot follow)
PLAUSIBLE = 1.5  # an efficiency above it: restores far faster than the tier's fio allows (a cache)
STORAGE_BOUND = 0.1  # d ln TTFT / d ln bandwidth below this: the point's TTFT ignores the read rate
UNFIT_VERDICTS = frozenset({"NOT_RUN", "ERROR"})
CURVE_KEY = "bandwidth_curve"


@dataclass(frozen=True)
class CurveModel:
    """The candidate arm as the time model sees it, its tier's read bandwidth left open."""

    geometry: ModelGeometry
    engine: Engine
    work: Workload
    tier_name: str
    read_streams: Optional[int]
    concurrency: int

    def predict(self, read_bps: float, efficiency: float = 1.0) -> PointPrediction:
        tier = Tier(self.tier_name, read_bps * efficiency, 0.0, None, self.read_streams)
        return predict_point(self.geometry, self.engine, self.work, tier, self.concurrency)

    def ttft_ms(self, read_bps: float, efficiency: float = 1.0) -> float:
        return self.predict(read_bps, efficiency).ttft_s * 1000.0

    def elasticity(self, read_bps: float, efficiency: float) -> float:
        """How much TTFT falls as the read rate rises: -d ln TTFT / d ln bandwidth (1: restore alone)."""
        hi, lo = self.ttft_ms(read_bps, efficiency * 1.25), self.ttft_ms(read_bps, efficiency / 1.25)
        return math.log(lo / hi) / math.log(1.25**2)


@dataclass(frozen=True)
class _Sample:
    point: Mapping[str, Any]
    read_bps: float
    read_source: str
    measured_ms: float
    fitted: bool


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def curve_concurrency(profile: Profile, curve: Mapping[str, Any]) -> int:
    """The concurrency the curve was measured at: the curve's own ``concurrency``, else the
    profile's (its lowest when it names several: the sweep's documented default)."""
    c = _num(curve.get("concurrency"))
    return int(c) if c is not None and c >= 1 else min(profile.load.concurrency)


def curve_model(profile: Profile, inventory: Optional[Inventory], curve: Mapping[str, Any]) -> CurveModel:
    """The time model of the profile's candidate arm (the compute the profile configures, the
    inventory's accelerator); InputError says why it cannot predict."""
    from harness.estimate.gatehook import inventory_accelerator
    from harness.estimate.loader import geometry_for_profile
    from harness.estimate.plan import SIM_READ_STREAMS, EstimateInputs, estimate_profile

    geom = geometry_for_profile(profile)
    acc, mem = inventory_accelerator(inventory) if inventory is not None else (None, None)
    cand = profile.arm(profile.candidate)
    inp = EstimateInputs(geometry=geom, accelerator=acc, hbm_bytes=mem)
    inp.read_bw[cand.name] = _num(curve.get("tier_fio_read_bps")) or 1e9  # any: only the capacity plan is used
    est = estimate_profile(profile, inp)
    if est.engine is None:
        raise InputError("no compute figure to predict TTFT with: " + "; ".join(est.data["notes"]))
    share = est.data["capacity"]["arms"].get(cand.name, {}).get("recompute_share", 0.0)
    w = est.workload
    work = Workload(w.input_tokens, w.output_tokens, w.chunk_size, w.hit_ratio * (1.0 - share))
    streams = SIM_READ_STREAMS if profile.engine.kind == "sim" else None
    return CurveModel(geom, est.engine, work, cand.storage or cand.name, streams, curve_concurrency(profile, curve))


def _samples(curve: Mapping[str, Any]) -> tuple[list[_Sample], list[dict[str, Any]]]:
    """The points that can be predicted against (and whether each is fitted on), and the others
    with the reason they are left out."""
    samples: list[_Sample] = []
    excluded: list[dict[str, Any]] = []
    for p in curve.get("points") or []:
        if not isinstance(p, Mapping):
            continue
        raw = p.get("verdicts")
        verdicts: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        prov, fio, ttft = _num(p.get("provisioned_read_bps")), _num(p.get("fio_read_bps")), _num(p.get("ttft_p50_ms"))
        bad = sorted({str(v) for v in verdicts.values()} & UNFIT_VERDICTS)
        reason = ("the point errored: " + str(p["error"]) if p.get("error") else
                  f"verdict {', '.join(bad)}" if bad else
                  "no measured TTFT p50" if ttft is None or ttft <= 0 else
                  "no read rate" if (fio or prov or 0) <= 0 else None)
        if reason is not None:
            excluded.append({"provisioned_read_bps": prov, "reason": reason})
            continue
        assert ttft is not None
        read = fio if fio is not None and fio > 0 else prov
        assert read is not None
        samples.append(_Sample(p, read, "fio" if read == fio else "provisioned", ttft,
                               verdicts.get("ttft_p50_reduction") != "INCONCLUSIVE"))
    return samples, excluded


def _loss(model: CurveModel, samples: Sequence[_Sample], efficiency: float, *, minimax: bool = True) -> float:
    logs = [math.log(model.ttft_ms(s.read_bps, efficiency) / s.measured_ms) for s in samples]
    return max(abs(x) for x in logs) if minimax else sum(x * x for x in logs)


def fit_efficiency(model: CurveModel, samples: Sequence[_Sample], *, minimax: bool = True) -> float:
    """The efficiency minimising the worst (``minimax``) or the summed squared log errors: a log grid
    over [LOW, HIGH], then a golden section around its best cell (each point's TTFT falls
    monotonically with the efficiency, so either loss has one minimum)."""
    n = 90
    grid = [math.exp(math.log(LOW) + (math.log(HIGH) - math.log(LOW)) * i / n) for i in range(n + 1)]
    losses = [_loss(model, samples, e, minimax=minimax) for e in grid]
    best = min(range(len(grid)), key=lambda i: losses[i])
    a, b = math.log(grid[max(0, best - 1)]), math.log(grid[min(n, best + 1)])
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(50):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if _loss(model, samples, math.exp(c), minimax=minimax) <= _loss(model, samples, math.exp(d), minimax=minimax):
            b = d
        else:
            a = c
    return math.exp((a + b) / 2)


def _row(model: CurveModel, s: _Sample, value: Optional[float]) -> dict[str, Any]:
    pred = model.ttft_ms(s.read_bps)
    row: dict[str, Any] = {
        "provisioned_read_bps": _num(s.point.get("provisioned_read_bps")), "read_bps_used": s.read_bps,
        "read_bps_source": s.read_source, "measured_ttft_p50_ms": s.measured_ms, "predicted_ttft_p50_ms": pred,
        "rel_error": pred / s.measured_ms - 1.0, "fitted": s.fitted, "calibrated_ttft_p50_ms": None,
        "calibrated_rel_error": None, "residual_ms": None, "bottleneck": None, "storage_bound": None}
    if value is not None:
        calibrated = model.predict(s.read_bps, value)
        row["calibrated_ttft_p50_ms"] = calibrated.ttft_s * 1000.0
        row["calibrated_rel_error"] = row["calibrated_ttft_p50_ms"] / s.measured_ms - 1.0
        row["residual_ms"] = s.measured_ms - row["calibrated_ttft_p50_ms"]
        row["bottleneck"] = calibrated.bottleneck
        row["storage_bound"] = model.elasticity(s.read_bps, value) >= STORAGE_BOUND
    return row


def _gbps(v: Optional[float]) -> str:
    return "-" if v is None else f"{v / 1e6:.4g} MB/s" if v < 1e9 else f"{v / 1e9:.4g} GB/s"


def _why_off(row: Mapping[str, Any]) -> str:
    """Why a calibrated point is off, from the sign of its error and what bounds it."""
    if not row["storage_bound"]:
        return f"bound by {row['bottleneck']}"
    if row["calibrated_rel_error"] > 0:
        return ("measured faster than the model: the restores shared the tier less than its random phases "
                "assume (a closed loop's clients fall into turns)")
    return "measured slower than the model: a cost it does not have grows as the rate falls"


def limits_sentence(rows: Sequence[Mapping[str, Any]], value: Optional[float]) -> Optional[str]:
    """Where the calibrated model cannot follow the curve, and why (None: it follows every point)."""
    parts: list[str] = []
    off = [r for r in rows if r["calibrated_rel_error"] is not None and abs(r["calibrated_rel_error"]) > GOAL]
    flat = [r for r in rows if r["storage_bound"] is False]
    if off:
        parts.append(f"beyond {GOAL:.0%} at " + ", ".join(
            f"{_gbps(r['provisioned_read_bps'])} ({r['calibrated_rel_error']:+.0%}, {_why_off(r)})" for r in off))
    if flat:
        parts.append("at " + ", ".join(_gbps(r["provisioned_read_bps"]) for r in flat)
                     + " the predicted TTFT is bound by " + ", ".join(sorted({str(r["bottleneck"]) for r in flat}))
                     + ", not the read rate (compute- or queue-bound): no storage-path efficiency moves it, and "
                     "the time model's queueing there is an approximation of two limits (docs/estimator.md)")
    if value is not None and value > PLAUSIBLE:
        parts.append(f"a read efficiency of {value:.2f} is not plausible: the restores were far faster than the "
                     "tier's fio bandwidth allows, so they did not all come from the tier (a page cache or the "
                     "engine's own cache; check the cold-restore counters): the agreement counts for nothing")
    elif value is not None and value > 1.0:
        parts.append(f"a read efficiency of {value:.2f} > 1: the restores took less time than the tier's fio "
                     "bandwidth allows under the model's sharing, so they overlapped less than it assumes, or reads "
                     "came from a cache (check the cold-restore counters)")
    if sum(1 for r in rows if r["fitted"]) < 2:
        parts.append("fewer than two fitted points: one point fits any efficiency exactly, so the fit proves nothing")
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def _uncalibrated(reason: str, model_rows: Optional[list[dict[str, Any]]] = None,
                  excluded: Optional[list[dict[str, Any]]] = None, concurrency: Optional[int] = None) -> dict[str, Any]:
    return {"parameter": PARAMETER, "value": None, "fit": "minimax log error", "value_least_squares": None,
            "reason": reason, "concurrency": concurrency,
            "points": model_rows or [], "excluded": excluded or [], "residuals_ms": [],
            "worst_rel_error": None, "worst_calibrated_rel_error": None, "goal": GOAL, "within_goal": None,
            "limits": f"Cannot be calibrated: {reason}."}


def calibrate_curve(profile: Profile, inventory: Optional[Inventory], curve: Mapping[str, Any]) -> dict[str, Any]:
    """The estimator beside every measured point of ``curve``, the read efficiency fitted on it,
    and the calibrated errors (JSON-able; see the module doc for the rules)."""
    try:
        model = curve_model(profile, inventory, curve)
    except (KvgateError, ValueError, KeyError) as exc:
        return _uncalibrated(f"the estimator cannot predict this profile: {exc}")
    samples, excluded = _samples(curve)
    fit = [s for s in samples if s.fitted]
    raw = [_row(model, s, None) for s in samples]
    if not fit:
        return _uncalibrated("no point to fit on (every point errored, was not run, had no TTFT p50 or an "
                             "INCONCLUSIVE TTFT verdict)", raw, excluded, model.concurrency)
    value = fit_efficiency(model, fit)
    if max(model.elasticity(s.read_bps, value) for s in fit) < STORAGE_BOUND:
        return _uncalibrated("no fitted point's predicted TTFT depends on the read rate (compute- or "
                             "queue-bound at every point): any efficiency fits", raw, excluded, model.concurrency)
    if not LOW * 1.5 < value < HIGH / 1.5:
        return _uncalibrated(f"the fit ran to the edge of its range [{LOW:g}, {HIGH:g}] ({value:.3g}): the time "
                             "model cannot follow this curve with one efficiency", raw, excluded, model.concurrency)
    rows = [_row(model, s, value) for s in samples]
    worst = max(abs(r["calibrated_rel_error"]) for r in rows)
    return {"parameter": PARAMETER, "value": value, "fit": "minimax log error",
            "value_least_squares": fit_efficiency(model, fit, minimax=False),
            "reason": None, "concurrency": model.concurrency,
            "points": rows, "excluded": excluded, "residuals_ms": [r["residual_ms"] for r in rows if r["fitted"]],
            "worst_rel_error": max(abs(r["rel_error"]) for r in rows), "worst_calibrated_rel_error": worst,
            "goal": GOAL, "within_goal": (worst <= GOAL and value <= PLAUSIBLE) if len(fit) >= 2 else None,
            "limits": _with_throttle(limits_sentence(rows, value), curve)}


def _with_throttle(limits: Optional[str], curve: Mapping[str, Any]) -> Optional[str]:
    """The sweep's throttle label first when it has one: a model of an even rate cannot follow a curve
    that steps with blk-throttle's slice, whatever its efficiency."""
    q = curve.get("throttle_quantization")
    text = q.get("text") if isinstance(q, Mapping) else None
    if not text:
        return limits
    lead = f"The curve is stepped: {text}; the estimator models a device delivering its rate evenly."
    return lead if not limits else f"{lead} {limits}"


@dataclass(frozen=True)
class Calibration:
    """A campaign's calibration as ``kvgate estimate --calibration`` applies it."""

    parameter: str
    value: float
    source: Path  # the result.json it came from
    worst_calibrated_rel_error: Optional[float]
    limits: Optional[str]
    engine: Optional[str] = None  # the engine kind of the profile the curve was measured with


def find_curve(campaign_dir: Path) -> tuple[Path, Mapping[str, Any], Mapping[str, Any]]:
    """The first ``<gate>/result.json`` of the campaign with ``measurements.bandwidth_curve``: its
    path, the curve and the profile the result recorded."""
    from harness.store.campaign import load_result

    if not campaign_dir.is_dir():
        raise InputError(f"campaign directory {campaign_dir} does not exist")
    for path in sorted(campaign_dir.glob("*/result.json")):
        try:
            result = load_result(path)
        except KvgateError as exc:
            raise InputError(f"{path}: cannot read it: {exc}") from None
        curve = result.measurements.get(CURVE_KEY)
        if isinstance(curve, Mapping):
            return path, curve, result.profile
    raise InputError(f"{campaign_dir}: no result.json in it has measurements.{CURVE_KEY} (run kvgate "
                     "bandwidth-sweep in this campaign first)")


def load_calibration(campaign_dir: Path) -> Calibration:
    """The read efficiency the campaign's bandwidth sweep calibrated (its ``estimator`` block);
    InputError names the file when there is no curve or it could not be calibrated."""
    path, curve, profile = find_curve(campaign_dir)
    est = curve.get("estimator")
    if not isinstance(est, Mapping):
        raise InputError(f"{path}: measurements.{CURVE_KEY}.estimator is missing: the curve was not calibrated")
    value = _num(est.get("value"))
    if est.get("parameter") != PARAMETER or value is None or value <= 0:
        why = est.get("reason") or f"expected parameter {PARAMETER!r} with a positive value"
        raise InputError(f"{path}: the bandwidth curve cannot be calibrated: {why}")
    limits = est.get("limits")
    engine = profile.get("engine")
    return Calibration(PARAMETER, value, path, _num(est.get("worst_calibrated_rel_error")),
                       str(limits) if limits else None, str(engine) if engine else None)
