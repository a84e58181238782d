"""PDF signatures of the sign-off document, by both parties in sequence (each an incremental
update, so the first signature stays valid), with X.509 certificates through pyHanko.

Keys: a PKCS#12 file (``--p12``) or a PEM key and certificate (``--key-pem`` / ``--cert``), with
a passphrase from an environment variable only. Each party signs its own field,
``kvgate-<role>``. A self-signed lab certificate (documented in the README)::

    openssl req -utf8 -x509 -newkey rsa:3072 -sha256 -days 730 -nodes -subj "/CN=Jane Doe/O=ACME Storage" \\
        -keyout vendor.key -out vendor.crt
    openssl pkcs12 -export -inkey vendor.key -in vendor.crt -out vendor.p12 -passout env:P12_PASS

The PDF must be signed before the OpenSSH signatures of the manifest: adding a PDF signature
changes ``report.pdf``, which the manifest lists.
"""

from __future__ import annotations

import datetime as _dt
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.errors import InputError
from harness.report.pdfread import bounded, decode_limits, open_pdf, read_pdf_bytes
from harness.report.pdfstamp import field_name
from harness.store.durable import write_atomic


class PdfSignError(InputError):
    """A PDF signature could not be made (bad key file, passphrase, field already signed)."""


def _signer(*, p12: Optional[Path], key_pem: Optional[Path], cert: Optional[Path],
            passphrase: Optional[bytes]) -> Any:
    from pyhanko.sign import signers

    if p12 is not None:
        signer = signers.SimpleSigner.load_pkcs12(str(p12), passphrase=passphrase)  # type: ignore[no-untyped-call]
        what = str(p12)
    elif key_pem is not None and cert is not None:
        signer = signers.SimpleSigner.load(  # type: ignore[no-untyped-call]
            str(key_pem), str(cert), key_passphrase=passphrase)
        what = f"{key_pem} / {cert}"
    else:
        raise PdfSignError("give --p12 FILE, or --key-pem FILE and --cert FILE, to sign the PDF")
    if signer is None:
        raise PdfSignError(f"{what}: cannot load the key and certificate (wrong passphrase, or not a "
                           "PKCS#12 / PEM key and certificate); give a passphrase with --passphrase-env VAR")
    if not _key_matches_cert(signer):
        raise PdfSignError(f"{what}: the private key is not the key of the certificate (a signature made "
                           "with it would name a certificate that did not sign; no PDF validator accepts it)")
    return signer


def _key_matches_cert(signer: Any) -> bool:
    """The signing key's public half is the certificate's public key."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_der_private_key(signer.signing_key.dump(), password=None)
    public = key.public_key().public_bytes(serialization.Encoding.DER,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return bool(public == signer.signing_cert.public_key.dump())


def _empty_field_box(reader: Any, name: str) -> Optional[tuple[float, float, float, float]]:
    """The rectangle of the unsigned signature field ``name`` on page one (placed when the PDF was
    rendered: ``harness.report.pdfstamp``), or None when the PDF has none."""
    from pyhanko.sign.fields import enumerate_sig_fields

    for field, value, ref in enumerate_sig_fields(reader, filled_status=False):
        if field == name and value is None:
            rect = ref.get_object().get("/Rect")
            return tuple(float(x) for x in rect) if rect is not None else None  # type: ignore[return-value]
    return None


def sign_pdf(pdf: Path, *, role: str, signer_name: str, p12: Optional[Path] = None,
             key_pem: Optional[Path] = None, cert: Optional[Path] = None,
             passphrase: Optional[bytes] = None, decision: Optional[str] = None,
             comment: Optional[str] = None, lang: str = "en") -> str:
    """Add ``role``'s signature to ``pdf`` as an incremental update; return the field name. Where
    page one has the role's empty field, the signature is drawn there: name, role, decision,
    comment, time and certificate fingerprint (``pdfstamp``)."""
    import io

    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.sign import fields, signers

    from harness.report.pdfstamp import Stamp, cert_fingerprint, stamp_style

    pdf = Path(pdf)
    if not pdf.is_file():
        raise PdfSignError(f"{pdf}: no PDF to sign (kvgate sign --pdf renders it from report.html)")
    name = field_name(role)
    data = read_pdf_bytes(pdf)  # the second party signs a PDF it received: bounded like verify
    with bounded(pdf), tempfile.TemporaryDirectory() as tmp:
        reader = open_pdf(pdf, data)
        if any(s.field_name == name for s in reader.embedded_signatures):
            raise PdfSignError(f"{pdf}: the {role} has signed this PDF already (field {name})")
        box = _empty_field_box(reader, name)
        signer = _signer(p12=p12, key_pem=key_pem, cert=cert, passphrase=passphrase)
        writer = IncrementalPdfFileWriter(io.BytesIO(data), strict=False, decode_limits=decode_limits())
        meta = signers.PdfSignatureMetadata(field_name=name, reason=f"kvgate sign-off as {role}",
                                            name=signer_name)
        out = io.BytesIO()
        if box is None:  # a PDF rendered before page one had signature cells: an invisible field
            signers.sign_pdf(writer, meta, signer=signer, new_field_spec=fields.SigFieldSpec(name), output=out)
        else:
            stamp = Stamp(signer=signer_name, role=role, fingerprint=cert_fingerprint(signer.signing_cert.dump()),
                          signed_at=_dt.datetime.now(_dt.timezone.utc), decision=decision, comment=comment)
            style, _ = stamp_style(stamp, box, lang, Path(tmp))
            signers.PdfSigner(meta, signer=signer, stamp_style=style).sign_pdf(writer, output=out)
    write_atomic(pdf, out.getvalue())
    return name


@dataclass
class PdfSignature:
    field: str
    signer: str  # the certificate's subject
    intact: bool  # the signed bytes are unchanged
    valid: bool  # the cryptographic signature checks
    trusted: bool  # the certificate chains to a given trust root
    covers_document: bool  # nothing but allowed incremental updates after it
    modification: str
    signed_at: Optional[str]

    @property
    def ok(self) -> bool:
        return self.intact and self.valid and self.trusted


def check_pdf(pdf: Path, trust_roots: list[Path]) -> list[PdfSignature]:
    """Validate every signature of ``pdf`` against certificates in ``trust_roots`` (PEM/DER).
    Raises PdfBombError when its streams inflate past kvgate's limits (``pdfread``)."""
    from pyhanko.keys import load_certs_from_pemder
    from pyhanko_certvalidator import ValidationContext

    roots = list(load_certs_from_pemder([str(p) for p in trust_roots])) if trust_roots else []  # type: ignore[no-untyped-call]
    ctx = ValidationContext(trust_roots=roots, allow_fetching=False)
    with bounded(pdf):
        return _validate_all(open_pdf(Path(pdf)), ctx)


def _validate_all(reader: Any, ctx: Any) -> list[PdfSignature]:
    from pyhanko.sign.validation import validate_pdf_signature

    out = []
    for sig in reader.embedded_signatures:
        status = validate_pdf_signature(sig, ctx)
        when = status.signer_reported_dt
        level = status.modification_level
        whole = status.coverage is not None and status.coverage.name == "ENTIRE_FILE"
        out.append(PdfSignature(
            field=sig.field_name, signer=status.signing_cert.subject.human_friendly,
            intact=status.intact, valid=status.valid, trusted=status.trusted,
            covers_document=whole or (level is not None
                                      and level.name in ("NONE", "LTA_UPDATES", "FORM_FILLING")),
            modification=level.name if level is not None else "unknown",
            signed_at=when.astimezone(_dt.timezone.utc).isoformat() if when else None))
    return out
