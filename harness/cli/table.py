"""Plain-text tables for the terminal (no dependency, aligned columns)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.terminaltext import for_terminal, json_for_terminal


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Aligned columns; every cell through the one sanitiser (a cell may hold what a node said)."""
    cells = [[for_terminal(h) for h in headers]] + [["-" if c is None else for_terminal(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def terminal_safe(text: object) -> str:
    """``text`` for one line of a terminal (``harness.terminaltext.for_terminal``: controls, escape
    sequences and bidi overrides shown escaped). For every string a node, an engine or a received
    file supplied."""
    return for_terminal(text)


def json_safe(text: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with C1 and bidi controls escaped as
    ``\\u``: JSON already escapes C0, but C1 (``\\x9b`` is a CSI) and U+202E pass through raw."""
    return json_for_terminal(text)
