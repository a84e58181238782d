"""Which known_hosts host field covers a host, by OpenSSH's own rules (``match.c`` and
``hostfile.c`` of OpenSSH 9), checked against ``ssh-keygen -F`` in tests/security/test_host_keys.py.

The rules a reader must keep:
- The name looked up is the host lowercased (ASCII only, as ``ssh`` does before any lookup), or
  ``[host]:port`` when the port is not 22; nothing else (no IP address: CheckHostIP is off by
  default since OpenSSH 8.5).
- A field starting with ``|`` is hashed: ``|1|<base64 of a 20-byte salt>|<base64 HMAC-SHA1(salt,
  name)>``, compared whole. Any other field starting with ``|`` is invalid and covers nothing.
- Any other field is a comma-separated pattern list. A pattern may start with ``!`` (negation);
  ``*`` matches any run of bytes (also none), ``?`` one byte, every other byte itself, ASCII
  case-insensitively. A negated pattern that matches makes the whole field not match, whatever
  else matches; otherwise the field matches when one plain pattern does. A pattern of 1023 bytes
  or more makes the whole field not match (OpenSSH's fixed buffer).
- Matching works on bytes, as OpenSSH does: ``?`` is one byte of a UTF-8 name, not one letter.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

HASH_MAGIC = b"|1|"
_SALT_BYTES = 20  # SHA-1's size: OpenSSH refuses any other salt length
_MAX_SUBPATTERN = 1023  # OpenSSH copies each pattern into a 1024-byte buffer
_UPPER = bytes(range(ord("A"), ord("Z") + 1))
_LOWER_TABLE = bytes.maketrans(_UPPER, _UPPER.lower())


def ascii_lower(data: bytes) -> bytes:
    """tolower() in the C locale: only A-Z change."""
    return data.translate(_LOWER_TABLE)


def lookup_name(host: str, port: int) -> bytes:
    """The name ``ssh`` looks up in known_hosts for ``host`` and ``port``."""
    name = ascii_lower(host.encode("utf-8", "surrogateescape"))
    return name if port == 22 else b"[" + name + b"]:" + str(port).encode()


def match_pattern(s: bytes, pattern: bytes) -> bool:
    """``*`` and ``?`` glob over bytes, linear in time (no backtracking blow-up on many ``*``)."""
    si = pi = 0
    star_pi, star_si = -1, 0
    while si < len(s):
        if pi < len(pattern) and pattern[pi] == ord("*"):  # before the literal test: "*" vs "*"
            star_pi, star_si = pi, si
            pi += 1
        elif pi < len(pattern) and (pattern[pi] == ord("?") or pattern[pi] == s[si]):
            si += 1
            pi += 1
        elif star_pi >= 0:
            # retry from the last star, which now swallows one more byte
            star_si += 1
            si, pi = star_si, star_pi + 1
        else:
            return False
    while pi < len(pattern) and pattern[pi] == ord("*"):
        pi += 1
    return pi == len(pattern)


def match_pattern_list(s: bytes, patterns: bytes, *, dolower: bool) -> int:
    """1 on a plain match, -1 when a negated pattern matches, 0 for no match (OpenSSH's values).
    ``dolower`` lowercases the patterns, not ``s`` (the caller lowercases ``s``)."""
    got_positive = 0
    i, n = 0, len(patterns)
    while i < n:
        negated = patterns[i] == ord("!")
        if negated:
            i += 1
        end = patterns.find(b",", i)
        end = n if end < 0 else end
        sub = patterns[i:end]
        if len(sub) >= _MAX_SUBPATTERN:
            return 0
        i = end + 1 if end < n else end
        if match_pattern(s, ascii_lower(sub) if dolower else sub):
            if negated:
                return -1
            got_positive = 1
    return got_positive


def _hashed_host(name: bytes, salt: bytes) -> bytes:
    digest = hmac.new(salt, name, hashlib.sha1).digest()
    return HASH_MAGIC + base64.b64encode(salt) + b"|" + base64.b64encode(digest)


def hashed_salt(field: bytes) -> bytes | None:
    """The salt of a hashed field ``|1|salt|hash``, or None when the field is not a valid one."""
    if not field.startswith(HASH_MAGIC):
        return None
    rest = field[len(HASH_MAGIC):]
    end = rest.find(b"|")
    if end <= 0 or end > 1024:
        return None
    try:
        salt = base64.b64decode(rest[:end], validate=True)
    except (binascii.Error, ValueError):
        return None
    return salt if len(salt) == _SALT_BYTES else None


def host_field_matches(name: bytes, field: bytes) -> bool:
    """Does the known_hosts host field ``field`` cover ``name`` (from ``lookup_name``)?"""
    if field.startswith(b"|"):
        salt = hashed_salt(field)
        return salt is not None and hmac.compare_digest(_hashed_host(name, salt), field)
    return match_pattern_list(ascii_lower(name), field, dolower=True) == 1
