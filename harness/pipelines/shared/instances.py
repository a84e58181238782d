"""How several engine instances (TP4x2) share one sweep point: the requests are dealt round-robin,
and the point's figures are the whole machine's (counts and throughputs add up). Pure.

Multi-instance reuse (R4): where the instances share one tier (``planning.shares_tier``), the
measured requests are dealt one instance further than their populate requests, so every restore
goes through another instance than the one that stored its prefix, and the offload hits of the
point are cross-instance hits. Where they do not share, nothing is rotated and no cross-instance
figure is claimed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.load import RequestSpec


def split_requests(specs: Sequence[RequestSpec], parts: int, offset: int = 0) -> list[list[RequestSpec]]:
    """Round-robin: request i goes to instance (i + offset) mod parts."""
    out: list[list[RequestSpec]] = [[] for _ in range(parts)]
    for i, s in enumerate(specs):
        out[(i + offset) % parts].append(s)
    return out


def measure_offset(shared_tier: bool, instances: int) -> int:
    """How far the measured requests are dealt from their populate requests: one instance on when
    the instances share a tier (cross-instance restores), else none."""
    return 1 if shared_tier and instances > 1 else 0


def cross_instance(key_figures: Sequence[Any], *, instances: int, offset: int) -> dict[str, Any]:
    """The cross-instance hit rate of a point: offload hit tokens over prompt tokens queried, summed
    over the instances, when every measured request was routed away from the instance that stored
    its prefix (``offset`` not a multiple of ``instances``). None when it cannot be claimed: one
    instance, no rotation (tiers not shared), or an instance without the counters."""
    out: dict[str, Any] = {"instances": instances, "offset": offset, "hit_tokens": None, "prompt_tokens": None,
                           "hit_rate": None, "reason": None}
    if instances < 2 or offset % instances == 0:
        out["reason"] = ("one instance" if instances < 2 else
                         "the instances do not share a tier: every restore went through its populating instance")
        return out
    figs: list[Mapping[str, Any]] = [f if isinstance(f, Mapping) else {} for f in key_figures]
    hits = [f.get("offload_hit_tokens") for f in figs]
    queried = [f.get("prompt_tokens_queried") for f in figs]
    if len(key_figures) != instances or any(h is None for h in hits) or any(q is None for q in queried):
        out["reason"] = "an instance exposes no offload-hit or prompt-token counter"
        return out
    h = float(sum(float(x) for x in hits if x is not None))
    q = float(sum(float(x) for x in queried if x is not None))
    out.update(hit_tokens=h, prompt_tokens=q, hit_rate=h / q if q > 0 else None,
               reason=None if q > 0 else "no prompt tokens were queried")
    return out


def split_lazily(specs: Sequence[RequestSpec], parts: int, offset: int = 0) -> list[Sequence[RequestSpec]]:
    """As :func:`split_requests`, without building a lazy workload's prompts (a slice of
    ``LazyRequests`` is LazyRequests): instance i gets requests (i - offset) mod parts, every
    parts-th one on."""
    return [specs[(i - offset) % parts::parts] for i in range(parts)]


def combine(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The whole-machine summary of several instances measured side by side."""
    if len(summaries) == 1:
        return dict(summaries[0])
    out: dict[str, Any] = {"instances": [dict(s) for s in summaries]}
    for key in ("completed", "failed", "total_input_tokens", "total_output_tokens"):
        out[key] = sum(int(s.get(key) or 0) for s in summaries)
    for key in ("request_throughput", "output_throughput", "total_token_throughput", "request_goodput"):
        out[key] = sum(float(s.get(key) or 0.0) for s in summaries)
    out["duration"] = max(float(s.get("duration") or 0.0) for s in summaries)
    out["max_concurrent_requests"] = sum(int(s.get("max_concurrent_requests") or 0) for s in summaries)
    return out
