"""The result file of a gate as the store keeps it (``reports/<campaign>/<gate>/result.json``).

The models live in ``harness.records`` (below the gate engine that writes them and the store that
keeps them); re-exported here because the store and the reports read them from here. The store
imports no gate code (an import-linter contract in pyproject.toml).
"""

from __future__ import annotations

from harness.records.outcome import CheckResult, Interval, Observation, Verdict
from harness.records.result import SCHEMA_VERSION, GateResult

__all__ = ["SCHEMA_VERSION", "CheckResult", "GateResult", "Interval", "Observation", "Verdict"]
