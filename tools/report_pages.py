"""Page images of the sign-off PDF for docs/report/: the demo's recorded G3 and G4
(tests/data/report/demo-G*.result.json, with the evidence tree the page-budget tests write)
rendered in English and Chinese, printed by WeasyPrint, and pages turned into PNG by poppler's
pdftoppm at 60 dpi, reduced to 256 colours.

    python tools/report_pages.py [OUT_DIR]      # default: docs/report

Writes g3-{en,zh}-page1.png (the sign-off sheet), g3-{en,zh}-forest.png (the page that opens
"Checks at a glance"), g4-{en,zh}-page1.png and campaign-{en,zh}-page1.png (the campaign page of
the two gates, their manifests written)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.report import render_campaign_report, render_gate_reports  # noqa: E402
from harness.report.pdf import write_pdf  # noqa: E402
from harness.report.sign import write_manifest  # noqa: E402
from tests.report.budget import demo_g4_result, demo_result, write_gate_dir, write_soak_dir  # noqa: E402

GLANCE = {"en": "Checks at a glance", "zh": "检查结果一览"}


def _page_with(pdf: Path, heading: str) -> int:
    pages = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,  # noqa: S603 - fixed argv
                           check=True).stdout.split("\f")
    return next(i for i, text in enumerate(pages, 1) if heading in text)


def _png(pdf: Path, page: int, out: Path) -> None:
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        stem = Path(tmp) / "p"
        argv = ["pdftoppm", "-r", "60", "-png", "-singlefile", "-f", str(page), "-l", str(page), str(pdf), str(stem)]
        subprocess.run(argv, check=True)  # noqa: S603 - fixed argv
        Image.open(f"{stem}.png").convert("RGB").quantize(256).save(out, optimize=True)


def main(out_dir: Path) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        camp = Path(tmp) / "demo-camp"
        g3 = write_gate_dir(camp / "G3", demo_result())
        g4 = write_soak_dir(camp / "G4", demo_g4_result())
        for lang in ("en", "zh"):
            for gate in (g3, g4):
                render_gate_reports(gate, lang)
        for gate in (g3, g4):
            write_manifest(gate)
        for lang in ("en", "zh"):
            pdf3, pdf4 = write_pdf(g3, lang), write_pdf(g4, lang)
            render_campaign_report(camp, lang)
            _png(write_pdf(camp, lang), 1, out_dir / f"campaign-{lang}-page1.png")
            _png(pdf3, 1, out_dir / f"g3-{lang}-page1.png")
            _png(pdf3, _page_with(pdf3, GLANCE[lang]), out_dir / f"g3-{lang}-forest.png")
            _png(pdf4, 1, out_dir / f"g4-{lang}-page1.png")
    print(f"page images in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "report"))
