"""A target's provisioned rate is on page one, beside the verdict (HTML and Markdown), and under the
gate's title in the terminal: whoever reads the figures sees that the rate is the declared cap."""

from __future__ import annotations

from pathlib import Path

from harness.cli.outcome import provisioned_lines
from harness.report import render_gate_reports

from .conftest import make_result, write_gate

LABEL = "fast-disk: reads provisioned at 150 MB/s by blk-throttle"
ROWS = [{"node": "local", "target": "fast-disk", "label": LABEL, "enforce": "blk-throttle",
         "read_bps": 150e6, "write_bps": None}]


def test_the_label_is_on_page_one_before_the_checks_and_in_the_terminal(tmp_path: Path) -> None:
    result = make_result(with_data=False)
    result.measurements["provisioned"] = ROWS
    gate = write_gate(tmp_path / "camp" / "G1", result)
    render_gate_reports(gate)
    html = (gate / "report.html").read_text(encoding="utf-8")
    at = html.index('id="provisioned-local-fast-disk"')
    assert at < html.index('id="checks"')
    assert LABEL in html[at:html.index("</p>", at)]
    assert f"> {LABEL}" in (gate / "report.md").read_text(encoding="utf-8")
    assert provisioned_lines(result) == [LABEL]


def test_no_label_without_a_declared_rate(tmp_path: Path) -> None:
    result = make_result(with_data=False)
    gate = write_gate(tmp_path / "camp" / "G1", result)
    render_gate_reports(gate)
    assert "provisioned" not in (gate / "report.html").read_text(encoding="utf-8")
    assert provisioned_lines(result) == []
