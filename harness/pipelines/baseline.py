"""Is the G2 baseline usable by this G3 run? Checked before any node is touched.

1. The baseline gate directory is verified against its ``MANIFEST.sha256`` (every file as
   written, nothing missing, nothing added) and every signature in it must be valid: a tampered
   baseline is refused.
2. Its recorded workload fingerprint (``harness.gates.fingerprint``) must equal the one this run
   computes for the same arm from its own inventory and profile. Every differing field is listed
   with both values; the user may accept named fields (``--allow-baseline-mismatch FIELD``), and
   the accepted differences are recorded in ``result.json`` and the report's notes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.errors import InputError
from harness.gates.fingerprint import MISSING, fingerprint_diff
from harness.report.sign import MANIFEST, verify
from harness.store.campaign import GateDir

__all__ = ["BaselineCheck", "check_baseline"]


@dataclass
class BaselineCheck:
    """What was checked and accepted about the baseline (recorded in G3's result.json)."""

    where: str
    digest: str
    accepted: list[dict[str, Any]] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {"where": self.where, "digest": self.digest, "accepted_mismatches": list(self.accepted)}

    def notes(self) -> list[str]:
        return [f"baseline accepted with a different {a['field']}: baseline {json.dumps(a['baseline'])}, "
                f"this run {json.dumps(a['this_run'])} (--allow-baseline-mismatch)" for a in self.accepted]


def verify_gate_dir(g2: GateDir, where: str) -> None:
    """Refuse a baseline whose files differ from its manifest or whose signatures are bad."""
    rep = verify(g2.path)
    bad: list[str] = []
    if not rep.manifest_present:
        bad.append(f"it has no {MANIFEST}")
    bad += rep.problems
    bad += [f"{p} changed" for p in rep.changed]
    bad += [f"{p} missing" for p in rep.missing]
    bad += [f"{p} added after the manifest was written" for p in rep.extra]
    bad += [f"{p} refused" for p in rep.refused]
    bad += [f"{s.file}: {s.reason}" for s in rep.signatures if not s.valid]
    if bad:
        raise InputError(f"the G2 baseline of {where} ({g2.path}) failed verification, refusing to compare "
                         f"against it: {'; '.join(bad)}")


def check_baseline(g2: GateDir, where: str, current: dict[str, Any], allow: Sequence[str]) -> BaselineCheck:
    """Verify the baseline's files, then compare its fingerprint with ``current`` (see module doc)."""
    verify_gate_dir(g2, where)
    result = g2.load_result()
    recorded_fp = result.fingerprint or {}
    recorded = recorded_fp.get("fields") if isinstance(recorded_fp, dict) else None
    if not isinstance(recorded, dict):
        recorded = {}
    known = set(recorded) | set(current)
    unknown = [f for f in allow if f not in known]
    if unknown:
        raise InputError(f"--allow-baseline-mismatch: unknown fingerprint field(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(known))}")
    diff = fingerprint_diff(recorded, current)
    refused = [d for d in diff if d[0] not in allow]
    if refused:
        lines = "\n".join(f"  {k}: baseline {_show(a)}, this run {_show(b)}" for k, a, b in refused)
        hint = ("the baseline was recorded without a workload fingerprint (an older kvgate): rerun G2, or "
                if not recorded else "rerun G2 with this profile, or ")
        raise InputError(
            f"the G2 baseline of {where} is not comparable with this run: {len(refused)} workload "
            f"fingerprint field(s) differ:\n{lines}\n{hint}accept named differences with "
            f"--allow-baseline-mismatch {' '.join(k for k, _, _ in refused)}")
    accepted = [{"field": k, "baseline": a, "this_run": b} for k, a, b in diff]
    return BaselineCheck(where=where, digest=str(recorded_fp.get("digest", "")), accepted=accepted)


def _show(value: Any) -> str:
    return value if value == MISSING else json.dumps(value, default=str)
