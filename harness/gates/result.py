"""Turn evaluated checks into the gate's ``GateResult`` (what ``result.json`` holds).

Verdict and exit code: :func:`harness.gates.verdict.decide` (the rules are in its module doc);
nothing here or in a caller decides them otherwise.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any, Optional

from harness import __version__
from harness.config.gatespec import GateSpec
from harness.gates.verdict import decide
from harness.records.outcome import CheckResult
from harness.records.result import GateResult

__all__ = ["build_gate_result", "utc_now", "utc_stamp"]


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def utc_stamp() -> str:
    """The UTC time as a folder-name stamp (default campaign names of the nightly and the cliff)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")


def build_gate_result(spec: GateSpec, checks: Sequence[CheckResult], *, campaign: str, started_at: str,
                      finished_at: Optional[str] = None, campaign_meta: Optional[dict[str, Any]] = None,
                      inventory: Optional[dict[str, Any]] = None, profile: Optional[dict[str, Any]] = None,
                      measurements: Optional[dict[str, Any]] = None, faults: Sequence[str] = (),
                      notes: Sequence[str] = (), emulated: bool = False,
                      fingerprint: Optional[dict[str, Any]] = None,
                      baseline: Optional[dict[str, Any]] = None,
                      gate_files: Sequence[dict[str, Any]] = ()) -> GateResult:
    """The result of gate ``spec``; ``campaign_meta`` is ``Campaign.meta`` (git commit, operator)."""
    decision = decide(checks, faults)
    meta = campaign_meta or {}
    return GateResult(
        gate=spec.id, title=spec.title, campaign=campaign, verdict=decision.verdict,
        exit_code=int(decision.exit_code), verdict_reason=decision.reason,
        started_at=started_at, finished_at=finished_at or utc_now(),
        kvgate_version=str(meta.get("kvgate_version") or __version__), git_commit=meta.get("git_commit"),
        operator=meta.get("operator"), inventory=dict(inventory or {}), profile=dict(profile or {}),
        emulated=emulated, checks=list(checks), measurements=dict(measurements or {}),
        faults=list(faults), notes=list(notes), fingerprint=fingerprint, baseline=baseline,
        gate_files=list(gate_files),
    )
