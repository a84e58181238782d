"""Checks of the documents beside the manifest signatures: the campaign page must be the
rendering of its gates as they are now (it names each gate's manifest hash, so a changed or
re-signed gate shows), and every PDF signature in ``report.pdf`` must be intact and valid (and,
with trust roots, each required role's certificate trusted)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.report.i18n import LANGS
from harness.report.pdf import pdf_name
from harness.report.render import REPORT_HTML, campaign_documents


def campaign_document_problems(campaign_dir: Path) -> list[str]:
    path = Path(campaign_dir) / REPORT_HTML
    if not path.is_file() or path.is_symlink():
        return [f"{path}: no campaign page (render it with kvgate report, then sign its PDF)"]
    expected, _, _ = campaign_documents(campaign_dir)
    if path.read_text(encoding="utf-8") != expected:
        return [f"{path} does not match the gates as they are now (a gate changed or was re-signed, "
                "or the directory was renamed, after the campaign page was rendered)"]
    return []


def pdf_problems(directory: Path, roles: Sequence[str], trust_roots: Sequence[Path] | None) -> list[str]:
    """Findings about the signatures of ``report.pdf`` and ``report.zh.pdf`` (each present PDF:
    every signature intact and valid; with trust roots, each required role signed by a trusted
    certificate, and at least one PDF present)."""
    from harness.report.pdfread import PdfBombError
    from harness.report.pdfsign import check_pdf
    from harness.report.pdfstamp import field_name

    pdfs = [Path(directory) / pdf_name(lang) for lang in LANGS if (Path(directory) / pdf_name(lang)).is_file()]
    if not pdfs:
        return [f"{Path(directory) / pdf_name()}: missing (PDF signatures were asked for)"] if trust_roots else []
    problems: list[str] = []
    for pdf in pdfs:
        try:
            sigs = check_pdf(pdf, list(trust_roots or []))
        except PdfBombError as exc:
            problems.append(str(exc))
            continue
        except Exception as exc:  # noqa: BLE001 - a received file that is not a PDF pyhanko can read
            # (no PDF at all, a broken xref, a flate bomb, a size over the limit) is a finding, not a crash
            problems.append(f"{pdf}: cannot be checked as a signed PDF: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        problems += [f"{pdf}: signature {s.field} ({s.signer}) is broken: the signed bytes changed"
                     for s in sigs if not (s.intact and s.valid)]
        problems += [f"{pdf}: signature {s.field} is followed by changes it does not allow ({s.modification})"
                     for s in sigs if s.intact and s.valid and not s.covers_document]
        if trust_roots:
            for role in roles:
                if not [s for s in sigs if s.field == field_name(role) and s.ok]:
                    problems.append(f"{pdf}: no valid PDF signature of the {role} by a trusted certificate")
    return problems
