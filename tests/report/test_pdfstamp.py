"""The stamp a PDF signature draws in its party's cell on page one: name, role, decision, comment,
time and certificate fingerprint, in the PDF's language, whatever the script of the name; the
rendered PDF's empty signature fields sit on the sign-off cells, and rendering stays deterministic.
Read with poppler's pdftotext from real WeasyPrint PDFs."""

from __future__ import annotations

import datetime as _dt
import subprocess
from pathlib import Path

from harness.report import render_gate_reports
from harness.report.pdf import html_to_pdf
from harness.report.pdfstamp import Stamp, cert_fingerprint, stamp_pdf

from .conftest import make_result, write_gate

BOX = (300.0, 100.0, 520.0, 140.0)  # the size of a sign-off cell, in points
WHEN = _dt.datetime(2026, 12, 6, 13, 5, tzinfo=_dt.timezone.utc)


def _text(pdf: bytes, tmp: Path) -> tuple[str, int]:
    path = tmp / "stamp.pdf"
    path.write_bytes(pdf)
    pages = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout  # noqa: S603, S607
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout  # noqa: S603, S607
    return " ".join(text.split()), int(pages.split("Pages:")[1].split()[0])


def test_the_stamp_says_who_decided_what_and_when(tmp_path: Path) -> None:
    fp = cert_fingerprint(b"certificate bytes")
    assert fp.startswith("SHA256:") and len(fp) == 7 + 43
    stamp = Stamp(signer="Jane Doe", role="vendor", fingerprint=fp, signed_at=WHEN, decision="accept",
                  comment="Meets the contract <b>thresholds</b>.")
    text, pages = _text(stamp_pdf(stamp, BOX, "en"), tmp_path)
    assert pages == 1
    assert "Signed by Jane Doe (Vendor)" in text
    assert "Decision: accepted. Comment: Meets the contract <b>thresholds</b>." in text  # escaped, shown as typed
    assert f"2026-12-06 13:05 UTC; certificate {fp}".replace(" ", "") in text.replace(" ", "")  # may wrap


def test_the_stamp_in_chinese_with_a_long_comment_fits_its_cell(tmp_path: Path) -> None:
    stamp = Stamp(signer="张伟", role="customer", fingerprint=cert_fingerprint(b"x"), signed_at=WHEN,
                  decision="reject", comment="读带宽需复测。" * 40)
    text, pages = _text(stamp_pdf(stamp, BOX, "zh"), tmp_path)
    assert pages == 1  # the font shrinks until every line fits the one page of the cell
    assert "签署人 张伟（客户方）" in text and "结论：拒绝" in text and "UTC；证书 SHA256:" in text


def test_rendered_pdf_has_empty_fields_on_the_sign_off_cells_and_is_deterministic(tmp_path: Path) -> None:
    from pyhanko.pdf_utils.reader import PdfFileReader
    from pyhanko.sign.fields import enumerate_sig_fields

    gate = write_gate(tmp_path / "camp-1" / "G3", make_result(with_data=False))
    render_gate_reports(gate)
    html = (gate / "report.html").read_text(encoding="utf-8")
    first, second = html_to_pdf(html), html_to_pdf(html)
    assert first == second
    path = tmp_path / "r.pdf"
    path.write_bytes(first)
    with open(path, "rb") as fh:
        reader = PdfFileReader(fh, strict=False)
        found = {name: [float(v) for v in ref.get_object()["/Rect"]]
                 for name, value, ref in enumerate_sig_fields(reader) if value is None}
    assert set(found) == {"kvgate-vendor", "kvgate-customer"}
    vendor, customer = found["kvgate-vendor"], found["kvgate-customer"]
    assert vendor[0] == customer[0] and vendor[1] > customer[3]  # same column, vendor's row above
    assert 180 < vendor[2] - vendor[0] < 250 and 30 < vendor[3] - vendor[1] < 50  # a 38% x 14 mm cell


def test_only_pyhankos_dsa_import_warning_is_silenced() -> None:
    """The DSA deprecation cryptography prints when pyHanko imports it is silenced; the same
    category with another message, or that message from another module, still reaches the user."""
    import warnings

    from cryptography.utils import CryptographyDeprecationWarning

    from harness.report.pdfstamp import quiet_expected_warnings

    def shown(message: str, module: str) -> bool:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")  # every warning shown, then kvgate's one exception before it
            quiet_expected_warnings()
            warnings.warn_explicit(message, CryptographyDeprecationWarning, "x.py", 1, module=module, registry={})
        return bool(seen)

    dsa = "DSA is deprecated and support will be removed in a future release."
    assert not shown(dsa, "pyhanko.sign.signers.pdf_cms")
    assert shown("TripleDES has been moved", "pyhanko.sign.signers.pdf_cms")
    assert shown(dsa, "harness.report.sshsig")
