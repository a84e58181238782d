"""What a campaign measured, as the estimator's inputs: each arm's fio read bandwidth and sweep
table. Reads ``result.json`` files only (``reports/<campaign>/<gate>/result.json``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.config.profile import Profile
from harness.errors import KvgateError
from harness.store.campaign import load_result


@dataclass
class CampaignFigures:
    read_bw: dict[str, float] = field(default_factory=dict)  # arm -> B/s (fio seq-read)
    read_bw_source: dict[str, str] = field(default_factory=dict)
    sweeps: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # arm -> conc -> row
    gates: list[str] = field(default_factory=list)


def fio_read_bw(fio: Mapping[str, Any], target: str) -> Optional[float]:
    """seq-read bandwidth of ``target`` from a measurements ``fio`` table ({node: {target: {...}}})."""
    for per_node in fio.values():
        if isinstance(per_node, Mapping):
            row = per_node.get(target)
            if isinstance(row, Mapping) and isinstance(row.get("seq_read_bw"), (int, float)):
                return float(row["seq_read_bw"])
    return None


def figures_from_measurements(profile: Profile, gate: str, measurements: Mapping[str, Any],
                              into: Optional[CampaignFigures] = None) -> CampaignFigures:
    out = into if into is not None else CampaignFigures()
    fio = measurements.get("fio") or {}
    for arm in profile.arms:
        if arm.storage and arm.name not in out.read_bw:
            bw = fio_read_bw(fio, arm.storage)
            if bw:
                out.read_bw[arm.name] = bw
                out.read_bw_source[arm.name] = f"fio seq-read of {arm.storage} in {gate}"
    for arm_name, table in (measurements.get("sweep") or {}).items():
        if isinstance(table, Mapping):
            out.sweeps.setdefault(arm_name, {}).update({str(k): dict(v) for k, v in table.items()
                                                        if isinstance(v, Mapping)})
    out.gates.append(gate)
    return out


def campaign_figures(campaign_dir: Path, profile: Profile) -> CampaignFigures:
    """The fio bandwidths and sweeps of a campaign's G2 and G3 (whichever exist)."""
    if not campaign_dir.is_dir():
        from harness.errors import InputError

        raise InputError(f"campaign directory {campaign_dir} does not exist")
    out = CampaignFigures()
    for gate in ("G3", "G2"):
        path = campaign_dir / gate / "result.json"
        if not path.exists():
            continue
        try:
            result = load_result(path)
        except KvgateError:
            continue
        figures_from_measurements(profile, gate, result.measurements, out)
    return out
