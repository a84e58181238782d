"""Accepted baseline mismatches (``--allow-baseline-mismatch``) are printed on page one of the gate
report, next to the verdict: whoever signs must see that the baseline's workload differed. The PDF
test renders a result without sweep data (a short document: layout is slow on two cores)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from harness.report import render_gate_reports
from harness.report.pdf import write_pdf

from .conftest import make_result, write_gate

ACCEPTED = [{"field": "workload.input_len", "baseline": 2048, "this_run": 256},
            {"field": "engine.version", "baseline": "0.10.2", "this_run": "0.11.0"}]
# what the chain of custody could not pin (issue 27): a rehearsal's unsigned baseline, a swapped gate file
UNSIGNED = {"campaign": "camp-0", "gate": "G2", "manifest_sha256": "cd" * 32, "signers": [], "verified": False,
            "unsigned_baseline": True, "unverified_reason": "it carries no signature"}
NON_STOCK = {"gate": "G3", "path": "/tmp/mine/G3.yaml", "sha256": "ef" * 32, "stock": False,
             "stock_path": "/opt/kvgate/gates/G3.yaml", "stock_sha256": "01" * 32,
             "differences": [{"kind": "threshold_changed", "check": "ttft_p50_reduction",
                              "text": "ttft_p50_reduction: threshold 25% -> -100%"},
                             {"kind": "blocker_removed", "check": "output_identity",
                              "text": "output_identity: removed (it was a blocker)"}]}


def _gate(root: Path, accepted: list[dict[str, object]], *, with_data: bool = True) -> Path:
    result = make_result(with_data=with_data)
    result.baseline = {"where": "camp-0", "digest": "ab" * 32, "accepted_mismatches": accepted}
    return write_gate(root / "camp-1" / "G3", result)


def test_accepted_mismatches_are_beside_the_verdict_before_the_checks(tmp_path: Path) -> None:
    gate = _gate(tmp_path, ACCEPTED)
    render_gate_reports(gate)
    html = (gate / "report.html").read_text(encoding="utf-8")
    notice = html.index('id="baseline-mismatches"')
    # beside the verdict, before the headline; the checks table is after page one
    assert notice < html.index('id="headline"') < html.index('class="details"') < html.index('id="checks"')
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


@pytest.fixture(scope="module")
def first_pdf_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Page one's text of one real PDF (WeasyPrint, read with poppler's pdftotext) of a G3 that
    accepted mismatches, used an unsigned baseline and a non-stock gate file: rendered once, for
    every test that reads page one."""
    result = make_result(with_data=False)
    result.baseline = {"where": "camp-0", "digest": "ab" * 32, "accepted_mismatches": ACCEPTED, **UNSIGNED}
    result.gate_files = [NON_STOCK]
    gate = write_gate(tmp_path_factory.mktemp("pdf") / "camp-1" / "G3", result)
    render_gate_reports(gate)
    pdf = write_pdf(gate)
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,  # noqa: S603, S607
                          timeout=120, check=True).stdout
    return re.sub(r"\s+", " ", text.split("\f")[0])


def test_accepted_mismatches_are_on_page_one_of_the_pdf(first_pdf_page: str) -> None:
    first = first_pdf_page
    assert "FAIL" in first and "Exit code 1" in first
    assert "accepted with --allow-baseline-mismatch" in first
    assert "workload.input_len: baseline 2048, this run 256" in first
    assert 'engine.version: baseline "0.10.2", this run "0.11.0"' in first


def test_custody_flags_are_on_page_one_of_the_pdf(first_pdf_page: str) -> None:
    """The unsigned-baseline and non-stock-gate-file notices are in the printed report's text on
    page one, not only in the HTML: whoever signs the PDF must see them."""
    assert ("G3: unsigned baseline: the G2 baseline of campaign camp-0 was not verified (it carries no "
            "signature); it was used with --allow-unsigned-baseline") in re.sub(
                r"(\w)- (\w)", r"\1-\2", first_pdf_page)  # a line may break after any hyphen of the flag
    assert "G3: non-stock gate file /tmp/mine/G3.yaml (sha256 efefefefefefefef)" in first_pdf_page
    assert "ttft_p50_reduction: threshold 25% -> -100%" in first_pdf_page
    assert "output_identity: removed (it was a blocker)" in first_pdf_page
    assert "Sign-off" in first_pdf_page  # and the sign-off block is still on the same page
