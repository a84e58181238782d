"""Accepted baseline mismatches (``--allow-baseline-mismatch``) are printed on page one of the gate
report, next to the verdict: whoever signs must see that the baseline's workload differed. The PDF
test renders a result without sweep data (a short document: layout is slow on two cores)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from harness.report import render_gate_reports
from harness.report.pdf import write_pdf

from .conftest import make_result, write_gate

ACCEPTED = [{"field": "workload.input_len", "baseline": 2048, "this_run": 256},
            {"field": "engine.version", "baseline": "0.10.2", "this_run": "0.11.0"}]


def _gate(root: Path, accepted: list[dict[str, object]], *, with_data: bool = True) -> Path:
    result = make_result(with_data=with_data)
    result.baseline = {"where": "camp-0", "digest": "ab" * 32, "accepted_mismatches": accepted}
    return write_gate(root / "camp-1" / "G3", result)


def test_accepted_mismatches_are_beside_the_verdict_before_the_checks(tmp_path: Path) -> None:
    gate = _gate(tmp_path, ACCEPTED)
    render_gate_reports(gate)
    html = (gate / "report.html").read_text(encoding="utf-8")
    notice = html.index('id="baseline-mismatches"')
    assert notice < html.index('id="checks"') < html.index('class="details"')  # beside the verdict
    block = html[notice:html.index("</p>", notice)]
    assert "accepted with --allow-baseline-mismatch" in block
    assert "workload.input_len: baseline 2048, this run 256" in block
    assert 'engine.version: baseline "0.10.2", this run "0.11.0"' in block


def test_no_notice_without_accepted_mismatches(tmp_path: Path) -> None:
    gate = _gate(tmp_path, [])
    render_gate_reports(gate)
    html = (gate / "report.html").read_text(encoding="utf-8")
    assert 'id="baseline-mismatches"' not in html
    assert "Baseline used" in html  # the baseline section itself is still shown


def test_notice_is_translated_in_the_zh_report(tmp_path: Path) -> None:
    gate = _gate(tmp_path, ACCEPTED[:1])
    html_path = render_gate_reports(gate, lang="zh")[1]
    html = html_path.read_text(encoding="utf-8")
    assert "已通过 --allow-baseline-mismatch 接受" in html
    assert "workload.input_len：基线 2048，本次运行 256" in html


def test_recorded_values_are_escaped(tmp_path: Path) -> None:
    gate = _gate(tmp_path, [{"field": "<i>f</i>", "baseline": "<script>x</script>", "this_run": 1}])
    render_gate_reports(gate)
    html = (gate / "report.html").read_text(encoding="utf-8")
    block = html[html.index('id="baseline-mismatches"'):]
    assert "<script>x" not in html and "<i>f" not in html
    assert "&lt;i&gt;f&lt;/i&gt;: baseline" in block


def test_accepted_mismatches_are_on_page_one_of_the_pdf(tmp_path: Path) -> None:
    gate = _gate(tmp_path, ACCEPTED, with_data=False)
    render_gate_reports(gate)
    pdf = write_pdf(gate)
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,  # noqa: S603, S607
                          timeout=120, check=True).stdout
    first = re.sub(r"\s+", " ", text.split("\f")[0])
    assert "FAIL" in first and "Exit code 1" in first
    assert "accepted with --allow-baseline-mismatch" in first
    assert "workload.input_len: baseline 2048, this run 256" in first
    assert 'engine.version: baseline "0.10.2", this run "0.11.0"' in first
