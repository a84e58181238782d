"""The one mapping from a signer's name (any script) to the ASCII *signer id* used in signature
file names (``signatures/<role>-<id>.sig``) and in ``allowed_signers`` principals
(``<id>@<role>``).

Rule: the name is Unicode-normalised (NFKD), accents dropped, lower-cased; every run of
characters other than ``a-z0-9`` becomes one ``-``. A name that is not plain ASCII loses
information that way, so its id gets ``-`` and the first 8 hex digits of the sha256 of the
name (NFC, UTF-8); a name with no Latin letter or digit at all (e.g. ``张伟``) becomes ``u-`` and
those 8 digits. Examples: ``Jane Doe`` -> ``jane-doe``; ``Jörg Müller`` -> ``jorg-muller-<hash>``;
``张伟`` -> ``u-<hash>``. ``kvgate sign`` prints the id; ``--signer-id`` chooses one instead.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from harness.errors import InputError

ROLE_RE = re.compile(r"^[a-z][a-z0-9]{0,31}$")
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def check_name(name: str) -> str:
    name = unicodedata.normalize("NFC", name.strip())
    if not name or len(name) > 200 or any(unicodedata.category(c).startswith("C") for c in name):
        raise InputError("--signer must be a non-empty name on one line (at most 200 characters, "
                         "no control characters)")
    return name


def signer_id(name: str) -> str:
    name = check_name(name)
    ascii_ = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_.lower()).strip("-")[:48].strip("-")
    if name.isascii() and slug:
        return slug
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    return f"{slug}-{digest}" if slug else f"u-{digest}"


def check_id(value: str) -> str:
    if not ID_RE.match(value):
        raise InputError(f"--signer-id {value!r}: expected 1-64 of a-z 0-9 . _ - (starting with a "
                         "letter or digit)")
    return value


def check_role(role: str) -> str:
    if not ROLE_RE.match(role):
        raise InputError(f"role {role!r}: expected a lower-case word (a-z, 0-9), e.g. vendor or customer")
    return role


def principal(signer: str, role: str) -> str:
    """The ``allowed_signers`` principal of a signature: ``<signer-id>@<role>``."""
    return f"{signer}@{role}"
