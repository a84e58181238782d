"""Read a gate's ``result.json``: the only input of the reports (the store owns the format)."""

from __future__ import annotations

from pathlib import Path

from harness.store.campaign import ResultFileError, load_result
from harness.store.schema import GateResult

RESULT_FILE = "result.json"

__all__ = ["RESULT_FILE", "ResultFileError", "load_gate_result"]


def load_gate_result(gate_dir: Path) -> GateResult:
    """Parse ``gate_dir/result.json``; refuse a ``schema_version`` this kvgate does not know."""
    return load_result(Path(gate_dir) / RESULT_FILE)
