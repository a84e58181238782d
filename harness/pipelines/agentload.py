"""Run a sweep point's load on a remote client node through the node agent.

The controller ships the exact requests as a JSONL trace (prompt, output length, request id), so
the node runs precisely what a local run would; the agent's ``load run --workload trace`` replays
it closed-loop at the point's concurrency, detached from the SSH session, and writes its records
and summary on the node; the controller polls, then pulls them back. One agent process per engine
instance (TP4x2), side by side.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.config.inventory import Node
from harness.config.profile import Profile
from harness.engines.base import EngineInstance
from harness.load import RequestSpec
from harness.pipelines.loadpoint import _split, combine
from harness.remote.base import DetachedHandle, Executor, RemoteError

POLL_S = 0.5


class AgentLoadError(RemoteError):
    """The load generator on the node failed or stopped without its summary."""


def _trace_lines(specs: Sequence[RequestSpec]) -> bytes:
    return "".join(json.dumps({"request_id": s.request_id, "prompt": s.prompt, "output_len": s.max_tokens}) + "\n"
                   for s in specs).encode()


def _argv(python: str, agent: str, profile: Profile, inst: EngineInstance, trace: str, out: str,
          concurrency: int, n: int) -> list[str]:
    load = profile.load
    argv = [python, "-I", "-S", agent, "load", "run", "--endpoint", inst.endpoint_url,
            "--model", inst.plan.served_model_name, "--api", load.api, "--workload", "trace", "--trace", trace,
            "--concurrency", str(max(1, concurrency)), "--num-requests", str(n), "--no-warmup",
            "--timeout", repr(float(load.request_timeout)), "--out", out]
    if load.mode == "open" and load.request_rate:
        argv += ["--request-rate", repr(float(load.request_rate)), "--burstiness", repr(float(load.burstiness))]
    if profile.engine.api_key_env:
        argv += ["--api-key-env", profile.engine.api_key_env]
    if load.ttft_slo:
        argv += ["--goodput", f"ttft:{load.ttft_slo * 1000.0:g}"]
    return argv


def run_agent_point(executor: Executor, client: Node, python: str, workdir: str, profile: Profile,
                    instances: Sequence[EngineInstance], specs: Sequence[RequestSpec], concurrency: int,
                    out_dir: Path, label: str) -> tuple[dict[str, Any], list[Path]]:
    from harness.agent.deploy import ensure_agent

    agent = ensure_agent(executor, workdir)
    run_id = uuid.uuid4().hex[:8]
    remote_base = f"{workdir.rstrip('/')}/load/{run_id}"
    executor.run(["mkdir", "-p", remote_base])
    parts = _split(specs, len(instances))
    conc = max(1, concurrency // len(instances))
    started: list[tuple[int, DetachedHandle, str, Path]] = []
    try:
        for i, (inst, part) in enumerate(zip(instances, parts)):
            if not part:
                continue
            trace = f"{remote_base}/requests-{i}.jsonl"
            executor.write_file(trace, _trace_lines(part))
            remote_out = f"{remote_base}/out-{i}"
            argv = _argv(python, agent, profile, inst, trace, remote_out, conc, len(part))
            handle = executor.start_detached(argv, workdir=remote_base, name=f"load-{run_id}-{i}")
            local = out_dir if len(instances) == 1 else out_dir / f"instance{i}"
            started.append((i, handle, remote_out, local))
        deadline = time.monotonic() + profile.load.request_timeout * (1 + len(specs) / max(1, conc)) + 60
        pending = {i for i, *_ in started}
        while pending:
            for i, handle, _, _ in started:
                if i in pending and not executor.poll(handle).running:
                    pending.discard(i)
            if pending and time.monotonic() > deadline:
                raise AgentLoadError(f"the load generator of {label} did not finish in time",
                                     host=executor.node, command=handle.command)
            if pending:
                time.sleep(POLL_S)
        summaries: list[dict[str, Any]] = []
        records: list[Path] = []
        for _, handle, remote_out, local in started:
            local.mkdir(parents=True, exist_ok=True)
            state = executor.poll(handle)
            for name in ("records.jsonl", "summary.json"):
                try:
                    executor.get(f"{remote_out}/{name}", str(local / name))
                except RemoteError:
                    if name == "summary.json":
                        raise AgentLoadError(
                            f"the load generator of {label} left no summary (exit {state.exit_code})",
                            host=executor.node, command=handle.command, exit_code=state.exit_code,
                            stderr=executor.tail_log(handle)) from None
            summaries.append(json.loads((local / "summary.json").read_text()))
            records.append(local / "records.jsonl")
        return combine(summaries), records
    finally:
        for _, handle, _, _ in started:
            try:
                if executor.poll(handle).running:
                    executor.stop(handle, grace=5.0)
            except RemoteError:
                pass

