"""Inline SVG charts for the reports, drawn in Python: no JavaScript, no external library, no
external reference, so a report stays one self-contained file that opens offline.

The data comes from ``GateResult.measurements`` (a free dict written by the gate pipelines) and,
for the ratio charts, from the checks' observations. The layout the charts read is::

    measurements = {
      "sweep": {                      # TTFT and throughput charts
        "<arm>": {                    # e.g. "baseline", "candidate", "recompute"
          "<concurrency>": {          # "c8" or "8": the number of concurrent requests
            "ttft_p50_ms": float,     # TTFT percentiles over the point's requests, milliseconds
            "ttft_p99_ms": float,
            "output_throughput": float,   # output tokens per second
            "request_throughput": float,  # requests per second
            "completed": int,
            "failed": int,
          }}},
      "fio": {                        # bandwidth chart
        "<node>": {"<target>": {"seq_read_bw": float, "seq_write_bw": float}}},  # bytes per second
      "checkpoint": {"<arm or node>": {"write_bw": float, "bytes": int, "seconds": float}},
      "modelload":  {"<arm or node>": {"read_bw": float, "bytes": int, "seconds": float}},
    }

Every key is optional. A missing or empty section skips its chart with a sentence saying why;
NaN, infinities, ``None`` and non-numbers are dropped point by point (and counted in the note).
Other sections are shown as tables by the renderer, not charted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional
from xml.sax.saxutils import escape as _escape
from xml.sax.saxutils import quoteattr as _quoteattr

from harness.report.i18n import _t
from harness.report.textutil import concurrency_of, xml_safe
from harness.store.schema import CheckResult, Verdict

# Okabe-Ito: distinguishable with the common colour-vision deficiencies, and in greyscale print.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442")
VERDICT_COLOURS = {
    Verdict.PASS: "#1a7f37",
    Verdict.FAIL: "#cf222e",
    Verdict.ERROR: "#8b0000",
    Verdict.INCONCLUSIVE: "#b35900",
    Verdict.NOT_RUN: "#6e7781",
    Verdict.NOT_APPLICABLE: "#afb8c1",
}

WIDTH = 720
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,'Noto Sans CJK SC',sans-serif"
MAX_LABEL = 28
TITLE_CHARS = 86  # 13 px titles that fit the chart width (see _text_width)


@dataclass
class Chart:
    """One chart for a report: ``svg`` is None when there was nothing to draw, and ``note`` says
    why (or mentions points that were left out)."""

    key: str
    title: str
    svg: Optional[str] = None
    note: str = ""
    caption: str = ""
    dropped: int = 0


@dataclass
class _Series:
    name: str
    points: list[tuple[float, float]] = field(default_factory=list)  # (x index or value, y)
    colour: str = PALETTE[0]
    dashed: bool = False


# --- small helpers ----------------------------------------------------------------------------

def _num(value: Any) -> Optional[float]:
    """A finite float, or None for anything that cannot be plotted (None, NaN, inf, text, bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def escape(text: str) -> str:
    return _escape(xml_safe(text))


def quoteattr(text: str) -> str:
    return _quoteattr(xml_safe(text))


def _short(text: str, limit: int = MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _text(x: float, y: float, body: str, *, anchor: str = "middle", size: int = 11,
          extra: str = "", full: Optional[str] = None) -> str:
    title = f"<title>{escape(full)}</title>" if full and full != body else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}"{extra}>'
            f"{title}{escape(body)}</text>")


def _text_width(text: str, size: int) -> float:
    """A generous estimate of a text's rendered width: CJK glyphs are a full em, others 0.62 em."""
    return sum(size * (1.0 if ord(c) > 0x2E80 else 0.62) for c in text)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 2.5, 5 x 10^k steps)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw)
    start = math.floor(lo / step) * step
    ticks: list[float] = []
    v = start
    while v < hi + step * 0.5 and len(ticks) < 50:
        ticks.append(round(v, 10))
        v += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        return f"{v:.3g}"
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.3g}" if a < 1 else f"{v:,.2f}".rstrip("0").rstrip(".")


def _range(values: Iterable[float], *, zero: bool) -> tuple[float, float]:
    vals = list(values)
    lo, hi = min(vals), max(vals)
    if zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if lo == hi:
        pad = abs(hi) * 0.5 or 1.0
        lo, hi = (lo, hi + pad) if zero and lo == 0 else (lo - pad, hi + pad)
    return lo, hi


def _svg_open(height: int, title: str, width: int = WIDTH) -> str:
    return (f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" style="{FONT}">'
            f"<title>{escape(title)}</title>"
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>')


def _legend(series: Sequence[_Series], x: float, y: float) -> list[str]:
    out = []
    for i, s in enumerate(series):
        yy = y + i * 18
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append(f'<line x1="{x:.1f}" y1="{yy:.1f}" x2="{x + 22:.1f}" y2="{yy:.1f}" '
                   f'stroke={quoteattr(s.colour)} stroke-width="2.5"{dash}/>')
        out.append(_text(x + 28, yy + 4, _short(s.name, 20), anchor="start", full=s.name))
    return out


# --- line chart against concurrency -----------------------------------------------------------

def _line_chart(title: str, series: list[_Series], xcats: list[int], ylabel: str, *, zero: bool) -> str:
    height = 210  # two to a printed page with their captions
    left, right, top, bottom = 72, 190, 30, 44
    pw, ph = WIDTH - left - right, height - top - bottom
    ys = [y for s in series for _, y in s.points]
    lo, hi = _range(ys, zero=zero)
    ticks = nice_ticks(lo, hi)
    lo, hi = ticks[0], ticks[-1]

    def px(i: float) -> float:
        return left + (pw / 2 if len(xcats) == 1 else pw * i / (len(xcats) - 1))

    def py(v: float) -> float:
        return top + ph - (v - lo) / (hi - lo) * ph

    out = [_svg_open(height, title), _text(left, 20, _short(title, TITLE_CHARS - 8), anchor="start", size=13,
                                           extra=' font-weight="600"')]
    for t in ticks:
        y = py(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        out.append(_text(left - 6, y + 4, _fmt_tick(t), anchor="end"))
    for i, c in enumerate(xcats):
        x = px(i)
        out.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 5}" stroke="#57606a"/>')
        out.append(_text(x, top + ph + 18, str(c)))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#57606a"/>')
    out.append(_text(left + pw / 2, height - 12, _t("concurrency (requests in flight)")))
    out.append(_text(16, top + ph / 2, ylabel, extra=f' transform="rotate(-90 16 {top + ph / 2:.1f})"'))
    for s in series:
        pts = sorted(s.points)
        coords = " ".join(f"{px(xi):.1f},{py(v):.1f}" for xi, v in pts)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        if len(pts) > 1:
            out.append(f'<polyline points="{coords}" fill="none" stroke={quoteattr(s.colour)} '
                       f'stroke-width="2.5"{dash}/>')
        for xi, v in pts:
            tip = escape(f"{s.name} at c{xcats[int(xi)]}: {_fmt_tick(v)}")
            out.append(f'<circle cx="{px(xi):.1f}" cy="{py(v):.1f}" r="3.5" fill={quoteattr(s.colour)}>'
                       f"<title>{tip}</title></circle>")
    out += _legend(series, left + pw + 14, top + 10)
    out.append("</svg>")
    return "".join(out)


def _sweep(measurements: Mapping[str, Any]) -> Mapping[str, Any]:
    sweep = measurements.get("sweep")
    return sweep if isinstance(sweep, Mapping) else {}


def _sweep_series(measurements: Mapping[str, Any], metrics: Sequence[tuple[str, str, bool]]
                  ) -> tuple[list[_Series], list[int], int]:
    """Series per (arm, metric); x as an index into the sorted union of concurrencies."""
    sweep = _sweep(measurements)
    cats: set[int] = set()
    for points in sweep.values():
        if isinstance(points, Mapping):
            cats.update(c for c in (concurrency_of(k) for k in points) if c is not None)
    xcats = sorted(cats)
    index = {c: i for i, c in enumerate(xcats)}
    series: list[_Series] = []
    dropped = 0
    for n, (arm, points) in enumerate(sorted(sweep.items(), key=lambda kv: str(kv[0]))):
        if not isinstance(points, Mapping):
            continue
        colour = PALETTE[n % len(PALETTE)]
        for metric, suffix, dashed in metrics:
            s = _Series(f"{arm}{suffix}", colour=colour, dashed=dashed)
            for ckey, values in points.items():
                c = concurrency_of(ckey)
                if c is None or not isinstance(values, Mapping) or metric not in values:
                    continue
                v = _num(values.get(metric))
                if v is None:
                    dropped += 1
                    continue
                s.points.append((float(index[c]), v))
            if s.points:
                series.append(s)
    return series, xcats, dropped


def _dropped_note(dropped: int) -> str:
    return " " + _t("%(n)s value(s) were missing or not a finite number and are not drawn.") % {"n": dropped} \
        if dropped else ""


def ttft_chart(measurements: Mapping[str, Any]) -> Chart:
    """TTFT p50 (solid) and p99 (dashed) against concurrency, one colour per arm."""
    chart = Chart("ttft", _t("TTFT against concurrency"))
    series, xcats, dropped = _sweep_series(
        measurements, [("ttft_p50_ms", " p50", False), ("ttft_p99_ms", " p99", True)])
    chart.dropped = dropped
    if not series:
        chart.note = (_t("No TTFT measurements in this gate (measurements.sweep is empty or has no "
                         "ttft_p50_ms / ttft_p99_ms values), so there is no TTFT chart.")
                      + _dropped_note(dropped))
        return chart
    chart.svg = _line_chart(chart.title, series, xcats, _t("TTFT (ms)"), zero=True)
    chart.caption = (_t("Time to first token per arm: p50 solid, p99 dashed. Lower is better.")
                     + _dropped_note(dropped))
    return chart


def throughput_chart(measurements: Mapping[str, Any]) -> Chart:
    """Output token throughput against concurrency, one line per arm."""
    chart = Chart("throughput", _t("Output throughput against concurrency"))
    series, xcats, dropped = _sweep_series(measurements, [("output_throughput", "", False)])
    chart.dropped = dropped
    if not series:
        chart.note = (_t("No throughput measurements in this gate (measurements.sweep has no "
                         "output_throughput values), so there is no throughput chart.") + _dropped_note(dropped))
        return chart
    chart.svg = _line_chart(chart.title, series, xcats, _t("output tokens/s"), zero=True)
    chart.caption = _t("Output tokens per second per arm. Higher is better.") + _dropped_note(dropped)
    return chart


# --- grouped bar chart: fio bandwidth ---------------------------------------------------------

_FIO_METRICS = (("seq_read_bw", "read"), ("seq_write_bw", "write"))


def _fio_groups(fio: Any) -> tuple[list[tuple[str, dict[str, float]]], int]:
    """("node / target", {read|write: GB/s}) per target with a figure, and how many were not numbers."""
    groups: list[tuple[str, dict[str, float]]] = []
    dropped = 0
    if not isinstance(fio, Mapping):
        return groups, dropped
    for node, targets in sorted(fio.items(), key=lambda kv: str(kv[0])):
        if not isinstance(targets, Mapping):
            continue
        for target, values in sorted(targets.items(), key=lambda kv: str(kv[0])):
            if not isinstance(values, Mapping):
                continue
            bars: dict[str, float] = {}
            for metric, label in _FIO_METRICS:
                if metric in values:
                    v = _num(values[metric])
                    if v is None:
                        dropped += 1
                    else:
                        bars[label] = v / 1e9
            if bars:
                groups.append((f"{node} / {target}", bars))
    return groups, dropped


def _fio_svg(title: str, groups: list[tuple[str, dict[str, float]]]) -> str:
    """Horizontal bars, read and write per target, on one GB/s axis from 0."""
    row_h, bar_h = 44, 16
    left, right, top = 210, 40, 40
    height = top + row_h * len(groups) + 50
    pw = WIDTH - left - right
    hi = max(v for _, bars in groups for v in bars.values())
    ticks = nice_ticks(0.0, hi if hi > 0 else 1.0)
    top_v = ticks[-1]

    def px(v: float) -> float:
        return left + max(0.0, v) / top_v * pw

    out = [_svg_open(height, title),
           _text(8, 20, _short(title, TITLE_CHARS), anchor="start", size=13, extra=' font-weight="600"')]
    base = top + row_h * len(groups)
    for t in ticks:
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{base}" stroke="#e5e7eb"/>')
        out.append(_text(x, base + 16, _fmt_tick(t)))
    out.append(_text(left + pw / 2, base + 36, _t("GB/s (decimal: 10^9 bytes per second)")))
    colours = {"read": PALETTE[0], "write": PALETTE[1]}
    for g, (label, bars) in enumerate(groups):
        y0 = top + g * row_h + 4
        out.append(_text(left - 8, y0 + row_h / 2, _short(label, 28), anchor="end", full=label))
        for b, (_, name) in enumerate(_FIO_METRICS):
            if name not in bars:
                continue
            v = bars[name]
            y = y0 + b * (bar_h + 2)
            tip = escape(f"{label} {name}: {v:.2f} GB/s")
            out.append(f'<rect x="{left}" y="{y:.1f}" width="{max(1.0, px(v) - left):.1f}" height="{bar_h}" '
                       f'fill="{colours[name]}"><title>{tip}</title></rect>')
            text = f"{name} {v:.2f}"
            if px(v) + 4 + _text_width(text, 10) <= WIDTH - 4:
                out.append(_text(px(v) + 4, y + bar_h - 4, text, anchor="start", size=10))
            else:  # no room right of the bar: inside its end, in white
                out.append(_text(px(v) - 4, y + bar_h - 4, text, anchor="end", size=10,
                                 extra=' fill="#ffffff"'))
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#57606a"/>')
    out.append("</svg>")
    return "".join(out)


def fio_chart(measurements: Mapping[str, Any]) -> Chart:
    """Sequential read and write bandwidth (fio, direct I/O) per storage target, per node, GB/s."""
    chart = Chart("fio", _t("Storage bandwidth per target (fio, direct I/O)"))
    groups, dropped = _fio_groups(measurements.get("fio"))
    chart.dropped = dropped
    if not groups:
        chart.note = (_t("No fio bandwidth in this gate (measurements.fio is empty), so there is no "
                         "bandwidth chart.") + _dropped_note(dropped))
        return chart
    chart.svg = _fio_svg(chart.title, groups)
    chart.caption = (_t("Sequential 1 MiB read (blue) and write (orange) bandwidth measured by fio with "
                        "direct I/O, per node and storage target.") + _dropped_note(dropped))
    return chart


def gate_charts(measurements: Mapping[str, Any], checks: Sequence[CheckResult]) -> list[Chart]:
    """Every chart of a gate report, in display order (charts without data carry a note)."""
    if "soak" in measurements and not measurements.get("sweep") and not measurements.get("fio"):
        return []  # a soak gate: its charts are in its own section (soak_charts), no "no sweep" notes
    curves = [ttft_chart(measurements), throughput_chart(measurements), ttft_throughput_chart(measurements)]
    if _concurrencies(measurements) == 1:  # one point per arm draws no curve: the sweep table has its figures
        curves = []
    # No fio bar chart: one bar per figure of the "fio bandwidth" table draws nothing a table does not
    # show, and each number is printed once (issue 53 item 2); fio_chart stays for callers that want it.
    return curves


def _concurrencies(measurements: Mapping[str, Any]) -> int:
    """How many distinct concurrencies the sweep measured (0 without a sweep)."""
    sweep = measurements.get("sweep")
    if not isinstance(sweep, Mapping):
        return 0
    return len({str(c) for points in sweep.values() if isinstance(points, Mapping) for c in points})


# --- G4 soak: per-window time series with the faults marked on the time axis ----------------
#
#   measurements["soak"] = {"windows": [{"t_s", "ttft_p50_ms", "ttft_p99_ms", "throughput_tok_s",
#                                        "failed", "requests", "hit_rate"}, ...],
#                           "faults": [{"t_s", "kind", "what", "evidence"}, ...],
#                           "fio": {"before": bytes/s, "after": bytes/s}}

_FAULT_COLOURS = {"restart": "#cf222e", "kernel storage": "#8b0000", "kernel network": "#D55E00",
                  "kernel accelerator": "#CC79A7", "raid": "#8b0000"}


def _time_unit(span_s: float) -> tuple[float, str]:
    if span_s >= 3 * 3600:
        return 3600.0, _t("time since the soak started (hours)")
    if span_s >= 180:
        return 60.0, _t("time since the soak started (minutes)")
    return 1.0, _t("time since the soak started (seconds)")


def _fault_marks(marks: Sequence[tuple[float, str, str]], px: Callable[[float], float], y0: float,
                 y1: float) -> list[str]:
    """A dashed vertical line at each fault, in its kind's colour, with what it was."""
    out = []
    for t_s, kind, what in marks:
        x = px(t_s)
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y1}" stroke='
                   f'{quoteattr(_FAULT_COLOURS[kind])} stroke-width="1.5" stroke-dasharray="4 3">'
                   f"<title>{escape(f'{kind} at {t_s:.0f} s: {what}')}</title></line>")
    return out


def _time_series_marks(series: list[_Series], px: Callable[[float], float], py: Callable[[float], float]
                       ) -> list[str]:
    """Each series' line, and its points with their values when it has at most 200."""
    out = []
    for s in series:
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(s.points))
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        if len(s.points) > 1:
            out.append(f'<polyline points="{coords}" fill="none" stroke={quoteattr(s.colour)} '
                       f'stroke-width="2"{dash}/>')
        if len(s.points) <= 200:
            for x, y in s.points:
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill={quoteattr(s.colour)}>'
                           f"<title>{escape(f'{s.name} at {x:.0f} s: {_fmt_tick(y)}')}</title></circle>")
    return out


def _time_chart(key: str, title: str, series: list[_Series], faults: Sequence[Mapping[str, Any]],
                ylabel: str, *, zero: bool) -> Chart:
    chart = Chart(key, title)
    pts = [(x, y) for s in series for x, y in s.points]
    if not pts:
        chart.note = _t("No soak window with a value for this chart.")
        return chart
    marks = [(float(f["t_s"]), str(f.get("kind")), str(f.get("what"))) for f in faults
             if _num(f.get("t_s")) is not None and str(f.get("kind")) in _FAULT_COLOURS]
    span = max([x for x, _ in pts] + [m[0] for m in marks])
    div, unit = _time_unit(span)
    height = 210  # two to a printed page with their captions
    left, right, top, bottom = 72, 190, 30, 44
    pw, ph = WIDTH - left - right, height - top - bottom
    lo, hi = _range([y for _, y in pts], zero=zero)
    ticks = nice_ticks(lo, hi)
    lo, hi = ticks[0], ticks[-1]
    xticks = nice_ticks(0.0, span / div if span > 0 else 1.0)
    xhi = xticks[-1] or 1.0

    def px(t_s: float) -> float:
        return left + (t_s / div) / xhi * pw

    def py(v: float) -> float:
        return top + ph - (v - lo) / (hi - lo) * ph

    out = [_svg_open(height, title), _text(left, 20, title, anchor="start", size=13, extra=' font-weight="600"')]
    for t in ticks:
        out.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + pw}" y2="{py(t):.1f}" stroke="#e5e7eb"/>')
        out.append(_text(left - 6, py(t) + 4, _fmt_tick(t), anchor="end"))
    for t in xticks:
        x = left + t / xhi * pw
        out.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 5}" stroke="#57606a"/>')
        out.append(_text(x, top + ph + 18, _fmt_tick(t)))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#57606a"/>')
    out.append(_text(left + pw / 2, height - 8, unit))
    out.append(_text(16, top + ph / 2, ylabel, extra=f' transform="rotate(-90 16 {top + ph / 2:.1f})"'))
    out += _fault_marks(marks, px, top, top + ph) + _time_series_marks(series, px, py)
    legend = list(series)
    kinds = sorted({k for _, k, _ in marks})
    legend += [_Series(k, colour=_FAULT_COLOURS[k], dashed=True) for k in kinds]
    out += _legend(legend, left + pw + 14, top + 10)
    out.append("</svg>")
    chart.svg = "".join(out)
    chart.caption = _t("One point per soak window (at its end). Dashed vertical lines mark faults: engine "
                       "restarts and kernel storage, network or accelerator errors (hover for the line).")
    return chart


def _soak_series(windows: Sequence[Mapping[str, Any]], key: str, name: str, colour: str, *,
                 scale: float = 1.0, dashed: bool = False) -> _Series:
    s = _Series(name, colour=colour, dashed=dashed)
    for w in windows:
        t, v = _num(w.get("t_s")), _num(w.get(key))
        if t is not None and v is not None:
            s.points.append((t, v * scale))
    return s


def soak_charts(measurements: Mapping[str, Any]) -> list[Chart]:
    """The G4 soak charts: TTFT p50/p99, throughput, failed requests and cache hit rate per
    window, with restarts and kernel errors marked; fio read bandwidth before and after."""
    soak = measurements.get("soak")
    if not isinstance(soak, Mapping) or not isinstance(soak.get("windows"), list):
        return []
    windows = [w for w in soak["windows"] if isinstance(w, Mapping)]
    faults = [f for f in soak.get("faults") or [] if isinstance(f, Mapping)]
    charts = [
        _time_chart("soak-ttft", _t("TTFT per soak window"),
                    [_soak_series(windows, "ttft_p50_ms", "TTFT p50", PALETTE[0]),
                     _soak_series(windows, "ttft_p99_ms", "TTFT p99", PALETTE[0], dashed=True)],
                    faults, _t("milliseconds"), zero=True),
        _time_chart("soak-throughput", _t("Output throughput per soak window"),
                    [_soak_series(windows, "throughput_tok_s", _t("output tok/s"), PALETTE[2])], faults,
                    _t("tokens per second"), zero=True),
        _time_chart("soak-failures", _t("Failed requests per soak window"),
                    [_soak_series(windows, "failed", _t("failed"), PALETTE[5]),
                     _soak_series(windows, "requests", _t("all requests"), PALETTE[6], dashed=True)], faults,
                    _t("requests"), zero=True),
        _time_chart("soak-hits", _t("Prompt tokens served from a cache, per soak window"),
                    [_soak_series(windows, "hit_rate", _t("hit rate"), PALETTE[3], scale=100.0)], faults,
                    _t("percent of tokens looked up"), zero=True),
    ]
    fio_raw = soak.get("fio")
    fio: Mapping[str, Any] = fio_raw if isinstance(fio_raw, Mapping) else {}
    before, after = _num(fio.get("before")), _num(fio.get("after"))
    title = _t("Read bandwidth of the KV target before and after the soak")
    bw = Chart("soak-fio", title)
    if before is None or after is None:
        bw.note = _t("fio did not measure the KV target both before and after the soak.")
    else:
        bw = fio_chart({"fio": {_t("before the soak"): {_t("KV target"): {"seq_read_bw": before}},
                                _t("after the soak"): {_t("KV target"): {"seq_read_bw": after}}}})
        bw.key, bw.title = "soak-fio", title
        bw.caption = _t("fio sequential read, the same job set on the same target: after / before = "
                        "%(ratio)s.") % {"ratio": f"{after / before * 100:.1f}%"}
    charts.append(bw)
    return charts


# --- TTFT against throughput (latency-throughput curve per arm) -------------------------------
#
#   measurements["sweep"]["<arm>"]["<concurrency>"] also carries, per point, the per-repetition
#   figures' mean and 95% t interval: "ttft_p50_ci", "ttft_p90_ci", "output_throughput_ci" =
#   [mean, low, high] (harness.pipelines.shared.sweepdata.mean_interval); None below two repetitions.

def _ci(values: Mapping[str, Any], key: str) -> Optional[tuple[float, float, float]]:
    v = values.get(key)
    if not isinstance(v, (list, tuple)) or len(v) != 3:
        return None
    nums = [_num(x) for x in v]
    if any(x is None for x in nums):
        return None
    m, lo, hi = (float(x) for x in nums if x is not None)
    return m, lo, hi


@dataclass
class _CurvePoint:
    conc: int
    x: tuple[float, float, float]
    y: tuple[float, float, float]


def _curves(measurements: Mapping[str, Any]) -> tuple[list[tuple[str, str, bool, list[_CurvePoint]]], int]:
    """(label, colour, dashed, points sorted by concurrency) per arm and percentile; dropped count."""
    out: list[tuple[str, str, bool, list[_CurvePoint]]] = []
    dropped = 0
    for n, (arm, points) in enumerate(sorted(_sweep(measurements).items(), key=lambda kv: str(kv[0]))):
        if not isinstance(points, Mapping):
            continue
        for key, suffix, dashed in (("ttft_p50_ci", " p50", False), ("ttft_p90_ci", " p90", True)):
            pts: list[_CurvePoint] = []
            for ckey, values in points.items():
                c = concurrency_of(ckey)
                if c is None or not isinstance(values, Mapping):
                    continue
                x, y = _ci(values, "output_throughput_ci"), _ci(values, key)
                if x is None or y is None:
                    dropped += 1
                    continue
                pts.append(_CurvePoint(c, x, y))
            if pts:
                out.append((f"{arm}{suffix}", PALETTE[n % len(PALETTE)], dashed, sorted(pts, key=lambda p: p.conc)))
    return out, dropped


def ttft_throughput_chart(measurements: Mapping[str, Any]) -> Chart:
    """TTFT p50 (solid) and p90 (dashed) against output throughput, one colour per arm, one point
    per concurrency with its 95% interval both ways (the repetitions' spread)."""
    chart = Chart("ttft-throughput", _t("TTFT against throughput"))
    curves, dropped = _curves(measurements)
    chart.dropped = dropped
    if not curves:
        chart.note = (_t("No point has both a TTFT and a throughput interval (two or more repetitions), "
                         "so there is no TTFT-against-throughput chart.") + _dropped_note(dropped))
        return chart
    height = 360
    left, right, top, bottom = 72, 190, 34, 56
    pw, ph = WIDTH - left - right, height - top - bottom
    xt = nice_ticks(*_range([v for _, _, _, ps in curves for p in ps for v in p.x[1:]], zero=True))
    yt = nice_ticks(*_range([v for _, _, _, ps in curves for p in ps for v in p.y[1:]], zero=True))

    def px(v: float) -> float:
        return left + (v - xt[0]) / (xt[-1] - xt[0]) * pw

    def py(v: float) -> float:
        return top + ph - (v - yt[0]) / (yt[-1] - yt[0]) * ph

    out = [_svg_open(height, chart.title), _text(left, 20, chart.title, anchor="start", size=13,
                                                 extra=' font-weight="600"')]
    for t in yt:
        out.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + pw}" y2="{py(t):.1f}" stroke="#e5e7eb"/>')
        out.append(_text(left - 6, py(t) + 4, _fmt_tick(t), anchor="end"))
    for t in xt:
        out.append(f'<line x1="{px(t):.1f}" y1="{top + ph}" x2="{px(t):.1f}" y2="{top + ph + 5}" stroke="#57606a"/>')
        out.append(_text(px(t), top + ph + 18, _fmt_tick(t)))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#57606a"/>')
    out.append(_text(left + pw / 2, height - 12, _t("output tokens/s")))
    out.append(_text(16, top + ph / 2, _t("TTFT (ms)"), extra=f' transform="rotate(-90 16 {top + ph / 2:.1f})"'))
    legend: list[_Series] = []
    for label, colour, dashed, pts in curves:
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        if len(pts) > 1:
            coords = " ".join(f"{px(p.x[0]):.1f},{py(p.y[0]):.1f}" for p in pts)
            out.append(f'<polyline points="{coords}" fill="none" stroke={quoteattr(colour)} stroke-width="2"{dash}/>')
        for p in pts:
            cx, cy = px(p.x[0]), py(p.y[0])
            out.append(f'<line class="ci" x1="{cx:.1f}" y1="{py(p.y[1]):.1f}" x2="{cx:.1f}" y2="{py(p.y[2]):.1f}" '
                       f'stroke={quoteattr(colour)} stroke-width="1.2"/>')
            out.append(f'<line class="ci" x1="{px(p.x[1]):.1f}" y1="{cy:.1f}" x2="{px(p.x[2]):.1f}" y2="{cy:.1f}" '
                       f'stroke={quoteattr(colour)} stroke-width="1.2"/>')
            tip = escape(f"{label} at c{p.conc}: {_fmt_tick(p.y[0])} ms [{_fmt_tick(p.y[1])}, {_fmt_tick(p.y[2])}], "
                         f"{_fmt_tick(p.x[0])} tok/s [{_fmt_tick(p.x[1])}, {_fmt_tick(p.x[2])}]")
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill={quoteattr(colour)}>'
                       f"<title>{tip}</title></circle>")
        legend.append(_Series(label, colour=colour, dashed=dashed))
    out += _legend(legend, left + pw + 14, top + 10)
    out.append("</svg>")
    chart.svg = "".join(out)
    chart.caption = (_t("TTFT p50 (solid) and p90 (dashed) against output throughput, one point per concurrency "
                        "(rising load to the right), each with the 95-percent interval of its repetitions both ways. "
                        "Lower and further right is better.") + _dropped_note(dropped))
    return chart
