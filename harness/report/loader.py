"""Read a gate's ``result.json``: the only input of the reports."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from harness.errors import InputError
from harness.store.schema import SCHEMA_VERSION, GateResult

RESULT_FILE = "result.json"


class ResultFileError(InputError):
    """A ``result.json`` is missing, not JSON, of an unknown schema version, or not a GateResult."""


def load_gate_result(gate_dir: Path) -> GateResult:
    """Parse ``gate_dir/result.json``; refuse a ``schema_version`` this kvgate does not know."""
    path = Path(gate_dir) / RESULT_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultFileError(f"{path}: no result file (is {gate_dir} a gate directory?)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultFileError(f"{path}: cannot read: {exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultFileError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise ResultFileError(f"{path}: expected a JSON object, found {type(raw).__name__}")
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ResultFileError(
            f"{path}: [schema_version] is {version!r}; this kvgate reads schema_version {SCHEMA_VERSION} "
            "only (a newer kvgate wrote it? render it with that version)")
    try:
        return GateResult.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"[{'.'.join(str(p) for p in e['loc'])}] {e['msg']}" for e in exc.errors()[:10])
        raise ResultFileError(f"{path}: not a valid gate result: {problems}") from None
