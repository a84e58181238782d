"""Run a sweep point's load on a remote client node through the node agent.

The controller ships the exact requests as a JSONL trace (prompt, output length, request id), so
the node runs precisely what a local run would; the agent's ``load run --workload trace`` replays
it closed-loop at the point's concurrency, detached from the SSH session, and writes its records
on the node, which ``harness.agent.remote`` pulls home as they are written. One agent process per
engine instance (TP4x2), side by side.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.agent.deploy import ensure_agent
from harness.agent.remote import RECORDS, AgentLoad, start_load, stop_load, wait_load
from harness.config.profile import Profile
from harness.engines.base import EngineInstance
from harness.load import RequestSpec
from harness.pipelines.shared.instances import combine, split_lazily
from harness.remote.base import Executor, RemoteError


def _trace_lines(specs: Sequence[RequestSpec]) -> bytes:
    return "".join(json.dumps({"request_id": s.request_id, "prompt": s.prompt, "output_len": s.max_tokens}) + "\n"
                   for s in specs).encode()


def _load_args(profile: Profile, inst: EngineInstance, trace: str, concurrency: int, n: int,
               client: str) -> list[str]:
    load = profile.load
    args = ["--endpoint", inst.plan.url_for(client), "--model", inst.plan.served_model_name, "--api", load.api,
            "--workload", "trace", "--trace", trace, "--concurrency", str(max(1, concurrency)),
            "--num-requests", str(n), "--no-warmup", "--timeout", repr(float(load.request_timeout)),
            # greedy, and the text kept: the gate compares outputs across arms (output_identity)
            "--keep-text", "--temperature", "0"]
    if load.mode == "open" and load.request_rate:
        args += ["--request-rate", repr(float(load.request_rate)), "--burstiness", repr(float(load.burstiness))]
    if profile.engine.kind != "sim" and load.api == "completions":
        args += ["--prompt-format", "token-ids"]  # exact lengths on a real model (as in loadpoint)
    if profile.engine.api_key_env:
        args += ["--api-key-env", profile.engine.api_key_env]
    if load.ttft_slo:
        args += ["--goodput", f"ttft:{load.ttft_slo * 1000.0:g}"]
    return args


def run_agent_point(executor: Executor, python: str, workdir: str, profile: Profile,
                    instances: Sequence[EngineInstance], specs: Sequence[RequestSpec], concurrency: int,
                    out_dir: Path, offset: int = 0) -> tuple[dict[str, Any], list[Path]]:
    """Run ``specs`` at ``concurrency`` from the node behind ``executor``; returns the whole-machine
    summary and the local copies of the records. Request i goes to instance (i + offset) mod n."""
    agent = ensure_agent(executor, workdir)
    run_id = uuid.uuid4().hex[:8]
    remote_base = f"{workdir.rstrip('/')}/load/{run_id}"
    executor.run(["mkdir", "-p", "--", remote_base])
    parts = split_lazily(specs, len(instances), offset)
    conc = max(1, concurrency // len(instances))
    runs: list[AgentLoad] = []
    try:
        for i, (inst, part) in enumerate(zip(instances, parts)):
            if not part:
                continue
            trace = f"{remote_base}/requests-{i}.jsonl"
            executor.write_file(trace, _trace_lines(part))
            local = out_dir if len(instances) == 1 else out_dir / f"instance{i}"
            runs.append(start_load(executor, agent, _load_args(profile, inst, trace, conc, len(part), executor.node),
                                   workdir=remote_base, local_dir=local, name=f"load-{i}", python=python))
        # Every request may take the whole request timeout, one concurrency slot at a time.
        budget = profile.load.request_timeout * (1 + len(specs) / conc) + 60
        deadline = time.monotonic() + budget
        summaries = [wait_load(executor, r, timeout_s=max(1.0, deadline - time.monotonic())).to_dict()
                     for r in runs]
        return combine(summaries), [Path(r.local_dir) / RECORDS for r in runs]
    except BaseException:
        for r in runs:
            try:
                if executor.poll(r.handle).running:
                    stop_load(executor, r, grace=5.0)
            except RemoteError:
                pass
        raise
