"""The table and sentences of a bandwidth sweep's report section (``_bandwidth.html.j2`` and
``_bandwidth.md.j2``), from ``measurements["bandwidth_curve"]`` alone (layout: ``bandwidthchart``).

Every sentence is a catalog message with its figures formatted here, so the zh report says it in
Chinese; the calibration's own ``limits`` sentence (English, composed by the estimator) is not
shown: its content is rebuilt from the points (which rates are beyond the goal, which are not
bound by the read rate). Call inside ``i18n.language``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.report.bandwidthchart import curve_of, fmt_bps
from harness.report.charts import _num
from harness.report.i18n import _t

__all__ = ["BandwidthSection", "bandwidth_section"]

BLOCKERS = ("ttft_p50_reduction", "throughput_gain")
VERDICTS = frozenset({"PASS", "FAIL", "INCONCLUSIVE", "NOT_RUN", "ERROR"})


@dataclass
class BandwidthSection:
    intro: str
    brackets: list[str]
    rows: list[dict[str, str]]
    errors: list[str]  # "<rate>: <error>" of each errored point
    estimator: list[str] = field(default_factory=list)


def _pct(v: Any, signed: bool = False, digits: int = 0) -> str:
    n = _num(v)
    return "-" if n is None else (f"{n:+.1%}" if signed else f"{n:.{digits}%}")


def _ms(v: Any) -> str:
    n = _num(v)
    return "-" if n is None else f"{n:,.1f}"


def _with_interval(value: Any, iv: Any) -> str:
    text = _ms(value)
    if isinstance(iv, Sequence) and not isinstance(iv, str) and len(iv) == 2 and None not in iv:
        text += f" [{_ms(iv[0])}, {_ms(iv[1])}]"
    return text


def _blocker_name(key: str) -> str:
    return {"ttft_p50_reduction": _t("TTFT p50 reduction"), "throughput_gain": _t("Throughput gain")}.get(key, key)


def _bracket(key: str, b: Mapping[str, Any]) -> str:
    status = b.get("status")
    values = {"name": _blocker_name(key), "pass": fmt_bps(b.get("lowest_pass_bps")),
              "fail": fmt_bps(b.get("highest_not_pass_bps")), "width": _pct(b.get("relative_width"))}
    if status == "bracketed":
        return _t("%(name)s: the least provisioned bandwidth that passed is %(pass)s, the highest that did not "
                  "is %(fail)s (bracket %(width)s wide).") % values
    if status == "all_pass":
        return _t("%(name)s: passed at every rate measured, down to %(pass)s; the least passing bandwidth is "
                  "below the sweep.") % values
    if status == "none_pass":
        return _t("%(name)s: passed at no rate measured, up to %(fail)s.") % values
    return _t("%(name)s: no bracket: INCONCLUSIVE points lie between the rates that passed and those that did "
              "not, and are never counted as a pass.") % values


def _intro(curve: Mapping[str, Any]) -> str:
    base = curve.get("baseline") if isinstance(curve.get("baseline"), Mapping) else {}
    th = curve.get("thresholds") if isinstance(curve.get("thresholds"), Mapping) else {}
    assert isinstance(base, Mapping) and isinstance(th, Mapping)
    return _t("The candidate arm at provisioned read rates, fractions of the tier's measured fio read bandwidth "
              "(%(fio)s), each with the full cold-restore protocol, repetitions and intervals of G3; the rate "
              "is verified by fio before each point. The baseline, measured once beside them: TTFT p50 "
              "%(base)s ms, %(tput)s tok/s. A rate passes the TTFT blocker when TTFT p50 falls by at least "
              "%(red)s, the throughput blocker when throughput rises by at least %(gain)s.") % {
        "fio": fmt_bps(curve.get("tier_fio_read_bps")),
        "base": _with_interval(base.get("ttft_p50_ms"), base.get("ttft_p50_interval_ms")),
        "tput": _with_interval(base.get("throughput_tok_s"), base.get("throughput_interval")),
        "red": _pct(th.get("ttft_p50_reduction")), "gain": _pct(th.get("throughput_gain"))}


def _estimator_rows(curve: Mapping[str, Any]) -> dict[float, Mapping[str, Any]]:
    est = curve.get("estimator")
    rows = est.get("points") if isinstance(est, Mapping) else None
    return {float(r["provisioned_read_bps"]): r for r in rows or []
            if isinstance(r, Mapping) and _num(r.get("provisioned_read_bps")) is not None}


def _row(p: Mapping[str, Any], est: Mapping[float, Mapping[str, Any]]) -> dict[str, str]:
    prov = _num(p.get("provisioned_read_bps"))
    verdicts = p.get("verdicts") if isinstance(p.get("verdicts"), Mapping) else {}
    assert isinstance(verdicts, Mapping)
    e = est.get(prov) if prov is not None else None
    calibrated = e is not None and e.get("calibrated_ttft_p50_ms") is not None
    rate = fmt_bps(prov) + (f" ({_pct(p.get('fraction'))})" if _num(p.get("fraction")) is not None else "")
    row = {"rate": rate, "fio": fmt_bps(p.get("fio_read_bps")),
           "ttft": _with_interval(p.get("ttft_p50_ms"), p.get("ttft_p50_interval_ms")),
           "throughput": _with_interval(p.get("throughput_tok_s"), p.get("throughput_interval")),
           "estimate": "-", "error": "-"}
    for key in BLOCKERS:
        v = str(verdicts.get(key) or "NOT_RUN")
        row[key] = v if v in VERDICTS else "NOT_RUN"
    if e is not None:
        row["estimate"] = _ms(e.get("calibrated_ttft_p50_ms" if calibrated else "predicted_ttft_p50_ms"))
        row["error"] = _pct(e.get("calibrated_rel_error" if calibrated else "rel_error"), signed=True)
    return row


def _estimator_lines(curve: Mapping[str, Any]) -> list[str]:
    est = curve.get("estimator")
    if not isinstance(est, Mapping):
        return [_t("The estimator was not held to this curve (no calibration recorded).")]
    points = [r for r in est.get("points") or [] if isinstance(r, Mapping)]
    if _num(est.get("value")) is None:
        return [_t("The estimator could not be calibrated on this curve; the error column is the uncalibrated "
                   "prediction's (read efficiency 1).")]
    goal = _num(est.get("goal")) or 0.15
    out = [_t("Estimator: read efficiency %(value)s fitted on %(n)s point(s) (the share of the tier's fio "
              "bandwidth the engine's restores get); worst error %(raw)s uncalibrated, %(cal)s calibrated, "
              "against a goal of %(goal)s at every point.") % {
        "value": f"{float(est['value']):.3f}", "n": sum(1 for r in points if r.get("fitted")),
        "raw": _pct(est.get("worst_rel_error"), digits=1), "cal": _pct(est.get("worst_calibrated_rel_error"), digits=1),
        "goal": _pct(goal)}]
    off = [fmt_bps(r.get("provisioned_read_bps")) for r in points
           if abs(_num(r.get("calibrated_rel_error")) or 0.0) > goal]
    flat = [fmt_bps(r.get("provisioned_read_bps")) for r in points if r.get("storage_bound") is False]
    if off:
        out.append(_t("Beyond the goal at: %(rates)s.") % {"rates": ", ".join(off)})
    if flat:
        out.append(_t("Not bound by the read rate (compute or queueing sets TTFT; no efficiency moves it) "
                      "at: %(rates)s.") % {"rates": ", ".join(flat)})
    if float(est["value"]) > 1.5:
        out.append(_t("A read efficiency above 1.5 is not plausible: the restores were far faster than the "
                      "tier's fio bandwidth allows, so they did not all come from the tier; the agreement counts "
                      "for nothing."))
    if est.get("within_goal") is None:
        out.append(_t("Fewer than two points were fitted: one point fits any efficiency, so the agreement "
                      "proves nothing."))
    return out


def _quantization(curve: Mapping[str, Any]) -> list[str]:
    """The curve's label when its restores span few of blk-throttle's slices (pipelines/bandwidth/throttleslice.py)."""
    q = curve.get("throttle_quantization")
    span = q.get("slices_range") if isinstance(q, Mapping) else None
    if not isinstance(q, Mapping) or not isinstance(span, Sequence) or len(span) != 2:
        return []
    return [_t("At %(n)s of %(of)s rates one request's restore spans %(lo)s-%(hi)s of blk-throttle's %(slice)s ms "
               "slices (fewer than %(min)s): TTFT there steps by the slice as the rate falls, so the curve and its "
               "brackets are this throttled volume's, not those of a device that delivers the rate evenly.") % {
        "n": q.get("points"), "of": q.get("of"), "lo": f"{_num(span[0]) or 0:.1f}", "hi": f"{_num(span[1]) or 0:.1f}",
        "slice": f"{(_num(q.get('slice_s')) or 0) * 1000:.0f}", "min": f"{_num(q.get('min_slices')) or 0:.0f}"}]


def bandwidth_section(measurements: Mapping[str, Any]) -> Optional[BandwidthSection]:
    """The section's words and rows, or None when the gate has no bandwidth curve."""
    curve = curve_of(measurements)
    if curve is None:
        return None
    est = _estimator_rows(curve)
    points = [p for p in curve["points"] if isinstance(p, Mapping)]
    bracket = curve.get("bracket") if isinstance(curve.get("bracket"), Mapping) else {}
    assert isinstance(bracket, Mapping)
    return BandwidthSection(
        intro=_intro(curve),
        brackets=[_bracket(k, bracket[k]) for k in BLOCKERS if isinstance(bracket.get(k), Mapping)]
        + _quantization(curve),
        rows=[_row(p, est) for p in points],
        errors=[f"{fmt_bps(p.get('provisioned_read_bps'))}: {p['error']}" for p in points if p.get("error")],
        estimator=_estimator_lines(curve))
