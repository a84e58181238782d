"""Reading JSON-lines input files (traces of requests, hash-id traces) with located errors."""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.load.errors import LoadInputError

# A trace is read whole; past this it is refused (a real week-long trace is a few hundred MB).
MAX_TRACE_BYTES = 1 << 30
# The latest arrival a trace may ask for: a replay waits until then, so 1e300 would wait forever.
MAX_TRACE_SECONDS = 30 * 86400.0


def trace_seconds(value: Any, where: str, *, unit: str = "s", scale: float = 1.0) -> float:
    """A trace timestamp in seconds: a finite number >= 0 (``NaN``, ``Infinity`` and negative values
    are refused) and at most MAX_TRACE_SECONDS after the start; else LoadInputError naming it."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise LoadInputError(f"{where}: field 'timestamp' = {value!r}: expected a finite number of {unit} >= 0")
    seconds = float(value) * scale
    if seconds > MAX_TRACE_SECONDS:
        raise LoadInputError(f"{where}: field 'timestamp' = {value!r}: later than the {MAX_TRACE_SECONDS:g} s "
                             "limit for a trace")
    return seconds


def json_objects(path: Path, what: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """``(line number, where, object)`` for each non-blank line of ``path`` (``where`` is
    ``path:line``); an unreadable file or a line that is not a JSON object raises
    :class:`LoadInputError` naming it."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise LoadInputError(f"{what} {path}: not a regular file")
        if st.st_size > MAX_TRACE_BYTES:
            raise LoadInputError(f"{what} {path}: {st.st_size} bytes, over the {MAX_TRACE_BYTES} byte limit")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LoadInputError(f"{what} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise LoadInputError(f"{what} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{no}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise LoadInputError(f"{where}: not a JSON object ({exc})") from None
        if not isinstance(obj, dict):
            raise LoadInputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        yield no, where, obj
