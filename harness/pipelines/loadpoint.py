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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config.inventory import Node
from harness.config.profile import Profile
from harness.engines.base import EngineInstance
from harness.load import LoadConfig, RequestSpec, Workload, build_workload, read_records, run_load_async
from harness.load.summary import Summary
from harness.pipelines.agentload import run_agent_point
from harness.pipelines.context import GateRun
from harness.pipelines.instances import combine, split_requests

SUCCESS = "ok"


@dataclass
class PointWorkload:
    """The requests of one sweep point: ``populate`` fills the KV tier, ``measure`` is measured."""

    populate: list[RequestSpec]
    measure: list[RequestSpec]
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
    else:
        params = {"path": load.trace}
    wl: Workload = build_workload(load.workload, params, load.seed)
    # A workload with its own warm-up list (long-doc) populates with it; otherwise the measured
    # requests themselves are sent once first, so that every measured request is a cold restore.
    populate = list(wl.warmup) if wl.warmup else [s.with_id(f"pop-{s.request_id}") for s in wl.measured]
    return PointWorkload(populate, list(wl.measured), wl.describe())


@dataclass
class PointResult:
    summary: dict[str, Any]
    ttft_ms: list[float]
    evidence: list[str]


def _config(profile: Profile, instance: EngineInstance, concurrency: int, label: str) -> LoadConfig:
    load = profile.load
    goodput = {"ttft": load.ttft_slo * 1000.0} if load.ttft_slo else {}
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
    parts = split_requests(specs, len(instances), offset)
    conc = [max(1, concurrency // len(instances))] * len(instances)
    dirs = [out_dir if len(instances) == 1 else out_dir / f"instance{i}" for i in range(len(instances))]

    async def all_instances() -> list[Summary]:
        tasks = []
        for inst, part, c, d in zip(instances, parts, conc, dirs):
            if not part:
                continue
            cfg = _config(profile, inst, c, label)
            wl = Workload("point", {}, profile.load.seed, list(part), [])
            tasks.append(run_load_async(cfg, d, workload=wl, handle_signals=False))
        return list(await asyncio.gather(*tasks))

    summaries = asyncio.run(all_instances())
    records = [d / "records.jsonl" for d in dirs if (d / "records.jsonl").exists()]
    return combine([s.to_dict() for s in summaries]), records


def ttfts_from(records: Sequence[Path]) -> list[float]:
    """TTFT (ms) of every successful measured request, from the records as written."""
    out: list[float] = []
    for path in records:
        for rec in read_records(path):
            if rec.get("phase", "measure") != "measure" or rec.get("status") != SUCCESS:
                continue
            ttft = rec.get("ttft_ms")
            if isinstance(ttft, (int, float)):
                out.append(float(ttft))
    return out


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
    return PointResult(summary, ttfts_from(records), evidence)
