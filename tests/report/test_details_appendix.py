"""Reason cells are sentences a signer reads (issue 53 item 2): the rounds, paths, tunables and tool
settings a pipeline records in a reason go to the appendix "Details of the checks", one row per
clause, linked from the cell; nothing is lost on the way (every recorded clause is in the cell or
in the appendix), in en and zh; a check's own reason (built from its observations) loses them too."""

from __future__ import annotations

import html as H
import re

import pytest

from harness.report.details import split_text
from harness.report.phrases import clauses
from harness.report.render import render_gate_html
from harness.store.schema import GateResult, Verdict

from .budget import demo_result

FIO_PATH = "/var/tmp/kvgate/tiers/fast-disk"
TUNED = ("fio seq-read read on local/fast-disk, engine io_uring, O_DIRECT, fio-3.33; median of the last 25 of 25 "
         "rounds of 2 s (1.00 GB/s, 1.10 GB/s); steady state NOT reached (range 31% > 20%); engine environment "
         "glibc.malloc.hugetlb=1; backing /var/tmp/kvgate/tiers/fast-disk/c (ext4) -> vda (disk); errors 0")


def _text(fragment: str) -> str:
    return H.unescape(re.sub(r"<[^>]+>", " ", fragment))


def _cell_and_appendix(html: str, check: str) -> tuple[str, str, str]:
    obs = html[html.index(f'id="obs-{check}"'):]
    obs = obs[:obs.index('class="o-head"')]
    appendix = html[html.index('id="details-table"'):]
    appendix = appendix[:appendix.index("</table>")]
    row = html[html.index(f'<tr id="check-{check}"'):]
    return obs, appendix, row[:row.index("</tr>")]


def _inconclusive(result: GateResult) -> GateResult:
    check = next(c for c in result.checks if c.id == "read_bandwidth")
    o = check.observations[0]
    o.reason, o.reason_msgs, o.verdict = TUNED, [], Verdict.INCONCLUSIVE
    check.verdict, check.reason = Verdict.INCONCLUSIVE, f"{o.path}: {TUNED}"
    return result


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_rounds_paths_and_tunables_leave_the_reason_cell_for_the_appendix(lang: str) -> None:
    html = render_gate_html(demo_result(), lang=lang)
    obs, appendix, _ = _cell_and_appendix(html, "read_bandwidth")
    cell = _text(obs)
    for detail in (FIO_PATH, "963.18 MB/s", "O_DIRECT", "io_uring", "precondition.json", "Dirty+Writeback"):
        assert detail not in cell, detail
        assert detail in _text(appendix), detail
    assert 'href="#details-read_bandwidth"' in obs and 'id="details-read_bandwidth"' in appendix
    assert ("steady state reached" if lang == "en" else "稳态") in cell  # what decided stays in the cell
    assert "fast-disk" in cell  # the target named in the cache sentence is not a path


def test_nothing_is_lost_and_the_checks_table_and_page_one_say_it_without_details() -> None:
    recorded = clauses(TUNED)
    kept, details = split_text(TUNED)
    assert sorted(clauses(kept) + details) == sorted(recorded)
    assert kept == "steady state NOT reached (range 31% > 20%); errors 0"
    html = render_gate_html(_inconclusive(demo_result()))
    obs, appendix, row = _cell_and_appendix(html, "read_bandwidth")
    for text in (obs, row, html[html.index('id="verdict-why"'):html.index("</span>", html.index('id="verdict-why"'))]):
        said = _text(text)
        assert "steady state NOT reached" in said
        assert "glibc.malloc.hugetlb=1" not in said and "rounds" not in said and "/var/tmp" not in said
    assert _text(obs).count("steady state NOT reached") == 1
    for detail in details:
        assert detail in _text(appendix), detail


def test_the_markdown_report_moves_them_too(tmp_path: object) -> None:
    from pathlib import Path

    from harness.report import render_gate_reports

    from .budget import write_gate_dir

    gate = write_gate_dir(Path(str(tmp_path)) / "G3", demo_result())
    md = render_gate_reports(gate)[2].read_text(encoding="utf-8")
    observations, appendix = md.split("## Appendix: details of the checks")
    row = next(line for line in observations.splitlines() if line.startswith("| `candidate.fio.seq_read_bw`"))
    assert FIO_PATH not in row and "(details in the appendix)" in row and "steady state reached" in row
    assert FIO_PATH in appendix and "963.18 MB/s" in appendix
