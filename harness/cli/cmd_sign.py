"""``kvgate sign GATE_DIR --key FILE --signer NAME --role vendor|customer``: write the statement
and evidence manifest of a gate directory and add an OpenSSH (SSHSIG) signature to it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.errors import InputError
from harness.exitcodes import ExitCode
from harness.report.campaignmanifest import CAMPAIGN_MANIFEST
from harness.report.i18n import DEFAULT_LANG, LANGS, suffix
from harness.report.manifest import SIGNATURES
from harness.report.pdf import pdf_name, write_pdf
from harness.report.pdfsign import sign_pdf
from harness.report.pdfstamp import COMMENT_MAX
from harness.report.sign import ROLES, is_campaign_dir, sign, sign_campaign


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "sign",
        help="sign a gate report (ssh-keygen -Y sign): each party adds its signature",
        description="Write GATE_DIR/SIGNOFF.json (campaign, gate) and GATE_DIR/MANIFEST.sha256 "
        "(sha256 of every file, sha256sum format) and sign the manifest with ssh-keygen -Y sign in "
        "namespace kvgate-report@v1, writing GATE_DIR/signatures/<role>-<signer-id>.sig. "
        "Any key OpenSSH signs with works: a private key file (make one with ssh-keygen -t ed25519 "
        "-f FILE), a public key file whose private key is in ssh-agent, or a hardware key "
        "(sk-ssh-ed25519). The signer id (printed) is the principal '<signer-id>@<role>' the "
        "other party puts in its allowed_signers file. The passphrase is never printed. "
        "A campaign directory (reports/<campaign>) signs its set of gates: campaign.manifest lists each gate "
        "with the sha256 of its MANIFEST.sha256 and its verdict, and is signed the same way.",
    )
    p.add_argument("gate_dir", metavar="GATE_DIR", type=Path, help="e.g. reports/<campaign>/G3")
    p.add_argument("--key", type=Path, metavar="FILE",
                   help="OpenSSH private key file, or public key file of a key held by ssh-agent")
    p.add_argument("--signer", required=True, metavar="NAME", help="who signs, any script, e.g. 'Jörg Müller'")
    p.add_argument("--signer-id", metavar="ID",
                   help="ASCII id for file names and principals (default: derived from --signer)")
    p.add_argument("--role", required=True, choices=ROLES, help="the party the signer acts for")
    p.add_argument("--passphrase-env", metavar="VAR",
                   help="name of an environment variable holding the key's passphrase")
    pdf = p.add_argument_group("PDF signature (sign the PDF first, both parties, then the manifest)")
    pdf.add_argument("--pdf", action="store_true",
                     help="sign the PDFs of GATE_DIR (report.pdf, report.zh.pdf: see --lang; rendered from "
                     "their HTML when absent) with an X.509 certificate instead of the manifest, as an "
                     "incremental update; the signature is drawn in the party's cell on page one")
    pdf.add_argument("--lang", choices=LANGS, default=None,
                     help="sign only this language's PDF (en report.pdf, zh report.zh.pdf); default: every "
                     "language the gate has a report in (report.html, report.zh.html), each PDF rendered "
                     "when absent")
    pdf.add_argument("--decision", choices=("accept", "reject"),
                     help="the party's decision, printed in its signature on page one")
    pdf.add_argument("--comment", metavar="TEXT", help="the party's comment, printed in its signature on page one "
                     "(at most 300 characters)")
    pdf.add_argument("--p12", type=Path, metavar="FILE", help="PKCS#12 file with key and certificate")
    pdf.add_argument("--key-pem", type=Path, metavar="FILE", help="PEM private key (with --cert)")
    pdf.add_argument("--cert", type=Path, metavar="FILE", help="PEM certificate (with --key-pem)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    passphrase = None
    if args.passphrase_env:
        value = os.environ.get(args.passphrase_env)
        if value is None:
            raise InputError(f"--passphrase-env: environment variable {args.passphrase_env} is not set")
        passphrase = value.encode("utf-8")
    if args.pdf:
        if args.comment is not None and len(args.comment) > COMMENT_MAX:
            raise InputError(f"--comment: {len(args.comment)} characters; at most {COMMENT_MAX} fit the signature")
        return _sign_pdf(args, passphrase)
    if args.decision is not None or args.comment is not None:
        raise InputError("--decision and --comment go with --pdf (they are printed in the PDF signature on page one)")
    if args.key is None:
        raise InputError("--key FILE is needed to sign the manifest (or --pdf with --p12 / --key-pem "
                         "and --cert to sign the PDF)")
    if is_campaign_dir(args.gate_dir):
        path = sign_campaign(args.gate_dir, args.key, args.signer, args.role, signer_id_=args.signer_id,
                             passphrase=passphrase)
        sid = path.name[len(args.role) + 1:-len(".sig")]
        manifest = args.gate_dir / CAMPAIGN_MANIFEST
        print(f"signed    {args.gate_dir} (its set of gates, {manifest}) as {args.role} {args.signer} "
              f"(principal {sid}@{args.role})")
        print(f"check     (cd {args.gate_dir} && sha256sum -c {CAMPAIGN_MANIFEST}) && ssh-keygen -Y verify -f "
              f"allowed_signers -I {sid}@{args.role} -n kvgate-report@v1 -s {path} < {manifest}")
        return int(ExitCode.OK)
    path = sign(args.gate_dir, args.key, args.signer, args.role, signer_id_=args.signer_id,
                passphrase=passphrase, progress=True)
    sid = path.name[len(args.role) + 1:-len(".sig")]
    print(f"signed    {args.gate_dir} as {args.role} {args.signer} (principal {sid}@{args.role})")
    print(f"manifest  {args.gate_dir / 'MANIFEST.sha256'}")
    print(f"signature {path}")
    print(f"check     ssh-keygen -Y verify -f allowed_signers -I {sid}@{args.role} -n kvgate-report@v1 "
          f"-s {path} < {args.gate_dir / 'MANIFEST.sha256'}")
    return int(ExitCode.OK)


def pdf_langs(gate_dir: Path, lang: str | None) -> list[str]:
    """The languages whose PDF ``kvgate sign --pdf`` signs: ``--lang`` alone, else every language with
    a PDF or an HTML report in the directory (English when there is neither, rendered then), so the
    README's one command per party signs the en and the zh PDF alike and verify finds both signed."""
    if lang is not None:
        return [lang]
    present = [code for code in LANGS if (gate_dir / pdf_name(code)).is_file()
               or (gate_dir / f"report{suffix(code)}.html").is_file()]
    return present or [DEFAULT_LANG]


def _sign_pdf(args: argparse.Namespace, passphrase: bytes | None) -> int:
    gate_dir: Path = args.gate_dir
    sigs = [p.name for p in (gate_dir / SIGNATURES).glob("*.sig*")] if (gate_dir / SIGNATURES).is_dir() else []
    if sigs:
        raise InputError(f"{gate_dir}: the manifest is signed already ({', '.join(sorted(sigs))}); a PDF "
                         "signature now would change report.pdf and break those signatures. Sign the PDF "
                         "first (both parties), then the manifest.")
    for lang in pdf_langs(gate_dir, args.lang):
        pdf = gate_dir / pdf_name(lang)
        if not pdf.is_file():
            write_pdf(gate_dir, lang)
            print(f"rendered  {pdf}")
        field = sign_pdf(pdf, role=args.role, signer_name=args.signer, p12=args.p12, key_pem=args.key_pem,
                         cert=args.cert, passphrase=passphrase, decision=args.decision, comment=args.comment,
                         lang=lang)
        print(f"signed    {pdf} as {args.role} {args.signer} (signature field {field})")
        print(f"check     pdfsig {pdf}")
    return int(ExitCode.OK)
