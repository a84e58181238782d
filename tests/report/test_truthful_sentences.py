"""No sentence in a report states something the run did not do: G4's duration check says how
long the soak ran and how long it had to (the gate file's "ran for the full 72 hours" is a
requirement, never printed as a statement), in en and zh; the checks table heads the gate file's
sentences "Requirement"."""

from __future__ import annotations

from pathlib import Path

from harness.report import render_gate_reports

from .budget import demo_g4_result, write_soak_dir


def test_the_soak_duration_sentence_is_built_from_the_measured_and_required_durations(tmp_path: Path) -> None:
    result = demo_g4_result()
    duration = next(c for c in result.checks if c.id == "duration")
    assert duration.description == "The soak ran for the full 72 hours"  # as the gate file says it
    assert duration.observations[0].measured == 60.004 and duration.threshold_value == 60.0
    d = write_soak_dir(tmp_path / "G4", result)
    render_gate_reports(d, "en")
    render_gate_reports(d, "zh")
    en = (d / "report.html").read_text(encoding="utf-8")
    zh = (d / "report.zh.html").read_text(encoding="utf-8")
    assert "full 72 hours" not in en and "完整运行了 72 小时" not in zh
    assert "Soak duration: ran 1.00 min; 1.00 min required" in en
    assert "长稳测试时长：运行 1.00 min；要求 1.00 min" in zh
    assert "<th class=\"c-desc\">Requirement</th>" in en
    md = (d / "report.md").read_text(encoding="utf-8")
    assert "full 72 hours" not in md and "Soak duration: ran 1.00 min" in md


def test_a_soak_cut_short_says_so(tmp_path: Path) -> None:
    result = demo_g4_result()
    duration = next(c for c in result.checks if c.id == "duration")
    duration.threshold_value, duration.threshold = 72 * 3600.0, "72h"
    duration.observations[0].measured = 180.0
    d = write_soak_dir(tmp_path / "G4", result)
    render_gate_reports(d, "en")
    en = (d / "report.html").read_text(encoding="utf-8")
    assert "Soak duration: ran 3.00 min; 72.00 h required" in en
    duration.observations = []
    d = write_soak_dir(tmp_path / "G4b", result)
    render_gate_reports(d, "en")
    assert "72.00 h required; no duration was measured" in (d / "report.html").read_text(encoding="utf-8")
