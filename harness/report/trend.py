"""The trend page of one history series: per tracked metric, its median over the runs with the
min-max band of its samples, confirmed change points marked, the latest run highlighted, each point
titled with its run id, date and commit (hover), and one table of the runs. One self-contained HTML
file (inline SVG and CSS, the gate reports' style sheet and chart helpers), deterministic for a
given history.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from harness.gates.regression import ChangePoint, change_points, min_effect_for
from harness.report.charts import FONT, PALETTE, WIDTH, Chart, escape, nice_ticks, quoteattr
from harness.report.i18n import DEFAULT_LANG, N_, _t, language
from harness.store.durable import write_atomic
from harness.store.historydb import HistoryDB, MetricRecord, StoredRun

__all__ = ["TrendMetric", "run_labels", "trend_chart", "render_trend_html", "write_trend_page"]

HEIGHT = 260
# words handed over as data (a metric's direction, a change's status), translated where shown
VOCABULARY = (N_("lower"), N_("higher"), N_("regression"), N_("improvement"))
REGRESSION_COLOUR = "#cf222e"
IMPROVEMENT_COLOUR = "#1a7f37"


@dataclass
class TrendMetric:
    name: str
    unit: str
    better: str
    values: list[Optional[MetricRecord]]
    change_points: list[ChangePoint] = field(default_factory=list)
    chart: Optional[Chart] = None


def _fmt(v: float) -> str:
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.3g}G"
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e3:
        return f"{v / 1e3:.3g}k"
    return f"{v:.3g}"


def _text(x: float, y: float, body: str, *, anchor: str = "middle", size: int = 11, extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" fill="#1f2328"{extra}>'
            f"{escape(body)}</text>")


def run_labels(runs: Sequence[StoredRun]) -> list[str]:
    """Each run's hover label, escaped once (shared by every chart of the page)."""
    return [escape(_t("run %(id)s %(started)s %(campaign)s commit %(commit)s") % {
        "id": r.id, "started": r.started_at, "campaign": r.campaign, "commit": (r.git_commit or "-")[:12]})
        for r in runs]


_LEFT, _RIGHT, _TOP, _BOTTOM = 72, 24, 30, 40
_PW, _PH = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM


@dataclass(frozen=True)
class _Axes:
    """Runs 0..n-1 across the plot, values lo..hi up it."""

    n: int
    lo: float
    hi: float

    def px(self, i: float) -> float:
        return _LEFT + (_PW / 2 if self.n == 1 else _PW * i / (self.n - 1))

    def py(self, v: float) -> float:
        return _TOP + _PH - (v - self.lo) / ((self.hi - self.lo) or 1.0) * _PH


def _frame(ax: _Axes, title: str, ticks: Sequence[float]) -> list[str]:
    """The SVG's opening, title, grid lines with their values, plot border and x label."""
    left, top, pw, ph = _LEFT, _TOP, _PW, _PH
    out = [f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
           f'style="{FONT};max-width:100%;height:auto"><title>{escape(title)}</title>'
           f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
           _text(left, 18, title, anchor="start", size=13, extra=' font-weight="600"')]
    for tick in ticks:
        y = ax.py(tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        out.append(_text(left - 6, y + 4, _fmt(tick), anchor="end"))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#57606a"/>')
    out.append(_text(left + pw / 2, HEIGHT - 10, _t("runs of this series, oldest to newest (%(n)s)") % {"n": ax.n}))
    return out


def _change_point_marks(ax: _Axes, metric: TrendMetric) -> list[str]:
    """A dashed vertical line between the runs before and after each change point."""
    out = []
    for cp in metric.change_points:
        x = ax.px(cp.index - 0.5) if cp.index > 0 else ax.px(0)
        colour = REGRESSION_COLOUR if cp.status.value == "regression" else IMPROVEMENT_COLOUR
        tip = _t("change point: %(status)s %(effect)s (p=%(p)s)") % {
            "status": _t(cp.status.value), "effect": f"{cp.effect:+.1%}", "p": f"{cp.p_value:.2g}"}
        out.append(f'<line class="change-point" x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_TOP + _PH}" '
                   f'stroke={quoteattr(colour)} stroke-width="2" stroke-dasharray="5 3">'
                   f"<title>{escape(tip)}</title></line>")
    return out


def _series_marks(ax: _Axes, pts: Sequence[tuple[int, MetricRecord]], labels: Sequence[str]) -> list[str]:
    """Each run's interval, the medians' line, and a dot per run (the newest run, when it measured
    the metric, highlighted)."""
    px, py, n = ax.px, ax.py, ax.n
    out = []
    band = [(i, m) for i, m in pts if m.low is not None and m.high is not None]
    for i, m in band:
        assert m.low is not None and m.high is not None
        out.append(f'<line x1="{px(i):.1f}" y1="{py(m.low):.1f}" x2="{px(i):.1f}" y2="{py(m.high):.1f}" '
                   f'stroke="#afb8c1" stroke-width="1.5"/>')
    coords = " ".join(f"{px(i):.1f},{py(m.median or 0.0):.1f}" for i, m in pts)
    if len(pts) > 1:
        out.append(f'<polyline points="{coords}" fill="none" stroke={quoteattr(PALETTE[0])} stroke-width="1.5"/>')
    last = pts[-1][0]
    normal = f'r="2.5" fill={quoteattr(PALETTE[0])}'
    highlighted = f'r="6" fill={quoteattr(PALETTE[5])} stroke="#1f2328" class="latest"'
    for i, m in pts:
        attrs = highlighted if i == last and i == n - 1 else normal
        # the label is escaped already; the value is a formatted number
        out.append(f'<circle cx="{px(i):.1f}" cy="{py(m.median or 0.0):.1f}" {attrs}><title>{labels[i]}: '
                   f"{_fmt(m.median or 0.0)}</title></circle>")
    return out


def trend_chart(metric: TrendMetric, runs: Sequence[StoredRun], labels: Optional[Sequence[str]] = None) -> Chart:
    """The metric's chart over ``runs`` (same order as ``metric.values``); ``labels`` from
    :func:`run_labels`."""
    labels = labels if labels is not None else run_labels(runs)
    pts = [(i, m) for i, m in enumerate(metric.values)
           if m is not None and m.median is not None and math.isfinite(m.median)]
    title = _t("%(metric)s (%(unit)s, %(better)s is better)") % {
        "metric": metric.name, "unit": metric.unit, "better": _t(metric.better)}
    if not pts:
        return Chart(key=metric.name, title=title, note=_t("no run of this series measured it"))
    ys = [m.median for _, m in pts if m.median is not None]
    ys += [v for _, m in pts for v in (m.low, m.high) if v is not None and math.isfinite(v)]
    ticks = nice_ticks(min(ys), max(ys))
    ax = _Axes(len(runs), ticks[0], ticks[-1])
    n = ax.n
    out = _frame(ax, title, ticks) + _change_point_marks(ax, metric) + _series_marks(ax, pts, labels)
    out.append("</svg>")
    note = ""
    if metric.change_points:
        note = "; ".join(_t("change point at run %(run)s: %(status)s %(effect)s") % {
            "run": runs[cp.index].id, "status": _t(cp.status.value), "effect": f"{cp.effect:+.1%}"}
            for cp in metric.change_points if cp.index < n)
    return Chart(key=metric.name, title=title, svg="".join(out), note=note)


def _metrics(db: HistoryDB, series: str, span: int) -> tuple[list[StoredRun], list[TrendMetric]]:
    table = db.series_table(series, limit=span)  # one bulk read; the charts need no samples
    runs = table.runs
    labels = run_labels(runs)
    out: list[TrendMetric] = []
    for k, name in enumerate(table.names):
        med, low, high = table.median[k].tolist(), table.low[k].tolist(), table.high[k].tolist()
        values: list[Optional[MetricRecord]] = [
            None if math.isnan(m) else MetricRecord(name=name, median=m, unit=table.unit[name],
                                                    better=table.better[name],
                                                    low=None if math.isnan(lo) else lo,
                                                    high=None if math.isnan(hi) else hi)
            for m, lo, hi in zip(med, low, high)]
        tm = TrendMetric(name, table.unit[name], table.better[name], values)
        if sum(not math.isnan(v) for v in med) >= 6:
            tm.change_points = change_points(med, better=tm.better, min_effect=min_effect_for(name))
        tm.chart = trend_chart(tm, runs, labels)
        out.append(tm)
    return runs, out


def render_trend_html(db: HistoryDB, series: str, *, span: int = 365, lang: str = DEFAULT_LANG) -> str:
    """The trend page of ``series`` (its last ``span`` runs) in ``lang`` (the gate reports'
    message catalogs)."""
    from harness.report.render import _environment

    with language(lang):
        runs, metrics = _metrics(db, series, span)
    env = _environment(html=True, lang=lang)
    return env.get_template("trend.html.j2").render(series=series, runs=runs, metrics=metrics,
                                                    latest=runs[-1] if runs else None)


def write_trend_page(db: HistoryDB, series: str, path: Path, *, span: int = 365, lang: str = DEFAULT_LANG) -> Path:
    write_atomic(path, render_trend_html(db, series, span=span, lang=lang).encode())
    return path
