"""The sign-off PDF: ``report.html`` (the same template, with its print CSS: A4, running header,
page numbers, page 1 = the sign-off sheet: verdict, headline, system under test, workload and the
sign-off block, whose signature cells are empty signature fields: ``pdfstamp``) laid out by
WeasyPrint into ``report.pdf`` in the gate (or campaign) directory.

WeasyPrint output is deterministic for the same HTML (no creation time is written), so re-rendering
an unsigned PDF keeps the manifest. A PDF that already carries signatures is never re-rendered:
that would drop them. Nothing is fetched while rendering (only ``data:`` URLs are allowed; the
report is self-contained anyway).
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import InputError
from harness.report.i18n import DEFAULT_LANG, suffix
from harness.store.durable import write_atomic

REPORT_PDF = "report.pdf"


class PdfError(InputError):
    """The PDF cannot be written (signed already, HTML missing)."""


def html_to_pdf(html: str) -> bytes:
    import weasyprint  # heavy: imported only when a PDF is made

    from harness.report.pdfstamp import add_signature_fields, signature_boxes

    fetcher = weasyprint.URLFetcher(allowed_protocols={"data"})
    document = weasyprint.HTML(string=html, url_fetcher=fetcher, media_type="print").render()
    out = document.write_pdf()
    assert isinstance(out, bytes)
    boxes = signature_boxes(document)  # page one's signature cells become (empty) signature fields
    return add_signature_fields(out, boxes) if boxes else out


def pdf_has_signatures(path: Path) -> bool:
    from pyhanko.pdf_utils.reader import PdfFileReader

    with open(path, "rb") as fh:
        return bool(PdfFileReader(fh, strict=False).embedded_signatures)


def pdf_name(lang: str = DEFAULT_LANG) -> str:
    return f"report{suffix(lang)}.pdf"


def write_pdf(directory: Path, lang: str = DEFAULT_LANG) -> Path:
    """Render ``directory/report[.LANG].html`` to ``report[.LANG].pdf``; refuse to overwrite a
    signed one."""
    directory = Path(directory)
    html_path, pdf_path = directory / f"report{suffix(lang)}.html", directory / pdf_name(lang)
    if not html_path.is_file():
        raise PdfError(f"{html_path}: no HTML report to print (run kvgate report first)")
    if pdf_path.is_file() and pdf_has_signatures(pdf_path):
        raise PdfError(f"{pdf_path} is signed already; it is not re-rendered (that would drop its "
                       "signatures)")
    write_atomic(pdf_path, html_to_pdf(html_path.read_text(encoding="utf-8")))
    return pdf_path
