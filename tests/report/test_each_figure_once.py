"""Each figure once (issue 53 item 2): a blocker's measured value and interval are printed on page
one's headline, where they decide, and the checks and observations tables refer to it; an
interval the measured text already states is not printed again beside it. Checked on the demo's
G3 as it recorded itself and grown to 3 arms x 3 concurrencies, in en and zh."""

from __future__ import annotations

import re

import pytest

from harness.report.i18n import language
from harness.report.render import render_gate_html
from harness.report.view import check_row
from harness.store.schema import GateResult, Verdict

from .budget import demo_result, grown_result

REFERENCE = {"en": "on page one (headline)", "zh": "见第一页（要点）"}


def _section(html: str, start: str, end: str) -> str:
    return html[html.index(start):html.index(end, html.index(start))]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("make", [demo_result, grown_result], ids=["demo", "3x3"])
def test_a_blocker_figure_is_printed_once_on_page_one(make: object, lang: str) -> None:
    result: GateResult = make()  # type: ignore[operator]
    html = render_gate_html(result, lang=lang)
    blockers = [c for c in result.checks if c.severity == "blocker" and c.verdict is not Verdict.NOT_APPLICABLE]
    assert len(blockers) >= 10
    observations = _section(html, 'id="observations-table"', "</table>")
    for check in blockers:
        with language(lang):
            row = check_row(check)
        for o in row.observations:  # every observation's figure is on page one, and only there
            text = re.sub(r"&gt;", ">", re.sub(r"&#39;", "'", html))
            headline = _section(text, 'id="headline-table"', "</table>")
            assert o.measured in headline and text.count(o.measured) == headline.count(o.measured), \
                (check.id, o.measured)
        block = observations[observations.index(f'id="obs-{check.id}"'):]
        block = block[:block.index('class="o-head"')] if 'class="o-head"' in block else block
        assert block.count(REFERENCE[lang]) == len(check.observations), check.id
    checks = _section(html, '<table id="checks">', "</table>")
    assert checks.count(REFERENCE[lang]) == len(blockers)


def test_an_interval_stated_in_the_measured_text_is_not_repeated() -> None:
    html = render_gate_html(demo_result())
    observations = _section(html, 'id="observations-table"', "</table>")
    advisory = observations[observations.index('id="obs-throughput_gain_per_point"'):]
    advisory = advisory[:advisory.index('class="o-head"')]
    assert advisory.count("[292.23%, 319.24%]") == 1  # in "126.5 -> 512.8 tok/s [292.23%, 319.24%] (95% CI, n=5)"


def test_a_metric_with_several_wildcards_is_labelled_by_what_they_matched() -> None:
    """G1's checks (``nodes.*.storage.*.fio.seq_read_bw``) name each observation by node and target
    on page one, not by its raw metric path (the full path stays on hover)."""
    from .budget import demo_early_result

    html = render_gate_html(demo_early_result("G1"))
    headline = _section(html, 'id="headline-table"', "</table>")
    assert "local/local-disk: " in headline and "local/fast-disk: " in headline
    assert "nodes.local.storage" not in headline
    assert 'title="nodes.local.storage.local-disk.fio.seq_read_bw"' in html
