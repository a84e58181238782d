"""The TTFT/throughput sweep of one arm, with the cold-restore protocol at every point.

For each concurrency and repetition: populate (send the point's contexts once, so the KV tier
holds them), evict the KV from the engine (the emulator's admin endpoint, or a restart), drop the
node's page cache when root (recorded), scrape the metrics, measure, scrape again. Each finished
repetition is recorded in the gate's resumable state, so ``--resume`` repeats nothing and loses
nothing; the engine is stopped whatever happens.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.config.inventory import Node
from harness.config.profile import Arm
from harness.engines import EngineInstance, delta, drop_page_cache, get_engine
from harness.engines.base import Engine
from harness.engines.coldrestore import check_profile, unlike_settings
from harness.engines.planning import shares_tier
from harness.errors import InfraError, InputError
from harness.gates.stats import percentile
from harness.pipelines.shared.coldrestore import point_counters
from harness.pipelines.shared.context import GateRun
from harness.pipelines.shared.drain import cold_evict
from harness.pipelines.shared.enospc import DiskFullWatch
from harness.pipelines.shared.instances import cross_instance, measure_offset
from harness.pipelines.shared.loadpoint import PointWorkload, point_workload, run_point
from harness.pipelines.shared.restoreprobe import WORKERS, probe_tier_files
from harness.pipelines.shared.sweepdata import Repetition, Sweep
from harness.pipelines.shared.tierhits import memory_hit_requests, tier_hits
from harness.progress import Progress
from harness.remote.base import DetachedHandle, Executor

log = logging.getLogger(__name__)


def step_key(arm: str, concurrency: int, repetition: int) -> str:
    return f"sweep/{arm}/c{concurrency}/rep{repetition}"


def repetition_from_state(arm: str, concurrency: int, repetition: int, data: dict[str, Any]) -> Repetition:
    return Repetition(arm, concurrency, repetition, dict(data.get("summary") or {}),
                      [float(x) for x in data.get("ttft_ms") or []], list(data.get("evidence") or []),
                      dict(data.get("counters") or {}), dict(data.get("tiers") or {}),
                      {str(k): str(v) for k, v in (data.get("notes") or {}).items()})


def load_points(gate_dir: Any, arm: str, points: Sequence[tuple[int, int]]) -> Sweep:
    """The recorded repetitions among ``points`` ((concurrency, repetition) pairs) of ``arm``."""
    sweep: Sweep = {}
    for c, r in points:
        data = gate_dir.step_done(step_key(arm, c, r))
        if data:
            sweep.setdefault(c, []).append(repetition_from_state(arm, c, r, data))
    return sweep


def load_sweep(run: GateRun, arm: str, concurrencies: Sequence[int], repetitions: int,
               gate_dir: Optional[Any] = None) -> Sweep:
    """The repetitions of ``arm`` already recorded in a gate's state (this gate's by default)."""
    points = [(c, r) for c in concurrencies for r in range(1, repetitions + 1)]
    return load_points(gate_dir or run.gate_dir, arm, points)


MAX_PROMPT_DEVIATION = 0.02


def prompt_token_check(requested_lengths: Sequence[int], deltas: Sequence[Optional[dict[str, Any]]]) -> dict[str, Any]:
    """Requested prompt tokens vs what the engines counted (``vllm:prompt_tokens``) in the measured
    window. A deviation over 2% means the workload's lengths are not the served model's tokens
    (words sent as tokens): the point is invalid (``valid`` False, with the reason)."""
    requested = sum(requested_lengths)
    served_parts = [((d or {}).get("counters") or {}).get("vllm:prompt_tokens") for d in deltas]
    if not served_parts or any(v is None for v in served_parts):
        return {"requested": requested, "served": None, "deviation": None, "valid": None,
                "reason": "an engine exposes no vllm:prompt_tokens counter: served lengths unknown"}
    served = float(sum(v for v in served_parts if v is not None))
    deviation = abs(served - requested) / requested if requested else 0.0
    valid = deviation <= MAX_PROMPT_DEVIATION
    reason = None if valid else (f"the engine served {served:.0f} prompt tokens for {requested} requested "
                                 f"({deviation:.1%} off, over {MAX_PROMPT_DEVIATION:.0%}): prompt lengths are "
                                 "not in the served model's tokens")
    return {"requested": requested, "served": served, "deviation": deviation, "valid": valid, "reason": reason}


def _start_instances(run: GateRun, engine: Engine, server: Node, arm: Arm) -> list[EngineInstance]:
    executor = run.executor(server.name)
    agent_path = None
    if run.profile.engine.kind == "sim" and server.connection != "local":
        from harness.agent.deploy import ensure_agent

        workdir = str(run.inventory.setting(server, "workdir"))
        agent_path = ensure_agent(executor, workdir)
    python = str(run.inventory.setting(server, "python"))
    # One engine over several nodes (vLLM's Ray backend): the next server nodes are its workers.
    span = run.profile.model.nodes_per_instance
    peers = run.server_nodes()[1:span]
    if len(peers) < span - 1:
        raise InputError(f"model.nodes_per_instance is {span} but the inventory has only "
                         f"{len(peers) + 1} server node(s)")
    peer_executors = {p.name: run.executor(p.name) for p in peers}
    instances: list[EngineInstance] = []
    _stop_stale(run, executor, arm)
    try:
        for i in range(run.profile.model.instances_per_node):
            plan = engine.plan(server, run.profile, arm, i, python=python, agent_path=agent_path,
                               workdir=str(run.inventory.setting(server, "workdir")), peers=peers)
            client = run.client_node(server)
            plan.url_for(client.name)  # a remote load client must be able to reach the engine
            run.gate_dir.write_evidence_json(f"engine/{arm.name}/instance{i}-plan.json", plan.to_json())
            run.gate_dir.record_command(server.name, ["env", *[f"{k}={v}" for k, v in sorted(plan.env.items())],
                                                      *plan.argv])
            for d in plan.kv_dirs:  # marked for this campaign: only these are removed at the end
                run.create_owned(executor, d)
            inst = engine.start(executor, plan, peer_executors=peer_executors or None)
            instances.append(inst)
            # Saved at once: a run killed mid-sweep leaves a detached engine behind, which a
            # resumed run finds here and stops before it starts its own.
            run.gate_dir.write_evidence_json(f"engine/{arm.name}/instance{i}.json", inst.to_json())
        for inst in instances:
            engine.wait_ready(inst)
    except BaseException:
        _stop_instances(run, engine, instances, arm)
        raise
    return instances


def _stop_stale(run: GateRun, executor: Executor, arm: Arm) -> None:
    for i in range(run.profile.model.instances_per_node):
        path = run.gate_dir.evidence_path(f"engine/{arm.name}/instance{i}.json")
        if not path.exists():
            continue
        try:
            handle = DetachedHandle.from_json(json.loads(path.read_text())["handle"])
            state = executor.stop(handle, grace=10.0)
            run.notes.append(f"stopped the engine left by an interrupted run ({arm.name} instance {i}): "
                             f"{state.reason or 'exit ' + str(state.exit_code)}")
        except (InfraError, OSError, ValueError, KeyError) as exc:
            run.warn(f"could not stop the engine left by an interrupted run ({arm.name} instance {i})", exc)


def _stop_instances(run: GateRun, engine: Engine, instances: Sequence[EngineInstance], arm: Arm) -> None:
    for i, inst in enumerate(instances):
        try:
            logs_dir = run.gate_dir.evidence_path(f"engine/{arm.name}/instance{i}-logs")
            logs_dir.mkdir(parents=True, exist_ok=True)
            engine.collect_logs(inst, logs_dir)
        except (InfraError, OSError) as exc:
            run.warn(f"{inst.node}: collecting the logs of {arm.name} instance {i} failed", exc)
        try:
            engine.stop(inst, remove_kv_files=False)
        except (InfraError, OSError) as exc:
            run.fault(f"{inst.node}: stopping {arm.name} instance {i} failed", exc)
            continue
        # The KV files this arm wrote are removed (by containment): a node is left as it was found.
        for d in inst.plan.kv_dirs:
            run.remove_owned(inst.executor, d)


def _scrape(run: GateRun, engine: Engine, instances: Sequence[EngineInstance]) -> list[Any]:
    snaps: list[Any] = []
    for inst in instances:
        try:
            snaps.append(engine.scrape_metrics(inst))
        except InfraError as exc:
            run.notes.append(f"metrics of {inst.node} could not be scraped: {exc}")
            snaps.append(None)
    return snaps


def _evict_cold(run: GateRun, engine: Engine, instances: list[EngineInstance], arm: Arm,
                protocol: dict[str, Any]) -> Optional[str]:
    """Drain, evict, prove empty (harness.pipelines.shared.drain.cold_evict), recording each step in
    ``protocol``; returns why the point is not a cold restore (None: it is)."""
    def restarted(i: int, inst: EngineInstance) -> None:  # a new process to stop if we are killed
        run.gate_dir.write_evidence_json(f"engine/{arm.name}/instance{i}.json", inst.to_json())

    return cold_evict(engine, instances, protocol, restarted)


def probe_key(arm: str) -> str:
    return f"restoreprobe/{arm}"


def _probe_tier(run: GateRun, arm: Arm, inst: EngineInstance, progress: Progress) -> None:
    """Read the tier's own chunk files as the restores did (harness.pipelines.shared.restoreprobe), once
    per arm, after its last measurement (recorded in the gate's state)."""
    if run.gate_dir.step_done(probe_key(arm.name)):
        return
    progress.status(f"reading the tier's chunk files as a restore does ({WORKERS} readers, O_DIRECT)")
    got = probe_tier_files(inst).to_json()
    run.gate_dir.write_evidence_json(f"sweep/{arm.name}/restore-probe.json", got)
    run.gate_dir.mark_step_done(probe_key(arm.name), got)


def _no_memory_tier(arm: Arm, protocol: dict[str, Any]) -> Optional[str]:
    """Why the arm cannot have served KV from host memory, when its engine does not split hits."""
    if not arm.offload:
        return "no KV offload tier (the arm recomputes)"
    shown = [e for e in protocol.get("memory_empty") or [] if e.get("empty") is True and not e.get("figures")]
    if shown and len(shown) == len(protocol.get("memory_empty") or []) and \
            all(e.get("detail") == "no host-memory KV tier configured" for e in shown):
        return "no host-memory KV tier configured"
    return None


def run_arm_sweep(run: GateRun, arm_name: str, *, label: Optional[str] = None,
                  points: Optional[Sequence[tuple[int, int]]] = None) -> Sweep:
    """Measure ``arm_name`` at every concurrency and repetition of the profile (resumable), or,
    given ``points``, at just those (concurrency, repetition) pairs (the SLO capacity's
    confirmation repetitions, numbered after the sweep's); returns what was measured."""
    profile = run.profile
    arm = profile.arm(arm_name)
    concs = list(profile.load.concurrency)
    reps = profile.load.repetitions
    wanted = list(points) if points is not None else [(c, r) for c in concs for r in range(1, reps + 1)]
    sweep = load_points(run.gate_dir, arm.name, wanted)
    todo = [(c, r) for c, r in wanted if not any(x.repetition == r for x in sweep.get(c, []))]
    if not todo:
        return sweep
    # every arm's cold restore must keep its tier: refused here, before any node is touched
    restore_plans = {p.arm: p.to_json() for p in check_profile(profile)}
    for difference in unlike_settings(profile):
        run.notes.append(f"baseline and candidate are not like for like: {difference}")
    server = run.server_nodes()[0]
    engine = get_engine(profile.engine.kind)
    workload = point_workload(profile)
    run.gate_dir.write_evidence_json(f"sweep/{arm.name}/workload.json", workload.description)
    progress = Progress(f"{run.gate} sweep {label or arm.name}", total=len(wanted), enabled=run.progress)
    progress.done = len(wanted) - len(todo)
    progress.status(f"starting {profile.engine.kind} for arm {arm.name} on {server.name}", force=True)
    instances = _start_instances(run, engine, server, arm)
    try:
        arm_sweep = _ArmSweep(run, arm, engine, instances, server, run.client_node(server), workload,
                              restore_plans.get(arm.name), progress)
        for conc, rep in todo:
            data = arm_sweep.point(conc, rep)
            if data is None:
                continue
            run.gate_dir.mark_step_done(step_key(arm.name, conc, rep), data)
            sweep.setdefault(conc, []).append(repetition_from_state(arm.name, conc, rep, data))
            summary, ttft_ms = data["summary"], data["ttft_ms"]
            p50 = percentile(ttft_ms, 50) if ttft_ms else float("nan")
            progress.update(1, f"c{conc} rep{rep}: {summary.get('completed')} ok, "
                               f"{summary.get('failed')} failed, TTFT p50 {p50:.0f} ms, "
                               f"{float(summary.get('output_throughput') or 0):.1f} tok/s")
        if profile.load.cold_restore and arm.offload and instances and points is None:
            _probe_tier(run, arm, instances[0], progress)
    finally:
        _stop_instances(run, engine, instances, arm)
        progress.finish(f"arm {arm.name} done")
    return sweep


def _fresh_point_dir(run: GateRun, arm: str, conc: int, rep: int) -> Path:
    point_dir = Path(run.gate_dir.evidence_path(f"sweep/{arm}/c{conc}/rep{rep}"))
    if point_dir.exists():
        # Left by an interrupted run: kept as evidence, never mixed into the new samples.
        n = 1
        while point_dir.with_name(f"{point_dir.name}.interrupted-{n}").exists():
            n += 1
        point_dir.rename(point_dir.with_name(f"{point_dir.name}.interrupted-{n}"))
    point_dir.mkdir(parents=True, exist_ok=True)
    return point_dir


def _write_protocol(point_dir: Path, protocol: dict[str, Any]) -> None:
    (point_dir / "protocol.json").write_text(json.dumps(protocol, indent=2, default=str) + "\n")


@dataclass
class _ArmSweep:
    """One arm's running engines and what every point of its sweep shares."""

    run: GateRun
    arm: Arm
    engine: Engine
    instances: list[EngineInstance]
    server: Node
    client: Node
    workload: PointWorkload
    restore_plan: Optional[dict[str, Any]]
    progress: Progress

    def point(self, conc: int, rep: int) -> Optional[dict[str, Any]]:
        """One repetition at one concurrency: what the gate's state records for it, or None when
        it is not counted (not a cold restore, or the KV tier filled up: a fault is recorded)."""
        point_dir = _fresh_point_dir(self.run, self.arm.name, conc, rep)
        protocol: dict[str, Any] = {"arm": self.arm.name, "concurrency": conc, "repetition": rep,
                                    "cold_restore": self.run.profile.load.cold_restore}
        full = DiskFullWatch(self.instances)  # engine-side ENOSPC during the point fails it (i17)
        if not self._before_measuring(conc, rep, point_dir, protocol, full):
            return None
        return self._measure(conc, rep, point_dir, protocol, full)

    def _before_measuring(self, conc: int, rep: int, point_dir: Path, protocol: dict[str, Any],
                          full: DiskFullWatch) -> bool:
        """Cold restore (populate, evict, drop the page cache) or the warm-up; False when the point
        is not a cold restore."""
        run, arm, instances, workload = self.run, self.arm, self.instances, self.workload
        load = run.profile.load
        if load.cold_restore:
            self.progress.status(f"c{conc} rep{rep}: populating {len(workload.populate)} contexts")
            pop = run_point(run, self.client, instances, workload.populate, conc, point_dir / "populate",
                            f"{arm.name} c{conc} populate")
            protocol["populate"] = {"completed": pop.summary.get("completed"), "failed": pop.summary.get("failed")}
            full.check(instances)
            not_cold = _evict_cold(run, self.engine, instances, arm, protocol)
            protocol["cold_restore_plan"] = self.restore_plan
            protocol["page_cache_dropped"] = drop_page_cache(run.executor(self.server.name))
            if not_cold:
                _write_protocol(point_dir, protocol)
                run.fault(f"{arm.name} c{conc} rep{rep}: not a cold restore ({not_cold}); the repetition "
                          "is not counted")
                return False
        elif load.warmup:
            warm = [s.with_id(f"warm-{s.request_id}") for s in workload.measure[:load.warmup]]
            run_point(run, self.client, instances, warm, conc, point_dir / "warmup", f"{arm.name} c{conc} warm-up")
            protocol["warmup_requests"] = len(warm)
        return True

    def _measure(self, conc: int, rep: int, point_dir: Path, protocol: dict[str, Any],
                 full: DiskFullWatch) -> Optional[dict[str, Any]]:
        """Scrape, measure, scrape again; the point's record (None: the KV tier filled up)."""
        run, arm, instances, workload = self.run, self.arm, self.instances, self.workload
        before = _scrape(run, self.engine, instances)
        self.progress.status(f"c{conc} rep{rep}: measuring {len(workload.measure)} requests")
        # R4: over a shared tier every restore goes through another instance than its populate
        offset = measure_offset(shares_tier(arm) and run.profile.load.cold_restore, len(instances))
        point = run_point(run, self.client, instances, workload.measure, conc, point_dir / "measure",
                          f"{arm.name} c{conc} rep{rep}", offset)
        after = _scrape(run, self.engine, instances)
        if point.duplicate_ids:  # two records for one request: which one was measured is unknown
            shown = ", ".join(point.duplicate_ids[:5]) + (" ..." if len(point.duplicate_ids) > 5 else "")
            run.fault(f"{arm.name} c{conc} rep{rep}: {len(point.duplicate_ids)} request id(s) occur more than once "
                      f"in the point's records ({shown}); the repetition is not counted")
            return None
        full_lines = full.check(instances)
        if full_lines > 0:  # the KV tier was full: not a storage measurement (i17)
            run.fault(f"{arm.name} c{conc} rep{rep}: the engine logged {full_lines} 'no space left on device' "
                      "line(s) during the point; the repetition is not counted")
            return None
        metrics = [delta(b, a).to_json() if b is not None and a is not None else None
                   for b, a in zip(before, after)]
        (point_dir / "metrics-delta.json").write_text(json.dumps(metrics, indent=2, default=str) + "\n")
        protocol["prompt_tokens"] = prompt_token_check([s.input_tokens for s in workload.measure], metrics)
        if len(instances) > 1:
            protocol["cross_instance"] = cross_instance(
                [(m or {}).get("key_figures") for m in metrics], instances=len(instances), offset=offset)
        counters = point_counters(metrics)
        memory_hits, memory_how = memory_hit_requests(before, after, requests=len(workload.measure),
                                                      structural=_no_memory_tier(arm, protocol))
        counters["memory_hit_requests"] = memory_hits
        protocol["memory_tier_hits"] = {"requests": memory_hits, "how": memory_how}
        _write_protocol(point_dir, protocol)
        if "cross_instance" in protocol:  # R4: what the cold_restore subtree reports per point
            counters["cross_instance_hit_tokens"] = protocol["cross_instance"]["hit_tokens"]
            counters["cross_instance_prompt_tokens"] = protocol["cross_instance"]["prompt_tokens"]
        return {"summary": point.summary, "ttft_ms": point.ttft_ms, "evidence": point.evidence,
                "protocol": protocol, "counters": counters, "notes": {"memory_hit_requests": memory_how},
                "tiers": tier_hits(before, after, arm.lmcache.chunk_size)}
