from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from harness.report.charts import (
    concurrency_of,
    fio_chart,
    gate_charts,
    nice_ticks,
    throughput_chart,
    ttft_chart,
    ttft_throughput_chart,
)
from harness.report.forest import gate_forest
from harness.report.i18n import language
from harness.store.schema import GateResult, Observation, Verdict

from .conftest import FIO, SWEEP, make_result


def _parse(svg: str | None) -> ET.Element:
    assert svg is not None
    root = ET.fromstring(svg)
    assert root.tag == "svg"
    assert "http" not in svg  # no namespace URL or link: nothing a browser could fetch
    return root


def _texts(root: ET.Element) -> list[str]:
    """The visible text of each <text> (a <title> child is a tooltip, not shown)."""
    out = []
    for t in root.iter("text"):
        title = t.find("title")
        out.append((title.tail if title is not None else t.text) or "")
    return out


def test_ttft_chart_lines_per_arm_and_percentile() -> None:
    chart = ttft_chart({"sweep": SWEEP})
    root = _parse(chart.svg)
    assert len(root.findall("polyline")) == 4  # baseline/candidate x p50/p99
    assert len(root.findall("circle")) == 12
    texts = _texts(root)
    assert "TTFT (ms)" in texts and "concurrency (requests in flight)" in texts
    assert {"1", "8", "16"} <= set(texts)  # x ticks sorted numerically, not as strings
    assert texts.index("1") < texts.index("8") < texts.index("16")
    assert any(t.endswith("candidate p99") for t in texts)
    assert chart.note == ""


def test_throughput_chart() -> None:
    chart = throughput_chart({"sweep": SWEEP})
    root = _parse(chart.svg)
    assert len(root.findall("polyline")) == 2
    assert "output tokens/s" in _texts(root)


def test_fio_chart_in_decimal_gigabytes() -> None:
    chart = fio_chart({"fio": FIO})
    root = _parse(chart.svg)
    assert len(root.findall("rect")) == 1 + 4  # background + 2 targets x read/write
    texts = _texts(root)
    assert "read 5.60" in texts and "write 1.80" in texts
    assert "GB/s (decimal: 10^9 bytes per second)" in texts
    assert "node-a / nvmeof-raid0" in texts


@pytest.mark.parametrize("measurements", [{}, {"sweep": {}}, {"sweep": "garbage"}, {"sweep": {"a": {}}},
                                          {"fio": {"n": {"t": {}}}}, {"sweep": None, "fio": []}])
def test_missing_data_skips_charts_with_a_sentence(measurements: dict[str, object]) -> None:
    for chart in (ttft_chart(measurements), throughput_chart(measurements), fio_chart(measurements)):
        assert chart.svg is None
        assert chart.note.startswith("No ") and "so there is no" in chart.note


def test_one_point_zero_nan_and_long_labels() -> None:
    long_arm = "candidate-nvmeof-raid0-with-a-very-long-name-that-goes-on-and-on"
    sweep = {long_arm: {"c4": {"ttft_p50_ms": 0.0, "ttft_p99_ms": float("nan"), "output_throughput": 0}},
             "nan-only": {"c4": {"ttft_p50_ms": float("inf"), "ttft_p99_ms": None}}}
    chart = ttft_chart({"sweep": sweep})
    root = _parse(chart.svg)
    assert len(root.findall("circle")) == 1 and root.findall("polyline") == []
    assert chart.dropped == 3 and "3 value(s) were missing" in chart.caption
    legend = [t for t in _texts(root) if t.startswith("candidate-")]
    assert legend == ["candidate-nvmeof-ra\u2026"]  # cut to fit beside the plot (20 characters)
    titles = ["".join(t.itertext()) for t in root.iter("title")]
    assert long_arm + " p50" in titles  # the full label stays available as a tooltip
    for el in root.iter():
        for v in el.attrib.values():
            assert "nan" not in v.lower() and "inf" not in v.lower()
    zero = throughput_chart({"sweep": sweep})
    _parse(zero.svg)
    fio = fio_chart({"fio": {"n" * 60: {"t": {"seq_read_bw": 0, "seq_write_bw": float("nan")}}}})
    _parse(fio.svg)
    assert fio.dropped == 1


def _threshold_marks(root: ET.Element) -> list[ET.Element]:
    return [ln for ln in root.iter("line") if ln.get("class") == "threshold"]


def test_one_forest_plot_for_every_interval_and_ratio_check() -> None:
    r = make_result()
    chart = gate_forest(r.checks)
    root = _parse(chart.svg)
    texts = _texts(root)
    # percent checks in one group, the ratio check in another, each on its own axis, said so
    assert "percent, linear scale" in texts and "ratio (x), linear scale" not in texts
    assert {"c1", "c8", "c16"} <= set(texts)
    assert "ttft_p50_reduction" in texts and "throughput_gain" in texts and "throughput_gain_plausible" in texts
    assert "read_bandwidth" not in texts  # a bandwidth point check has no interval: not on the plot
    assert texts.count("INCONCLUSIVE") == 1 and texts.count("FAIL") == 1 and texts.count("PASS") == 3
    assert "grouped by unit" in chart.caption and "own axis" in chart.caption
    # one threshold mark per drawn check, each spanning only its own rows
    marks = _threshold_marks(root)
    assert len(marks) == 3
    # the threshold sits between the c8 interval's ends (it straddles it)
    x_thr = float(marks[0].get("x1", "nan"))
    whiskers = [ln for ln in root.iter("line") if ln.get("stroke") == "#b35900" and ln.get("y1") == ln.get("y2")]
    assert len(whiskers) == 1
    assert float(whiskers[0].get("x1", "nan")) < x_thr < float(whiskers[0].get("x2", "nan"))
    ys = sorted((float(m.get("y1", "0")), float(m.get("y2", "0"))) for m in marks)
    assert all(a[1] <= b[0] for a, b in zip(ys, ys[1:])), "marks of different checks overlap"


def test_forest_plot_groups_units_and_logs_a_wide_ratio_range() -> None:
    r = make_result()
    speedup = r.checks[5]  # recompute_speedup: ratio, 1x threshold
    speedup.observations = [Observation(path="compare.recompute_speedup.c8", measured=15.0, verdict=Verdict.PASS),
                            Observation(path="compare.recompute_speedup.c16", measured=1.2, verdict=Verdict.PASS)]
    texts = _texts(_parse(gate_forest(r.checks).svg))
    assert "ratio (x), log scale" in texts and "percent, linear scale" in texts
    assert texts.index("percent, linear scale") < texts.index("ratio (x), log scale")


def test_forest_plot_without_values() -> None:
    r = make_result()
    for c in r.checks:
        for o in c.observations:
            o.measured = None
    chart = gate_forest(r.checks)
    assert chart.svg is None and "no forest plot" in chart.note
    check = r.checks[0]
    check.observations[1].measured = 0.3
    check.observations[1].interval = None
    chart = gate_forest(r.checks)
    _parse(chart.svg)
    assert ("Not drawn (no value): compare.ttft_p50_reduction.c1, compare.ttft_p50_reduction.c16"
            in chart.caption)


def test_gate_charts_have_no_per_check_plots() -> None:
    r = make_result()
    keys = [c.key for c in gate_charts(r.measurements, r.checks)]
    # fio's figures are the "fio bandwidth" table's: a bar per figure would print each number twice
    assert keys == ["ttft", "throughput", "ttft-throughput"] and r.measurements.get("fio")


@pytest.mark.parametrize("lo, hi", [(0, 1), (0, 0), (5, 5), (-3, 7), (0.001, 0.002), (0, 1234567), (10, 0)])
def test_nice_ticks_cover_range(lo: float, hi: float) -> None:
    ticks = nice_ticks(lo, hi)
    assert 2 <= len(ticks) <= 12
    assert ticks[0] <= min(lo, hi) and ticks[-1] >= max(lo, hi)
    assert all(b > a for a, b in zip(ticks, ticks[1:]))
    assert nice_ticks(math.nan, 1) == [0.0, 1.0]


def test_concurrency_keys() -> None:
    assert [concurrency_of(k) for k in ("c8", "16", 4, "C2", "x", "c")] == [8, 16, 4, 2, None, None]


def _text_extent(t: ET.Element) -> tuple[float, float]:
    """Estimated [left, right] of a <text>, with the width rule the charts use."""
    from harness.report.charts import _text_width

    title = t.find("title")
    body = (title.tail if title is not None else t.text) or ""
    x, w = float(t.get("x", "0")), _text_width(body, int(t.get("font-size", "11")))
    anchor = t.get("text-anchor", "start")
    return (x - w, x) if anchor == "end" else (x - w / 2, x + w / 2) if anchor == "middle" else (x, x + w)


def test_bar_labels_stay_inside_the_chart() -> None:
    """The defect seen: "write 4.9" cut at the right edge when a bar reaches the axis end."""
    fio = {"node-a": {"t": {"seq_read_bw": 4.9e9, "seq_write_bw": 5.0e9}}}
    root = _parse(fio_chart({"fio": fio}).svg)
    width = float(root.get("viewBox", "").split()[2])
    labels = [t for t in root.iter("text") if (t.text or "").startswith(("read", "write"))]
    assert len(labels) == 2
    for t in labels:
        lo, hi = _text_extent(t)
        assert 0 <= lo and hi <= width, (t.text, lo, hi)


def test_non_negative_axes_start_at_zero() -> None:
    check = make_result().checks[0]  # reductions 21%..36%, threshold 25%
    for obs in check.observations:
        if obs.interval:
            obs.interval.low = 0.01
    root = _parse(gate_forest([check]).svg)
    texts = [t.text or "" for t in root.iter("text") if t.get("text-anchor") == "middle"]  # axis ticks
    ticks = [t for t in texts if t.endswith("%")]
    assert ticks and not any(t.startswith("-") for t in ticks)
    assert ticks[0] == "0%"
    for chart in (ttft_chart({"sweep": SWEEP}), throughput_chart({"sweep": SWEEP})):
        labels = [t.text or "" for t in _parse(chart.svg).iter("text")]
        assert not any(x.startswith("-") and x[1:2].isdigit() for x in labels)


def test_ttft_against_throughput_per_arm_with_intervals_both_ways() -> None:
    sweep = {"baseline": {"c8": {"ttft_p50_ci": [900.0, 850.0, 950.0], "ttft_p90_ci": [1500.0, 1400.0, 1600.0],
                                 "output_throughput_ci": [700.0, 680.0, 720.0]},
                          "c16": {"ttft_p50_ci": [2000.0, 1900.0, 2100.0], "ttft_p90_ci": [3000.0, 2800.0, 3200.0],
                                  "output_throughput_ci": [1000.0, 960.0, 1040.0]}},
             "candidate": {"c8": {"ttft_p50_ci": [600.0, 580.0, 620.0], "ttft_p90_ci": [900.0, 850.0, 950.0],
                                  "output_throughput_ci": [1000.0, 990.0, 1010.0]},
                           "c16": {"ttft_p50_ci": None, "output_throughput_ci": [1300.0, 1250.0, 1350.0]}}}
    chart = ttft_throughput_chart({"sweep": sweep})
    root = _parse(chart.svg)
    # baseline p50 and p90 have two points each (a line), the candidate's one point each (c16 has no
    # TTFT interval: dropped and counted, p50 and p90)
    assert len(root.findall("polyline")) == 2
    circles = root.findall("circle")
    assert len(circles) == 6 and chart.dropped == 2 and "2 value(s)" in chart.note + chart.caption
    assert len([ln for ln in root.findall("line") if ln.get("class") == "ci"]) == 12  # one vertical + one horizontal
    tips = [c.find("title").text or "" for c in circles]  # type: ignore[union-attr]
    assert "baseline p90 at c16: 3,000 ms [2,800, 3,200], 1,000 tok/s [960, 1,040]" in tips
    texts = _texts(root)
    assert "output tokens/s" in texts and "TTFT (ms)" in texts and any(t.endswith("candidate p90") for t in texts)
    empty = ttft_throughput_chart({"sweep": {"a": {"c1": {"ttft_p50_ms": 1.0}}}})
    assert empty.svg is None and "so there is no" in empty.note


def test_log_axis_reaches_every_value() -> None:
    """The defect seen: write_overhead 0.418x drawn at the 0.5x end of a log axis that began there."""
    r = make_result()
    speedup = r.checks[5]  # ratio, 1x threshold
    speedup.observations = [Observation(path="compare.recompute_speedup.c8", measured=0.418, verdict=Verdict.FAIL),
                            Observation(path="compare.recompute_speedup.c16", measured=8.56, verdict=Verdict.PASS)]
    root = _parse(gate_forest(r.checks).svg)
    ticks = {t.text: float(t.get("x", "nan")) for t in root.iter("text") if (t.text or "").endswith("x")
             and t.get("text-anchor") == "middle"}
    assert "0.2x" in ticks and "0.5x" in ticks and "10x" in ticks, ticks
    rects = [rc for rc in root.iter("rect") if rc.find("title") is not None
             and "recompute_speedup" in (rc.find("title").text or "")]  # type: ignore[union-attr]
    xs = sorted(float(rc.get("x", "nan")) + 4 for rc in rects)
    assert len(xs) == 2
    assert ticks["0.2x"] < xs[0] < ticks["0.5x"]  # 0.418x between its ticks, not on the axis end
    assert ticks["5x"] < xs[1] < ticks["10x"]


# check ids as long as a gate file may write them, and observation labels of a long arm name
LONG_IDS = ("throughput_drift_per_instance_after_the_warm_up", "candidate_offload_hit_share_vs_expected_every_point")


def long_names_result() -> GateResult:
    """make_result with two long check ids, one with long observation labels and long values."""
    r = make_result()
    r.checks[0].id = LONG_IDS[0]
    r.checks[1].id = LONG_IDS[1]
    for o in r.checks[0].observations:
        o.path = o.path.replace("ttft_p50_reduction.", "ttft_p50_reduction.candidate-nvmeof-raid0-remote-")
    return r


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_forest_labels_whole_and_inside_the_plot(lang: str) -> None:
    """No forest-plot label is cut (the defect: ids over ~28 characters ended in an ellipsis) and
    every text, estimated generously (bold ids 10% wider), lies inside the viewBox."""
    r = long_names_result()
    with language(lang):
        root = _parse(gate_forest(r.checks).svg)
    width = float(root.get("viewBox", "").split()[2])
    texts = _texts(root)
    assert not [t for t in texts if "\u2026" in t]
    assert set(LONG_IDS) <= set(texts)
    assert {"candidate-nvmeof-raid0-remote-c8", "candidate-nvmeof-raid0-remote-c16"} <= set(texts)
    for t in root.iter("text"):
        lo, hi = _text_extent(t)
        if t.get("font-weight") == "600":
            hi = lo + (hi - lo) * 1.1
        assert 0 <= lo and hi <= width, (_texts(t)[0], lo, hi, width)
