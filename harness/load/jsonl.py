"""Reading JSON-lines input files (traces of requests, hash-id traces) with located errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.load.errors import LoadInputError


def json_objects(path: Path, what: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """``(line number, where, object)`` for each non-blank line of ``path`` (``where`` is
    ``path:line``); an unreadable file or a line that is not a JSON object raises
    :class:`LoadInputError` naming it."""
    try:
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
