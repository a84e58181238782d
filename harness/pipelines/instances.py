"""How several engine instances (TP4x2) share one sweep point: the requests are dealt round-robin,
and the point's figures are the whole machine's (counts and throughputs add up). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.load import RequestSpec


def split_requests(specs: Sequence[RequestSpec], parts: int) -> list[list[RequestSpec]]:
    out: list[list[RequestSpec]] = [[] for _ in range(parts)]
    for i, s in enumerate(specs):
        out[i % parts].append(s)
    return out


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
