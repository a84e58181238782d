"""Which files of ``evidence/`` back an observation, for the reports' Evidence column.

An observation names its evidence when the pipeline recorded it (``Observation.evidence``); when
it did not, the report links the evidence the gate's layout implies, found by listing the gate
directory (lstat only, nothing outside it; links are relative, so the folder can move):

* a sweep point ``...cN`` (``compare.ttft_p50_reduction.c8``, ``candidate.sweep.c8.ttft``):
  ``evidence/sweep/<arm>/cN/`` of the arm named in the path, or of every arm for ``compare.*``;
* ``<arm>.fio.*``, ``<arm>.checkpoint.*``, ``<arm>.modelload.*``: ``evidence/<probe>/<node>/<target>/``
  for the arm's storage target (the profile recorded in ``result.json`` says which);
* otherwise ``evidence/measured.json``, the measured tree every check read, when present.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.report.textutil import concurrency_of
from harness.store.schema import GateResult

EVIDENCE = "evidence"
_PROBES = ("fio", "checkpoint", "modelload")


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _arms(result: GateResult) -> dict[str, str]:
    """Arm name -> storage target name, from the recorded profile."""
    arms = result.profile.get("arms") if isinstance(result.profile, Mapping) else None
    out: dict[str, str] = {}
    for arm in arms or []:
        if isinstance(arm, Mapping) and isinstance(arm.get("name"), str):
            out[arm["name"]] = str(arm.get("storage") or "")
    return out


class EvidenceFinder:
    """Infers evidence paths (relative to the gate directory) for observation paths."""

    def __init__(self, gate_dir: Path, result: GateResult) -> None:
        self.gate_dir = Path(gate_dir)
        self.arms = _arms(result)

    def _rel(self, *parts: str) -> str:
        return "/".join((EVIDENCE, *parts))

    def __call__(self, path: str) -> list[str]:
        base = self.gate_dir / EVIDENCE
        if not _is_dir(base):
            return []
        tokens = path.split(".")
        found: list[str] = []
        conc = next((t for t in tokens if concurrency_of(t) is not None and t.lower().startswith("c")), None)
        arms = [t for t in tokens if t in self.arms] or (list(self.arms) if tokens[0] == "compare" else [])
        if conc:
            for arm in arms:
                if _is_dir(base / "sweep" / arm / conc):
                    found.append(self._rel("sweep", arm, conc) + "/")
        probe = next((t for t in tokens if t in _PROBES), None)
        if probe and _is_dir(base / probe):
            for arm in arms:
                target = self.arms.get(arm, "")
                for node in sorted(p.name for p in (base / probe).iterdir() if _is_dir(p)):
                    if target and _is_dir(base / probe / node / target):
                        found.append(self._rel(probe, node, target) + "/")
        if not found and (base / "measured.json").is_file():
            found.append(self._rel("measured.json"))
        return found


def no_evidence(path: str) -> list[str]:  # noqa: ARG001 - the finder's signature
    return []


def finder(gate_dir: Path | None, result: GateResult) -> Any:
    return EvidenceFinder(gate_dir, result) if gate_dir is not None else no_evidence
