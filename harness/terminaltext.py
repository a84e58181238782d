"""The one sanitiser for text that came from a server, a node or a file and reaches a terminal.

A reason phrase, an error body, a node's output or a file name can hold escape sequences (clear
the screen, set the window title, colour a line green) and Unicode bidi controls (U+202E turns
"FAIL" into "LIAF" and reorders what follows), or a line break that prints a fake line of its
own. :func:`for_terminal` shows every such character escaped, visibly and reversibly
(``\\x1b``, ``\\u202e``, ``\\n``), so what the terminal shows is the text as received, on one line.
Records keep the text as it was (their JSON escapes it); only what is printed goes through here.
Stdlib only (the node agent carries it, for the load client's summary and progress lines).
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL (ESC and CSI among them; line breaks and tabs too: a field is one line),
# then the Unicode bidi controls (embeddings, overrides, isolates, marks) and the line/paragraph
# separators some terminals break on.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: object) -> str:
    """``text`` for one line of a terminal: every control and bidi character shown escaped."""
    return _UNSAFE.sub(_escaped, str(text))


def json_for_terminal(text: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with the characters JSON leaves raw
    (C1 controls, bidi controls, line separators) escaped as ``\\uXXXX``: still the same JSON."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
