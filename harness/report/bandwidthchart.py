"""The chart of a bandwidth sweep (inline SVG, like ``charts``): TTFT p50 against the provisioned
read bandwidth, each measured point with its interval and coloured by its TTFT verdict, the
baseline's TTFT p50 and the G3 threshold as horizontal lines, and the estimator's curve.

Layout read from ``GateResult.measurements`` (written by ``kvgate bandwidth-sweep``)::

    measurements["bandwidth_curve"] = {
      "tier_fio_read_bps": float,
      "baseline": {"ttft_p50_ms", "ttft_p50_interval_ms", "throughput_tok_s", "throughput_interval"},
      "thresholds": {"ttft_p50_reduction": float, "throughput_gain": float},
      "points": [{"provisioned_read_bps", "fraction", "fio_read_bps", "ttft_p50_ms", "ttft_p50_interval_ms",
                  "throughput_tok_s", "throughput_interval", "verdicts": {...}, "error"}, ...],
      "bracket": {...},
      "estimator": <harness.estimate.calibration.calibrate_curve's output, or None>}

A point with an error is not drawn (the table shows it). The estimator's curve joins its
calibrated predictions at the measured rates (dashed), and the uncalibrated ones (dotted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from harness.report.charts import (
    PALETTE,
    VERDICT_COLOURS,
    WIDTH,
    Chart,
    _fmt_tick,
    _legend,
    _num,
    _Series,
    _svg_open,
    _text,
    escape,
    nice_ticks,
    quoteattr,
)
from harness.report.i18n import _t
from harness.store.schema import Verdict

__all__ = ["bandwidth_charts", "curve_of", "fmt_bps"]

_HEIGHT, _LEFT, _RIGHT, _TOP, _BOTTOM = 300, 72, 190, 34, 48
_PW, _PH = WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM


def curve_of(measurements: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    """``measurements["bandwidth_curve"]`` when it is a curve with a list of points."""
    curve = measurements.get("bandwidth_curve")
    return curve if isinstance(curve, Mapping) and isinstance(curve.get("points"), list) else None


def fmt_bps(v: Any) -> str:
    """Decimal units as fio and the provisioned rates are given: 150 MB/s, 5.23 GB/s."""
    n = _num(v)
    if n is None:
        return "-"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n:.0f} B/s"


@dataclass(frozen=True)
class _Axes:
    """Bandwidth 0..x_hi (in ``unit`` B/s: MB/s, or GB/s past 2 GB/s) across, TTFT 0..y_hi (ms) up."""

    x_hi: float
    y_hi: float
    unit: float = 1e6

    def px(self, bps: float) -> float:
        return _LEFT + bps / self.unit / self.x_hi * _PW

    def py(self, ms: float) -> float:
        return _TOP + _PH - ms / self.y_hi * _PH


def _points(curve: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [p for p in curve.get("points") or [] if isinstance(p, Mapping) and not p.get("error")
            and _num(p.get("provisioned_read_bps")) and _num(p.get("ttft_p50_ms")) is not None]


def _interval(p: Mapping[str, Any], key: str) -> Optional[tuple[float, float]]:
    iv = p.get(key)
    if isinstance(iv, Sequence) and len(iv) == 2:
        lo, hi = _num(iv[0]), _num(iv[1])
        if lo is not None and hi is not None:
            return lo, hi
    return None


def _baseline(curve: Mapping[str, Any]) -> tuple[Optional[float], Optional[float]]:
    """(baseline TTFT p50, the TTFT the reduction threshold asks for) in ms."""
    base = curve.get("baseline")
    b = _num(base.get("ttft_p50_ms")) if isinstance(base, Mapping) else None
    th = curve.get("thresholds")
    r = _num(th.get("ttft_p50_reduction")) if isinstance(th, Mapping) else None
    return b, (None if b is None or r is None else b * (1 - r))


def _estimator_series(curve: Mapping[str, Any]) -> list[_Series]:
    est = curve.get("estimator")
    rows = est.get("points") if isinstance(est, Mapping) else None
    out = [_Series(_t("model, calibrated"), colour=PALETTE[2], dashed=True),
           _Series(_t("model, uncalibrated"), colour=PALETTE[3], dashed=True)]
    for row in rows if isinstance(rows, list) else []:
        x = _num(row.get("provisioned_read_bps")) if isinstance(row, Mapping) else None
        if x is None:
            continue
        for s, key in zip(out, ("calibrated_ttft_p50_ms", "predicted_ttft_p50_ms")):
            y = _num(row.get(key))
            if y is not None:
                s.points.append((x, y))
    return [s for s in out if s.points]


def _frame(ax: _Axes, title: str) -> list[str]:
    out = [_svg_open(_HEIGHT, title), _text(_LEFT, 20, title, anchor="start", size=13, extra=' font-weight="600"')]
    for t in nice_ticks(0.0, ax.y_hi):
        if t <= ax.y_hi:
            y = ax.py(t)
            out.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + _PW}" y2="{y:.1f}" stroke="#e5e7eb"/>')
            out.append(_text(_LEFT - 6, ax.py(t) + 4, _fmt_tick(t), anchor="end"))
    for t in nice_ticks(0.0, ax.x_hi):
        if t <= ax.x_hi:
            x = ax.px(t * ax.unit)
            out.append(f'<line x1="{x:.1f}" y1="{_TOP + _PH}" x2="{x:.1f}" y2="{_TOP + _PH + 5}" stroke="#57606a"/>')
            out.append(_text(x, _TOP + _PH + 18, _fmt_tick(t)))
    out.append(f'<rect x="{_LEFT}" y="{_TOP}" width="{_PW}" height="{_PH}" fill="none" stroke="#57606a"/>')
    label = _t("provisioned read bandwidth (GB/s)") if ax.unit == 1e9 else _t("provisioned read bandwidth (MB/s)")
    out.append(_text(_LEFT + _PW / 2, _HEIGHT - 10, label))
    mid = _TOP + _PH / 2
    out.append(_text(16, mid, _t("TTFT p50 (ms)"), extra=f' transform="rotate(-90 16 {mid:.1f})"'))
    return out


def _hline(ax: _Axes, y: float, cls: str, colour: str, dashed: bool) -> str:
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return (f'<line class="{cls}" data-ms="{y:.3f}" x1="{_LEFT}" y1="{ax.py(y):.1f}" x2="{_LEFT + _PW}" '
            f'y2="{ax.py(y):.1f}" stroke={quoteattr(colour)} stroke-width="1.8"{dash}/>')


def _verdict(text: str) -> Verdict:
    try:
        return Verdict(text)
    except ValueError:
        return Verdict.NOT_RUN


def _measured(ax: _Axes, points: Sequence[Mapping[str, Any]]) -> list[str]:
    """The measured line, each point's interval as a whisker and its dot in its TTFT verdict's colour."""
    ordered = sorted(points, key=lambda p: float(p["provisioned_read_bps"]))
    out = []
    if len(ordered) > 1:
        coords = " ".join(f"{ax.px(p['provisioned_read_bps']):.1f},{ax.py(p['ttft_p50_ms']):.1f}" for p in ordered)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{PALETTE[0]}" stroke-width="2.2"/>')
    for p in ordered:
        x, y = ax.px(p["provisioned_read_bps"]), ax.py(p["ttft_p50_ms"])
        iv = _interval(p, "ttft_p50_interval_ms")
        if iv is not None:
            lo, hi = ax.py(iv[0]), ax.py(iv[1])
            out.append(f'<path class="bw-interval" d="M{x:.1f},{lo:.1f}V{hi:.1f}M{x - 4:.1f},{lo:.1f}H{x + 4:.1f}'
                       f'M{x - 4:.1f},{hi:.1f}H{x + 4:.1f}" stroke="{PALETTE[0]}" stroke-width="1.4" fill="none"/>')
        verdict = str((p.get("verdicts") or {}).get("ttft_p50_reduction") or "NOT_RUN")
        colour = VERDICT_COLOURS[_verdict(verdict)]
        tip = f"{fmt_bps(p['provisioned_read_bps'])}: TTFT p50 {_fmt_tick(p['ttft_p50_ms'])} ms, {verdict}"
        out.append(f'<circle class="bw-point" data-bps="{float(p["provisioned_read_bps"]):.0f}" '
                   f'data-verdict={quoteattr(verdict)} cx="{x:.1f}" cy="{y:.1f}" r="4" fill={quoteattr(colour)} '
                   f'stroke="#ffffff"><title>{escape(tip)}</title></circle>')
    return out


def _estimator_lines(ax: _Axes, series: Sequence[_Series]) -> list[str]:
    out = []
    for s in series:
        coords = " ".join(f"{ax.px(x):.1f},{ax.py(y):.1f}" for x, y in sorted(s.points))
        dash = "6 4" if s.colour == PALETTE[2] else "2 3"
        out.append(f'<polyline class="bw-estimator" points="{coords}" fill="none" stroke={quoteattr(s.colour)} '
                   f'stroke-width="2" stroke-dasharray="{dash}"/>')
    return out


def bandwidth_charts(measurements: Mapping[str, Any]) -> list[Chart]:
    """The TTFT-vs-bandwidth chart when the gate has a bandwidth curve (else no chart at all)."""
    curve = curve_of(measurements)
    if curve is None:
        return []
    chart = Chart("bandwidth-ttft", _t("TTFT p50 against the provisioned read bandwidth"))
    points = _points(curve)
    if not points:
        chart.note = _t("No point of the bandwidth sweep has a measured TTFT p50.")
        return [chart]
    base, threshold = _baseline(curve)
    estimator = _estimator_series(curve)
    ys = [float(p["ttft_p50_ms"]) for p in points] + [y for s in estimator for _, y in s.points]
    ys += [iv[1] for p in points if (iv := _interval(p, "ttft_p50_interval_ms"))]
    ys += [v for v in (base, threshold) if v is not None]
    top = max(float(p["provisioned_read_bps"]) for p in points)
    unit = 1e9 if top >= 2e9 else 1e6
    ax = _Axes(nice_ticks(0.0, top / unit)[-1], nice_ticks(0.0, max(ys))[-1], unit)
    legend = [_Series(_t("measured TTFT p50"), colour=PALETTE[0])]
    out = _frame(ax, chart.title)
    if base is not None:
        out.append(_hline(ax, base, "bw-baseline", PALETTE[6], False))
        legend.append(_Series(_t("baseline TTFT p50"), colour=PALETTE[6]))
    if threshold is not None:
        out.append(_hline(ax, threshold, "bw-threshold", PALETTE[5], True))
        legend.append(_Series(_t("G3 threshold"), colour=PALETTE[5], dashed=True))
    out += _estimator_lines(ax, estimator) + _measured(ax, points)
    out += _legend(legend + estimator, _LEFT + _PW + 14, _TOP + 10)
    out.append("</svg>")
    chart.svg = "".join(out)
    dropped = len(curve.get("points") or []) - len(points)
    chart.caption = _t("Median time to first token of the candidate at each provisioned read rate, with its "
                       "interval; dot colour: the TTFT-reduction verdict at that rate. Lower is better: a point "
                       "passes below the threshold line.")
    if dropped:
        chart.caption += " " + _t("%(n)s point(s) with an error or no TTFT are in the table only.") % {"n": dropped}
    return [chart]
