"""The reproducibility control of G4's ``bandwidth_retention``: the KV target's read before the soak
must be the same level every time it was measured, or a retention ratio says nothing about the soak.

Retention compares the reads after the soak with those before it. On storage whose level moves
between probes (a shared VM disk: the level wandered by 10-30% between runs minutes apart), a ratio
below the bar can be the level moving, not the soak degrading the storage. So the target's read
figures taken before the soak (G1's fio on it, G3's fio of the candidate's target, G4's own
before-side, all in this campaign) must agree within the retention tolerance (the lowest at least
the check's threshold times the highest, 90% with the stock threshold); else the check is
INCONCLUSIVE, naming every figure and the spread, never FAIL (nor PASS) on a level that does not
reproduce. With fewer than two figures there is nothing to compare, and the leaf says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from harness.config.inventory import Node, StorageTarget
from harness.errors import KvgateError
from harness.pipelines.shared.context import GateRun
from harness.store.campaign import GateDir
from harness.units import UnitKind, format_quantity, parse_quantity

RETENTION_METRIC = "soak.read_bw_retention"


def earlier_reads(campaign_path: Path, node: str, target: str) -> list[tuple[str, float]]:
    """(gate, bytes/s) of the target's sequential read in this campaign's G1 and G3 results."""
    wanted = (("G1", f"nodes.{node}.storage.{target}.fio.seq_read_bw"), ("G3", "candidate.fio.seq_read_bw"))
    out = []
    for gate, path in wanted:
        try:
            result = GateDir(campaign_path / gate, gate, create=False).load_result()
        except (KvgateError, OSError, ValueError):
            continue
        got = next((o.measured for c in result.checks for o in c.observations
                    if o.path == path and o.measured is not None and o.measured > 0), None)
        if got is not None:
            out.append((gate, float(got)))
    return out


def retention_tolerance(threshold_text: Optional[str]) -> float:
    """The retention check's threshold as a fraction (0.90 for '90%'); 0.90 when none is known."""
    if not threshold_text:
        return 0.90
    return float(parse_quantity(threshold_text, UnitKind.PERCENT).value)


def reproducibility_control(leaf: dict[str, Any], before: Optional[dict[str, Any]],
                            earlier: list[tuple[str, float]], threshold: float) -> dict[str, Any]:
    """``leaf`` (the retention leaf) with the control applied (see the module docstring)."""
    value = (before or {}).get("value")
    if leaf.get("value") is None or not isinstance(value, (int, float)) or value <= 0:
        return leaf
    figures = [*earlier, ("G4 before", float(value))]
    out = dict(leaf)
    if len(figures) < 2:
        out["detail"] = f"{leaf.get('detail', '')}; reproducibility before the soak not checked: no G1 or G3 read " \
                        "of this target in the campaign"
        return out
    low, high = min(v for _, v in figures), max(v for _, v in figures)
    spread = 1.0 - low / high
    text = ", ".join(f"{g} {format_quantity(v, UnitKind.BANDWIDTH)}" for g, v in figures)
    out["detail"] = (f"{leaf.get('detail', '')}; the target's read before the soak: {text} (spread {spread:.1%}, "
                     f"tolerance {1 - threshold:.0%})")
    out["reproduced_before"] = {"figures": [{"gate": g, "read_bw": v} for g, v in figures], "spread": spread,
                                "tolerance": 1 - threshold}
    if low < threshold * high:
        why = (f"the target's read before the soak does not reproduce within the retention tolerance "
               f"{1 - threshold:.0%}: {text} (spread {spread:.1%}); on a level that moves this much between "
               "probes a ratio after/before is the level moving, not the soak")
        out["inconclusive"] = f"{leaf['inconclusive']}; {why}" if leaf.get("inconclusive") else why
    return out


def control_for_run(run: GateRun, node: Node, target: StorageTarget, leaf: dict[str, Any],
                    before: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The control for this G4 run: the earlier reads from its campaign, the threshold of its
    retention check (a profile's override of it included)."""
    check = next((c for c in run.spec.checks if c.metric == RETENTION_METRIC), None)
    text = check.threshold if check is not None else None
    for o in run.profile.overrides:
        if check is not None and o.gate == "G4" and o.check == check.id:
            text = o.threshold
    earlier = earlier_reads(run.campaign.path, node.name, target.name)
    return reproducibility_control(leaf, before, earlier, retention_tolerance(text))
