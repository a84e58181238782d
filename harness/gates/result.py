"""Turn evaluated checks into the gate's ``GateResult`` (what ``result.json`` holds).

Exit code: :func:`harness.gates.evaluate.gate_verdict`, except that a gate whose blockers were
NOT RUN while infrastructure faults were recorded exits 4 (INFRA_FAULT) instead of 1: the
measurement did not happen because a node, an engine or a disk failed, not because the system
under test fell short. A FAIL stays a FAIL (exit 1) whatever else happened.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any, Optional

from harness import __version__
from harness.config.gatespec import GateSpec
from harness.exitcodes import ExitCode
from harness.gates.evaluate import gate_verdict
from harness.store.schema import CheckResult, GateResult, Verdict

__all__ = ["build_gate_result", "utc_now"]


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def build_gate_result(spec: GateSpec, checks: Sequence[CheckResult], *, campaign: str, started_at: str,
                      finished_at: Optional[str] = None, campaign_meta: Optional[dict[str, Any]] = None,
                      inventory: Optional[dict[str, Any]] = None, profile: Optional[dict[str, Any]] = None,
                      measurements: Optional[dict[str, Any]] = None, faults: Sequence[str] = (),
                      notes: Sequence[str] = (), emulated: bool = False) -> GateResult:
    """The result of gate ``spec``; ``campaign_meta`` is ``Campaign.meta`` (git commit, operator)."""
    verdict, code = gate_verdict(checks)
    if verdict is Verdict.NOT_RUN and faults:
        code = ExitCode.INFRA_FAULT
    meta = campaign_meta or {}
    return GateResult(
        gate=spec.id, title=spec.title, campaign=campaign, verdict=verdict, exit_code=int(code),
        started_at=started_at, finished_at=finished_at or utc_now(),
        kvgate_version=str(meta.get("kvgate_version") or __version__), git_commit=meta.get("git_commit"),
        operator=meta.get("operator"), inventory=dict(inventory or {}), profile=dict(profile or {}),
        emulated=emulated, checks=list(checks), measurements=dict(measurements or {}),
        faults=list(faults), notes=list(notes),
    )
