"""Serving engines behind one protocol: ``vllm`` (+ LMCache on ROCm, Ascend, CUDA) and ``sim``
(kvgate's KV emulator).

    engine = get_engine(profile.engine.kind)
    plan = engine.plan(node, profile, "candidate", instance_index=0)      # pure
    inst = engine.start(executor, plan)
    engine.wait_ready(inst)
    before = engine.scrape_metrics(inst) ... after = engine.scrape_metrics(inst)
    d = delta(before, after)
    inst = engine.evict(inst).instance                                      # cold restore
    drop_page_cache(executor)
    engine.collect_logs(inst, evidence_dir)
    engine.stop(inst, remove_kv_files=False)
"""

from harness.engines.base import (
    Engine,
    EngineError,
    EngineInstance,
    EnginePlan,
    EngineStartError,
    EngineStopError,
    EvictResult,
    RayClusterPlan,
)
from harness.engines.lifecycle import EngineUnreachable, drop_page_cache, http_request, port_free
from harness.engines.prometheus import MetricsDelta, MetricsParseError, MetricsSnapshot, delta
from harness.engines.registry import engine_kinds, get_engine, plan_node

__all__ = [
    "Engine",
    "EngineError",
    "EngineInstance",
    "EnginePlan",
    "EngineStartError",
    "EngineStopError",
    "EngineUnreachable",
    "EvictResult",
    "MetricsDelta",
    "MetricsParseError",
    "MetricsSnapshot",
    "RayClusterPlan",
    "delta",
    "drop_page_cache",
    "engine_kinds",
    "get_engine",
    "plan_node",
    "http_request",
    "port_free",
]
