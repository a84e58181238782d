"""How coarse the kernel's rate is at a sweep point: restores measured in blk-throttle's slices.

blk-throttle does not meter bytes continuously: it grants a cgroup ``rate x slice`` bytes per slice
and holds what exceeds it until a later slice (block/blk-throttle.c; the slice is ``DFL_THROTL_SLICE``
= HZ/10, 100 ms, for every queue since the revert of "choose a small throtl_slice for SSD", and was
20 ms for a non-rotational queue before it). A restore that fits in a slice or two is served at
device speed or held a whole slice: TTFT then steps by 100 ms as the rate falls instead of following
it, and a curve of such points is the throttle's, not a device's of that rate. The sweep records, per
point, how many slices one request's restore spans at the point's rate; below ``MIN_SLICES`` the
point is flagged (a label on the curve and in the report), never silently read as a device's curve.
Nothing here changes a verdict: each point is a real measurement of a real throttled volume.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

SLICE_S = 0.1
MIN_SLICES = 10.0  # a step of one slice is then at most ~10% of the restore's time

__all__ = ["SLICE_S", "MIN_SLICES", "restore_slices", "quantization"]


def restore_slices(cold_restore: Mapping[str, Any], concurrency: int, prompts: int,
                   bytes_per_token: Optional[float], rate_bps: float) -> dict[str, Optional[float]]:
    """One request's restored bytes (the engine's offload hit tokens of the lowest repetition over
    the repetition's prompts, times KV bytes per token) and the slices it spans at ``rate_bps``."""
    leaf = (cold_restore.get("offload_hit_tokens") or {}).get(f"c{concurrency}") or {}
    hits = leaf.get("value")
    if not isinstance(hits, (int, float)) or hits <= 0 or not bytes_per_token or prompts <= 0 or rate_bps <= 0:
        return {"restore_bytes_per_request": None, "throttle_slices": None}
    per = float(hits) / prompts * bytes_per_token
    return {"restore_bytes_per_request": per, "throttle_slices": per / (rate_bps * SLICE_S)}


def quantization(points: Sequence[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
    """The curve's label when any measured point's restore spans fewer than ``MIN_SLICES`` slices."""
    spans = [(p["provisioned_read_bps"], p["throttle_slices"]) for p in points
             if isinstance(p.get("throttle_slices"), (int, float))]
    coarse = [(r, s) for r, s in spans if s < MIN_SLICES]
    if not coarse:
        return None
    lo, hi = min(s for _, s in coarse), max(s for _, s in coarse)
    return {"slice_s": SLICE_S, "min_slices": MIN_SLICES, "points": len(coarse), "of": len(spans),
            "slices_range": [lo, hi],
            "text": (f"at {len(coarse)} of {len(spans)} rates one request's restore spans {lo:.1f}-{hi:.1f} of "
                     f"blk-throttle's {SLICE_S * 1000:.0f} ms slices (fewer than {MIN_SLICES:.0f}): TTFT there steps "
                     f"by the slice as the rate falls, so the curve and its bracket are this throttled volume's, "
                     f"not those of a device that delivers the rate evenly")}
