"""Run the load of one sweep point against the engine instances of an arm.

The load generator runs next to the server. For a node of this machine (``connection: local``)
it runs in this process; for a remote node it runs there through the node agent, and its records
are pulled back. Several instances (TP4x2) share the point's requests and concurrency, and the
point's figures are the whole machine's: throughputs add up, TTFT samples are pooled.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config.inventory import Node
from harness.config.profile import Profile
from harness.engines.base import EngineInstance
from harness.load import LoadConfig, RequestSpec, Workload, build_workload, hashtrace, read_records, run_load_async
from harness.load.records import duplicate_ids
from harness.load.summary import Summary
from harness.load.workloads import LazyRequests
from harness.pipelines.shared.agentload import run_agent_point
from harness.pipelines.shared.context import GateRun
from harness.pipelines.shared.instances import combine, split_lazily

SUCCESS = "ok"


@dataclass
class PointWorkload:
    """The requests of one sweep point: ``populate`` fills the KV tier, ``measure`` is measured."""

    # LazyRequests when the workload builds its prompts lazily: each is built when it is sent
    # (or shipped to a node agent), never all at once
    populate: Sequence[RequestSpec]
    measure: Sequence[RequestSpec]
    description: dict[str, Any]


def point_workload(profile: Profile) -> PointWorkload:
    """Build the point's requests from the profile (the same for every arm, so arms compare)."""
    load = profile.load
    n = load.prompts_per_point
    if load.workload == "long-doc":
        params: dict[str, Any] = {"num_docs": n, "doc_len": load.input_len, "num_queries": n,
                                  "hit_ratio": load.hit_ratio, "output_len": load.output_len}
    elif load.workload == "random":
        params = {"num_requests": n, "input_len": load.input_len, "output_len": load.output_len,
                  "range_ratio": load.range_ratio}
    elif load.workload == "shared-prefix":
        per_group = max(1, n // load.num_groups)
        params = {"num_groups": load.num_groups, "prompts_per_group": per_group, "prefix_len": load.prefix_len,
                  "suffix_len": max(1, load.input_len - load.prefix_len), "output_len": load.output_len}
    elif load.workload == "multi-round":
        params = {"num_users": load.num_groups, "num_rounds": load.num_rounds,
                  "question_len": load.input_len, "output_len": load.output_len}
    elif load.workload == "hash-trace":
        # replayed in the trace's order, closed loop at each swept concurrency (LoadSpec refuses open)
        params = hash_trace_params(profile)
    else:
        params = {"path": load.trace}
    wl: Workload = build_workload(load.workload, params, load.seed)
    # A workload with its own warm-up list (long-doc) populates with it; otherwise the measured
    # requests themselves are sent once first, so that every measured request is a cold restore.
    measure: Sequence[RequestSpec] = wl.measured
    populate: Sequence[RequestSpec]
    if wl.warmup:
        populate = wl.warmup
    elif isinstance(measure, LazyRequests):
        populate = LazyRequests(r.with_id(f"pop-{r.request_id}") for r in measure.recipes)
    else:
        populate = [s.with_id(f"pop-{s.request_id}") for s in measure]
    description = wl.describe()
    if load.workload == "hash-trace":
        description["expected_per_point"] = point_expected_reuse(profile)
    return PointWorkload(populate, measure, description)


def hash_trace_params(profile: Profile) -> dict[str, Any]:
    """The ``hash-trace`` workload parameters of the profile's load."""
    load = profile.load
    return {"path": load.trace, "block_size": load.trace_block_size, "time_unit": load.trace_time_unit,
            "replay": "closed", "max_context": load.trace_max_context, "sample": load.trace_sample,
            "max_requests": load.prompts_per_point, "lru_blocks": load.lru_blocks}


def point_expected_reuse(profile: Profile) -> dict[str, Any]:
    """What the trace promises for one measured pass of a sweep point, by the point's protocol.

    ``after_populate`` (an arm with an offload tier): the cold-restore protocol sends the measured
    requests once (populate), evicts the engine's own cache and measures; the tier, an LRU of
    ``lru_blocks``, saw the populate pass first. ``cold`` (an arm without a tier, or no cold
    restore): the measured pass from an empty cache (with warm-up: after the warm-up requests), so
    only the reuse within the pass; without cold restore later repetitions also find the earlier
    ones' blocks, so the figure is the first repetition's."""
    load = profile.load
    params = hash_trace_params(profile)
    bs = int(params["block_size"])
    reqs = hashtrace.select(
        hashtrace.parse_trace(Path(str(params["path"])), block_size=bs, time_unit=str(params["time_unit"])),
        max_context=int(params["max_context"]), sample=float(params["sample"]),
        max_requests=int(params["max_requests"]), seed=load.seed)
    pairs = [(r.input_length, r.hash_ids) for r in reqs]
    cap = load.lru_blocks
    out: dict[str, Any] = {"lru_capacity_blocks": cap, "block_size": bs}
    if load.cold_restore:
        out["after_populate"] = hashtrace.expected_reuse(pairs + pairs, bs, cap, count_from=len(pairs)).as_dict()
        out["cold"] = hashtrace.expected_reuse(pairs, bs, cap).as_dict()
    else:
        warm = pairs[:load.warmup]
        out["cold"] = hashtrace.expected_reuse(warm + pairs, bs, cap, count_from=len(warm)).as_dict()
    return out


def expected_reuse_table(profile: Profile, tier_table: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """``measurements.expected_reuse`` of a G2/G3 result: per arm, per measured point, the
    trace's expected hit rate beside the measured one. Empty unless the load is a hash-trace (the
    only workload whose reuse is known in advance)."""
    if profile.load.workload != "hash-trace":
        return {}
    exp = point_expected_reuse(profile)
    return {arm: expected_reuse_rows(exp, rows, offload=profile.arm(arm).offload,
                                     cold_restore=profile.load.cold_restore)
            for arm, rows in tier_table.items()}


def expected_reuse_rows(exp: dict[str, Any], tier_rows: Sequence[dict[str, Any]], *,
                        offload: bool, cold_restore: bool) -> list[dict[str, Any]]:
    """Per measured point of an arm: the expected hit rate (``point_expected_reuse``) beside the
    measured one (all tiers, from the engine's counters; None when the engine gave none)."""
    basis = "after_populate" if offload and cold_restore else "cold"
    expected = (exp.get(basis) or {}).get("expected_hit_rate")
    rows = []
    for row in tier_rows:
        measured = (row.get("rates") or {}).get("total")
        rows.append({"point": row.get("point"), "basis": basis, "lru_capacity_blocks": exp.get("lru_capacity_blocks"),
                     "expected_hit_rate": expected, "measured_hit_rate": measured,
                     "difference": None if measured is None or expected is None else measured - expected})
    return rows


@dataclass
class PointResult:
    summary: dict[str, Any]
    ttft_ms: list[float]
    evidence: list[str]
    # request ids that occur more than once in the point's records: the point is not counted
    duplicate_ids: list[str] = field(default_factory=list)


def _config(profile: Profile, instance: EngineInstance, concurrency: int, label: str) -> LoadConfig:
    load = profile.load
    goodput = {"ttft": load.ttft_slo * 1000.0} if load.ttft_slo else {}
    if load.slo is not None:  # per request: TTFT and time per output token within the SLO's bounds
        if load.slo.ttft_p90 is not None:
            goodput["ttft"] = load.slo.ttft_p90 * 1000.0
        if load.slo.itl_p90 is not None:
            goodput["tpot"] = load.slo.itl_p90 * 1000.0
    return LoadConfig(
        endpoint=instance.endpoint_url,
        model=instance.plan.served_model_name,
        api=load.api,
        workload=load.workload,
        seed=load.seed,
        concurrency=max(1, concurrency),
        request_rate=load.request_rate if load.mode == "open" else None,
        burstiness=load.burstiness,
        run_warmup=False,
        timeout_s=load.request_timeout,
        api_key_env=profile.engine.api_key_env,
        goodput=goodput,
        # greedy, and the text kept: the gate compares outputs across arms (output_identity)
        keep_text=True,
        extra_body={"temperature": 0},
        # a real model re-tokenizes text: token ids keep the workload's lengths exact (issue 18 item 6)
        prompt_format="token_ids" if profile.engine.kind != "sim" and load.api == "completions" else "text",
        progress=False,
        label=label,
    )


def run_local_point(profile: Profile, instances: Sequence[EngineInstance], specs: Sequence[RequestSpec],
                    concurrency: int, out_dir: Path, label: str, offset: int = 0) -> tuple[dict[str, Any], list[Path]]:
    """Run ``specs`` at ``concurrency`` spread over ``instances`` from this process (request i on
    instance (i + offset) mod n)."""
    parts = split_lazily(specs, len(instances), offset)
    conc = [max(1, concurrency // len(instances))] * len(instances)
    dirs = [out_dir if len(instances) == 1 else out_dir / f"instance{i}" for i in range(len(instances))]

    async def all_instances() -> list[Summary]:
        tasks = []
        for inst, part, c, d in zip(instances, parts, conc, dirs):
            if not part:
                continue
            cfg = _config(profile, inst, c, label)
            wl = Workload("point", {}, profile.load.seed, part, [])
            tasks.append(run_load_async(cfg, d, workload=wl, handle_signals=False))
        return list(await asyncio.gather(*tasks))

    summaries = asyncio.run(all_instances())
    records = [d / "records.jsonl" for d in dirs if (d / "records.jsonl").exists()]
    return combine([s.to_dict() for s in summaries]), records


def ttfts_from(records: Sequence[Path]) -> tuple[list[float], list[str]]:
    """TTFT (ms) of every successful measured request, from the records as written (a record
    whose timing is no measurement reads as an error, ``harness.load.records``), and the request
    ids that occur more than once among them (an error of the point)."""
    out: list[float] = []
    recs = [rec for path in records for rec in read_records(path)]
    for rec in recs:
        if rec.get("phase", "measure") != "measure" or rec.get("status") != SUCCESS:
            continue
        ttft = rec.get("ttft_ms")
        if isinstance(ttft, (int, float)):  # a finite time > 0 on a successful record (classified when read)
            out.append(float(ttft))
    return out, duplicate_ids(recs)


def run_point(run: GateRun, client: Node, instances: Sequence[EngineInstance], specs: Sequence[RequestSpec],
              concurrency: int, out_dir: Path, label: str, offset: int = 0) -> PointResult:
    """Run one batch of requests from ``client`` and return its summary, TTFT samples and evidence."""
    profile = run.profile
    if client.connection != "local":
        summary, records = run_agent_point(
            run.executor(client.name), str(run.inventory.setting(client, "python")),
            str(run.inventory.setting(client, "workdir")), profile, instances, specs, concurrency, out_dir,
            offset=offset)
    else:
        summary, records = run_local_point(profile, instances, specs, concurrency, out_dir, label, offset)
    (out_dir / "point-summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    base = run.path.resolve()
    evidence = [p.resolve().relative_to(base).as_posix() for p in records if p.resolve().is_relative_to(base)]
    ttfts, dups = ttfts_from(records)
    return PointResult(summary, ttfts, evidence, dups)
