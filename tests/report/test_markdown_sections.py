"""The Markdown report (``report.md``) says what the HTML says on its first page: the accepted
baseline mismatches next to the verdict and the "Repetitions and achieved power" table beside the
checks, both read from result.json alone, in English and Chinese."""

from __future__ import annotations

import re
from pathlib import Path

from harness.report import render_gate_reports
from harness.store.schema import GateResult

from .conftest import make_result, write_gate

ACCEPTED = [{"field": "workload.input_len", "baseline": 2048, "this_run": 256},
            {"field": "engine.version", "baseline": "0.10.2", "this_run": "0.11.0"}]
POWER = [(0.93, 6), (0.41, 37), (None, None)]


def _result(accepted: list[dict[str, object]] | None = None, *, power: bool = True) -> GateResult:
    result = make_result()
    if accepted is not None:
        result.baseline = {"where": "camp-0", "digest": "ab" * 32, "accepted_mismatches": accepted}
    if power:
        ttft = next(c for c in result.checks if c.id == "ttft_p50_reduction")
        for o, (p, reps) in zip(ttft.observations, POWER):
            o.n_samples, o.min_samples, o.power, o.power_repetitions = 10, 5, p, reps
    return result


def _render(tmp_path: Path, result: GateResult, lang: str = "en") -> tuple[str, str]:
    gate = write_gate(tmp_path / "camp-1" / "G3", result)
    _, html, md, _ = render_gate_reports(gate, lang=lang)
    return html.read_text(encoding="utf-8"), md.read_text(encoding="utf-8")


def _md_table_after(md: str, heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after ``heading`` (header row first)."""
    lines = md[md.index(heading):].splitlines()[1:]
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        if set(line) <= set("|-"):
            continue
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def _html_power(html: str) -> list[list[str]]:
    block = html[html.index('<table id="power">'):]
    block = block[:block.index("</table>")]
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)]
            for r in re.findall(r"<tr>(.*?)</tr>", block, re.S)]


def test_power_table_beside_the_checks_says_what_the_html_says(tmp_path: Path) -> None:
    html, md = _render(tmp_path, _result())
    heading = "### Repetitions and achieved power"
    assert md.index("## Checks") < md.index(heading) < md.index("## What was tested") < md.index("## Observations")
    rows = _md_table_after(md, heading)
    assert rows[0] == ["Check", "Observation", "Repetitions", "Minimum", "Achieved power", "Repetitions for 80% power"]
    assert rows[1:] == [
        ["`ttft_p50_reduction`", "`compare.ttft_p50_reduction.c1`", "10", "5", "93%", "6"],
        ["`ttft_p50_reduction`", "`compare.ttft_p50_reduction.c8`", "10", "5", "41%", "37"],
        ["`ttft_p50_reduction`", "`compare.ttft_p50_reduction.c16`", "10", "5", "-", "-"],
    ]
    assert [[c.strip("`") for c in r] for r in rows] == _html_power(html)  # one source of rows
    assert "z_0.8" in md[md.index(heading):md.index("## What was tested")]


def test_no_power_table_without_power_figures(tmp_path: Path) -> None:
    _, md = _render(tmp_path, _result(power=False))
    assert "Repetitions and achieved power" not in md


def test_power_table_in_chinese(tmp_path: Path) -> None:
    _, md = _render(tmp_path, _result(), lang="zh")
    rows = _md_table_after(md, "### 重复次数与实际检验功效")
    assert rows[0][-1] == "达到 80% 功效所需重复次数" and rows[0][-2] == "实际检验功效"
    assert rows[2][-2:] == ["41%", "37"]
    assert "Repetitions and achieved power" not in md


def test_accepted_mismatches_next_to_the_verdict(tmp_path: Path) -> None:
    _, md = _render(tmp_path, _result(ACCEPTED))
    notice = md.index("accepted with --allow-baseline-mismatch")
    assert md.index("**Verdict: FAIL**") < notice < md.index("## Checks")
    block = md[notice:md.index("## Checks")]
    assert "> - workload.input_len: baseline 2048, this run 256" in block
    assert '> - engine.version: baseline "0.10.2", this run "0.11.0"' in block


def test_no_mismatch_notice_without_accepted_mismatches(tmp_path: Path) -> None:
    _, md = _render(tmp_path, _result([]))
    assert "accepted with --allow-baseline-mismatch" not in md
    assert "| Baseline used | camp-0" in md  # the baseline section is still there


def test_mismatch_notice_in_chinese(tmp_path: Path) -> None:
    _, md = _render(tmp_path, _result(ACCEPTED[:1]), lang="zh")
    block = md[:md.index("## 检查结果")]
    assert "已通过 --allow-baseline-mismatch 接受" in block
    assert "> - workload.input_len：基线 2048，本次运行 256" in block


def test_recorded_values_cannot_break_the_markdown(tmp_path: Path) -> None:
    accepted = [{"field": "a|b<i>", "baseline": "x\n## Verdict: PASS", "this_run": "<script>y</script>"}]
    _, md = _render(tmp_path, _result(accepted))
    block = md[md.index("accepted with --allow-baseline-mismatch"):md.index("## Checks")]
    assert "a\\|b\\<i>" in block and "\\<script>" in block
    assert not re.search(r"(?<!\\)<(script|i)>", block)  # every tag-like text is escaped
    # a recorded newline cannot start a heading: the notice stays one list item
    assert [line for line in block.splitlines() if line.startswith("> - ")] == [
        '> - a\\|b\\<i>: baseline "x\\\\n## Verdict: PASS", this run "\\<script>y\\</script>"']


def test_what_was_tested_prints_what_page_one_prints(tmp_path: Path) -> None:
    """report.md's "What was tested" holds the facts of page one's system under test and workload
    (recorded versions, declared and measured hardware, the load), never a "not recorded" for what
    the result recorded."""
    from tests.report.budget import demo_result, write_gate_dir

    gate = write_gate_dir(tmp_path / "camp" / "G3", demo_result())
    for lang, not_recorded, heading in (("en", "not recorded", "## What was tested"),
                                        ("zh", "未记录", "## 测试对象")):
        _, html_path, md_path, _ = render_gate_reports(gate, lang=lang)
        md, html = md_path.read_text(encoding="utf-8"), html_path.read_text(encoding="utf-8")
        section = md[md.index(heading):]
        section = section[:section.index("\n## ", 1)]
        assert not_recorded not in section
        page_one = html[html.index('id="system-under-test"'):html.index('id="signoff"')]
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", page_one, re.S)]
        assert len(cells) > 20
        for cell in cells:  # every value page one shows is in the Markdown too
            assert cell.replace("|", "\\|") in section, cell
    assert "| CPU | AMD EPYC (measured) |" in md_path.with_name("report.md").read_text(encoding="utf-8")
