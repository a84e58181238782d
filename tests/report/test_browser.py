"""Reports rendered in a real headless Chromium (the system's, driven by Playwright; installed by
``tools/ensure-system-deps.sh``): no console error, no request leaving the file, every SVG text
inside its chart's viewBox (measured by the browser's own layout), the verdict in the first
viewport. Rendered once per module: Chromium is slow on two cores."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from harness.report import render_campaign_report, render_gate_reports

from .cliffdata import cliff_measurements
from .conftest import make_result, write_gate
from .test_charts import LONG_IDS, long_names_result

CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1280, "height": 800}

# Each <text> of each chart, as laid out (rotations included), in the chart's viewBox units.
_SVG_TEXT_BOXES = """() => [...document.querySelectorAll('svg.chart')].flatMap((svg, i) => {
  const vb = svg.viewBox.baseVal, r = svg.getBoundingClientRect();
  const sx = vb.width / r.width, sy = vb.height / r.height;
  return [...svg.querySelectorAll('text')].map(t => {
    const b = t.getBoundingClientRect();
    return {chart: i, text: t.textContent, x: (b.left - r.left) * sx, y: (b.top - r.top) * sy,
            w: b.width * sx, h: b.height * sy, vw: vb.width, vh: vb.height};
  });
})"""


@dataclass
class Loaded:
    url: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    boxes: list[dict[str, Any]] = field(default_factory=list)
    verdict_box: dict[str, float] | None = None
    verdict_text: str = ""
    heading_fonts: list[dict[str, Any]] = field(default_factory=list)  # fonts that drew the first <h2>
    screenshot: Path | None = None


def _load(browser: Browser, path: Path, shot: Path) -> Loaded:
    page: Page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
    out = Loaded(url=path.as_uri())
    page.on("console", lambda m: out.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: out.console_errors.append(str(e)))
    page.on("request", lambda r: out.requests.append(r.url))
    page.goto(out.url, wait_until="load")
    out.boxes = page.evaluate(_SVG_TEXT_BOXES)
    verdict = page.locator("#verdict")
    out.verdict_box = verdict.bounding_box()
    out.verdict_text = verdict.inner_text()
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    h2 = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "h2"})["nodeId"]
    out.heading_fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": h2})["fonts"]
    page.screenshot(path=str(shot), full_page=False)
    out.screenshot = shot
    page.close()
    return out


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Loaded]]:
    root = tmp_path_factory.mktemp("browser")
    camp = root / "camp-1"
    g3 = write_gate(camp / "G3", make_result())
    # the defect seen: a bar reaching the axis end had its label cut ("write 4.9")
    result = make_result()
    result.gate = "G2"
    result.measurements["fio"] = {"node-a": {"local-nvme": {"seq_read_bw": 4.9e9, "seq_write_bw": 5.0e9}}}
    g2 = write_gate(camp / "G2", result)
    # the capacity-cliff charts (log x axis, tier boundaries labelled inside the plot)
    cliff = make_result()
    cliff.measurements = cliff_measurements()
    cl = write_gate(root / "cliff-1" / "cliff", cliff)
    render_gate_reports(cl)
    # long check ids and observation labels, in Chinese: the forest plot widens its columns
    long = long_names_result()
    lg = write_gate(root / "long-1" / "G3", long)
    render_gate_reports(lg, "zh")
    render_gate_reports(g3)
    render_gate_reports(g2)
    render_campaign_report(camp)
    render_gate_reports(g3, "zh")
    render_campaign_report(camp, "zh")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield {name: _load(browser, path / page, root / f"{name}.png")
                   for name, path, page in (("G3", g3, "report.html"), ("G2", g2, "report.html"),
                                            ("campaign", camp, "report.html"), ("G3-zh", g3, "report.zh.html"),
                                            ("campaign-zh", camp, "report.zh.html"),
                                            ("cliff", cl, "report.html"), ("long-zh", lg, "report.zh.html"))}
        finally:
            browser.close()


@pytest.mark.parametrize("name", ["G3", "G2", "campaign", "G3-zh", "campaign-zh", "cliff"])
def test_no_console_error_and_no_request_leaves_the_file(pages: dict[str, Loaded], name: str) -> None:
    page = pages[name]
    assert page.console_errors == []
    assert page.requests == [page.url]


@pytest.mark.parametrize("name", ["G3", "G2", "G3-zh", "cliff", "long-zh"])
def test_every_svg_text_inside_its_viewbox(pages: dict[str, Loaded], name: str) -> None:
    boxes = pages[name].boxes
    assert len(boxes) > 20  # the charts were drawn
    outside = [b for b in boxes if b["x"] < 0 or b["y"] < 0 or b["x"] + b["w"] > b["vw"] + 0.5
               or b["y"] + b["h"] > b["vh"] + 0.5]
    assert outside == []


@pytest.mark.parametrize("name,verdict", [("G3", "FAIL"), ("G2", "FAIL"), ("campaign", "FAIL"),
                                          ("G3-zh", "FAIL"), ("campaign-zh", "FAIL")])
def test_verdict_in_first_viewport(pages: dict[str, Loaded], name: str, verdict: str) -> None:
    box = pages[name].verdict_box
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"]
    assert pages[name].verdict_text.startswith(verdict)


@pytest.mark.parametrize("name", ["G3-zh", "campaign-zh"])
def test_cjk_drawn_with_a_cjk_font(pages: dict[str, Loaded], name: str) -> None:
    """Chinese headings are drawn by an installed CJK font (not tofu from a Latin fallback); the
    screenshot stays in the test's output folder for a person to look at."""
    fonts = pages[name].heading_fonts
    assert any("CJK" in f["familyName"] and f["glyphCount"] > 0 for f in fonts), fonts
    shot = pages[name].screenshot
    assert shot is not None and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_long_check_ids_drawn_whole(pages: dict[str, Loaded]) -> None:
    """No label of the forest plot is cut: every long check id and observation label is a text of
    its own, whole (inside the viewBox: test_every_svg_text_inside_its_viewbox)."""
    texts = {b["text"] for b in pages["long-zh"].boxes}
    assert not [t for t in texts if "\u2026" in t]
    assert set(LONG_IDS) <= texts
