"""The trend page in a real headless Chromium, as the gate reports are checked: no console error,
no request leaving the file, every chart text inside its viewBox, the change point and the latest
run drawn, hover titles naming run id and commit."""

from __future__ import annotations

import random
from pathlib import Path

from playwright.sync_api import sync_playwright

from harness.report.trend import write_trend_page
from harness.store.historydb import HistoryDB, MetricRecord, RunRecord

CHROMIUM = "/usr/bin/chromium"

_SVG_TEXT_BOXES = """() => [...document.querySelectorAll('svg.chart')].flatMap(svg => {
  const vb = svg.viewBox.baseVal, r = svg.getBoundingClientRect();
  const sx = vb.width / r.width, sy = vb.height / r.height;
  return [...svg.querySelectorAll('text')].map(t => {
    const b = t.getBoundingClientRect();
    return {x: (b.left - r.left) * sx, y: (b.top - r.top) * sy, w: b.width * sx, h: b.height * sy,
            vw: vb.width, vh: vb.height, text: t.textContent};
  });
})"""


def test_trend_page_in_chromium(tmp_path: Path) -> None:
    rng = random.Random(3)
    with HistoryDB(f"sqlite:///{tmp_path / 'h.sqlite'}") as db:
        for i in range(30):
            metrics = []
            for name, better, centre in (("candidate.c2.ttft_p50_ms", "lower", 100.0 if i < 20 else 125.0),
                                         ("fio.n1.tier.seq_read_bw", "higher", 2.5e9)):
                xs = [rng.gauss(centre, centre * 0.01) for _ in range(5)]
                metrics.append(MetricRecord(name=name, better=better, unit="x", n=5, median=sorted(xs)[2],
                                            low=min(xs), high=max(xs), samples=xs))
            db.add_run(RunRecord(run_key=f"r{i}", series="s" * 64, kind="nightly",
                                 started_at=f"2026-04-{i + 1:02d}T02:30:00Z", campaign=f"nightly-{i}",
                                 git_commit=f"{i:07x}deadbeef", nodes=["n1"], metrics=metrics))
        page_path = write_trend_page(db, "s" * 64, tmp_path / "trend.html")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            requests: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri(), wait_until="load")
            boxes = page.evaluate(_SVG_TEXT_BOXES)
            charts = page.locator("svg.chart").count()
            change_points = page.locator("svg.chart line.change-point").count()
            latest = page.locator("svg.chart circle.latest").count()
            tip = page.locator("svg.chart circle.latest title").first.text_content()
            rows = page.locator("#runs tbody tr").count()
            page.close()
        finally:
            browser.close()
    assert errors == [] and requests == [page_path.as_uri()]
    assert charts == 2 and change_points == 1 and latest == 2 and rows == 30
    assert tip is not None and "run 30 2026-04-30T02:30:00Z nightly-29 commit 000001ddeadb" in tip
    outside = [b for b in boxes if b["x"] < 0 or b["y"] < 0 or b["x"] + b["w"] > b["vw"] + 0.5
               or b["y"] + b["h"] > b["vh"] + 0.5]
    assert len(boxes) > 10 and outside == []
