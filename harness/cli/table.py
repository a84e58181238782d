"""Plain-text tables for the terminal (no dependency, aligned columns)."""

from __future__ import annotations

import re
from collections.abc import Sequence


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ANSI escape sequences (CSI ... final byte, OSC ... BEL/ST, two-byte ESC x), then any other C0/C1
# control character or DEL. Line breaks are controls here too: a field printed on one line cannot
# start a line of its own (a fake "VERIFIED").
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def terminal_safe(text: object) -> str:
    """``text`` for one line of a terminal: escape sequences dropped, other control characters
    (line breaks included) shown as ``?``. For every string a node, an engine or a received file
    supplied (``kvgate verify``, ``kvgate soak status``)."""
    return _CONTROL.sub("?", _ANSI.sub("", str(text)))


def json_safe(text: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with C1 controls escaped as ``\\u``:
    JSON already escapes C0, but C1 (``\\x9b`` is a CSI) passes through raw."""
    return re.sub(r"[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text)
