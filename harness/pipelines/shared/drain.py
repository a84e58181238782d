"""Between populate and measure: drain the tier writes, then (after the evict) prove the memory
tiers empty. The steps of the cold restore that LMCache's asynchronous writes make necessary.

LMCache writes KV to its storage tier behind the request (lmcache 0.5.6: the multiprocess
server's ``StoreController`` submits L1 objects to its L2 adapters asynchronously; in-process,
``LocalDiskBackend`` writes through a task queue), and a non-forced clear keeps what is still
being written (``L1Manager.clear(force=False)`` skips read-locked objects; ``LocalCPUBackend.clear``
skips objects that cannot be evicted). Clearing right after a populate therefore leaves the
backlog in DRAM, and the measurement reads it from there while the remaining writes compete with
the reads. So, per instance:

1. **drain** (bounded, recorded): wait until every queued write completed and the figures hold
   still for ``SETTLE_S``. Sources, first found wins: the LMCache server's own figures
   (``lmcache_mp_num_inflight_l2_stores`` at 0 and ``l2_store_submitted_objects`` equal to
   ``..._completed_objects``, with ``lmcache_mp_l2_usage_bytes`` holding still); the emulator's
   ``kvgate_sim:pending_tier_writes`` at 0; else the tier directories' file count and bytes (read
   on the node) holding still. Past ``TIMEOUT_S``
   the point is not a cold restore and is not counted. The record keeps the first look's figures
   too (``first_figures``): the backlog the populate left, which a clear at once would have kept in
   memory. Then the node's write-back: ``sync -f`` on the tier and Dirty + Writeback idle
   (``harness.probes.drain``), recorded as evidence.
2. the engine's evict; then drain again (its verification probes store KV of their own) and,
   where the memory tier is not empty, clear it alone (``clear_memory_tier``);
3. **prove empty**: the memory tiers' usage after the evict: ``lmcache_mp_l1_memory_usage_bytes``
   (multiprocess), ``kvgate_sim:memory_tier_chunks`` (the emulator's CPU tier) at zero; an
   in-process LMCache CPU tier is emptied by the engine restart the plan requires, and no
   memory tier at all is configured otherwise. Not empty: the point is not counted.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.engines.base import Engine, EngineError, EngineInstance
from harness.engines.lifecycle import http_request, sidecar_request
from harness.engines.prometheus import MetricsSnapshot
from harness.errors import InfraError
from harness.probes.drain import DrainRecord, wait_drained

__all__ = ["DrainResult", "EmptyResult", "all_drained", "clear_memory_tier", "cold_evict", "drain_writes",
           "node_writeback", "prove_memory_empty", "TIMEOUT_S", "SETTLE_S"]

TIMEOUT_S = 1800.0  # ~2 TB of backlog at 1.2 GB/s; past it the storage cannot keep up at all
SETTLE_S = 1.0  # the figures must hold still this long (writes not yet submitted show up meanwhile)
SETTLE_COUNTED_S = 0.5  # the same where the engine counts its pending writes itself
POLL_S = 0.25
NODE_WRITEBACK_S = 60.0

MP_INFLIGHT = "lmcache_mp_num_inflight_l2_stores"
MP_SUBMITTED = "lmcache_mp_l2_store_submitted_objects_chunks"
MP_COMPLETED = "lmcache_mp_l2_store_completed_objects_chunks"
MP_L1_USAGE = "lmcache_mp_l1_memory_usage_bytes"
MP_L2_USAGE = "lmcache_mp_l2_usage_bytes"  # holding still too (read from lmcache 0.5.6's /metrics)
SIM_PENDING = "kvgate_sim:pending_tier_writes"
SIM_MEMORY = "kvgate_sim:memory_tier_chunks"


@dataclass
class DrainResult:
    node: str
    drained: bool
    method: str
    waited_s: float
    polls: int
    figures: dict[str, Optional[float]] = field(default_factory=dict)
    reason: str = ""
    # the figures at the first look, right after the populate: the backlog the drain waited out
    # (submitted above completed: the populate outran its tier writes, and a clear at once would
    # have kept those chunks in memory)
    first: dict[str, Optional[float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "drained": self.drained, "method": self.method,
                "waited_s": round(self.waited_s, 3), "polls": self.polls, "figures": self.figures,
                "first_figures": self.first, "reason": self.reason}


def _engine_figures(snap: MetricsSnapshot) -> tuple[str, dict[str, Optional[float]], bool]:
    """(method, figures, all writes done) from the engine's own metrics; method '' when it has none."""
    if snap.value(MP_SUBMITTED) is not None or snap.value(MP_INFLIGHT) is not None:
        figs = {n: snap.value(n) for n in (MP_INFLIGHT, MP_SUBMITTED, MP_COMPLETED, MP_L2_USAGE)}
        inflight, sub, done = figs[MP_INFLIGHT], figs[MP_SUBMITTED], figs[MP_COMPLETED]
        ok = (inflight in (None, 0.0)) and (sub is None or (done or 0.0) >= sub)
        return "lmcache server L2 store counters", figs, ok
    pending = snap.value(SIM_PENDING)
    if pending is not None:
        return "emulator pending tier writes", {SIM_PENDING: pending}, pending == 0
    return "", {}, False


def _dir_figures(inst: EngineInstance) -> dict[str, Optional[float]]:
    """Files and bytes under the instance's KV directories, read on its node."""
    dirs = [d for d in inst.plan.kv_dirs]
    if not dirs:
        return {"files": None, "bytes": None}
    cmd = ("find " + " ".join(shlex.quote(d) for d in dirs)
           + " -type f ! -name '*.tmp' ! -name '.*' -printf '%s\\n' 2>/dev/null; true")
    res = inst.executor.run(["sh", "-c", cmd], timeout=300.0, check=False)
    sizes = [int(x) for x in res.stdout.split() if x.isdigit()]
    return {"files": float(len(sizes)), "bytes": float(sum(sizes))}


def drain_writes(engine: Engine, inst: EngineInstance, *, timeout_s: float = TIMEOUT_S,
                 settle_s: float = SETTLE_S, clock: Callable[[], float] = time.monotonic) -> DrainResult:
    """Wait until ``inst``'s tier writes completed and its figures held still ``settle_s``."""
    start = clock()
    polls = 0
    last: Optional[dict[str, Optional[float]]] = None
    first: dict[str, Optional[float]] = {}
    still_since: Optional[float] = None
    method = ""
    while True:
        polls += 1
        try:
            snap = engine.scrape_metrics(inst)
        except InfraError as exc:
            return DrainResult(inst.node, False, method or "metrics", clock() - start, polls, last or {},
                               f"metrics could not be scraped while draining: {exc}", first=first)
        method, figs, done = _engine_figures(snap)
        if not method:
            method, figs = "tier directory files and bytes holding still", _dir_figures(inst)
            done = figs.get("files") is not None
        first = first or dict(figs)
        now = clock()
        settle = settle_s if method.startswith("tier directory") else min(settle_s, SETTLE_COUNTED_S)
        if done and figs == last:
            still_since = still_since if still_since is not None else now
            if now - still_since >= settle:
                return DrainResult(inst.node, True, method, now - start, polls, figs, first=first)
        else:
            still_since = now if done else None
        last = figs
        if now - start > timeout_s:
            return DrainResult(inst.node, False, method, now - start, polls, figs,
                               f"tier writes still running after {timeout_s:.0f} s: {figs}", first=first)
        time.sleep(POLL_S)


@dataclass
class EmptyResult:
    node: str
    empty: Optional[bool]  # None: no figure (recorded why)
    figures: dict[str, Optional[float]]
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "empty": self.empty, "figures": self.figures, "detail": self.detail}


def prove_memory_empty(engine: Engine, inst: EngineInstance) -> EmptyResult:
    """The memory tiers' usage right after the evict (see the module's rule 3)."""
    snap = engine.scrape_metrics(inst)
    l1, cpu = snap.value(MP_L1_USAGE), snap.value(SIM_MEMORY)
    if l1 is not None:
        return EmptyResult(inst.node, l1 == 0, {MP_L1_USAGE: l1}, "LMCache server L1 usage")
    if cpu is not None:
        return EmptyResult(inst.node, cpu == 0, {SIM_MEMORY: cpu}, "emulator CPU tier chunks")
    plan = inst.plan
    if plan.sidecar is not None:
        return EmptyResult(inst.node, None, {MP_L1_USAGE: None},
                           f"the LMCache server exposes no {MP_L1_USAGE}: its L1 could not be shown empty")
    if plan.cpu_tier:
        return EmptyResult(inst.node, True, {}, "in-process CPU tier emptied by the engine restart")
    return EmptyResult(inst.node, True, {}, "no host-memory KV tier configured")


def clear_memory_tier(inst: EngineInstance) -> dict[str, Any]:
    """Clear the memory tier alone, once its writes drained (the evict's own verification probes
    store KV too, after the populate's drain): the LMCache server's ``POST /cache/clear``; the
    emulator's CPU tier through its admin endpoint. Returns the step as recorded."""
    plan = inst.plan
    if plan.sidecar is not None:
        side = plan.sidecar
        status, body = sidecar_request(inst, side.l1_clear_path, method="POST", body=side.l1_clear_body.encode())
        step = "lmcache_l1_clear"
    elif plan.kind == "sim":
        status, body = http_request(inst, "/kvgate/evict", method="POST",
                                    body=json.dumps({"tiers": ["local_cpu"]}).encode())
        step = "emulator_cpu_tier_clear"
    else:
        return {"step": "none", "detail": "no memory tier kvgate can clear on its own"}
    if status != 200:
        raise EngineError(f"{step} answered {status}: {body[:300]!r}", node=inst.node)
    return {"step": step, "status": status, "answer": body[:300].decode("utf-8", "replace")}


def node_writeback(inst: EngineInstance) -> DrainRecord:
    """``sync -f`` the instance's tier, then wait (bounded) for the node's Dirty + Writeback to be
    idle (``harness.probes.drain``, the storage protocol's drained state)."""
    path = inst.plan.kv_dirs[0] if inst.plan.kv_dirs else "/"
    return wait_drained(inst.executor, path, [], timeout_s=NODE_WRITEBACK_S)


def all_drained(results: Sequence[DrainResult]) -> Optional[str]:
    """Why the drain failed on some instance (None: every instance drained)."""
    bad = [r for r in results if not r.drained]
    return "; ".join(f"{r.node}: {r.reason}" for r in bad) or None


def cold_evict(engine: Engine, instances: list[EngineInstance], protocol: dict[str, Any],
               restarted: Callable[[int, EngineInstance], None]) -> Optional[str]:
    """Steps 1-3 of the module on every instance, in order, each recorded in ``protocol``
    (``drain``, ``evict``, ``drain_after_evict``, ``memory_empty``); an instance the evict restarted
    replaces its old one in ``instances`` and is passed to ``restarted``. Returns why the point
    is not a cold restore (None: it is)."""
    drains = [drain_writes(engine, inst) for inst in instances]
    protocol["drain"] = [d.to_json() for d in drains]
    why = all_drained(drains)
    if why:
        return f"tier writes did not drain: {why}"
    # then the node's own write-back (in-process buffered writes refill the page cache after a
    # drop; sync first), recorded: a shared node's other writers count, so it is evidence, not a gate
    protocol["node_writes"] = [node_writeback(inst).to_json() for inst in instances]
    evicted: list[dict[str, Any]] = []
    for i, inst in enumerate(instances):
        res = engine.evict(inst)
        if res.instance is not inst:
            restarted(i, res.instance)
        instances[i] = res.instance
        evicted.append({"node": inst.node, "method": res.method, "detail": res.detail,
                        "steps": list(res.steps), "reset_verified": res.reset_verified})
    protocol["evict"] = evicted
    again = [drain_writes(engine, inst) for inst in instances]
    protocol["drain_after_evict"] = [d.to_json() for d in again]
    why = all_drained(again)
    if why:
        return f"tier writes did not drain after the evict: {why}"
    empty = [prove_memory_empty(engine, inst) for inst in instances]
    for i, inst in enumerate(instances):
        if empty[i].empty is False:
            evicted[i]["steps"].append(clear_memory_tier(inst))
            empty[i] = prove_memory_empty(engine, inst)
    protocol["memory_empty"] = [e.to_json() for e in empty]
    full = [e for e in empty if e.empty is False]
    if full:
        return "memory tier not empty after the evict: " + "; ".join(f"{e.node} {e.detail} {e.figures}" for e in full)
    return None
