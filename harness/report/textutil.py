"""Leaf helpers shared by ``view`` and ``charts`` (so neither imports the other)."""

from __future__ import annotations

import re
from typing import Any, Optional

# Characters XML 1.0 forbids (C0 controls but tab, newline, carriage return; lone surrogates;
# U+FFFE/U+FFFF). Command output tails carry ANSI colour escapes: one would make junit.xml
# unparseable for a CI system.
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def xml_safe(text: str) -> str:
    """``text`` without ANSI escape sequences and characters XML 1.0 cannot carry."""
    return _XML_BAD.sub("\ufffd", _ANSI.sub("", text))


def concurrency_of(key: Any) -> Optional[int]:
    """``"c16"``, ``"16"`` or ``16`` -> 16; anything else -> None."""
    m = re.fullmatch(r"[cC]?(\d+)", str(key).strip())
    return int(m.group(1)) if m else None
