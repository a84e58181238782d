"""G1's read check against a declared rate: on a target provisioned at a read rate, fio's sequential
read as a share of that rate (``nodes.*.storage.*.fio.read_of_provisioned``), its steady rounds as
the interval's samples. A volume that delivers much less than it was sold at FAILs the check; a
figure that was no storage figure stays as the read leaf said (NOT_RUN or INCONCLUSIVE).

A read well above a rate kvgate itself enforces (``enforce: blk-throttle``) means the cap did not
hold, so the run measured the raw device, not the provisioned volume its report is labelled with:
INCONCLUSIVE, never a PASS of the label."""

from __future__ import annotations

from typing import Any, Optional

from harness.config.inventory import StorageTarget
from harness.probes.blkthrottle import rate_text
from harness.units import UnitKind, format_quantity

CAP_SLACK = 1.10  # a throttled read measured above 110% of its cap: the cap was not in effect


def read_of_provisioned(target: StorageTarget, read_leaf: Any) -> Optional[dict[str, Any]]:
    """The leaf, or None when the target declares no read rate."""
    declared = target.provisioned.read if target.provisioned else None
    if declared is None:
        return None
    rate = rate_text(declared)
    value = read_leaf.get("value") if isinstance(read_leaf, dict) else None
    if not isinstance(value, (int, float)):
        why = read_leaf.get("detail") if isinstance(read_leaf, dict) else None
        return {"value": None, "detail": f"no read figure to compare with the declared {rate}" +
                (f": {why}" if why else "")}
    leaf: dict[str, Any] = {
        "value": value / declared,
        "text": f"{100 * value / declared:.1f}% of {rate} ({format_quantity(value, UnitKind.BANDWIDTH)})",
        "detail": f"fio sequential read {format_quantity(value, UnitKind.BANDWIDTH)} against the declared read "
                  f"rate {rate} ({'enforced by ' + target.enforce if target.enforce else 'not enforced by kvgate'})",
        "evidence": list(read_leaf.get("evidence") or []),
    }
    samples = read_leaf.get("samples")
    if isinstance(samples, dict) and isinstance(samples.get("x"), list):
        leaf["samples"] = {**samples, "x": [float(x) / declared for x in samples["x"]]}
    if read_leaf.get("inconclusive"):
        leaf["inconclusive"] = read_leaf["inconclusive"]
    elif target.enforce and value > CAP_SLACK * declared:
        leaf["inconclusive"] = (f"the read ({format_quantity(value, UnitKind.BANDWIDTH)}) is above the {rate} "
                                f"{target.enforce} enforces: the cap was not in effect, so this is the raw device's "
                                "figure, not the provisioned volume's")
    return leaf
