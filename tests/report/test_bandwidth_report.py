"""The bandwidth sweep in a gate report (issue 54 item 4): one chart (TTFT p50 with intervals
against the provisioned rate, the baseline and the G3 threshold as lines, the estimator's curve)
and one table (rate, measured fio, TTFT p50 [interval], throughput, each blocker's verdict, the
estimator's error), in en and zh, from result.json alone; the report signs and verifies like any
gate report. The fixture curve is the estimator's own at a read efficiency of 0.6 (the sweep that
writes real ones is built beside this)."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import pytest

from harness.report import render_gate_reports
from harness.report.bandwidthchart import bandwidth_charts
from harness.report.bandwidthtable import bandwidth_section
from harness.report.i18n import language
from harness.report.sign import sign, verify
from harness.report.signer import signer_id
from harness.report.trust import read_allowed_signers
from tests.support.bandwidthcurve import bandwidth_result, report_curve

from .budget import write_gate_dir


def test_no_curve_no_chart_and_no_section() -> None:
    assert bandwidth_charts({"sweep": {}}) == []
    assert bandwidth_section({}) is None
    assert bandwidth_section({"bandwidth_curve": {"points": "not a list"}}) is None


def test_chart_draws_every_measured_point_the_lines_and_the_estimator() -> None:
    curve = report_curve()
    (chart,) = bandwidth_charts({"bandwidth_curve": curve})
    assert chart.svg is not None
    drawn = re.findall(r'class="bw-point" data-bps="(\d+)" data-verdict="(\w+)"', chart.svg)
    # the errored 30 MB/s point is not drawn (the table shows it), the five measured ones are
    assert [(int(b), v) for b, v in drawn] == [(37500000, "FAIL"), (52500000, "FAIL"), (75000000, "FAIL"),
                                               (112500000, "PASS"), (150000000, "PASS")]
    assert chart.svg.count('class="bw-interval"') == 5
    assert re.search(r'class="bw-baseline" data-ms="420\.000"', chart.svg)
    assert re.search(r'class="bw-threshold" data-ms="315\.000"', chart.svg)  # 25% below the baseline
    assert chart.svg.count('class="bw-estimator"') == 2  # calibrated and uncalibrated
    assert "1 point(s) with an error or no TTFT are in the table only." in chart.caption


def test_a_tier_of_gigabytes_per_second_is_drawn_in_gb_per_second() -> None:
    curve = report_curve()
    for p in curve["points"]:
        p["provisioned_read_bps"] *= 40  # 6 GB/s down to 1.5 GB/s
    with language("en"):
        (chart,) = bandwidth_charts({"bandwidth_curve": curve})
    assert chart.svg is not None and "provisioned read bandwidth (GB/s)" in chart.svg
    assert "provisioned read bandwidth (MB/s)" not in chart.svg
    assert ">6</text>" in chart.svg  # the last tick, in GB/s
    xs = [float(x) for x in re.findall(r'class="bw-point" data-bps="\d+" data-verdict="\w+" cx="([\d.]+)"', chart.svg)]
    assert len(xs) == 5 and max(xs) == pytest.approx(72 + (720 - 72 - 190), abs=0.2)  # 6 GB/s at the right edge


def test_an_inconclusive_point_is_drawn_and_listed_as_such() -> None:
    """Wrong-PASS scenario for the report: an INCONCLUSIVE point between the passes and the fails is
    never shown as a PASS, in the chart or the table."""
    curve = report_curve()
    curve["points"][2]["verdicts"]["ttft_p50_reduction"] = "INCONCLUSIVE"
    (chart,) = bandwidth_charts({"bandwidth_curve": curve})
    assert chart.svg is not None and 'data-bps="75000000" data-verdict="INCONCLUSIVE"' in chart.svg
    with language("en"):
        section = bandwidth_section({"bandwidth_curve": curve})
    assert section is not None
    assert section.rows[2]["ttft_p50_reduction"] == "INCONCLUSIVE"
    curve["points"][2]["verdicts"]["ttft_p50_reduction"] = "MAYBE"  # not a verdict: never shown as one
    with language("en"):
        section = bandwidth_section({"bandwidth_curve": curve})
    assert section is not None and section.rows[2]["ttft_p50_reduction"] == "NOT_RUN"


def test_no_measured_point_is_a_sentence_not_a_chart() -> None:
    curve = report_curve()
    curve["points"] = [p for p in curve["points"] if p["error"]]
    (chart,) = bandwidth_charts({"bandwidth_curve": curve})
    assert chart.svg is None and "No point of the bandwidth sweep has a measured TTFT p50." in chart.note


def test_estimator_sentences_say_what_the_calibration_found() -> None:
    curve = report_curve()
    with language("en"):
        section = bandwidth_section({"bandwidth_curve": curve})
        assert section is not None
        first = section.estimator[0]
        assert re.match(r"Estimator: read efficiency 0\.(59|60)\d fitted on 5 point\(s\)", first)
        assert re.search(r"worst error 4[0-9]\.\d% uncalibrated, [0-9]\.\d% calibrated", section.estimator[0])
        flat = copy.deepcopy(curve)
        for p in flat["estimator"]["points"][:2]:
            p["calibrated_rel_error"], p["storage_bound"] = 0.3, False
        lines = " ".join(bandwidth_section({"bandwidth_curve": flat}).estimator)  # type: ignore[union-attr]
        assert "Beyond the goal at: 150 MB/s, 112.5 MB/s." in lines and "Not bound by the read rate" in lines
        cached = copy.deepcopy(curve)
        cached["estimator"]["value"] = 2.4
        assert "is not plausible" in " ".join(bandwidth_section({"bandwidth_curve": cached}).estimator)  # type: ignore[union-attr]
        curve["estimator"] = None
        assert bandwidth_section({"bandwidth_curve": curve}).estimator == [  # type: ignore[union-attr]
            "The estimator was not held to this curve (no calibration recorded)."]


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = write_gate_dir(tmp_path_factory.mktemp("bw") / "camp" / "G3", bandwidth_result(), reps=1)
    for lang in ("en", "zh"):
        render_gate_reports(d, lang)
    return d


def test_section_renders_in_english(gate: Path) -> None:
    html = (gate / "report.html").read_text(encoding="utf-8")
    assert 'id="chart-bandwidth-ttft"' in html and 'id="bandwidth"' in html
    table = html.split('<table class="bandwidth-points">')[1].split("</table>")[0]
    assert table.count("<tr>") == 7  # the header and six rates, the errored one included
    assert "<td class=\"num\">112.5 MB/s (75%)</td><td class=\"num\">111.4 MB/s</td>" in table
    assert "the least provisioned bandwidth that passed is 112.5 MB/s, the highest that did not is 75 MB/s" in html
    assert "the kernel did not deliver the rate" in html
    md = (gate / "report.md").read_text(encoding="utf-8")
    assert "## Storage bandwidth sweep" in md
    assert re.search(r"^\| 150 MB/s \(100%\) \| 148\.5 MB/s \| 166\.7 \[158\.4, 175\.1\] \| .* \| PASS \| PASS \| "
                     r"16\d\.\d \| [+-]\d\.\d% \|$", md, re.M)
    assert "measurements: bandwidth_curve" not in md.lower()  # its own section, not dotted rows


def test_section_renders_in_chinese(gate: Path) -> None:
    html = (gate / "report.zh.html").read_text(encoding="utf-8")
    assert "存储带宽扫描" in html and "TTFT p50 与预配读带宽的关系" in html and "预配读带宽（MB/s）" in html
    assert "Storage bandwidth sweep" not in html and "provisioned read bandwidth" not in html
    assert "通过的最低预配带宽为 112.5 MB/s" in html and re.search(r"估算器：读效率 0\.(59|60)\d", html)
    md = (gate / "report.zh.md").read_text(encoding="utf-8")
    assert "## 存储带宽扫描" in md and "| 预配速率 | 实测 fio |" in md


def test_the_report_signs_and_verifies_like_any_gate_report(gate: Path, tmp_path: Path) -> None:
    keys = {}
    for role in ("vendor", "customer"):
        keys[role] = tmp_path / role
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", role, "-f", str(keys[role])],  # noqa: S603
                       check=True, capture_output=True, timeout=60)
    sign(gate, keys["vendor"], "Jane Doe", "vendor")
    sign(gate, keys["customer"], "张伟", "customer")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text("".join(
        f"{signer_id(name)}@{role} {' '.join(Path(str(keys[role]) + '.pub').read_text().split()[:2])}\n"
        for role, name in (("vendor", "Jane Doe"), ("customer", "张伟"))), encoding="utf-8")
    report = verify(gate, anchors=read_allowed_signers(allowed))
    assert report.ok and report.status == "VERIFIED", report.lines()
    manifest = (gate / "MANIFEST.sha256").read_text(encoding="utf-8")
    assert "report.html" in manifest and "report.zh.html" in manifest and "result.json" in manifest


def test_a_curve_stepped_by_the_throttle_slice_says_so_in_both_languages() -> None:
    curve = report_curve()
    curve["throttle_quantization"] = {"points": 5, "of": 5, "slices_range": [0.6, 2.2], "slice_s": 0.1,
                                      "min_slices": 10.0, "text": "..."}
    with language("en"):
        en = bandwidth_section({"bandwidth_curve": curve})
    with language("zh"):
        zh = bandwidth_section({"bandwidth_curve": curve})
    assert en is not None and zh is not None
    assert any("spans 0.6-2.2 of blk-throttle's 100 ms slices" in b for b in en.brackets)
    assert any("0.6-2.2 个 100 ms" in b and "时间片" in b for b in zh.brackets)
    del curve["throttle_quantization"]
    with language("en"):
        plain = bandwidth_section({"bandwidth_curve": curve})
    assert plain is not None and not any("blk-throttle" in b for b in plain.brackets)
