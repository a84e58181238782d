"""Trust anchors: which key may sign for which signer and role.

A report signature counts only when its key is bound to the signature's *principal*
``<signer-id>@<role>`` by an anchor, in either of two files:

* an OpenSSH ``allowed_signers`` file (the one ``ssh-keygen -Y verify -f`` reads)::

      joerg-mueller-3f2a9c1e@vendor,joerg-mueller-3f2a9c1e@customer ssh-ed25519 AAAA...
      zhang-wei@customer namespaces="kvgate-report@v1" ssh-ed25519 AAAA...

  read as ``ssh-keygen -Y verify`` reads it (sshsig.c, OpenSSH 9): principals are a pattern list
  (``*``, ``?``, and ``!`` vetoes wherever it stands); options ``namespaces``, ``valid-after`` and
  ``valid-before`` take double-quoted values, names are case-insensitive, times are checked at
  verification (SSHSIG carries no signing time); ``cert-authority`` lines are refused. Where
  OpenSSH would skip a line (an unquoted value, an unknown or repeated option, a stray comma),
  kvgate refuses the file naming the line: it never trusts a file it reads differently.
  ``tests/security/test_allowed_signers.py`` checks every accepted form against ssh-keygen.
* an ``authorized_keys`` file (``--trusted-keys``), where the ``principals="..."`` option names
  what the key may sign as and ``expiry-time`` ends its validity; options are parsed as sshd
  parses them. A key without principals is trusted as a key but bound to no signer or role, so
  it satisfies no role.

Both files are read up to MAX_TRUST_FILE_BYTES.

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
    principals: tuple[str, ...]  # patterns, ``!`` negates; empty: the key is bound to no signer or role
    key_blob: bytes
    namespaces: Optional[tuple[str, ...]] = None
    valid_after: Optional[_dt.datetime] = None
    valid_before: Optional[_dt.datetime] = None

    def allows(self, principal: str, namespace: str, now: _dt.datetime) -> Optional[str]:
        """None when this anchor lets its key sign as ``principal``; else why not. The checks and
        their order are ``ssh-keygen -Y verify``'s (sshsig.c ``check_allowed_keys_line``)."""
        if match_pattern_list(principal, self.principals) != 1:
            bound = ", ".join(self.principals) or "no signer or role"
            return f"the key is bound to {bound}, not {principal} ({self.source})"
        if self.namespaces is not None and match_pattern_list(namespace, self.namespaces) != 1:
            return f"the key may not sign namespace {namespace} ({self.source})"
        if self.valid_after and now < self.valid_after:
            return f"the key is valid only after {self.valid_after.isoformat()} ({self.source})"
        if self.valid_before and now > self.valid_before:
            return f"the key expired at {self.valid_before.isoformat()} ({self.source})"
        return None


def _match(pattern: str, text: str) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, re.DOTALL) is not None


def match_pattern_list(text: str, patterns: tuple[str, ...]) -> int:
    """OpenSSH's ``match_pattern_list``: 1 when a pattern matches and no negated one (``!p``)
    does, -1 when a negated one matches (a veto, whatever the order), 0 when none matches."""
    positive = 0
    for pattern in patterns:
        negated = pattern.startswith("!")
        if _match(pattern[1:] if negated else pattern, text):
            if negated:
                return -1
            positive = 1
    return positive


def _tokens(line: str) -> list[str]:
    """Split on blanks outside double quotes; ``\\"`` does not toggle quoting (OpenSSH's
    ``sshkey_advance_past_options``)."""
    out, cur, quoted, i = [], "", False, 0
    while i < len(line):
        c = line[i]
        if c == "\\" and line[i + 1:i + 2] == '"':
            cur += line[i:i + 2]
            i += 2
            continue
        if c == '"':
            quoted = not quoted
            cur += c
        elif c in " \t" and not quoted:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    if quoted:
        raise ValueError("unbalanced double quote")
    if cur:
        out.append(cur)
    return out


def _dequote(text: str, i: int, name: str) -> tuple[str, int]:
    """OpenSSH's ``opt_dequote``: a value must be double-quoted; ``\\"`` is a quote inside it."""
    if text[i:i + 1] != '"':
        raise ValueError(f'option {name}: missing start quote (values must be written {name}="...")')
    i += 1
    value = ""
    while i < len(text) and text[i] != '"':
        if text[i] == "\\" and text[i + 1:i + 2] == '"':
            i += 1
        value += text[i]
        i += 1
    if i >= len(text):
        raise ValueError(f"option {name}: missing end quote")
    return value, i + 1


_OPTION_NAME = re.compile(r"[A-Za-z0-9-]+")


def parse_options(text: str, *, flags: frozenset[str], valued: frozenset[str]) -> dict[str, Optional[str]]:
    """Key options as OpenSSH reads them (``sshsigopt_parse``/``sshauthopt_parse``): comma-separated,
    names case-insensitive, a flag bare, a valued option ``name="value"``; an unknown or repeated
    option, a missing quote, a stray character or a trailing comma raises ValueError."""
    opts: dict[str, Optional[str]] = {}
    i = 0
    while True:
        m = _OPTION_NAME.match(text, i)
        name = m.group(0).lower() if m else ""
        i = m.end() if m else i
        if name in flags and text[i:i + 1] != "=":
            value: Optional[str] = None
        elif name in valued and text[i:i + 1] == "=":
            value, i = _dequote(text, i + 1, name)
        else:
            raise ValueError(f"unknown or malformed key option near {text[max(0, i - len(name)):][:40]!r}")
        if name in opts:
            raise ValueError(f"option {name} given more than once")
        opts[name] = value
        if i >= len(text):
            return opts
        if text[i] != ",":
            raise ValueError(f"unknown key option text {text[i:][:40]!r}")
        i += 1
        if i >= len(text):
            raise ValueError("unexpected end of options after a comma")


def _time(value: str, where: str) -> _dt.datetime:
    """OpenSSH's ``parse_absolute_time``: YYYYMMDD[HHMM[SS]], UTC with a ``Z`` or ``UTC`` suffix,
    else local time."""
    digits, utc = value, False
    if len(value) > 1 and value[-1:] in "Zz":
        digits, utc = value[:-1], True
    elif len(value) > 3 and value[-3:].upper() == "UTC":
        digits, utc = value[:-3], True
    fmt = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}.get(len(digits))
    if fmt is None or not digits.isdigit() or not digits.isascii():
        raise TrustFileError(f"{where}: time {value!r} is not YYYYMMDD[HHMM[SS]][Z]")
    try:
        t = _dt.datetime.strptime(digits, fmt)
    except ValueError:
        raise TrustFileError(f"{where}: time {value!r} is not a date") from None
    if t.year < 1970:
        raise TrustFileError(f"{where}: time {value!r} is before 1970")
    return t.replace(tzinfo=_dt.timezone.utc) if utc else t.astimezone(_dt.timezone.utc)


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


MAX_TRUST_FILE_BYTES = 1 << 20  # far beyond any real list of signers; a bigger file is refused


def _lines(text: str, source: str) -> list[tuple[str, str]]:
    out = []
    for n, line in enumerate(text.split("\n"), 1):  # OpenSSH reads lines, not universal newlines
        line = line.strip(" \t\r")
        if line and not line.startswith("#"):
            out.append((f"{source}:{n}", line))
    return out


_SIGNER_FLAGS = frozenset({"cert-authority"})
_SIGNER_VALUED = frozenset({"namespaces", "valid-after", "valid-before"})
# sshd's authorized_keys options (auth-options.c). kvgate honours principals and expiry-time and
# refuses cert-authority; the others restrict logins, not signatures, and are accepted as written.
_AUTH_FLAGS = frozenset({
    "restrict", "cert-authority", "verify-required", "touch-required", "no-touch-required",
    *(f"{p}{f}" for p in ("", "no-") for f in ("port-forwarding", "agent-forwarding", "x11-forwarding",
                                                "pty", "user-rc")),
})
_AUTH_VALUED = frozenset({"command", "principals", "from", "expiry-time", "environment", "permitopen",
                          "permitlisten", "tunnel"})


def read_allowed_signers(path: Path) -> list[Anchor]:
    """Anchors from an OpenSSH ``allowed_signers`` file (see :func:`parse_allowed_signers`)."""
    return parse_allowed_signers(_raw_text(path), str(path))


def _raw_text(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_TRUST_FILE_BYTES + 1)
        if len(data) > MAX_TRUST_FILE_BYTES:
            raise TrustFileError(f"{path}: larger than the {MAX_TRUST_FILE_BYTES} byte limit for a trust file")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrustFileError(f"{path}: cannot read the trust anchors: {exc}") from None


def parse_allowed_signers(text: str, source: str) -> list[Anchor]:
    """Anchors from ``allowed_signers`` text, read as ``ssh-keygen -Y verify`` reads it
    (sshsig.c): ``principals [options] keytype base64 [comment]``; principals are a pattern list
    (``*``, ``?``, ``!`` vetoes), options those of :func:`parse_options` with quoted values. A line
    OpenSSH would not use (malformed options, unquoted times, a bad key) is an error here, naming
    the line, rather than skipped: kvgate never trusts a file it reads differently."""
    anchors = []
    for where, line in _lines(text, source):
        try:
            anchors.append(_signer_line(line, where))
        except ValueError as exc:
            raise TrustFileError(f"{where}: {exc}") from None
    return anchors


def _signer_line(line: str, where: str) -> Anchor:
    toks = _tokens(line)
    if len(toks) < 3:
        raise ValueError("expected 'principals [options] keytype base64-key'")
    first = toks[0]
    if first.startswith('"'):
        if not first.endswith('"') or len(first) < 2 or '"' in first[1:-1]:
            raise ValueError("malformed quoted principals")
        first = first[1:-1]
    principals = tuple(first.split(","))
    opts: dict[str, Optional[str]] = {}
    rest = toks[1:]
    if rest[0] not in _KEY_TYPES:
        opts = parse_options(rest[0], flags=_SIGNER_FLAGS, valued=_SIGNER_VALUED)
        rest = rest[1:]
    if len(rest) < 2:
        raise ValueError("expected a key type and a base64 key after the options")
    if "cert-authority" in opts:
        raise ValueError("cert-authority anchors are not supported by kvgate verify")
    after = _time(opts["valid-after"] or "", where) if "valid-after" in opts else None
    before = _time(opts["valid-before"] or "", where) if "valid-before" in opts else None
    if after and before and before <= after:
        raise ValueError('"valid-before" time is before "valid-after"')
    ns = opts.get("namespaces")
    return Anchor(source=where, principals=principals, key_blob=_key(rest[0], rest[1], where),
                  namespaces=tuple(ns.split(",")) if ns is not None else None,
                  valid_after=after, valid_before=before)


def read_authorized_keys(path: Path) -> list[Anchor]:
    """Anchors from an ``authorized_keys`` file; ``principals="a@vendor,b@customer"`` binds,
    ``expiry-time="..."`` ends the key's validity; options are parsed as sshd parses them."""
    anchors = []
    for where, line in _lines(_raw_text(path), str(path)):
        try:
            toks = _tokens(line)
            opts: dict[str, Optional[str]] = {}
            if toks and toks[0] not in _KEY_TYPES:
                opts = parse_options(toks[0], flags=_AUTH_FLAGS, valued=_AUTH_VALUED)
                toks = toks[1:]
            if len(toks) < 2:
                raise ValueError("expected '[options] keytype base64-key [comment]'")
            if "cert-authority" in opts:
                raise ValueError("cert-authority keys are not supported by kvgate verify")
        except ValueError as exc:
            raise TrustFileError(f"{where}: {exc}") from None
        principals = tuple(p for p in (opts.get("principals") or "").split(",") if p)
        expiry = _time(opts["expiry-time"] or "", where) if "expiry-time" in opts else None
        anchors.append(Anchor(source=where, principals=principals, key_blob=_key(toks[0], toks[1], where),
                              valid_before=expiry))
    return anchors
