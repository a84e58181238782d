"""Minimum repetitions and achieved power, beside the checks: every interval observation's
repetitions, minimum, achieved power and repetitions for 80% power, read from result.json."""

from __future__ import annotations

import re
from pathlib import Path

from harness.report import render_gate_reports

from .conftest import make_result, write_gate


def _table(html: str) -> list[list[str]]:
    block = html[html.index('<table id="power">'):]
    block = block[:block.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", block, re.S)
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)]
            for r in rows]


def test_power_table_lists_every_interval_observation_beside_the_checks(tmp_path: Path) -> None:
    result = make_result()
    ttft = next(c for c in result.checks if c.id == "ttft_p50_reduction")
    assert ttft.statistic == "interval"
    for o, (power, reps) in zip(ttft.observations, [(0.93, 6), (0.41, 37), (None, None)]):
        o.n_samples, o.min_samples, o.power, o.power_repetitions = 10, 5, power, reps
    gate = write_gate(tmp_path / "camp-1" / "G3", result)
    render_gate_reports(gate)
    html = (gate / "report.html").read_text(encoding="utf-8")
    assert html.index('class="details"') < html.index('id="checks"') < html.index('id="power"')  # after page one
    rows = _table(html)
    assert rows[0] == ["Check", "Observation", "Repetitions", "Minimum", "Achieved power", "Repetitions for 80% power"]
    body = rows[1:]
    assert [r[1] for r in body] == [o.path for o in ttft.observations]
    assert body[0][2:] == ["10", "5", "93%", "6"]
    assert body[1][2:] == ["10", "5", "41%", "37"]
    assert body[2][2:] == ["10", "5", "-", "-"]
    assert all(r[0] == "ttft_p50_reduction" for r in body)  # point checks have no row
    assert "z_0.8" in html[html.index('id="power-note"'):]


def test_no_power_table_when_no_interval_observation_carries_it(tmp_path: Path) -> None:
    gate = write_gate(tmp_path / "camp-1" / "G3", make_result())  # hand-built: no power recorded
    render_gate_reports(gate)
    assert 'id="power"' not in (gate / "report.html").read_text(encoding="utf-8")


def test_power_table_in_chinese(tmp_path: Path) -> None:
    result = make_result()
    ttft = next(c for c in result.checks if c.id == "ttft_p50_reduction")
    ttft.observations[0].power, ttft.observations[0].min_samples = 0.5, 5
    gate = write_gate(tmp_path / "camp-1" / "G3", result)
    html = render_gate_reports(gate, lang="zh")[1].read_text(encoding="utf-8")
    assert "重复次数与实际检验功效" in html and "达到 80% 功效所需重复次数" in html and "50%" in html


def test_power_says_in_one_sentence_what_it_means(tmp_path: Path) -> None:
    """Beside the table and on page one: an INCONCLUSIVE is a check the repetitions run did not
    decide, and the table's last column is what would decide it 8 times in 10."""
    result = make_result()
    ttft = next(c for c in result.checks if c.id == "ttft_p50_reduction")
    ttft.observations[1].n_samples, ttft.observations[1].power, ttft.observations[1].power_repetitions = 40, 0.41, 160
    gate = write_gate(tmp_path / "camp-1" / "G3", result)
    render_gate_reports(gate)
    html = (gate / "report.html").read_text(encoding="utf-8")
    note = re.sub(r"<[^>]+>", "", html[html.index('id="power-note"'):].split("</p>")[0])
    first = note[note.index(">") + 1:note.index(" How:")]
    assert first.count(". ") == 0 and first.endswith("would decide it 8 times in 10.")
    assert "an INCONCLUSIVE check is one they did not decide" in first
    why = html[html.index('id="verdict-why"'):].split("</span>")[0]
    assert "ttft_p50_reduction is INCONCLUSIVE" in why
    assert "could not tell PASS from FAIL; the power table after the checks gives the repetitions" in why
    md = (gate / "report.md").read_text(encoding="utf-8")
    assert first in md
