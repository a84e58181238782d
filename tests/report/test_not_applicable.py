"""A NOT_APPLICABLE check is shown with its reason, is never listed as a blocker not passed, and
is a skipped testcase in JUnit."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from harness.report import render_gate_reports
from harness.store.schema import CheckResult, GateResult, Observation, Verdict


def test_not_applicable_blocker(tmp_path: Path) -> None:
    na = CheckResult(id="accelerators", description="Accelerators match", metric="nodes.*.accelerators.match",
                     comparator="is_true", severity="blocker", statistic="point", unit_kind="bool",
                     verdict=Verdict.NOT_APPLICABLE, reason="the inventory expects no accelerators on any node",
                     observations=[Observation(path="nodes.*.accelerators.match", verdict=Verdict.NOT_APPLICABLE,
                                               reason="the inventory expects no accelerators on any node")])
    ok = CheckResult(id="nodes_reachable", description="Reachable", metric="nodes.*.reachable",
                     comparator="is_true", severity="blocker", statistic="point", unit_kind="bool",
                     verdict=Verdict.PASS,
                     observations=[Observation(path="nodes.a.reachable", measured=1.0, verdict=Verdict.PASS)])
    result = GateResult(gate="G1", title="Arrival acceptance", campaign="c", verdict=Verdict.PASS, exit_code=0,
                        started_at="2026-11-29T10:00:00Z", finished_at="2026-11-29T10:01:00Z",
                        kvgate_version="0.1.0", checks=[ok, na])
    gate_dir = tmp_path / "G1"
    gate_dir.mkdir()
    (gate_dir / "result.json").write_text(result.model_dump_json())
    render_gate_reports(gate_dir)
    html = (gate_dir / "report.html").read_text()
    assert "Blocker checks not passed" not in html
    assert "the inventory expects no accelerators on any node" in html
    md = (gate_dir / "report.md").read_text()
    assert "NOT_APPLICABLE" in md and "Blocker checks not passed" not in md
    cases = {c.get("name"): c for c in ET.parse(gate_dir / "junit.xml").getroot().iter("testcase")}
    na_case = next(c for name, c in cases.items() if name and name.startswith("accelerators"))
    assert na_case.find("skipped") is not None and na_case.find("failure") is None
