"""What a printed page shows, read back from a real PDF with poppler's ``pdftotext -bbox``: every
word with its box, per page; and the checks the layout tests make on them (a word outside the
page's margins, two words drawn over each other, a digest not printed whole)."""

from __future__ import annotations

import html
import re
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

EDGE_PT = 20.0  # WeasyPrint's A4 margins are 11-12 mm (31-34 pt): no body text comes closer to a side
TOP_BOTTOM_PT = 4.0  # the running header and page number sit in the top and bottom margins
OVERLAP_PT = 1.0  # two boxes overlapping by more than this in both directions are drawn over each other
HEX64 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


@dataclass(frozen=True)
class Word:
    page: int
    x1: float
    y1: float
    x2: float
    y2: float
    text: str


@dataclass(frozen=True)
class Page:
    number: int
    width: float
    height: float
    words: list[Word]


def pages(pdf: Path) -> list[Page]:
    out = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True,  # noqa: S603, S607
                         timeout=120, check=True).stdout
    result = []
    found = re.findall(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', out, re.S)
    for n, (w, h, body) in enumerate(found, 1):
        words = [Word(n, float(a), float(b), float(c), float(d), html.unescape(t)) for a, b, c, d, t in re.findall(
            r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>', body)]
        result.append(Page(n, float(w), float(h), words))
    return result


def outside_margins(page: Page) -> list[Word]:
    return [w for w in page.words if w.x1 < EDGE_PT or w.y1 < TOP_BOTTOM_PT or w.x2 > page.width - EDGE_PT
            or w.y2 > page.height - TOP_BOTTOM_PT]


def _core(w: Word) -> tuple[float, float, float, float]:
    """The middle half of a word's height: poppler's boxes span the font's whole ascent and
    descent, so two lines set at a line height of 1.1-1.3 touch; glyphs drawn over each other
    still meet in their middle."""
    quarter = (w.y2 - w.y1) / 4
    return w.x1, w.y1 + quarter, w.x2, w.y2 - quarter


def overlaps(page: Page) -> list[tuple[Word, Word]]:
    """Pairs of words whose middles overlap by more than ``OVERLAP_PT`` both ways (a sweep over the
    words sorted by their top)."""
    words = sorted(page.words, key=lambda w: _core(w)[1])
    found = []
    for i, a in enumerate(words):
        ax1, ay1, ax2, ay2 = _core(a)
        for b in words[i + 1:]:
            bx1, by1, bx2, by2 = _core(b)
            if by1 >= ay2 - OVERLAP_PT:
                break
            if min(ax2, bx2) - max(ax1, bx1) > OVERLAP_PT and min(ay2, by2) - max(ay1, by1) > OVERLAP_PT:
                found.append((a, b))
    return found


_SCREEN = ("screen-only", "screen-table")  # the HTML's screen-only parts (print has its own, shorter ones)
_VOID = {"br", "img", "meta", "link", "col", "input", "hr", "wbr", "source"}


class _Printed(HTMLParser):
    """The HTML's text outside its screen-only elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skip, self.text = 0, []  # type: tuple[int, list[str]]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        self.skip += 1 if self.skip or any(c in _SCREEN for c in classes) else 0

    def handle_endtag(self, tag: str) -> None:
        if tag not in _VOID and self.skip:
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.text.append(data)


def digests_not_whole(html_text: str, pdf_pages: list[Page]) -> list[str]:
    """The 64-hex digests the HTML prints (its screen-only parts aside) that the PDF does not show
    as one unbroken word."""
    printed = _Printed()
    printed.feed(html_text)
    words = {w.text.strip(".,;:()[]") for p in pdf_pages for w in p.words}
    return sorted({d for d in HEX64.findall(" ".join(printed.text)) if d not in words})
