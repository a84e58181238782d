"""Prompt tokens served per KV tier over one measurement window, from the engine's own counters.

Sources, per engine instance, as differences between the scrape before and the scrape after:

* ``queried``: ``vllm:prefix_cache_queries`` (prompt tokens looked up);
* ``hbm``: ``vllm:prefix_cache_hits`` (the engine's own prefix cache);
* ``offload``: every offload tier together (``MetricsDelta.offload_hit_tokens``);
* per offload tier: the KV emulator's ``kvgate_sim:chunk_hits{tier=...}`` (chunks, times the arm's
  chunk size); else LMCache's multiprocess server's L1/L2 lookup hits (``local_cpu`` = L1, ``local_disk``
  = L2). In-process LMCache does not split its hits by tier: those tiers are None, never 0.

Instances are summed; a figure any instance lacks is None for the point (a partial sum would be
kinder than the truth). Rates are shares of ``queried``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from harness.engines.prometheus import MP_L1_HIT, MP_L2_HIT, MetricsSnapshot, delta

SIM_MEMORY_HIT_REQUESTS = "kvgate_sim:memory_hit_requests"
MP_LOOKUPS = "lmcache_mp_lookups_requests"

__all__ = ["TIERS", "memory_hit_requests", "sweep_tier_rows", "tier_hits", "tier_rates", "tier_rows"]

# Display order, fastest first. "offload" is the sum of the offload tiers.
TIERS = ("hbm", "local_cpu", "local_disk", "remote")
SIM_CHUNK_HITS = "kvgate_sim:chunk_hits"


def _counter_delta(before: MetricsSnapshot, after: MetricsSnapshot, name: str, **labels: str) -> Optional[float]:
    a = after.value(name, **labels)
    if a is None:
        return None
    b = before.value(name, **labels)
    return a - b if b is not None and a >= b else a


def _one_instance(before: MetricsSnapshot, after: MetricsSnapshot, chunk_size: int) -> dict[str, Optional[float]]:
    d = delta(before, after)
    out: dict[str, Optional[float]] = {
        "queried": d.counters.get("vllm:prefix_cache_queries"),
        "hbm": d.counters.get("vllm:prefix_cache_hits"),
        "offload": d.offload_hit_tokens(),
        "local_cpu": None, "local_disk": None, "remote": None,
    }
    if after.family(SIM_CHUNK_HITS) is not None:
        for tier in ("local_cpu", "local_disk", "remote"):
            chunks = _counter_delta(before, after, SIM_CHUNK_HITS, tier=tier)
            out[tier] = (chunks or 0.0) * chunk_size
    elif MP_L1_HIT in d.counters or MP_L2_HIT in d.counters:
        out["local_cpu"] = d.counters.get(MP_L1_HIT)
        out["local_disk"] = d.counters.get(MP_L2_HIT)
    return out


def tier_hits(before: Sequence[Optional[MetricsSnapshot]], after: Sequence[Optional[MetricsSnapshot]],
              chunk_size: int) -> dict[str, Optional[float]]:
    """Tokens served per tier (and ``queried``, ``offload``) over one window, summed over instances."""
    keys = ("queried", "hbm", "offload", *TIERS[1:])
    total: dict[str, Optional[float]] = {k: 0.0 for k in keys}
    pairs = list(zip(before, after))
    if not pairs:
        return {k: None for k in keys}
    for b, a in pairs:
        one = _one_instance(b, a, chunk_size) if b is not None and a is not None else dict.fromkeys(keys)
        for k in keys:
            v, t = one.get(k), total[k]
            total[k] = None if v is None or t is None else t + float(v)
    return total


def tier_rates(hits: Mapping[str, Any]) -> dict[str, Optional[float]]:
    """Each tier's share of the prompt tokens looked up (None when unknown or nothing was queried),
    plus ``total`` (engine prefix cache + offload tiers)."""
    queried = hits.get("queried")
    out: dict[str, Optional[float]] = {}
    for k in (*TIERS, "offload"):
        v = hits.get(k)
        out[k] = float(v) / float(queried) if isinstance(v, (int, float)) and queried else None
    hbm, off = out.get("hbm"), out.get("offload")
    out["total"] = hbm + off if hbm is not None and off is not None else None
    return out


def tier_rows(points: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """``(label, tier_hits)`` per point -> rows for the report's per-tier hit-rate table and chart."""
    rows = []
    for label, hits in points:
        rows.append({"point": label, "queried": hits.get("queried"), "rates": tier_rates(hits)})
    return rows


def sweep_tier_rows(sweep: Mapping[int, Sequence[Any]], *, offload: bool = True) -> list[dict[str, Any]]:
    """Rows per concurrency and repetition of a gate sweep (``sweepdata.Sweep``), in order. Points
    recorded before tier figures existed have none and are left out."""
    points = []
    for conc in sorted(sweep):
        for rep in sorted(sweep[conc], key=lambda r: r.repetition):
            hits = dict(rep.tiers)
            if not hits:
                continue
            if not offload and hits.get("offload") is None:
                hits["offload"] = 0.0  # no connector: nothing can come from an offload tier
            points.append((f"c{conc} rep{rep.repetition}", hits))
    return tier_rows(points)


def _instance_memory_hits(b: MetricsSnapshot, a: MetricsSnapshot) -> tuple[Optional[float], Optional[float], str]:
    """(requests known to have hit a memory tier, lookups, source) for one instance; requests is
    None when the engine does not split its hits by tier."""
    if a.value(SIM_MEMORY_HIT_REQUESTS) is not None:
        return _counter_delta(b, a, SIM_MEMORY_HIT_REQUESTS), None, "emulator per-request count"
    if a.value(MP_L1_HIT) is not None:
        l1 = _counter_delta(b, a, MP_L1_HIT) or 0.0
        return l1, _counter_delta(b, a, MP_LOOKUPS), "l1_tokens"
    return None, None, ""


def memory_hit_requests(before: Sequence[Optional[MetricsSnapshot]], after: Sequence[Optional[MetricsSnapshot]],
                        *, requests: int, structural: Optional[str] = None) -> tuple[Optional[float], str]:
    """Measured requests that took KV from a host-memory tier (the CPU tier, LMCache's L1), with
    how it was counted. Counted per request, not per lookup: vLLM asks LMCache again while a
    request waits, and a repeated lookup finds in L1 what the request's own first lookup loaded
    from L2. The emulator counts requests itself. From LMCache's server, only its L1 hit tokens
    and lookups are known: no L1 hit means no request hit; L1 hits with one lookup per request at
    most mean at least one request did (the value is that lower bound); L1 hits with more lookups
    than requests cannot be attributed (None). ``structural`` names why an engine without a tier
    split cannot have served from memory (no memory tier configured); else such an engine gives
    None."""
    pairs = list(zip(before, after))
    if not pairs or any(b is None or a is None for b, a in pairs):
        return None, "an engine's metrics were not scraped around the measurement"
    per = [_instance_memory_hits(b, a) for b, a in pairs if b is not None and a is not None]
    if any(src == "" for _, _, src in per):
        if structural:
            return 0.0, structural
        return None, "the engine does not split its KV hits by tier (in-process LMCache): memory-tier hits unknown"
    if all(src == "emulator per-request count" for _, _, src in per):
        return float(sum(v or 0.0 for v, _, _ in per)), "requests that took any chunk from a memory tier (emulator)"
    l1 = sum(v or 0.0 for v, _, _ in per)
    lookups = [lk for _, lk, _ in per]
    if l1 == 0:
        return 0.0, "LMCache server: 0 L1 hit tokens over the measurement"
    if any(lk is None for lk in lookups):
        return None, f"LMCache server: {l1:.0f} L1 hit tokens and no lookup count: not attributable to requests"
    n = sum(lk or 0.0 for lk in lookups)
    if n <= requests:
        return 1.0, (f"LMCache server: {l1:.0f} L1 hit tokens over {n:.0f} lookups for {requests} requests "
                     "(one lookup each at most): at least one request was served from L1")
    return None, (f"LMCache server: {l1:.0f} L1 hit tokens over {n:.0f} lookups for {requests} requests: "
                  "repeated lookups find what a request itself loaded; not attributable to requests")
