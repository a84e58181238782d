"""Signing and verifying a gate directory, so a vendor and a customer each sign the same result and
anyone can check later, with stock OpenSSH, that no file changed and who signed.

What each file binds:

* ``MANIFEST.sha256`` (``harness.report.manifest``): the sha256 of every file of the gate
  directory but ``signatures/`` and itself, in ``sha256sum`` format.
* ``SIGNOFF.json`` (in the manifest): the *signed statement*: format, campaign, gate and the
  signature namespace. ``verify`` checks its campaign and gate against ``result.json`` (also in
  the manifest) and the gate against the directory's name, so a G2 folder renamed G3 fails.
* ``signatures/<role>-<signer-id>.sig``: an SSHSIG signature (``ssh-keygen -Y sign``) over the
  bytes of ``MANIFEST.sha256`` in namespace ``kvgate-report@v1``. Role and signer are bound by the
  trust anchor, not by the signature: the signature counts for ``<role>`` only when an anchor
  binds its key to the principal ``<signer-id>@<role>`` (``harness.report.trust``). So a
  customer with OpenSSH alone checks a report with::

      sha256sum -c MANIFEST.sha256 && ssh-keygen -Y verify -f allowed_signers \\
          -I <signer-id>@<role> -n kvgate-report@v1 -s signatures/<role>-<signer-id>.sig < MANIFEST.sha256

* ``signatures/<role>-<signer-id>.json``: unsigned metadata (display name in any script, signing
  time, fingerprint): informational, checked for consistency with the ``.sig`` (SSHSIG carries
  no time).
* ``signatures/*.sig.json``: the earlier ``kvgate-signature-v1`` format, verified only
  (``harness.report.legacy``).

``verify`` says VERIFIED only when every file is as signed, nothing else is in the directory, the
statement matches ``result.json``, every signature present is valid, and every required role
(vendor and customer by default) has a valid signature by a trusted key, each role by a
different key. Without trust anchors the best it says is "integrity OK, signers not
authenticated".
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.errors import InputError
from harness.progress import Progress
from harness.report import legacy, sshsig
from harness.report.campaignmanifest import CAMPAIGN_MANIFEST, expected_entries, journal_sha256, write_campaign_manifest
from harness.report.campaignmanifest import text as campaign_text
from harness.report.i18n import DEFAULT_LANG, LANGS
from harness.report.labels import gate_labels
from harness.report.loader import RESULT_FILE, ResultFileError, load_gate_result
from harness.report.manifest import (
    MANIFEST,
    SIGNATURES,
    ManifestError,
    compute,
    diff,
    manifest_text,
    parse_manifest,
    read_regular,
    scan,
)
from harness.report.render import render_campaign_report, report_names
from harness.report.signer import check_id, check_name, check_role, principal, signer_id
from harness.report.trust import Anchor
from harness.store.durable import write_atomic

SIGNOFF = "SIGNOFF.json"
SIGNOFF_FORMAT = "kvgate-signoff-v1"
ROLES = ("vendor", "customer")
_SIG_NAME = re.compile(r"^signatures/([a-z][a-z0-9]{0,31})-([a-z0-9][a-z0-9._-]{0,63})\.(sig|json)$")

__all__ = ["MANIFEST", "ROLES", "SIGNATURES", "SIGNOFF", "SignError", "SignatureCheck", "VerifyReport",
           "parse_manifest", "sign", "verify", "write_manifest"]


class SignError(InputError):
    """Signing was refused: a bad key, passphrase, signer, role or gate directory."""


def _check_gate_dir(gate_dir: Path) -> Path:
    gate_dir = Path(gate_dir)
    if not gate_dir.is_dir() or gate_dir.is_symlink():
        raise SignError(f"{gate_dir}: not a directory")
    if not (gate_dir / RESULT_FILE).is_file():
        # Refuse to hash an arbitrary directory (a typo could walk a home directory).
        hint = (" (a campaign's page is signed as a PDF: kvgate sign DIR --pdf ...; each gate with kvgate sign)"
                if (gate_dir / "campaign.json").is_file() or (gate_dir / "report.html").is_file() else "")
        raise SignError(f"{gate_dir}: not a gate directory (no {RESULT_FILE}){hint}")
    return gate_dir


def _statement(gate_dir: Path) -> dict[str, Any]:
    try:
        result = load_gate_result(gate_dir)
    except ResultFileError as exc:
        raise SignError(str(exc)) from None
    if result.gate != gate_dir.resolve().name:
        raise SignError(f"{gate_dir}: result.json is gate {result.gate} but the directory is named "
                        f"{gate_dir.resolve().name}; rename it back before signing")
    return {"format": SIGNOFF_FORMAT, "campaign": result.campaign, "gate": result.gate,
            "namespace": sshsig.NAMESPACE,
            # sha256sum cannot list a directory: the empty ones are named here, in the manifest
            "empty_directories": scan(gate_dir).empty_dirs}


def _statement_bytes(statement: dict[str, Any]) -> bytes:
    return (json.dumps(statement, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def write_manifest(gate_dir: Path, *, progress: bool = False, strict: bool = False) -> Path:
    """Write ``SIGNOFF.json`` and ``MANIFEST.sha256``. ``strict`` (signing) refuses symlinks and
    special files; otherwise (a gate run) they are left out, and ``verify`` names them. Empty
    directories are listed in ``SIGNOFF.json``."""
    gate_dir = _check_gate_dir(gate_dir)
    write_atomic(gate_dir / SIGNOFF, _statement_bytes(_statement(gate_dir)))
    tree = scan(gate_dir)
    if strict and tree.refused:
        raise SignError(f"{gate_dir}: cannot be signed, it holds entries a manifest cannot cover: "
                        f"{', '.join(tree.refused[:10])}; remove them first")
    path = gate_dir / MANIFEST
    write_atomic(path, manifest_text(compute(gate_dir, tree.files, progress=progress)).encode("utf-8"))
    return path


def _signature_files(gate_dir: Path) -> list[str]:
    return sorted(f for f in scan(gate_dir).signature_files if f.endswith((".sig", legacy.SUFFIX)))


def sign(gate_dir: Path, key_file: Path, signer: str, role: str, *, signer_id_: Optional[str] = None,
         passphrase: Optional[bytes] = None, progress: bool = False,
         now: Optional[_dt.datetime] = None) -> Path:
    """Write the statement and manifest, sign the manifest with ``ssh-keygen -Y sign`` and write
    ``signatures/<role>-<signer-id>.sig`` (+ ``.json`` metadata); return the ``.sig`` path.

    When the directory already carries signatures, the files must still match the manifest they
    signed: signing changed files would silently invalidate the other party's signature, so it
    is refused, naming the files."""
    gate_dir = _check_gate_dir(gate_dir)
    name = check_name(signer)
    sid = check_id(signer_id_) if signer_id_ else signer_id(name)
    check_role(role)
    rel_sig = f"{SIGNATURES}/{role}-{sid}.sig"
    manifest_path = gate_dir / MANIFEST
    others = [f for f in _signature_files(gate_dir) if f != rel_sig]
    old = manifest_path.read_text(encoding="utf-8") if manifest_path.is_file() else None
    if others and old is not None:
        statement = (gate_dir / SIGNOFF).read_bytes() if (gate_dir / SIGNOFF).is_file() else b""
        if statement and statement != _statement_bytes(_statement(gate_dir)):
            raise SignError(f"{gate_dir}: {SIGNOFF} no longer matches result.json; refusing to sign")
        tree = scan(gate_dir)
        current = manifest_text(compute(gate_dir, tree.files, progress=progress))
        if old != current:
            raise SignError(
                f"{gate_dir}: files changed since it was signed ({', '.join(others)}): "
                f"{diff(parse_manifest(old)[0], parse_manifest(current)[0])}; refusing to sign "
                "(run kvgate verify for details)")
    else:
        write_manifest(gate_dir, progress=progress, strict=True)
    path = sign_file(gate_dir, MANIFEST, rel_sig, key_file, name, sid, role, passphrase=passphrase, now=now)
    parent = gate_dir.resolve().parent
    if is_campaign_dir(parent):
        write_campaign_manifest(parent)  # signing a gate updates the campaign's set (unless that is signed)
    return path


def is_campaign_dir(path: Path) -> bool:
    """A campaign directory: no result.json of its own; a campaign.json, a campaign manifest or a
    gate directory in it."""
    path = Path(path)
    if not path.is_dir() or path.is_symlink() or (path / RESULT_FILE).exists():
        return False
    return ((path / "campaign.json").is_file() or (path / CAMPAIGN_MANIFEST).is_file()
            or any((d / RESULT_FILE).is_file() for d in path.iterdir() if d.is_dir() and not d.is_symlink()))


def sign_campaign(campaign_dir: Path, key_file: Path, signer: str, role: str, *,
                  signer_id_: Optional[str] = None, passphrase: Optional[bytes] = None,
                  now: Optional[_dt.datetime] = None) -> Path:
    """Sign the campaign's set of gates: write ``campaign.manifest`` (unless it is signed
    already, then it must still be the set present) and sign it like a gate's manifest."""
    campaign_dir = Path(campaign_dir)
    name, sid = check_name(signer), check_id(signer_id_) if signer_id_ else signer_id(check_name(signer))
    check_role(role)
    scan = expected_entries(campaign_dir)
    if scan.problems:
        raise SignError(f"{campaign_dir}: cannot be signed: {'; '.join(scan.problems)}")
    if not scan.entries:
        raise SignError(f"{campaign_dir}: no gate to sign (no gate directory with a {RESULT_FILE})")
    _refresh_campaign_pages(campaign_dir)
    wanted = campaign_text(campaign_dir.resolve().name, scan.entries, journal_sha256(campaign_dir)).encode("utf-8")
    path = campaign_dir / CAMPAIGN_MANIFEST
    if write_campaign_manifest(campaign_dir) is None or read_regular(path) != wanted:
        raise SignError(f"{campaign_dir}: {CAMPAIGN_MANIFEST} is signed already and the gates changed since; "
                        "refusing to sign (run kvgate verify for details)")
    return sign_file(campaign_dir, CAMPAIGN_MANIFEST, f"{SIGNATURES}/{role}-{sid}.sig", key_file, name, sid,
                     role, passphrase=passphrase, now=now)


def _refresh_campaign_pages(campaign_dir: Path) -> None:
    """The campaign page names each gate's OpenSSH signatures, so the page a gate run rendered before
    the parties signed their gates is stale: rendered again (each language already rendered, and
    the default one) from the gates as they are when the set is signed, which is what verify
    re-renders and compares."""
    for lang in LANGS:
        if lang == DEFAULT_LANG or (campaign_dir / report_names(lang)[0]).is_file():
            render_campaign_report(campaign_dir, lang)


def sign_file(base: Path, rel_message: str, rel_sig: str, key_file: Path, name: str, sid: str, role: str, *,
              passphrase: Optional[bytes] = None, now: Optional[_dt.datetime] = None) -> Path:
    """Sign the bytes of ``base/rel_message`` (a gate's manifest, a campaign's manifest) with
    SSHSIG in namespace ``kvgate-report@v1``; write ``base/rel_sig`` and its ``.json`` metadata."""
    message = read_regular(base / rel_message)
    try:
        pem = _pem_key(key_file, passphrase)
        armored = (sshsig.sign_ed25519(message, pem) if pem is not None
                   else sshsig.sign(message, key_file, passphrase=passphrase))
        parsed = sshsig.parse_armored(armored)
    except sshsig.SshsigError as exc:
        raise SignError(str(exc)) from None
    problem = sshsig.verify(parsed, message)
    if problem:  # ssh-keygen produced something we cannot check: never write it
        raise SignError(f"the signature made with {key_file} does not verify: {problem}")
    when = (now or _dt.datetime.now(_dt.timezone.utc)).astimezone(_dt.timezone.utc)
    meta = {"signer": name, "signer_id": sid, "role": role, "principal": principal(sid, role),
            "signed_at": when.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "fingerprint": parsed.fingerprint, "public_key": parsed.openssh_public,
            "namespace": sshsig.NAMESPACE,
            "manifest_sha256": hashlib.sha256(message).hexdigest(),
            "note": "unsigned metadata; the signature is the .sig file beside this one"}
    sig_path = base / rel_sig
    write_atomic(sig_path, armored.encode("ascii"))
    write_atomic(sig_path.with_suffix(".json"),
                 (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return sig_path


def _pem_key(path: Path, passphrase: Optional[bytes]) -> Optional[Ed25519PrivateKey]:
    """An Ed25519 key from a PKCS#8 PEM file (``openssl genpkey -algorithm ed25519``), which
    ``ssh-keygen`` cannot read; None for any other file (``ssh-keygen`` takes those)."""
    try:
        head = Path(path).read_bytes()[:64]
    except OSError as exc:
        raise SignError(f"{path}: cannot read the key file: {exc.strerror or exc}") from None
    if b"-----BEGIN PRIVATE KEY-----" not in head and b"-----BEGIN ENCRYPTED PRIVATE KEY-----" not in head:
        return None
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=passphrase)
    except TypeError:
        raise SignError(f"{path}: the key is protected by a passphrase; give it with --passphrase-env VAR"
                        if passphrase is None else f"{path}: the key has no passphrase; do not give one") from None
    except (ValueError, UnsupportedAlgorithm):
        raise SignError(f"{path}: not a readable PEM private key (wrong passphrase?)") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SignError(f"{path}: a PEM {type(key).__name__.lstrip('_')}; PEM keys must be Ed25519 "
                        "(or use an OpenSSH key: ssh-keygen -t ed25519 -f FILE)")
    return key


# --- verification ---------------------------------------------------------------------------

@dataclass
class SignatureCheck:
    file: str
    valid: bool
    reason: str = ""
    signer: Optional[str] = None  # display name (from the metadata; informational)
    signer_id: Optional[str] = None
    role: Optional[str] = None
    signed_at: Optional[str] = None
    fingerprint: Optional[str] = None
    trusted: Optional[bool] = None  # None: no trust anchors were given
    trust_reason: str = ""
    legacy: bool = False
    key_blob: bytes = b""

    @property
    def principal(self) -> str:
        return principal(self.signer_id or "?", self.role or "?")


@dataclass
class VerifyReport:
    gate_dir: str
    manifest_present: bool
    campaign: Optional[str] = None
    gate: Optional[str] = None
    required_roles: list[str] = field(default_factory=lambda: list(ROLES))
    anchors_given: bool = False
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)  # PDFs printed after signing from a signed HTML, byte for byte
    refused: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    signatures: list[SignatureCheck] = field(default_factory=list)
    roles_satisfied: dict[str, str] = field(default_factory=dict)  # role -> signature file
    labels: list[str] = field(default_factory=list)  # what the signers accepted knowingly (issue 27, 51)
    verdict: Optional[str] = None  # the gate's verdict as result.json records it
    notes: list[str] = field(default_factory=list)  # what was and was not re-checked

    @property
    def files_ok(self) -> bool:
        return self.manifest_present and not (self.changed or self.missing or self.extra or self.refused
                                              or self.problems)

    @property
    def integrity_ok(self) -> bool:
        """Every file as signed and every signature present valid."""
        return self.files_ok and bool(self.signatures) and all(s.valid for s in self.signatures)

    @property
    def missing_roles(self) -> list[str]:
        return [r for r in self.required_roles if r not in self.roles_satisfied]

    @property
    def ok(self) -> bool:
        return self.integrity_ok and self.anchors_given and not self.missing_roles

    @property
    def status(self) -> str:
        if self.ok:
            return "VERIFIED"
        if self.integrity_ok and not self.anchors_given:
            return "INTEGRITY OK, SIGNERS NOT AUTHENTICATED"
        return "NOT VERIFIED"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for s in d["signatures"]:
            s.pop("key_blob", None)
        d.update(ok=self.ok, files_ok=self.files_ok, integrity_ok=self.integrity_ok,
                 missing_roles=self.missing_roles, status=self.status)
        return d

    def lines(self) -> list[str]:
        """Human summary, one finding per line."""
        out = [f"gate     {self.gate or '?'} of campaign {self.campaign or '?'} ({self.gate_dir})"]
        if not self.manifest_present:
            out.append(f"MISSING  {MANIFEST}: the gate directory was never signed (kvgate sign)")
        out += [f"PROBLEM  {p}" for p in self.problems]
        out += [f"REFUSED  {p}: not a regular file or directory" for p in self.refused]
        out += [f"CHANGED  {p}" for p in self.changed]
        out += [f"MISSING  {p}" for p in self.missing]
        out += [f"EXTRA    {p} (not in the manifest)" for p in self.extra]
        out += [f"DERIVED  {p}: not in the manifest, but byte for byte what kvgate prints from the signed "
                f"{p[:-len('.pdf')]}.html (rendered after signing), so the signatures cover what it shows"
                for p in self.derived]
        if self.files_ok:
            out.append(f"ok       {MANIFEST}: every file matches, nothing else is present")
        if self.manifest_present and not self.signatures:
            out.append(f"MISSING  {SIGNATURES}/: no signature")
        for s in self.signatures:
            who = f"{s.role or '?'} {s.signer or s.signer_id or '?'} ({s.fingerprint or 'no key'})"
            if not s.valid:
                out.append(f"BAD      {s.file}: {who}: {s.reason}")
            elif s.trusted is False:
                out.append(f"UNTRUSTED {s.file}: {who}: {s.trust_reason}")
            else:
                note = " trusted as " + s.principal if s.trusted else ""
                out.append(f"ok       {s.file}: {who}{note}" + (" (legacy kvgate-signature-v1)" if s.legacy else ""))
        out += [f"LABEL    {label}" for label in self.labels]
        out += [f"NOTE     {note}" for note in self.notes]
        if self.anchors_given:
            for role in self.missing_roles:
                out.append(f"MISSING  role {role}: no valid signature by a key trusted for it")
        else:
            out.append("NOTE     no trust anchors given (--allowed-signers or --trusted-keys): "
                       "who signed is not checked")
        # the verdict beside the word: a VERIFIED INCONCLUSIVE is not a VERIFIED PASS (issue 53)
        out.append(f"{self.status}: {self.gate or '?'} verdict {self.verdict or '?'}"
                   + (f"; {len(self.labels)} label(s) above" if self.labels else ""))
        return out


def _check_sig(gate_dir: Path, rel: str, message: Optional[bytes]) -> SignatureCheck:
    check = SignatureCheck(file=rel, valid=False)
    m = _SIG_NAME.match(rel)
    if m:
        check.role, check.signer_id = m.group(1), m.group(2)
    try:
        data = read_regular(gate_dir / rel)
    except (OSError, ManifestError) as exc:
        check.reason = f"unreadable: {exc}"
        return check
    if rel.endswith(legacy.SUFFIX):
        check.legacy = True
        old = legacy.check(data, hashlib.sha256(message).hexdigest() if message is not None else None)
        check.signer, check.role, check.signed_at = old.signer, old.role, old.signed_at
        check.signer_id = signer_id(old.signer) if old.signer else None
        check.fingerprint, check.key_blob = old.fingerprint, old.key_blob or b""
        check.reason, check.valid = old.reason, not old.reason
        return check
    if not m:
        check.reason = "file name is not <role>-<signer-id>.sig"
        return check
    try:
        parsed = sshsig.parse_armored(data.decode("ascii"))
    except (UnicodeDecodeError, sshsig.SshsigError) as exc:
        check.reason = str(exc) if isinstance(exc, sshsig.SshsigError) else "not ASCII armor"
        return check
    check.fingerprint, check.key_blob = parsed.fingerprint, parsed.public_key
    if message is None:
        check.reason = f"no {MANIFEST} to check against"
        return check
    problem = sshsig.verify(parsed, message)
    if problem:
        check.reason = problem
        return check
    check.valid = True
    meta_rel = rel[:-len(".sig")] + ".json"
    try:
        meta = json.loads(read_regular(gate_dir / meta_rel).decode("utf-8"))
        if isinstance(meta, dict):
            if meta.get("fingerprint") not in (None, check.fingerprint):
                check.valid, check.reason = False, f"{meta_rel} names another key than the signature"
            check.signer = meta.get("signer") if isinstance(meta.get("signer"), str) else None
            check.signed_at = meta.get("signed_at") if isinstance(meta.get("signed_at"), str) else None
    except (OSError, ManifestError, UnicodeDecodeError, json.JSONDecodeError):
        pass  # the metadata is optional: the signature stands on its own
    return check


def _trust(checks: Sequence[SignatureCheck], anchors: Sequence[Anchor], roles: Sequence[str],
           now: _dt.datetime) -> dict[str, str]:
    for c in checks:
        if not c.valid:
            continue
        mine = [a for a in anchors if a.key_blob == c.key_blob]
        if not mine:
            c.trusted, c.trust_reason = False, "key not in the trust anchors"
            continue
        reasons = [a.allows(c.principal, sshsig.NAMESPACE, now) for a in mine]
        c.trusted = any(r is None for r in reasons)
        c.trust_reason = "" if c.trusted else "; ".join(r for r in reasons if r)
    satisfied: dict[str, str] = {}
    used: set[bytes] = set()
    for role in roles:  # each role by a different key: one person cannot sign for both parties
        for c in checks:
            if c.valid and c.trusted and c.role == role and c.key_blob not in used:
                satisfied[role] = c.file
                used.add(c.key_blob)
                break
    return satisfied


def verify(gate_dir: Path, *, anchors: Optional[Sequence[Anchor]] = None,
           roles: Sequence[str] = ROLES, progress: bool = False,
           now: Optional[_dt.datetime] = None) -> VerifyReport:
    """Recompute the manifest, check the statement, every signature and the required roles."""
    gate_dir = Path(gate_dir)
    if not gate_dir.is_dir() or gate_dir.is_symlink():
        raise InputError(f"{gate_dir}: not a directory")
    manifest_path = gate_dir / MANIFEST
    report = VerifyReport(gate_dir=str(gate_dir), manifest_present=manifest_path.is_file(),
                          required_roles=list(roles), anchors_given=anchors is not None)
    tree = scan(gate_dir)
    report.refused = tree.refused
    message: Optional[bytes] = None
    if report.manifest_present:
        message = read_regular(manifest_path)
        try:
            recorded, report.problems = parse_manifest(message.decode("utf-8"))
        except UnicodeDecodeError:
            recorded, report.problems = {}, [f"{MANIFEST} is not UTF-8 text"]
        actual = compute(gate_dir, tree.files, progress=progress)
        report.changed = sorted(k for k in recorded if k in actual and recorded[k] != actual[k])
        report.missing = sorted(k for k in recorded if k not in actual)
        report.extra += sorted(k for k in actual if k not in recorded)
        _derived_pdfs(gate_dir, recorded, actual, report, progress=progress)
    sig_files = [f for f in tree.signature_files if f.endswith((".sig", legacy.SUFFIX))]
    for f in tree.signature_files:
        if f not in sig_files and not (f.endswith(".json") and f[:-5] + ".sig" in sig_files):
            report.extra.append(f"{f} (not a signature file)")
    report.problems += _statement_problems(gate_dir, report, tree.empty_dirs, new_format=any(
        f.endswith(".sig") for f in sig_files))
    report.signatures = [_check_sig(gate_dir, f, message) for f in sig_files]
    _custody_findings(gate_dir, report)
    if anchors is not None:
        report.roles_satisfied = _trust(report.signatures, anchors, roles,
                                        now or _dt.datetime.now(_dt.timezone.utc))
    return report


_REPORT_PDF = re.compile(r"^report(\.[a-z]{2})?\.pdf$")


def _derived_pdfs(gate_dir: Path, recorded: dict[str, str], actual: dict[str, str], report: VerifyReport, *,
                  progress: bool) -> None:
    """A report PDF the manifest does not list (``kvgate report --pdf`` after the parties signed) is
    the gate's own only when it is, byte for byte, what kvgate prints from the HTML report of its
    language as signed (rendering is deterministic): then it shows nothing the signatures do not
    cover. Anything else (another text, another HTML, an HTML that changed) stays EXTRA."""
    from harness.report.pdf import html_to_pdf  # WeasyPrint: loaded only when such a PDF is present

    for rel in [r for r in report.extra if _REPORT_PDF.match(r)]:
        html_rel = rel[:-len(".pdf")] + ".html"
        if html_rel not in recorded or actual.get(html_rel) != recorded[html_rel]:
            continue  # no signed HTML to print it from: EXTRA
        with Progress(f"printing the signed {html_rel} to compare with {rel}", enabled=progress):
            html = read_regular(gate_dir / html_rel)  # these bytes are hashed and printed: no swap between
            try:
                same = hashlib.sha256(html).hexdigest() == recorded[html_rel] and \
                    hashlib.sha256(html_to_pdf(html.decode("utf-8"))).hexdigest() == actual[rel]
            except UnicodeDecodeError:
                same = False
        if same:
            report.extra.remove(rel)
            report.derived.append(rel)
        else:
            report.extra[report.extra.index(rel)] = f"{rel}: not what the signed {html_rel} prints to"


def _statement_problems(gate_dir: Path, report: VerifyReport, empty_dirs: list[str], *,
                        new_format: bool) -> list[str]:
    """Check ``SIGNOFF.json`` against ``result.json`` and the directory; empty directories it
    does not list are reported as extra."""
    try:
        result = load_gate_result(gate_dir)
    except ResultFileError as exc:
        return [str(exc)]
    report.campaign, report.gate = result.campaign, result.gate
    problems = []
    dirname = gate_dir.resolve().name
    if result.gate != dirname:
        problems.append(f"{RESULT_FILE} is gate {result.gate} but the directory is named {dirname}")
    path = gate_dir / SIGNOFF
    if not path.is_file():
        report.extra += [f"{d}/ (empty directory)" for d in empty_dirs]
        if new_format:
            problems.append(f"{SIGNOFF} missing: the signatures bind no campaign or gate")
        return problems
    try:
        statement = json.loads(read_regular(path).decode("utf-8"))
    except (OSError, ManifestError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return problems + [f"{SIGNOFF} unreadable: {exc}"]
    if not isinstance(statement, dict) or statement.get("format") != SIGNOFF_FORMAT:
        report.extra += [f"{d}/ (empty directory)" for d in empty_dirs]
        return problems + [f"{SIGNOFF}: not a {SIGNOFF_FORMAT} statement"]
    listed = statement.get("empty_directories")
    listed = [d for d in listed if isinstance(d, str)] if isinstance(listed, list) else []
    report.extra += [f"{d}/ (empty directory)" for d in empty_dirs if d not in listed]
    report.missing += [f"{d}/ (empty directory)" for d in listed if d not in empty_dirs
                       and not _is_dir(gate_dir / d)]
    for key, actual in (("campaign", result.campaign), ("gate", result.gate)):
        if statement.get(key) != actual:
            problems.append(f"{SIGNOFF} names {key} {statement.get(key)!r} but {RESULT_FILE} says {actual!r}")
    if statement.get("namespace") != sshsig.NAMESPACE:
        problems.append(f"{SIGNOFF} names namespace {statement.get('namespace')!r}, not {sshsig.NAMESPACE}")
    return problems


def _is_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _custody_findings(gate_dir: Path, report: VerifyReport) -> None:
    """What the result says it was decided by (issue 27): a G3's baseline is re-checked against
    the ``MANIFEST.sha256`` digest it recorded when that gate directory is at hand (the sibling
    campaign under the same reports root); an unsigned baseline and a non-stock gate file are
    labels, printed with the verdict."""
    try:
        result = load_gate_result(gate_dir)
    except ResultFileError:
        return  # already a problem of the statement check
    report.verdict = result.verdict.value
    report.labels += [label.text for label in gate_labels(result)]
    b = result.baseline
    if not isinstance(b, dict) or not b.get("manifest_sha256"):
        return
    camp, gate = str(b.get("campaign") or ""), str(b.get("gate") or "G2")
    here = Path(gate_dir).resolve()
    base = here.parent / gate if camp == result.campaign else here.parent.parent / camp / gate
    path = base / MANIFEST
    if not camp or "/" in camp or not path.is_file() or path.is_symlink():
        report.notes.append(f"the baseline {gate} of campaign {camp!r} is not at hand ({base}): its "
                            f"MANIFEST.sha256 digest {b['manifest_sha256'][:16]}... was not re-checked")
        return
    actual = hashlib.sha256(read_regular(path)).hexdigest()
    if actual != b["manifest_sha256"]:
        report.problems.append(f"the baseline {base} is not the one this gate compared against: its "
                               f"{MANIFEST} has sha256 {actual}, {RESULT_FILE} recorded {b['manifest_sha256']}")
    else:
        report.notes.append(f"the baseline {base}: {MANIFEST} matches the digest this gate recorded")
