"""The nightly report section renders a regression (English and Chinese) without crashing."""

from __future__ import annotations

from pathlib import Path

from harness.report import render_gate_reports
from harness.store.campaign import GateDir
from harness.store.schema import GateResult, Verdict


def test_nightly_section_with_a_regression(tmp_path: Path) -> None:
    reg = {"metric": "candidate.c2.ttft_p50_ms", "status": "regression", "effect": 0.4, "effect_low": 0.2,
           "effect_high": 0.6, "p_value": 0.001, "current_median": 140.0, "window_median": 100.0, "window_runs": 10,
           "min_effect": 0.05, "last_good": {"id": 9, "campaign": "n9", "started_at": "t9", "git_commit": "aaa"},
           "first_bad": {"id": None, "campaign": "n10", "started_at": "t10", "git_commit": "bbb"},
           "what_changed": ["kvgate commit: aaa -> bbb"]}
    result = GateResult(gate="nightly", title="Nightly regression", campaign="n10", verdict=Verdict.FAIL, exit_code=1,
                        started_at="t10", finished_at="t10", kvgate_version="0.1.0",
                        measurements={"nightly": {"series": "s" * 64, "window": [{"id": 9}], "regressions": [reg],
                                                  "improvements": [dict(reg, metric="x", effect=-0.1)]}})
    d = tmp_path / "nightly"
    GateDir(d, "nightly").write_result(result)
    render_gate_reports(d)
    html = (d / "report.html").read_text()
    assert 'id="nightly-regressions"' in html and "+40.0%" in html and "kvgate commit: aaa -&gt; bbb" in html
    assert "95% interval" in html
    render_gate_reports(d, "zh")
    assert "95% 区间" in (d / "report.zh.html").read_text()
