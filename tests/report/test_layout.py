"""No clipped or overlapping text in any printed report (issue 53 item 3): the demo's G1, G2, G3 and G4,
the demo's G3 with a bandwidth sweep's chart and table (issue 54),
the demo's G3 grown to 3 arms x 3 concurrencies, and the campaign page of the demo's G3 and G4, in
en and zh. Every word of every page (poppler's ``pdftotext -bbox`` on the real WeasyPrint PDF)
lies inside the page's margins, no two words are drawn over each other, and every 64-hex digest
the HTML shows is printed whole, as one word (not cut at the page edge, not broken across lines).
The gate PDFs are the page-budget tests' (rendered once per session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.report import render_campaign_report, render_gate_reports
from harness.report.pdf import pdf_name, write_pdf
from harness.report.sign import write_manifest
from tests.support.once import build_once, session_dir

from . import layout
from .budget import demo_g4_result, demo_result, write_gate_dir, write_soak_dir
from .test_page_budget import _Pdfs


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Pdfs]:
    yield _Pdfs(session_dir(tmp_path_factory, "page-budget"))  # the same PDFs as the page-budget tests


def _campaign(root: Path) -> None:
    camp = root / "demo-camp"
    gates = [write_gate_dir(camp / "G3", demo_result()), write_soak_dir(camp / "G4", demo_g4_result())]
    for gate in gates:
        for lang in ("en", "zh"):
            render_gate_reports(gate, lang)
        write_manifest(gate)  # the campaign page names each gate's manifest digest
    for lang in ("en", "zh"):
        render_campaign_report(camp, lang)
        write_pdf(camp, lang)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_once(session_dir(tmp_path_factory, "layout") / "campaign", _campaign) / "demo-camp"


def _pdf(name: str, lang: str, pdfs: _Pdfs, campaign: Path) -> Path:
    return campaign / pdf_name(lang) if name == "campaign" else pdfs[(name, lang)]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", ["G1-demo", "G2-demo", "demo", "3x3", "G4-demo", "bandwidth", "campaign"])
def test_no_text_clipped_or_overlapping(pdfs: _Pdfs, campaign: Path, name: str, lang: str) -> None:
    pdf = _pdf(name, lang, pdfs, campaign)
    pages = layout.pages(pdf)
    assert pages and all(p.words for p in pages)
    first = " ".join(w.text for w in pages[0].words)
    assert ("Sign-off" if lang == "en" else "签字确认") in first  # page one is the sheet the parties sign
    outside = [(w.page, w.text, round(w.x1), round(w.y1)) for p in pages for w in layout.outside_margins(p)]
    assert outside == [], outside[:10]
    overlapping = [(a.page, a.text, b.text, round(a.x1), round(a.y1)) for p in pages for a, b in layout.overlaps(p)]
    assert overlapping == [], overlapping[:10]
    html = (pdf.parent / pdf.name.replace(".pdf", ".html")).read_text(encoding="utf-8")
    assert layout.digests_not_whole(html, pages) == []
    if name in ("demo", "3x3"):  # fio's rounds, paths and settings: in the details appendix, after page one
        texts = [" ".join(w.text for w in p.words) for p in pages]
        heading = "details of the checks" if lang == "en" else "各检查的细节"
        start = next(i for i, t in enumerate(texts) if heading in t)
        assert start > 0 and "Dirty+Writeback" in " ".join(texts[start:])
        assert not any("Dirty+Writeback" in t for t in texts[:start])  # not in a reason cell before it
    if name == "campaign":  # the gates' manifest digests and the campaign manifest's are there to be found
        assert len(set(layout.HEX64.findall(html))) >= 3


def test_the_checks_catch_what_they_look_for() -> None:
    """Overlapping boxes, a word past the right margin and a digest broken in two are found."""
    words = [layout.Word(1, 50, 100, 120, 110, "NOT_APPLICABLE"), layout.Word(1, 110, 101, 200, 111, "reason"),
             layout.Word(1, 560, 200, 600, 210, "cut"), layout.Word(1, 50, 300, 90, 310, "a" * 32),
             layout.Word(1, 50, 312, 90, 322, "b" * 32)]
    page = layout.Page(1, 595.0, 842.0, words)
    assert [(a.text, b.text) for a, b in layout.overlaps(page)] == [("NOT_APPLICABLE", "reason")]
    assert [w.text for w in layout.outside_margins(page)] == ["cut"]
    assert layout.digests_not_whole("<code>" + "a" * 32 + "b" * 32 + "</code>", [page]) == ["a" * 32 + "b" * 32]
