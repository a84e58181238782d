"""One forest plot for a whole gate: every interval check (and every percent or ratio check, whose
estimate a reader compares with its threshold the same way) is one row per observation, with its
estimate (a square), its interval (whiskers), its own threshold (a dashed red mark across that
check's rows) and its verdict colour.

Rows of different units cannot share an axis, so the rows are **grouped by unit**: one panel per
unit kind (percent, ratio, bandwidth, ...), each with its own axis, stacked in one SVG. A ratio
panel whose values span more than ``LOG_SPAN`` times is drawn on a log axis (a 15x speed-up and a
0.9x hit share on one linear axis would squeeze one of them to a point); the panel's heading says
which scale it uses, and the caption says how the plot is built. Observations without a value are
named in the caption, not drawn.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Optional

from harness.report.charts import (
    VERDICT_COLOURS,
    Chart,
    _num,
    _range,
    _svg_open,
    _text,
    _text_width,
    escape,
    nice_ticks,
)
from harness.report.i18n import N_, _t
from harness.report.phrases import say
from harness.store.schema import CheckResult, Verdict
from harness.units import UnitKind, format_quantity

LOG_SPAN = 8.0  # a positive ratio panel spanning more than this many times gets a log axis
ROW_H = 17
FW = 820  # at least this wide (the other charts: 720): three columns; print scales it to the page width
LABEL_W = 250  # left column at least: check id and its rule / observation label
VERDICT_W = 80  # then the verdict, then the estimate [interval]
VALUE_W = 250
PLOT_W = 300  # the axis at least
THRESHOLD_RED = "#cf222e"


@dataclass
class _Layout:
    """Column widths sized to the longest label and value (no label is cut: a long check id or a
    long translated rule widens its column, and the plot grows, which print scales to the page)."""

    label_w: float = LABEL_W
    value_w: float = VALUE_W

    @property
    def width(self) -> float:
        return max(FW, self.label_w + PLOT_W + self.value_w)

    @property
    def plot_w(self) -> float:
        return self.width - self.label_w - self.value_w

_UNIT_NAMES = {
    UnitKind.PERCENT.value: N_("percent"), UnitKind.RATIO.value: N_("ratio (x)"),
    UnitKind.BANDWIDTH.value: N_("bandwidth"), UnitKind.BYTES.value: N_("bytes"),
    UnitKind.DURATION.value: N_("duration"), UnitKind.COUNT.value: N_("count"),
}


@dataclass
class _Row:
    label: str
    estimate: float
    interval: Optional[tuple[float, float]]
    verdict: Verdict
    text: str


@dataclass
class _CheckRows:
    check: CheckResult
    rows: list[_Row]
    threshold: Optional[float]


@dataclass
class _Panel:
    unit: str
    checks: list[_CheckRows] = field(default_factory=list)
    log: bool = False


def forest_checks(checks: Sequence[CheckResult]) -> list[CheckResult]:
    """The checks the forest plot draws: interval checks, and percent or ratio checks, with at
    least one observation."""
    return [c for c in checks if c.observations and c.comparator not in ("is_true", "is_false")
            and (c.statistic == "interval" or c.unit_kind in (UnitKind.PERCENT.value, UnitKind.RATIO.value))]


def _scale(unit: str) -> float:
    return 100.0 if unit == UnitKind.PERCENT.value else 1.0


def _fmt(value: float, unit: str) -> str:
    """A display value (percent already x100) with its unit."""
    if unit == UnitKind.PERCENT.value:
        return f"{value:.1f}%"
    if unit == UnitKind.RATIO.value:
        return f"{value:.3g}x"
    try:
        return format_quantity(value, UnitKind(unit))
    except ValueError:
        return f"{value:g}"


def _obs_label(check: CheckResult, path: str) -> str:
    prefix = check.metric.rstrip("*")
    if check.metric.endswith("*") and path.startswith(prefix) and len(path) > len(prefix):
        return path[len(prefix):]
    return ""


def _check_rows(check: CheckResult, missing: list[str]) -> Optional[_CheckRows]:
    factor = _scale(check.unit_kind)
    rows: list[_Row] = []
    for obs in check.observations:
        m = _num(obs.measured)
        if m is None:
            missing.append(obs.path)
            continue
        iv = None
        if obs.interval is not None:
            lo, hi = _num(obs.interval.low), _num(obs.interval.high)
            if lo is not None and hi is not None:
                iv = (min(lo, hi) * factor, max(lo, hi) * factor)
        text = _fmt(m * factor, check.unit_kind)
        if iv:
            text += f" [{_fmt(iv[0], check.unit_kind)}, {_fmt(iv[1], check.unit_kind)}]"
        rows.append(_Row(_obs_label(check, obs.path), m * factor, iv, obs.verdict, text))
    if not rows:
        return None
    thr = _num(check.threshold_value)
    return _CheckRows(check, rows, thr * factor if thr is not None else None)


def _panels(checks: Sequence[CheckResult]) -> tuple[list[_Panel], list[str]]:
    panels: dict[str, _Panel] = {}
    missing: list[str] = []
    for check in forest_checks(checks):
        rows = _check_rows(check, missing)
        if rows is not None:
            panels.setdefault(check.unit_kind, _Panel(check.unit_kind)).checks.append(rows)
    order = [UnitKind.PERCENT.value, UnitKind.RATIO.value]
    out = sorted(panels.values(), key=lambda p: (order.index(p.unit) if p.unit in order else 9, p.unit))
    for p in out:
        vals = _values(p)
        p.log = p.unit == UnitKind.RATIO.value and min(vals) > 0 and max(vals) / min(vals) > LOG_SPAN
    return out, missing


def _values(panel: _Panel) -> list[float]:
    vals = [r.estimate for c in panel.checks for r in c.rows]
    vals += [v for c in panel.checks for r in c.rows if r.interval for v in r.interval]
    vals += [c.threshold for c in panel.checks if c.threshold is not None]
    return vals


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1, 2, 5 x 10^k ticks from the largest at or below ``lo`` to the smallest at or above ``hi``
    (0 < lo <= hi), so every value lies on the axis."""
    cands = [round(m * 10 ** k, 12) for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2)
             for m in (1.0, 2.0, 5.0)]
    first = max(t for t in cands if t <= lo * (1 + 1e-12))
    last = min(t for t in cands if t >= hi * (1 - 1e-12))
    return [t for t in cands if first <= t <= last]


def _axis(panel: _Panel, x0: float, width: float) -> tuple[list[float], Callable[[float], float]]:
    vals = _values(panel)
    if panel.log:
        ticks = _log_ticks(min(vals), max(vals))
        a, b = math.log10(ticks[0]), math.log10(ticks[-1])
        return ticks, lambda v: x0 + (math.log10(max(v, ticks[0])) - a) / (b - a) * width
    lo, hi = _range(vals, zero=False)
    pad = (hi - lo) * 0.08
    ticks = nice_ticks(max(0.0, lo - pad) if min(vals) >= 0 else lo - pad, hi + pad)
    lo, hi = ticks[0], ticks[-1]
    return ticks, lambda v: x0 + (v - lo) / (hi - lo) * width


def _tick_text(t: float, unit: str) -> str:
    if unit == UnitKind.PERCENT.value:
        return f"{t:g}%"
    if unit == UnitKind.RATIO.value:
        return f"{t:g}x"
    return _fmt(t, unit)


def _bold_width(text: str, size: int) -> float:
    return _text_width(text, size) * 1.1  # bold glyphs are wider


def _rule(c: _CheckRows) -> str:
    return f"{c.check.comparator} {_fmt(c.threshold, c.check.unit_kind)}" if c.threshold is not None else ""


def _layout(panels: Sequence[_Panel]) -> _Layout:
    lay = _Layout()
    for p in panels:
        lay.label_w = max(lay.label_w, _text_width(_t("%(unit)s, %(scale)s") % {
            "unit": _t(_UNIT_NAMES.get(p.unit, p.unit)), "scale": _t("linear scale")}, 11) + 16 - PLOT_W)
        for c in p.checks:
            lay.label_w = max(lay.label_w, 8 + _bold_width(c.check.id, 10) + 12 + _text_width(_rule(c), 10) + 8)
            for r in c.rows:
                lay.label_w = max(lay.label_w, 16 + _text_width(r.label, 10) + 8)
                lay.value_w = max(lay.value_w, 10 + VERDICT_W + _text_width(r.text, 10) + 8)
    return lay


def _draw_panel(out: list[str], panel: _Panel, y: float, lay: _Layout) -> float:
    """Draw one unit's panel from ``y``; return the y below it."""
    x0, pw = lay.label_w, lay.plot_w
    ticks, px = _axis(panel, x0, pw)
    scale = _t("log scale") if panel.log else _t("linear scale")
    head = _t("%(unit)s, %(scale)s") % {"unit": _t(_UNIT_NAMES.get(panel.unit, panel.unit)), "scale": scale}
    out.append(_text(8, y + 12, head, anchor="start", size=11, extra=' font-weight="600" fill="#57606a"'))
    y += 18
    top = y
    nrows = sum(len(c.rows) + (1 if _sub_rows(c) else 0) for c in panel.checks)
    bottom = top + nrows * ROW_H
    for t in ticks:
        out.append(f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{bottom}" stroke="#eef0f2"/>')
    for c in panel.checks:
        y = _draw_check(out, c, y, px, lay)
    out.append(f'<line x1="{x0}" y1="{bottom}" x2="{x0 + pw}" y2="{bottom}" stroke="#57606a"/>')
    for t in ticks:
        out.append(_text(px(t), bottom + 13, _tick_text(t, panel.unit), size=10))
    return bottom + 22


def _panel_height(panel: _Panel) -> int:
    """What ``_draw_panel`` takes: a heading (18), the rows, the axis labels (22)."""
    return 18 + sum(len(c.rows) + (1 if _sub_rows(c) else 0) for c in panel.checks) * ROW_H + 22


def _sub_rows(c: _CheckRows) -> bool:
    """A check gets its own heading row when its rows are labelled observations (c1, c8, ...)."""
    return any(r.label for r in c.rows)


def _check_label(out: list[str], check_id: str, rule: str, y: float, lay: _Layout) -> None:
    """A check's id (bold, left) and its rule (grey, right-aligned) in the label column."""
    out.append(_text(8, y + ROW_H / 2 + 4, check_id, anchor="start", size=10, extra=' font-weight="600"'))
    out.append(_text(lay.label_w - 8, y + ROW_H / 2 + 4, rule, anchor="end", size=10, extra=' fill="#57606a"'))


def _draw_check(out: list[str], c: _CheckRows, y: float, px: Callable[[float], float], lay: _Layout) -> float:
    rule = _rule(c)
    head_y = y
    if _sub_rows(c):
        _check_label(out, c.check.id, rule, y, lay)
        y += ROW_H
    for row in c.rows:
        mid = y + ROW_H / 2
        colour = VERDICT_COLOURS.get(row.verdict, "#000000")
        if row.label:
            out.append(_text(lay.label_w - 8, mid + 4, row.label, anchor="end", size=10))
        else:
            _check_label(out, c.check.id, rule, y, lay)
        if row.interval is not None:
            a, b = px(row.interval[0]), px(row.interval[1])
            out.append(f'<line x1="{a:.1f}" y1="{mid:.1f}" x2="{b:.1f}" y2="{mid:.1f}" stroke="{colour}" '
                       f'stroke-width="2"/>')
            for e in (a, b):
                out.append(f'<line x1="{e:.1f}" y1="{mid - 4:.1f}" x2="{e:.1f}" y2="{mid + 4:.1f}" '
                           f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<rect x="{px(row.estimate) - 4:.1f}" y="{mid - 4:.1f}" width="8" height="8" fill="{colour}">'
                   f"<title>{escape(f'{c.check.id} {row.label}: {row.text}')}</title></rect>")
        right = lay.width - lay.value_w + 10
        out.append(_text(right, mid + 4, row.verdict.value, anchor="start", size=9,
                         extra=f' fill="{colour}" font-weight="700"'))
        out.append(_text(right + VERDICT_W, mid + 4, row.text, anchor="start", size=10))
        y += ROW_H
    if c.threshold is not None:
        x = px(c.threshold)
        out.append(f'<line class="threshold" x1="{x:.1f}" y1="{head_y + 1:.1f}" x2="{x:.1f}" y2="{y - 1:.1f}" '
                   f'stroke="{THRESHOLD_RED}" stroke-width="2" stroke-dasharray="4 2">'
                   f"<title>{escape(f'{c.check.id}: {rule}')}</title></line>")
    return y


def gate_forest(checks: Sequence[CheckResult]) -> Chart:
    """The gate's forest plot (``Chart.svg`` None with a note when no check has a value to draw)."""
    chart = Chart("forest", _t("Checks: estimate and interval against each threshold"))
    panels, missing = _panels(checks)
    chart.dropped = len(missing)
    not_drawn = (" " + _t("Not drawn (no value): %(paths)s.") % {"paths": ", ".join(missing)}) if missing else ""
    if not panels:
        chart.note = _t("No interval, percent or ratio check has a measured value, so there is no forest "
                        "plot.") + not_drawn
        return chart
    height = 28 + sum(_panel_height(p) for p in panels)
    lay = _layout(panels)
    out = [_svg_open(height, chart.title, math.ceil(lay.width)),
           _text(8, 18, chart.title, anchor="start", size=13, extra=' font-weight="600"')]
    y = 26.0
    for p in panels:
        y = _draw_panel(out, p, y, lay)
    out.append("</svg>")
    chart.svg = "".join(out)
    chart.caption = _forest_caption(checks) + not_drawn
    return chart


def _forest_caption(checks: Sequence[CheckResult]) -> str:
    ivs = [o.interval for c in forest_checks(checks) for o in c.observations if o.interval is not None]
    conf = ""
    if ivs:
        conf = " " + _t("Whiskers: %(confidence)s%% interval (%(method)s); a row without whiskers is a point "
                        "check.") % {"confidence": f"{ivs[0].confidence * 100:g}", "method": say(ivs[0].method, _t)}
    return (_t("One row per observation; square: the estimate, in its verdict's colour; dashed red mark: "
               "that check's threshold. Rows are grouped by unit, each group on its own axis (a ratio "
               "group spanning more than %(span)sx is on a log axis). PASS needs the whole interval on "
               "the passing side.") % {"span": f"{LOG_SPAN:g}"} + conf)
