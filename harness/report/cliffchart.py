"""Charts of the capacity-cliff sweep and of the hit rate per KV tier (inline SVG, like ``charts``).

Layout read from ``GateResult.measurements``::

    measurements["cliff"] = {
      "kv_bytes_per_token": int,
      "arms": {"<arm>": {
        "boundaries": {"<tier>": {"tokens": int | None, "bytes": int | None, "how": str}},
        "points": [{"prefixes", "tokens", "bytes", "ttft_p50_ms", "measured_hit_rate",
                    "rates": {"hbm", "local_cpu", "local_disk", "remote", "offload", "total"},
                    "expected": {"hit_rate", "tier", "by_tier": {...}}}, ...]}}}
    measurements["tier_hits"] = {"<arm>": [{"point": str, "queried": float,
                                            "rates": {"hbm", "local_cpu", ..., "total"}}, ...]}

The x axis of the cliff charts is the working set's KV bytes on a log2 scale; every tier boundary
with a size is a dashed vertical line (``class="tier-boundary"``, ``data-tier``, ``data-bytes``),
labelled inside the plot. Rates are drawn in percent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from harness.report.charts import (
    PALETTE,
    WIDTH,
    Chart,
    _fmt_tick,
    _legend,
    _num,
    _Series,
    _svg_open,
    _text,
    _text_width,
    escape,
    nice_ticks,
    quoteattr,
)

__all__ = ["TIER_NAMES", "cliff_charts", "fmt_bytes"]

TIER_NAMES = {"hbm": "HBM", "local_cpu": "CPU", "local_disk": "disk", "remote": "remote"}
TIER_COLOURS = {"hbm": PALETTE[0], "local_cpu": PALETTE[1], "local_disk": PALETTE[2], "remote": PALETTE[3]}


def fmt_bytes(n: float) -> str:
    """Binary units: 512 KiB, 4 MiB, 1.5 GiB."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v >= 10 or float(v).is_integer() else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


_WS_HEIGHT, _WS_LEFT, _WS_RIGHT, _WS_TOP, _WS_BOTTOM = 340, 72, 190, 34, 56
_WS_PW, _WS_PH = WIDTH - _WS_LEFT - _WS_RIGHT, _WS_HEIGHT - _WS_TOP - _WS_BOTTOM


@dataclass(frozen=True)
class _WsAxes:
    """Bytes 2**lo_x..2**hi_x across the plot (log2), values 0..hi up it."""

    lo_x: int
    hi_x: int
    hi: float

    def px(self, b: float) -> float:
        return _WS_LEFT + (math.log2(b) - self.lo_x) / (self.hi_x - self.lo_x) * _WS_PW

    def py(self, v: float) -> float:
        return _WS_TOP + _WS_PH - v / self.hi * _WS_PH


def _ws_frame(ax: _WsAxes, title: str, ticks: Sequence[float], ylabel: str) -> list[str]:
    """The SVG's opening and title, value grid, byte ticks (powers of two), border and axis labels."""
    height, left, top, pw, ph = _WS_HEIGHT, _WS_LEFT, _WS_TOP, _WS_PW, _WS_PH
    px, py = ax.px, ax.py
    out = [_svg_open(height, title), _text(left, 20, title, anchor="start", size=13, extra=' font-weight="600"')]
    for t in ticks:
        out.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + pw}" y2="{py(t):.1f}" stroke="#e5e7eb"/>')
        out.append(_text(left - 6, py(t) + 4, _fmt_tick(t), anchor="end"))
    step = max(1, math.ceil((ax.hi_x - ax.lo_x) / 8))
    for e in range(ax.lo_x, ax.hi_x + 1, step):
        x = px(2.0**e)
        out.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 5}" stroke="#57606a"/>')
        out.append(_text(x, top + ph + 18, fmt_bytes(2.0**e)))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#57606a"/>')
    out.append(_text(left + pw / 2, height - 12, "KV of the working set (model geometry, log scale)"))
    out.append(_text(16, top + ph / 2, ylabel, extra=f' transform="rotate(-90 16 {top + ph / 2:.1f})"'))
    return out


def _boundary_marks(ax: _WsAxes, boundaries: Sequence[tuple[float, str, str]]) -> list[str]:
    """A dashed line at each tier's capacity, labelled (labels staggered over four rows)."""
    left, top, pw, ph = _WS_LEFT, _WS_TOP, _WS_PW, _WS_PH
    out = []
    for k, (b, tier, label) in enumerate(sorted(boundaries)):
        x = ax.px(b)
        colour = TIER_COLOURS.get(tier, PALETTE[6])
        out.append(f'<line class="tier-boundary" data-tier={quoteattr(tier)} data-bytes="{b:.0f}" '
                   f'x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke={quoteattr(colour)} '
                   f'stroke-width="1.5" stroke-dasharray="5 4"><title>{escape(label)}: {fmt_bytes(b)}</title></line>')
        text = f"{label} ({fmt_bytes(b)})"
        y = top + 14 + 14 * (k % 4)
        width = _text_width(text, 10)
        anchor, tx = ("start", x + 3) if x + 3 + width <= left + pw else ("end", x - 3)
        out.append(_text(tx, y, text, anchor=anchor, size=10, extra=f' fill={quoteattr(colour)}'))
    return out


def _series_lines(ax: _WsAxes, series: list[_Series]) -> list[str]:
    """Each series' line (dashed when it says so) and its points with their values."""
    px, py = ax.px, ax.py
    out = []
    for s in series:
        ordered = sorted(s.points)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        if len(ordered) > 1:
            coords = " ".join(f"{px(bx):.1f},{py(by):.1f}" for bx, by in ordered)
            out.append(f'<polyline points="{coords}" fill="none" stroke={quoteattr(s.colour)} '
                       f'stroke-width="2.2"{dash}/>')
        for bx, by in ordered:
            out.append(f'<circle cx="{px(bx):.1f}" cy="{py(by):.1f}" r="3" fill={quoteattr(s.colour)}>'
                       f"<title>{escape(f'{s.name} at {fmt_bytes(bx)}: {_fmt_tick(by)}')}</title></circle>")
    return out


def _ws_chart(key: str, title: str, series: list[_Series], boundaries: Sequence[tuple[float, str, str]],
              ylabel: str, caption: str) -> Chart:
    """Lines against the working set's bytes (log2 x), with the tier boundaries marked."""
    chart = Chart(key, title)
    pts = [(x, y) for s in series for x, y in s.points]
    if not pts:
        chart.note = "No measured point with a value for this chart."
        return chart
    xs = [x for x, _ in pts] + [b for b, _, _ in boundaries]
    lo_x, hi_x = math.floor(math.log2(min(xs))), math.ceil(math.log2(max(xs)))
    if hi_x == lo_x:
        hi_x += 1
    ys = [y for _, y in pts]
    ticks = nice_ticks(0.0, max(max(ys), 1e-9))
    ax = _WsAxes(lo_x, hi_x, ticks[-1])
    out = _ws_frame(ax, title, ticks, ylabel) + _boundary_marks(ax, boundaries) + _series_lines(ax, series)
    out += _legend(series, _WS_LEFT + _WS_PW + 14, _WS_TOP + 10)
    out.append("</svg>")
    chart.svg = "".join(out)
    chart.caption = caption
    return chart


def _arms(measurements: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    cliff = measurements.get("cliff")
    arms = cliff.get("arms") if isinstance(cliff, Mapping) else None
    return {str(k): v for k, v in arms.items() if isinstance(v, Mapping)} if isinstance(arms, Mapping) else {}


def _boundaries(arm: Mapping[str, Any], prefix: str = "") -> list[tuple[float, str, str]]:
    out = []
    for tier, b in (arm.get("boundaries") or {}).items():
        nbytes = _num(b.get("bytes")) if isinstance(b, Mapping) else None
        if nbytes is not None and nbytes > 0:
            out.append((nbytes, str(tier), f"{prefix}{TIER_NAMES.get(str(tier), str(tier))} full"))
    return out


def _points(arm: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [p for p in arm.get("points") or [] if isinstance(p, Mapping) and (_num(p.get("bytes")) or 0) > 0]


def _rate_series(name: str, points: Sequence[Mapping[str, Any]], get: Any, colour: str, *,
                 dashed: bool = False) -> _Series:
    s = _Series(name, colour=colour, dashed=dashed)
    for p in points:
        v = _num(get(p))
        if v is not None:
            s.points.append((float(p["bytes"]), v * 100.0))
    return s


def _rates(p: Mapping[str, Any]) -> Mapping[str, Any]:
    r = p.get("rates")
    return r if isinstance(r, Mapping) else {}


def _expected(p: Mapping[str, Any]) -> Optional[float]:
    e = p.get("expected")
    return _num(e.get("hit_rate")) if isinstance(e, Mapping) else None


def cliff_charts(measurements: Mapping[str, Any]) -> list[Chart]:
    """Per arm, the hit rate of each tier against the working set (measured total and the expected
    reuse too); then TTFT p50 against the working set, one line per arm, every arm's boundaries."""
    arms = _arms(measurements)
    charts: list[Chart] = []
    for n, (name, arm) in enumerate(sorted(arms.items())):
        points = _points(arm)
        series = []
        for tier in ("hbm", "local_cpu", "local_disk", "remote"):
            s = _rate_series(TIER_NAMES[tier], points, lambda p, t=tier: _rates(p).get(t), TIER_COLOURS[tier])
            if tier in (arm.get("boundaries") or {}) or any(y > 0 for _, y in s.points):
                series.append(s)
        # drawn last, on top of the tiers they sum
        series += [_rate_series("measured, all tiers", points, lambda p: _rates(p).get("total"), PALETTE[6]),
                   _rate_series("expected (LRU)", points, _expected, PALETTE[5], dashed=True)]
        series = [s for s in series if s.points]
        charts.append(_ws_chart(
            f"cliff-hits-{n}", f"Hit rate per tier against the working set: {name}", series, _boundaries(arm),
            "percent of prompt tokens looked up",
            "Share of measured prompt tokens each tier served (engine counters), their sum (black) and the "
            "reuse an LRU of the arm's largest tier gives for the same requests (dashed). Dashed vertical "
            "lines: where each tier fills (tier size over the KV bytes per token of the model geometry)."))
    if arms:
        series = []
        bounds: list[tuple[float, str, str]] = []
        for n, (name, arm) in enumerate(sorted(arms.items())):
            s = _Series(name, colour=PALETTE[(n + 4) % len(PALETTE)])
            for p in _points(arm):
                v = _num(p.get("ttft_p50_ms"))
                if v is not None:
                    s.points.append((float(p["bytes"]), v))
            series.append(s)
            bounds += _boundaries(arm, f"{name}: " if len(arms) > 1 else "")
        charts.append(_ws_chart(
            "cliff-ttft", "TTFT p50 against the working set", [s for s in series if s.points], bounds,
            "TTFT p50 (ms)", "Median time to first token of the measured requests at each working-set size, "
            "per arm. Dashed vertical lines: where each arm's tiers fill."))
    return charts
