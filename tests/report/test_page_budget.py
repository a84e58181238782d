"""The sign-off PDF is a document, not a printout: the demo's G3 fits in 8 pages and a G3 of 3 arms
x 3 concurrencies with its baseline in 12; the demo's G4 and a 72-hour soak of 864 windows each in 8
(the soak is a chart, a drift table and a table of periods, not a row per window, and a folder of
864 window files is one appendix row); all in English and in Chinese, and no page but a section's
last is less than a third full. Real WeasyPrint PDFs, read with poppler (pdfinfo, pdftotext);
each PDF is rendered once, when a test first needs it (layout is the slow part)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.report import render_gate_reports
from harness.report.pdf import pdf_name, write_pdf
from tests.support.bandwidthcurve import bandwidth_result
from tests.support.once import build_once, session_dir

from .budget import (
    demo_early_result,
    demo_g4_result,
    demo_result,
    grown_result,
    long_soak_result,
    write_gate_dir,
    write_soak_dir,
)
from .conftest import write_gate

BUDGET = {"demo": 8, "3x3": 12, "G4-demo": 8, "G4-72h": 8, "bandwidth": 8}
# headings that open a section on a new page: the page before each is a section's last page
SECTION_STARTS = {"en": ("Checks", "Nightly regression", "Appendix: evidence files"),
                  "zh": ("检查结果", "夜间回归", "附录：证据文件")}
MARGIN_PT = 40.0  # running header and page number (WeasyPrint's A4 margins are 11-12 mm)


def _run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout  # noqa: S603


_WRITERS = {"demo": lambda d: write_gate_dir(d / "G3", demo_result()),
            "3x3": lambda d: write_gate_dir(d / "G3", grown_result()),
            "G4-demo": lambda d: write_soak_dir(d / "G4", demo_g4_result()),
            "G4-72h": lambda d: write_soak_dir(d / "G4", long_soak_result()),
            # the demo's G3 with a bandwidth curve (issue 54): its chart and table on the printed page
            "bandwidth": lambda d: write_gate_dir(d / "G3", bandwidth_result()),
            "G1-demo": lambda d: write_gate(d / "G1", demo_early_result("G1")),
            "G2-demo": lambda d: write_gate(d / "G2", demo_early_result("G2"))}


class _Pdfs:
    """The PDFs by (gate, language), each rendered once per session when a test first asks for it,
    by whichever xdist worker asks first (the others wait for it: ``tests.support.once``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __getitem__(self, key: tuple[str, str]) -> Path:
        name, lang = key

        def render(d: Path) -> None:
            gate = _WRITERS[name](d)
            render_gate_reports(gate, lang)
            write_pdf(gate, lang)

        done = build_once(self.root / f"{name}-{lang}", render)
        (pdf,) = done.glob(f"*/{pdf_name(lang)}")
        return pdf


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Pdfs]:
    yield _Pdfs(session_dir(tmp_path_factory, "page-budget"))


def _pages(pdf: Path) -> int:
    return int(re.search(r"^Pages:\s+(\d+)", _run("pdfinfo", str(pdf)), re.M).group(1))  # type: ignore[union-attr]


def _fill(pdf: Path) -> list[float]:
    """Per page: how far down the body's lowest word reaches, as a share of the body's height
    (running header and page number left out)."""
    html = _run("pdftotext", "-bbox", str(pdf), "-")
    fills = []
    for page in re.findall(r"<page width=\"([\d.]+)\" height=\"([\d.]+)\">(.*?)</page>", html, re.S):
        height = float(page[1])
        ys = [float(y) for y in re.findall(r'yMax="([\d.]+)"', page[2])]
        body = [y for y in ys if MARGIN_PT < y < height - MARGIN_PT]
        fills.append((max(body) - MARGIN_PT) / (height - 2 * MARGIN_PT) if body else 0.0)
    return fills


def _section_last(pdf: Path, lang: str) -> set[int]:
    """0-based indexes of pages that end a section: the last page, and each page followed by a
    page that opens a section."""
    pages = _run("pdftotext", "-layout", str(pdf), "-").split("\f")[:-1]
    last = {len(pages) - 1}
    for i, text in enumerate(pages[1:], 1):
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) > 1 and any(h in lines[1] for h in SECTION_STARTS[lang]):  # first below the running header
            last.add(i - 1)
    return last


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", list(BUDGET))
def test_page_budget(pdfs: _Pdfs, name: str, lang: str) -> None:
    assert _pages(pdfs[(name, lang)]) <= BUDGET[name]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", list(BUDGET))
def test_no_page_but_a_sections_last_is_nearly_empty(pdfs: _Pdfs, name: str,
                                                     lang: str) -> None:
    pdf = pdfs[(name, lang)]
    fills = _fill(pdf)
    exempt = _section_last(pdf, lang)
    assert 0 in exempt and len(exempt) >= 2, exempt  # page one, the details, the appendix
    thin = [(i + 1, round(f, 2)) for i, f in enumerate(fills) if i not in exempt and f < 1 / 3]
    assert thin == [], f"pages less than a third full: {thin} of {len(fills)}"


def test_forest_plot_and_tables_are_on_the_page(pdfs: _Pdfs) -> None:
    text = _run("pdftotext", "-layout", str(pdfs[("3x3", "en")]), "-")
    assert "Checks: estimate and interval against each threshold" in text
    assert text.count("estimate and interval against the threshold") == 0  # no per-check plots
    assert "Appendix: evidence files" in text and "evidence/sweep/candidate-2/c16/rep5/measure/records.jsonl" in text
    # measurements read as tables, not as dotted JSON paths
    for path in ("baseline[0].point", "candidate[1].rates.offload", "recompute.cold_restore.offload_hit_tokens.c2"):
        assert path not in text
    assert re.search(r"candidate-2\s+16\s", text)  # a per arm x concurrency row


def test_soak_prints_as_a_document(pdfs: _Pdfs) -> None:
    """The 72-hour soak's PDF: its drift checks with their intervals, the time series, the faults
    and at most 12 rows of windows; the 864 window files are one appendix row."""
    text = _run("pdftotext", "-layout", str(pdfs[("G4-72h", "en")]), "-")
    assert "Drift checks" in text and re.search(r"ttft_drift\s+\+35\.5%.*\[26\.34%", text)
    assert "TTFT per soak window" in text and "time since the soak started (hours)" in text
    assert "nvme nvme0: I/O 417 QID 3 timeout" in text
    assert "The 864 windows in 12 periods" in text and re.search(r"^\s*793-864\s+259200\s", text, re.M)
    assert "w000500.jsonl.gz" not in text and "864 files: each digest in MANIFEST.sha256" in text


@pytest.mark.parametrize("name", ["3x3", "G4-72h"])
def test_no_word_runs_off_the_page(pdfs: _Pdfs, name: str) -> None:
    """Tables and the forest plot stay within the printed page, in en and zh: no word's box
    reaches past the page's right margin (WeasyPrint does not clip an overflowing table: it
    draws past the page edge, and the viewer cuts it)."""
    for lang in ("en", "zh"):
        html = _run("pdftotext", "-bbox", str(pdfs[(name, lang)]), "-")
        out = []
        for width, body in re.findall(r"<page width=\"([\d.]+)\" height=\"[\d.]+\">(.*?)</page>", html, re.S):
            for x_max, word in re.findall(r'xMax="([\d.]+)"[^>]*>([^<]*)</word>', body):
                if float(x_max) > float(width) - 20:
                    out.append((word, x_max))
        assert out == [], (lang, out[:10])
