"""OpenSSH signatures (SSHSIG, the format of ``ssh-keygen -Y sign``): create them through
``ssh-keygen`` itself, verify them in-process.

Signing goes through the real ``ssh-keygen -Y sign`` so that every key OpenSSH can use works:
files (with a passphrase, handed over by ``SSH_ASKPASS`` from an environment variable, never
argv), keys held by an ``ssh-agent`` (give the public key file), and hardware keys
(``sk-ssh-ed25519@openssh.com``, ``sk-ecdsa-sha2-nistp256@openssh.com``).

Verification parses the armored blob (``PROTOCOL.sshsig`` in OpenSSH's sources) and checks the
signature with ``cryptography``: ssh-ed25519, rsa-sha2-256/512, ecdsa-sha2-nistp256/384/521 and
both sk types. The message signed is::

    "SSHSIG" || string(namespace) || string(reserved) || string(hash_alg) || string(H(message))

and for sk keys the authenticator signs
``sha256(application) || flags || counter || sha256(that message)``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from harness.errors import InputError

NAMESPACE = "kvgate-report@v1"
ARMOR_BEGIN = "-----BEGIN SSH SIGNATURE-----"
ARMOR_END = "-----END SSH SIGNATURE-----"
_MAGIC = b"SSHSIG"
_SIGN_TIMEOUT_S = 120.0  # a hardware key waits for a touch
_PASS_ENV = "KVGATE_SSHSIG_PASSPHRASE"


class SshsigError(InputError):
    """A signature could not be made or is not a well-formed SSHSIG."""


# --- wire format ----------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise SshsigError("truncated SSH signature")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return int.from_bytes(self.take(4), "big")

    def string(self) -> bytes:
        return self.take(self.u32())

    def mpint(self) -> int:
        return int.from_bytes(self.string(), "big", signed=True)

    def done(self) -> bool:
        return self.pos == len(self.data)


def _string(b: bytes) -> bytes:
    return len(b).to_bytes(4, "big") + b


@dataclass(frozen=True)
class Sshsig:
    public_key: bytes  # SSH wire blob of the signer's public key
    namespace: str
    hash_alg: str
    signature: bytes  # SSH wire blob of the signature

    @property
    def key_type(self) -> str:
        return _Reader(self.public_key).string().decode("ascii", "replace")

    @property
    def openssh_public(self) -> str:
        return f"{self.key_type} {base64.b64encode(self.public_key).decode()}"

    @property
    def fingerprint(self) -> str:
        return key_fingerprint(self.public_key)


def key_fingerprint(blob: bytes) -> str:
    """``SHA256:...`` of a public key's wire blob, as ``ssh-keygen -lf`` prints it."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def parse_armored(text: str) -> Sshsig:
    """Parse ``-----BEGIN SSH SIGNATURE-----`` ... into its fields."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    if len(lines) < 3 or lines[0] != ARMOR_BEGIN or lines[-1] != ARMOR_END:
        raise SshsigError("not an armored SSH signature (BEGIN/END SSH SIGNATURE lines)")
    try:
        blob = base64.b64decode("".join(lines[1:-1]), validate=True)
    except binascii.Error:
        raise SshsigError("SSH signature body is not base64") from None
    r = _Reader(blob)
    if r.take(6) != _MAGIC:
        raise SshsigError("not an SSHSIG blob (bad magic)")
    version = r.u32()
    if version != 1:
        raise SshsigError(f"SSHSIG version {version} is not supported (1 is)")
    public_key, namespace, _reserved, hash_alg, signature = (
        r.string(), r.string(), r.string(), r.string(), r.string())
    if not r.done():
        raise SshsigError("trailing bytes after the SSH signature")
    return Sshsig(public_key=public_key, namespace=namespace.decode("utf-8", "replace"),
                  hash_alg=hash_alg.decode("ascii", "replace"), signature=signature)


def _signed_data(namespace: str, hash_alg: str, message: bytes) -> bytes:
    digest = (hashlib.sha512 if hash_alg == "sha512" else hashlib.sha256)(message).digest()
    return (_MAGIC + _string(namespace.encode()) + _string(b"") + _string(hash_alg.encode())
            + _string(digest))


_CURVES: dict[str, tuple[ec.EllipticCurve, hashes.HashAlgorithm]] = {
    "nistp256": (ec.SECP256R1(), hashes.SHA256()),
    "nistp384": (ec.SECP384R1(), hashes.SHA384()),
    "nistp521": (ec.SECP521R1(), hashes.SHA512()),
}


def _verify_raw(key_blob: bytes, sig_blob: bytes, data: bytes) -> None:
    """Raise ``InvalidSignature`` unless ``sig_blob`` signs ``data`` with ``key_blob``."""
    k = _Reader(key_blob)
    ktype = k.string().decode("ascii", "replace")
    s = _Reader(sig_blob)
    stype = s.string().decode("ascii", "replace")
    sig = s.string()
    if ktype == "ssh-ed25519" and stype == "ssh-ed25519":
        Ed25519PublicKey.from_public_bytes(k.string()).verify(sig, data)
    elif ktype == "ssh-rsa" and stype in ("rsa-sha2-256", "rsa-sha2-512"):
        e, n = k.mpint(), k.mpint()
        algo: hashes.HashAlgorithm = hashes.SHA256() if stype == "rsa-sha2-256" else hashes.SHA512()
        rsa.RSAPublicNumbers(e, n).public_key().verify(sig, data, padding.PKCS1v15(), algo)
    elif ktype.startswith("ecdsa-sha2-") and stype == ktype:
        curve, algo = _CURVES[k.string().decode()]
        point = k.string()
        rs = _Reader(sig)
        der = encode_dss_signature(rs.mpint(), rs.mpint())
        ec.EllipticCurvePublicKey.from_encoded_point(curve, point).verify(der, data, ec.ECDSA(algo))
    elif ktype in ("sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com") and stype == ktype:
        if ktype.startswith("sk-ecdsa"):
            k.string()  # curve name
        point = k.string()
        application = k.string()
        flags, counter = s.take(1), s.take(4)
        if not flags[0] & 0x01:  # user presence, required by ssh-keygen's default policy
            raise InvalidSignature("hardware key signature without user presence")
        signed = hashlib.sha256(application).digest() + flags + counter + hashlib.sha256(data).digest()
        if ktype == "sk-ssh-ed25519@openssh.com":
            Ed25519PublicKey.from_public_bytes(point).verify(sig, signed)
        else:
            rs = _Reader(sig)
            der = encode_dss_signature(rs.mpint(), rs.mpint())
            ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point).verify(
                der, signed, ec.ECDSA(hashes.SHA256()))
    else:
        raise InvalidSignature(f"unsupported key/signature type {ktype}/{stype}")


def verify(sig: Sshsig, message: bytes, *, namespace: str = NAMESPACE) -> Optional[str]:
    """None when ``sig`` is a valid signature of ``message`` in ``namespace``; else the reason."""
    if sig.namespace != namespace:
        return f"signed for namespace {sig.namespace!r}, not {namespace!r}"
    if sig.hash_alg not in ("sha256", "sha512"):
        return f"unsupported hash {sig.hash_alg!r}"
    try:
        _verify_raw(sig.public_key, sig.signature, _signed_data(namespace, sig.hash_alg, message))
    except InvalidSignature as exc:
        return f"signature does not match{': ' + str(exc) if str(exc) else ''}"
    except (SshsigError, KeyError, ValueError):
        return "malformed public key or signature"
    return None


# --- signing ----------------------------------------------------------------------------------

def armor(blob: bytes) -> str:
    body = base64.b64encode(blob).decode()
    return "\n".join([ARMOR_BEGIN, *(body[i:i + 70] for i in range(0, len(body), 70)), ARMOR_END]) + "\n"


def sign_ed25519(message: bytes, key: Ed25519PrivateKey, *, namespace: str = NAMESPACE) -> str:
    """SSHSIG of ``message`` made in-process with an Ed25519 key (for PKCS#8 PEM key files, which
    ``ssh-keygen`` does not read); byte-for-byte the format ``ssh-keygen -Y sign`` writes."""
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    key_blob = _string(b"ssh-ed25519") + _string(raw)
    signature = key.sign(_signed_data(namespace, "sha512", message))
    blob = (_MAGIC + (1).to_bytes(4, "big") + _string(key_blob) + _string(namespace.encode()) + _string(b"")
            + _string(b"sha512") + _string(_string(b"ssh-ed25519") + _string(signature)))
    return armor(blob)


def ssh_keygen() -> str:
    path = shutil.which("ssh-keygen")
    if path is None:
        raise SshsigError("ssh-keygen not found: install OpenSSH's client (apt-get install openssh-client)")
    return path


def sign(message: bytes, key_file: Path, *, namespace: str = NAMESPACE,
         passphrase: Optional[bytes] = None) -> str:
    """Sign ``message`` with ``ssh-keygen -Y sign -f key_file -n namespace``; return the armored
    signature. ``key_file`` is a private key, or a public key whose private half is in the
    ``ssh-agent`` named by ``SSH_AUTH_SOCK``. A passphrase goes through ``SSH_ASKPASS`` and an
    environment variable of the child only."""
    key_file = Path(key_file)
    if not key_file.is_file():
        raise SshsigError(f"{key_file}: no such key file")
    env = {k: v for k, v in os.environ.items() if k != _PASS_ENV}
    with tempfile.TemporaryDirectory(prefix="kvgate-sign-") as tmp:
        if passphrase is not None:
            askpass = Path(tmp) / "askpass"
            # The script holds no secret: it prints the variable the child inherits.
            askpass.write_text(f'#!/bin/sh\nprintf "%s\\n" "${_PASS_ENV}"\n')
            askpass.chmod(stat.S_IRWXU)
            env.update({"SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force",
                        _PASS_ENV: passphrase.decode("utf-8"), "DISPLAY": env.get("DISPLAY", ":0")})
        else:
            env["SSH_ASKPASS_REQUIRE"] = "never"
        try:
            proc = subprocess.run(  # noqa: S603 - fixed argv, the key path is an argument
                [ssh_keygen(), "-q", "-Y", "sign", "-f", str(key_file), "-n", namespace],
                input=message, capture_output=True, env=env, timeout=_SIGN_TIMEOUT_S,
                stdin=None, start_new_session=passphrase is not None)
        except subprocess.TimeoutExpired:
            raise SshsigError(f"ssh-keygen -Y sign with {key_file} did not finish in "
                              f"{_SIGN_TIMEOUT_S:.0f} s (a hardware key waiting for a touch?)") from None
    out = proc.stdout.decode("ascii", "replace")
    if proc.returncode != 0 or ARMOR_BEGIN not in out:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        hint = ""
        if passphrase is None and any("passphrase" in t.lower() for t in tail):
            hint = " (the key is protected by a passphrase; give it with --passphrase-env VAR)"
        raise SshsigError(f"ssh-keygen -Y sign with {key_file} failed (exit {proc.returncode}): "
                          f"{' / '.join(tail) or 'no output'}{hint}")
    return out[out.index(ARMOR_BEGIN):].strip() + "\n"
