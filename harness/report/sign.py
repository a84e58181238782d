"""Evidence manifest and Ed25519 signatures of a gate directory, so a vendor and a customer can
each sign the same result and anyone can check later that no file changed.

* ``MANIFEST.sha256``: one line per file under the gate directory (``signatures/`` and the
  manifest itself excepted), sorted by path, in ``sha256sum`` format: ``sha256sum -c`` run in the
  gate directory checks it without kvgate.
* ``signatures/<role>-<signer>.sig.json``: who signed (signer, role), when (UTC), with which key
  (raw public key in base64, its OpenSSH form and its ``SHA256:`` fingerprint, the one
  ``ssh-keygen -lf`` prints), the sha256 of the manifest, and the Ed25519 signature.

What is signed is the canonical JSON *statement* ``{"format", "manifest_sha256", "public_key",
"role", "signed_at", "signer"}`` (keys sorted, no spaces, ASCII): it binds the manifest (hence
every file) together with the signer's name, role and time, so a vendor signature cannot be
relabelled as the customer's. Keys: ``ssh-keygen -t ed25519`` (OpenSSH format) or PKCS#8 PEM
(``openssl genpkey -algorithm ed25519``), optionally passphrase-protected. Key material and
passphrases never appear in messages or files.

A valid signature proves the files are those the key holder signed; that the key belongs to the
named person is checked against ``trusted_keys`` (authorized_keys format) when given, otherwise
by comparing the printed fingerprint with the one the signer publishes.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from harness.errors import InputError
from harness.progress import Progress
from harness.store.durable import write_atomic

MANIFEST = "MANIFEST.sha256"
SIGNATURES = "signatures"
SIGNATURE_FORMAT = "kvgate-signature-v1"
ROLES = ("vendor", "customer")
_LINE = re.compile(r"^(\\?)([0-9a-f]{64}) [ *](.+)$")
_CHUNK = 1 << 20


class SignError(InputError):
    """Signing was refused: a bad key, passphrase, signer, role or gate directory."""


# --- manifest -------------------------------------------------------------------------------

def _check_gate_dir(gate_dir: Path) -> Path:
    gate_dir = Path(gate_dir)
    if not gate_dir.is_dir():
        raise SignError(f"{gate_dir}: not a directory")
    if not (gate_dir / "result.json").is_file() and not (gate_dir / MANIFEST).is_file():
        # Refuse to hash an arbitrary directory (a typo could walk a home directory).
        raise SignError(f"{gate_dir}: not a gate directory (no result.json)")
    return gate_dir


def _files(gate_dir: Path) -> list[str]:
    out: list[str] = []
    for root, dirs, files in os.walk(gate_dir):
        rel_root = Path(root).relative_to(gate_dir)
        if rel_root == Path("."):
            dirs[:] = [d for d in dirs if d != SIGNATURES]
        dirs.sort()
        for name in files:
            rel = (rel_root / name).as_posix()
            if rel == MANIFEST:
                continue
            out.append(rel)
    return sorted(out)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def compute_manifest(gate_dir: Path, *, progress: bool = False) -> dict[str, str]:
    """``{relative path: sha256}`` of every file the manifest covers, sorted by path."""
    gate_dir = Path(gate_dir)
    files = _files(gate_dir)
    out: dict[str, str] = {}
    with Progress(f"hashing {gate_dir.name}", total=len(files), enabled=progress) as p:
        for rel in files:
            try:
                out[rel] = _sha256_file(gate_dir / rel)
            except OSError as exc:
                raise SignError(f"{gate_dir / rel}: cannot read: {exc.strerror or exc}") from None
            p.update(1, rel)
    return out


def _line(rel: str, digest: str) -> str:
    # sha256sum's escaping: a name with a backslash or newline gets a leading backslash.
    if "\\" in rel or "\n" in rel:
        return "\\" + digest + "  " + rel.replace("\\", "\\\\").replace("\n", "\\n")
    return f"{digest}  {rel}"


def manifest_text(entries: dict[str, str]) -> str:
    return "".join(_line(rel, entries[rel]) + "\n" for rel in sorted(entries))


def parse_manifest(text: str) -> tuple[dict[str, str], list[str]]:
    """Entries of a manifest and the problems found (line numbers of malformed lines)."""
    entries: dict[str, str] = {}
    problems: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _LINE.match(line)
        if not m:
            problems.append(f"{MANIFEST} line {n}: not '<sha256>  <path>'")
            continue
        rel = m.group(3)
        if m.group(1):
            rel = re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), rel)
        entries[rel] = m.group(2)
    return entries, problems


def write_manifest(gate_dir: Path, *, progress: bool = False) -> Path:
    """Write ``gate_dir/MANIFEST.sha256`` (sha256sum format, sorted) and return its path."""
    gate_dir = _check_gate_dir(gate_dir)
    path = gate_dir / MANIFEST
    write_atomic(path, manifest_text(compute_manifest(gate_dir, progress=progress)).encode("utf-8"))
    return path


# --- keys -----------------------------------------------------------------------------------

def load_private_key(path: Path, passphrase: Optional[bytes] = None) -> Ed25519PrivateKey:
    """An Ed25519 private key from an OpenSSH (``ssh-keygen -t ed25519``) or PKCS#8 PEM file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SignError(f"{path}: cannot read the key file: {exc.strerror or exc}") from None
    try:
        if b"-----BEGIN OPENSSH PRIVATE KEY-----" in data:
            key: Any = serialization.load_ssh_private_key(data, password=passphrase)
        else:
            key = serialization.load_pem_private_key(data, password=passphrase)
    except TypeError:
        if passphrase is None:
            raise SignError(f"{path}: the key is protected by a passphrase; give it with "
                            "--passphrase-env VAR") from None
        raise SignError(f"{path}: the key has no passphrase; do not give one") from None
    except (ValueError, UnsupportedAlgorithm):
        raise SignError(f"{path}: not a readable Ed25519 private key (wrong passphrase, or not an "
                        "OpenSSH/PEM private key file)") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SignError(f"{path}: a {type(key).__name__.lstrip('_')} key; kvgate signs with Ed25519 only "
                        "(make one with: ssh-keygen -t ed25519 -f FILE)")
    return key


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def openssh_public(key: Ed25519PublicKey) -> str:
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def fingerprint(key: Ed25519PublicKey) -> str:
    """``SHA256:...`` over the SSH wire form of the key, as ``ssh-keygen -lf`` prints it."""
    blob = base64.b64decode(openssh_public(key).split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def read_trusted_keys(path: Path) -> list[Ed25519PublicKey]:
    """Ed25519 keys from an authorized_keys-style file (``ssh-ed25519 AAAA... comment`` per line)."""
    keys: list[Ed25519PublicKey] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read trusted keys: {exc}") from None
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        try:
            key = serialization.load_ssh_public_key(" ".join(parts[:2]).encode())
        except (ValueError, UnsupportedAlgorithm, IndexError):
            raise InputError(f"{path}:{n}: not an OpenSSH public key line") from None
        if not isinstance(key, Ed25519PublicKey):
            raise InputError(f"{path}:{n}: not an ssh-ed25519 key")
        keys.append(key)
    return keys


# --- signing --------------------------------------------------------------------------------

_STATEMENT_KEYS = ("format", "manifest_sha256", "public_key", "role", "signed_at", "signer")


def _statement(fields: dict[str, str]) -> bytes:
    return json.dumps({k: fields[k] for k in _STATEMENT_KEYS}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True).encode("ascii")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "signer"


def signature_path(gate_dir: Path, signer: str, role: str) -> Path:
    """``signatures/<role>-<signer>.sig.json``; when another signer's name maps to the same file
    name ("Jane Doe" and "Jane_Doe"), a short hash of the name keeps both signatures."""
    path = Path(gate_dir) / SIGNATURES / f"{role}-{_slug(signer)}.sig.json"
    if path.is_file():
        try:
            existing = json.loads(path.read_text(encoding="utf-8")).get("signer")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            existing = None
        if existing != signer:
            digest = hashlib.sha256(signer.encode("utf-8")).hexdigest()[:8]
            path = path.with_name(f"{role}-{_slug(signer)}-{digest}.sig.json")
    return path


def _signatures(gate_dir: Path) -> list[Path]:
    d = Path(gate_dir) / SIGNATURES
    return sorted(d.glob("*.sig.json")) if d.is_dir() else []


def sign(gate_dir: Path, private_key_path: Path, signer: str, role: str, *,
         passphrase: Optional[bytes] = None, progress: bool = False,
         now: Optional[_dt.datetime] = None) -> Path:
    """Write the manifest and ``signatures/<role>-<signer>.sig.json``; return the signature path.

    When the directory already carries signatures, the files must still match the manifest they
    signed: signing changed files would silently invalidate the other party's signature, so it
    is refused, naming the files."""
    gate_dir = _check_gate_dir(gate_dir)
    signer = signer.strip()
    if not signer or any(c in signer for c in "\r\n\x00") or len(signer) > 200:
        raise SignError("--signer must be a non-empty name on one line (at most 200 characters)")
    if role not in ROLES:
        raise SignError(f"role {role!r} is not one of: {', '.join(ROLES)}")
    key = load_private_key(private_key_path, passphrase)
    current = manifest_text(compute_manifest(gate_dir, progress=progress))
    manifest_path = gate_dir / MANIFEST
    others = [p for p in _signatures(gate_dir) if p != signature_path(gate_dir, signer, role)]
    if others and manifest_path.is_file():
        old = manifest_path.read_text(encoding="utf-8")
        if old != current:
            changes = _diff(parse_manifest(old)[0], parse_manifest(current)[0])
            raise SignError(
                f"{gate_dir}: files changed since it was signed ({', '.join(p.name for p in others)}): "
                f"{changes}; refusing to sign (run kvgate verify for details)")
    write_atomic(manifest_path, current.encode("utf-8"))
    public = key.public_key()
    when = (now or _dt.datetime.now(_dt.timezone.utc)).astimezone(_dt.timezone.utc)
    fields = {
        "format": SIGNATURE_FORMAT,
        "signer": signer,
        "role": role,
        "signed_at": when.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "manifest_sha256": hashlib.sha256(current.encode("utf-8")).hexdigest(),
        "public_key": base64.b64encode(_raw_public(public)).decode(),
    }
    doc: dict[str, Any] = dict(fields)
    doc["public_key_openssh"] = openssh_public(public)
    doc["fingerprint"] = fingerprint(public)
    doc["algorithm"] = "ed25519"
    doc["signed_statement"] = ("canonical JSON of format, manifest_sha256, public_key, role, signed_at, "
                               "signer (sorted keys, no spaces, ASCII)")
    doc["signature"] = base64.b64encode(key.sign(_statement(fields))).decode()
    path = signature_path(gate_dir, signer, role)
    write_atomic(path, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))
    return path


def _diff(old: dict[str, str], new: dict[str, str]) -> str:
    changed = sorted(k for k in old if k in new and old[k] != new[k])
    missing = sorted(k for k in old if k not in new)
    extra = sorted(k for k in new if k not in old)
    parts = []
    for label, items in (("changed", changed), ("missing", missing), ("added", extra)):
        if items:
            parts.append(f"{label}: {', '.join(items[:10])}" + (" ..." if len(items) > 10 else ""))
    return "; ".join(parts) or "manifest format differs"


# --- verification ---------------------------------------------------------------------------

@dataclass
class SignatureCheck:
    file: str
    valid: bool
    reason: str = ""
    signer: Optional[str] = None
    role: Optional[str] = None
    signed_at: Optional[str] = None
    fingerprint: Optional[str] = None
    trusted: Optional[bool] = None  # None: no trusted key list was given


@dataclass
class VerifyReport:
    gate_dir: str
    manifest_present: bool
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    signatures: list[SignatureCheck] = field(default_factory=list)

    @property
    def files_ok(self) -> bool:
        return self.manifest_present and not (self.changed or self.missing or self.extra or self.problems)

    @property
    def ok(self) -> bool:
        """Every file as signed, at least one signature, every signature valid (and trusted when
        a trusted key list was given)."""
        return (self.files_ok and bool(self.signatures)
                and all(s.valid and s.trusted is not False for s in self.signatures))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        d["files_ok"] = self.files_ok
        return d

    def lines(self) -> list[str]:
        """Human summary, one finding per line."""
        out = []
        if not self.manifest_present:
            out.append(f"MISSING  {MANIFEST}: the gate directory was never signed (kvgate sign)")
        out += [f"PROBLEM  {p}" for p in self.problems]
        out += [f"CHANGED  {p}" for p in self.changed]
        out += [f"MISSING  {p}" for p in self.missing]
        out += [f"EXTRA    {p} (not in the manifest)" for p in self.extra]
        if self.manifest_present and not (self.changed or self.missing or self.extra or self.problems):
            out.append(f"ok       {MANIFEST}: every file matches")
        if self.manifest_present and not self.signatures:
            out.append(f"MISSING  {SIGNATURES}/: no signature")
        for s in self.signatures:
            who = f"{s.role or '?'} {s.signer or '?'} ({s.fingerprint or 'no key'}, {s.signed_at or '?'})"
            if not s.valid:
                out.append(f"BAD      {s.file}: {who}: {s.reason}")
            elif s.trusted is False:
                out.append(f"UNTRUSTED {s.file}: {who}: key not in the trusted keys")
            else:
                out.append(f"ok       {s.file}: {who}" + (" trusted" if s.trusted else ""))
        out.append("VERIFIED" if self.ok else "NOT VERIFIED")
        return out


def _check_signature(path: Path, rel: str, manifest_sha: Optional[str],
                     trusted: Optional[Sequence[bytes]]) -> SignatureCheck:
    check = SignatureCheck(file=rel, valid=False)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        check.reason = f"unreadable: {exc}"
        return check
    if not isinstance(doc, dict):
        check.reason = "not a JSON object"
        return check
    check.signer, check.role = doc.get("signer"), doc.get("role")
    check.signed_at, check.fingerprint = doc.get("signed_at"), doc.get("fingerprint")
    fields = {k: doc.get(k) for k in _STATEMENT_KEYS}
    if not all(isinstance(v, str) for v in fields.values()) or not isinstance(doc.get("signature"), str):
        check.reason = "missing or non-text fields"
        return check
    if fields["format"] != SIGNATURE_FORMAT:
        check.reason = f"unknown format {fields['format']!r}"
        return check
    try:
        raw = base64.b64decode(str(fields["public_key"]), validate=True)
        public = Ed25519PublicKey.from_public_bytes(raw)
        signature = base64.b64decode(str(doc["signature"]), validate=True)
    except (ValueError, binascii.Error):
        check.reason = "public key or signature is not valid base64 Ed25519 data"
        return check
    check.fingerprint = fingerprint(public)
    if doc.get("fingerprint") not in (None, check.fingerprint):
        check.reason = "the stated fingerprint does not match the public key"
        return check
    if manifest_sha is None:
        check.reason = f"no {MANIFEST} to check against"
        return check
    if fields["manifest_sha256"] != manifest_sha:
        check.reason = f"signed a different {MANIFEST} (the manifest was replaced)"
        return check
    try:
        public.verify(signature, _statement({k: str(v) for k, v in fields.items()}))
    except InvalidSignature:
        check.reason = "signature does not match (the signature file was altered)"
        return check
    check.valid = True
    if trusted is not None:
        check.trusted = raw in trusted
    return check


def verify(gate_dir: Path, *, trusted_keys: Optional[Iterable[Ed25519PublicKey]] = None,
           progress: bool = False) -> VerifyReport:
    """Recompute the manifest, compare it with ``MANIFEST.sha256`` and check every signature."""
    gate_dir = _check_gate_dir(gate_dir)
    manifest_path = gate_dir / MANIFEST
    report = VerifyReport(gate_dir=str(gate_dir), manifest_present=manifest_path.is_file())
    manifest_sha: Optional[str] = None
    if report.manifest_present:
        data = manifest_path.read_bytes()
        manifest_sha = hashlib.sha256(data).hexdigest()
        try:
            recorded, report.problems = parse_manifest(data.decode("utf-8"))
        except UnicodeDecodeError:
            recorded, report.problems = {}, [f"{MANIFEST} is not UTF-8 text"]
        actual = compute_manifest(gate_dir, progress=progress)
        report.changed = sorted(k for k in recorded if k in actual and recorded[k] != actual[k])
        report.missing = sorted(k for k in recorded if k not in actual)
        report.extra = sorted(k for k in actual if k not in recorded)
    trusted = [_raw_public(k) for k in trusted_keys] if trusted_keys is not None else None
    for path in _signatures(gate_dir):
        rel = path.relative_to(gate_dir).as_posix()
        report.signatures.append(_check_signature(path, rel, manifest_sha, trusted))
    return report
