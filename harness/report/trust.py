"""Trust anchors: which key may sign for which signer and role.

A report signature counts only when its key is bound to the signature's *principal*
``<signer-id>@<role>`` by an anchor, in either of two files:

* an OpenSSH ``allowed_signers`` file (the one ``ssh-keygen -Y verify -f`` reads)::

      joerg-mueller-3f2a9c1e@vendor,joerg-mueller-3f2a9c1e@customer ssh-ed25519 AAAA...
      zhang-wei@customer namespaces="kvgate-report@v1" ssh-ed25519 AAAA...

  principals are comma-separated patterns (``*`` and ``?``); options ``namespaces``,
  ``valid-after`` and ``valid-before`` are honoured as ``ssh-keygen`` does (checked at the
  time of verification: SSHSIG carries no signing time); ``cert-authority`` lines are refused.
* an ``authorized_keys`` file (``--trusted-keys``), where the ``principals="..."`` option names
  what the key may sign as. A key without it is trusted as a key but bound to no signer or
  role, so it satisfies no role.

Signer ids and roles are restricted to ``[a-z0-9._-]`` (see ``harness.report.signer``), so a
principal never contains a pattern character, comma, quote or space.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from harness.errors import InputError

_KEY_TYPES = {
    "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
}


class TrustFileError(InputError):
    """A trust anchor file is unreadable or malformed (names the file and line)."""


@dataclass(frozen=True)
class Anchor:
    source: str  # "file:line"
    principals: tuple[str, ...]  # patterns; empty: the key is bound to no signer or role
    key_blob: bytes
    namespaces: Optional[tuple[str, ...]] = None
    valid_after: Optional[_dt.datetime] = None
    valid_before: Optional[_dt.datetime] = None

    def allows(self, principal: str, namespace: str, now: _dt.datetime) -> Optional[str]:
        """None when this anchor lets its key sign as ``principal``; else why not."""
        if not any(_match(p, principal) for p in self.principals):
            bound = ", ".join(self.principals) or "no signer or role"
            return f"the key is bound to {bound}, not {principal} ({self.source})"
        if self.namespaces is not None and not any(_match(n, namespace) for n in self.namespaces):
            return f"the key may not sign namespace {namespace} ({self.source})"
        if self.valid_after and now < self.valid_after:
            return f"the key is valid only after {self.valid_after.isoformat()} ({self.source})"
        if self.valid_before and now >= self.valid_before:
            return f"the key expired at {self.valid_before.isoformat()} ({self.source})"
        return None


def _match(pattern: str, text: str) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text) is not None


def _tokens(line: str) -> list[str]:
    """Split on whitespace outside double quotes (OpenSSH's option syntax)."""
    out, cur, quoted = [], "", False
    for c in line:
        if c == '"':
            quoted = not quoted
            cur += c
        elif c.isspace() and not quoted:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += c
    if quoted:
        raise ValueError("unbalanced double quote")
    if cur:
        out.append(cur)
    return out


def _options(text: str) -> dict[str, str]:
    opts: dict[str, str] = {}
    for m in re.finditer(r'([A-Za-z-]+)(?:="([^"]*)")?(?:,|$)', text):
        if m.group(0):
            opts[m.group(1).lower()] = m.group(2) if m.group(2) is not None else ""
    return opts


def _time(value: str, where: str) -> _dt.datetime:
    digits = value.rstrip("Zz")
    fmt = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}.get(len(digits))
    if fmt is None:
        raise TrustFileError(f"{where}: time {value!r} is not YYYYMMDD[HHMM[SS]][Z]")
    try:
        t = _dt.datetime.strptime(digits, fmt)
    except ValueError:
        raise TrustFileError(f"{where}: time {value!r} is not a date") from None
    return t.replace(tzinfo=_dt.timezone.utc) if value[-1:] in "Zz" else t.astimezone(_dt.timezone.utc)


def _key(ktype: str, b64: str, where: str) -> bytes:
    if ktype not in _KEY_TYPES:
        raise TrustFileError(f"{where}: unknown key type {ktype!r} (expected one of "
                             f"{', '.join(sorted(_KEY_TYPES))})")
    try:
        blob = base64.b64decode(b64, validate=True)
    except binascii.Error:
        raise TrustFileError(f"{where}: the key is not base64") from None
    if blob[4:4 + int.from_bytes(blob[:4], "big")].decode("ascii", "replace") != ktype:
        raise TrustFileError(f"{where}: the key's body is not a {ktype} key")
    return blob


def _read_lines(path: Path) -> list[tuple[str, str]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrustFileError(f"{path}: cannot read the trust anchors: {exc}") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            out.append((f"{path}:{n}", line))
    return out


def read_allowed_signers(path: Path) -> list[Anchor]:
    """Anchors from an OpenSSH ``allowed_signers`` file."""
    anchors = []
    for where, line in _read_lines(path):
        try:
            toks = _tokens(line)
        except ValueError as exc:
            raise TrustFileError(f"{where}: {exc}") from None
        if len(toks) < 3:
            raise TrustFileError(f"{where}: expected 'principals [options] keytype base64-key'")
        principals = tuple(p for p in toks[0].strip('"').split(",") if p)
        opts: dict[str, str] = {}
        rest = toks[1:]
        if rest[0] not in _KEY_TYPES:
            opts = _options(rest[0])
            rest = rest[1:]
        if len(rest) < 2:
            raise TrustFileError(f"{where}: expected a key type and a base64 key after the options")
        if "cert-authority" in opts:
            raise TrustFileError(f"{where}: cert-authority anchors are not supported by kvgate verify")
        unknown = set(opts) - {"namespaces", "valid-after", "valid-before"}
        if unknown:
            raise TrustFileError(f"{where}: unknown option(s) {', '.join(sorted(unknown))}")
        anchors.append(Anchor(
            source=where, principals=principals, key_blob=_key(rest[0], rest[1], where),
            namespaces=tuple(opts["namespaces"].split(",")) if "namespaces" in opts else None,
            valid_after=_time(opts["valid-after"], where) if "valid-after" in opts else None,
            valid_before=_time(opts["valid-before"], where) if "valid-before" in opts else None))
    return anchors


def read_authorized_keys(path: Path) -> list[Anchor]:
    """Anchors from an ``authorized_keys`` file; ``principals="a@vendor,b@customer"`` binds."""
    anchors = []
    for where, line in _read_lines(path):
        try:
            toks = _tokens(line)
        except ValueError as exc:
            raise TrustFileError(f"{where}: {exc}") from None
        opts: dict[str, str] = {}
        if toks and toks[0] not in _KEY_TYPES:
            opts = _options(toks[0])
            toks = toks[1:]
        if len(toks) < 2:
            raise TrustFileError(f"{where}: expected '[options] keytype base64-key [comment]'")
        principals = tuple(p for p in opts.get("principals", "").split(",") if p)
        anchors.append(Anchor(source=where, principals=principals, key_blob=_key(toks[0], toks[1], where)))
    return anchors
