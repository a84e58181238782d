"""Verification (only) of ``kvgate-signature-v1`` files: ``signatures/<role>-<slug>.sig.json``,
kvgate's earlier JSON format: an Ed25519 signature over the canonical JSON statement
``{"format", "manifest_sha256", "public_key", "role", "signed_at", "signer"}`` (keys sorted, no
spaces, ASCII). New signatures are SSHSIG (``harness.report.sshsig``); these are still read so
that reports signed before stay checkable."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Optional

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from harness.report.sshsig import key_fingerprint

FORMAT = "kvgate-signature-v1"
SUFFIX = ".sig.json"
_STATEMENT_KEYS = ("format", "manifest_sha256", "public_key", "role", "signed_at", "signer")


@dataclass
class LegacySignature:
    signer: Optional[str] = None
    role: Optional[str] = None
    signed_at: Optional[str] = None
    key_blob: Optional[bytes] = None  # SSH wire form of the Ed25519 key
    reason: str = ""  # empty when the signature is valid

    @property
    def fingerprint(self) -> Optional[str]:
        return key_fingerprint(self.key_blob) if self.key_blob else None


def statement(fields: dict[str, str]) -> bytes:
    return json.dumps({k: fields[k] for k in _STATEMENT_KEYS}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True).encode("ascii")


def check(data: bytes, manifest_sha: Optional[str]) -> LegacySignature:
    out = LegacySignature()
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        out.reason = f"unreadable: {exc}"
        return out
    if not isinstance(doc, dict):
        out.reason = "not a JSON object"
        return out
    fields = {k: doc.get(k) for k in _STATEMENT_KEYS}
    if not all(isinstance(v, str) for v in fields.values()) or not isinstance(doc.get("signature"), str):
        out.reason = "missing or non-text fields"
        return out
    out.signer, out.role, out.signed_at = fields["signer"], fields["role"], fields["signed_at"]
    if fields["format"] != FORMAT:
        out.reason = f"unknown format {fields['format']!r}"
        return out
    try:
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(str(fields["public_key"]), validate=True))
        signature = base64.b64decode(str(doc["signature"]), validate=True)
    except (ValueError, binascii.Error):
        out.reason = "public key or signature is not valid base64 Ed25519 data"
        return out
    ssh = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    out.key_blob = base64.b64decode(ssh.split()[1])
    if doc.get("fingerprint") not in (None, out.fingerprint):
        out.reason = "the stated fingerprint does not match the public key"
    elif manifest_sha is None:
        out.reason = "no MANIFEST.sha256 to check against"
    elif fields["manifest_sha256"] != manifest_sha:
        out.reason = "signed a different MANIFEST.sha256 (the manifest was replaced)"
    else:
        try:
            public.verify(signature, statement({k: str(v) for k, v in fields.items()}))
        except InvalidSignature:
            out.reason = "signature does not match (the signature file was altered)"
    return out


