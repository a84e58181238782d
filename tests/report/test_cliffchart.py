"""The capacity-cliff charts: every sized tier boundary marked where its bytes fall, one hit-rate
chart per arm and one TTFT chart, nothing drawn from nothing, bad values left out."""

from __future__ import annotations

import math
import re

from harness.report.cliffchart import cliff_charts, fmt_bytes
from harness.report.render import render_gate_reports

from .cliffdata import BPT, cliff_measurements
from .conftest import make_result, write_gate


def test_boundaries_are_marked_at_the_tier_sizes() -> None:
    charts = cliff_charts(cliff_measurements())
    assert [c.key for c in charts] == ["cliff-hits-0", "cliff-hits-1", "cliff-ttft"]
    svg = charts[0].svg or ""
    marks = dict(re.findall(r'data-tier="([a-z_]+)" data-bytes="(\d+)"', svg))
    assert marks == {"hbm": str(2048 * BPT), "local_cpu": str(6144 * BPT), "local_disk": str(16640 * BPT)}
    assert "CPU full (12 MiB)" in svg and "disk full (32 MiB)" in svg
    # the boundary sits between the points on either side of it (log2 x axis)
    xs = {int(b): float(x) for b, x in re.findall(r'data-bytes="(\d+)" x1="([\d.]+)"', svg)}
    cx = sorted(float(x) for x in re.findall(r'<circle cx="([\d.]+)"', svg))
    assert cx[0] < xs[2048 * BPT] < xs[6144 * BPT] < xs[16640 * BPT] < cx[-1]
    # the no-offload arm has only its HBM boundary; the TTFT chart marks every arm's, named
    assert re.findall(r'data-tier="([a-z_]+)"', charts[1].svg or "") == ["hbm"]
    assert "cpu-disk: disk full" in (charts[2].svg or "") and "hbm-only: HBM full" in (charts[2].svg or "")


def test_nothing_to_draw_gives_no_chart_and_bad_values_are_left_out() -> None:
    assert cliff_charts({}) == [] and cliff_charts({"cliff": {"arms": "x"}}) == []
    m = cliff_measurements()
    for p in m["cliff"]["arms"]["cpu-disk"]["points"]:
        p["ttft_p50_ms"] = math.nan
        p["rates"] = {}
        p["expected"]["hit_rate"] = None
    charts = cliff_charts({"cliff": {"arms": {"cpu-disk": m["cliff"]["arms"]["cpu-disk"]}}})
    assert charts[0].svg is None and charts[0].note
    assert charts[1].svg is None and charts[1].note
    assert fmt_bytes(3 * 2**20) == "3 MiB" and fmt_bytes(1.5 * 2**30) == "1.5 GiB" and fmt_bytes(100) == "100 B"


def test_cliff_and_tier_sections_render_from_result_json_alone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = make_result()
    result.measurements = cliff_measurements()
    gate = write_gate(tmp_path / "c" / "cliff", result)
    render_gate_reports(gate)
    html = (gate / "report.html").read_text()
    assert 'id="cliff"' in html and 'id="tier-hits-cpu-disk"' in html
    row = re.search(r"<tr><td class=\"num\">12</td>.*?</tr>", html)
    assert row and "98.5%" in row.group(0) and "49.2%" in row.group(0)  # expected and measured per point

    md = (gate / "report.md").read_text()
    assert "## Capacity cliff" in md and "| 12 | 12288 | 25165824 | 98.5% | 98.4% |" in md
    assert "## Hit rate per tier" in md and "| cpu-disk | 12 prefixes |" in md
