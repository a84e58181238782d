"""Visible signatures on page one: the sign-off block's signature cells (``#sigbox-<role>``) become
empty PDF signature fields when the PDF is rendered, and ``kvgate sign --pdf`` fills a party's
field with its stamp: name, role, decision, comment, signing time (UTC) and the SHA-256
fingerprint of the signing certificate, laid out by WeasyPrint in the report's fonts (so a Chinese
name prints as such).

Adding the fields is an incremental update that keeps the rendering deterministic (no
modification date and a document id derived from the bytes), so re-rendering an unsigned PDF
still gives the same file and the manifest stays as it was."""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import io
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import markupsafe

from harness.report.i18n import N_, _t, language

SIGBOX_PREFIX = "sigbox-"
PX_TO_PT = 0.75  # CSS px (1/96 in) to PDF points (1/72 in)
COMMENT_MAX = 300  # characters of a party's comment on the stamp

ROLE_WORDS = {"vendor": N_("Vendor"), "customer": N_("Customer")}
Box = tuple[float, float, float, float]  # x1, y1, x2, y2 in PDF points, origin bottom-left
DSA_IMPORT_WARNING = r"DSA is deprecated"


def quiet_expected_warnings() -> None:
    """Silence the one warning every pyHanko import prints: pyHanko imports cryptography's DSA key
    types (to read DSA signatures) and cryptography warns on that import that DSA support will go,
    a note to pyHanko's authors, not to the person signing, and printed whatever key is used.
    Only that message, only when a pyHanko module triggers it, is silenced: any other warning,
    and every error, still reaches the user."""
    from cryptography.utils import CryptographyDeprecationWarning

    warnings.filterwarnings("ignore", message=DSA_IMPORT_WARNING, category=CryptographyDeprecationWarning,
                            module=r"pyhanko(\.|$)")


quiet_expected_warnings()  # before any pyHanko import (they are lazy, in the functions below)


def signature_boxes(document: Any) -> dict[str, Box]:
    """The signature cells of page one of a rendered WeasyPrint document, by role."""
    if not document.pages:
        return {}
    page = document.pages[0]
    height = page.height
    found: dict[str, Box] = {}

    def walk(box: Any) -> None:
        element = getattr(box, "element", None)
        ident = element.get("id") if element is not None and getattr(box, "element_tag", None) == "div" else None
        if ident and ident.startswith(SIGBOX_PREFIX) and ident[len(SIGBOX_PREFIX):] not in found:
            x, y = box.border_box_x(), box.border_box_y()
            w, h = box.border_width(), box.border_height()
            found[ident[len(SIGBOX_PREFIX):]] = (x * PX_TO_PT, (height - y - h) * PX_TO_PT,
                                                  (x + w) * PX_TO_PT, (height - y) * PX_TO_PT)
        for child in getattr(box, "children", None) or []:
            walk(child)

    walk(page._page_box)  # noqa: SLF001 - WeasyPrint's laid-out boxes; its public API has no element geometry
    return found


def field_name(role: str) -> str:
    """The PDF signature field of a party: rendered empty over its sign-off cell, signed by kvgate sign."""
    return f"kvgate-{role}"


def add_signature_fields(pdf: bytes, boxes: Mapping[str, Box]) -> bytes:
    """``pdf`` with an empty signature field ``kvgate-<role>`` over each box on page one."""
    from pyhanko.pdf_utils import generic
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.sign import fields

    writer = IncrementalPdfFileWriter(io.BytesIO(pdf), strict=False)
    # deterministic: no modification date, and the new revision's id from the bytes it extends
    # (pyHanko otherwise writes the time and a random id)
    writer._update_meta = lambda: None  # type: ignore[method-assign]  # noqa: SLF001
    digest = hashlib.sha256(pdf).digest()
    try:
        first = writer.prev.trailer["/ID"][0]
    except KeyError:  # WeasyPrint writes no id: the first part from the bytes as well
        first = generic.ByteStringObject(digest[:16])
    writer._document_id = generic.ArrayObject([first, generic.ByteStringObject(digest[16:])])  # noqa: SLF001
    for role, box in boxes.items():
        fields.append_signature_field(writer, fields.SigFieldSpec(field_name(role), on_page=0,
                                                                  box=box))  # type: ignore[arg-type]  # floats work
    out = io.BytesIO()
    writer.write(out)  # type: ignore[no-untyped-call]
    return out.getvalue()


@dataclass
class Stamp:
    signer: str
    role: str
    fingerprint: str  # "SHA256:<base64>" of the certificate
    signed_at: _dt.datetime
    decision: Optional[str] = None  # "accept" / "reject"
    comment: Optional[str] = None


def cert_fingerprint(cert_der: bytes) -> str:
    """OpenSSH style: ``SHA256:`` and the unpadded base64 of the certificate's SHA-256."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(cert_der).digest()).decode("ascii").rstrip("=")


def _lines(stamp: Stamp) -> list[str]:
    decision = _t({"accept": N_("accepted"), "reject": N_("rejected")}.get(stamp.decision or "", N_("not stated")))
    comment = (stamp.comment or "").strip()[:COMMENT_MAX] or "-"
    return [
        _t("Signed by %(name)s (%(role)s)") % {"name": stamp.signer,
                                                "role": _t(ROLE_WORDS.get(stamp.role, stamp.role))},
        _t("Decision: %(decision)s. Comment: %(comment)s") % {"decision": decision, "comment": comment},
        _t("%(when)s UTC; certificate %(fingerprint)s") % {
            "when": stamp.signed_at.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
            "fingerprint": stamp.fingerprint},
    ]


def _stamp_html(lines: list[str], width: float, height: float, size: float) -> str:
    body = "".join(f"<p>{markupsafe.escape(line)}</p>" for line in lines)
    return (f"<html><head><meta charset='utf-8'><style>@page {{ size: {width:.2f}pt {height:.2f}pt; "
            f"margin: 2pt 4pt; }} body {{ font-family: 'Noto Sans', 'Noto Sans CJK SC', sans-serif; "
            f"font-size: {size:.1f}pt; line-height: 1.15; color: #0a3069; margin: 0; }} "
            "p { margin: 0; overflow-wrap: anywhere; } p:first-child { font-weight: bold; }</style></head>"
            f"<body>{body}</body></html>")


def stamp_pdf(stamp: Stamp, box: Box, lang: str) -> bytes:
    """A one-page PDF the size of ``box`` with the stamp's lines (the words in ``lang``), in the
    largest font size from 7.5 pt down that fits all of them on the one page."""
    import weasyprint

    with language(lang):
        lines = _lines(stamp)
    width, height = box[2] - box[0], box[3] - box[1]
    fetcher = weasyprint.URLFetcher(allowed_protocols={"data"})
    size = 7.5
    while True:
        document = weasyprint.HTML(string=_stamp_html(lines, width, height, size), url_fetcher=fetcher).render()
        if len(document.pages) == 1 or size <= 3.0:
            out = document.write_pdf()
            assert isinstance(out, bytes)
            return out
        size -= 0.5


def stamp_style(stamp: Stamp, box: Box, lang: str, workdir: Path) -> Any:
    """A pyHanko stamp style drawing :func:`stamp_pdf` into the signature field."""
    from pyhanko.stamp import StaticStampStyle

    path = Path(tempfile.mkstemp(suffix=".pdf", dir=workdir)[1])
    path.write_bytes(stamp_pdf(stamp, box, lang))
    return StaticStampStyle.from_pdf_file(str(path), border_width=0), path
