"""One measured rate of a bandwidth sweep: the rate verified by fio under its cgroup, then the
candidate arm's G3 sweep (cold restore, repetitions, restore probe) and G3's checks on it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from harness.config.gatespec import GateSpec
from harness.config.inventory import Node, StorageTarget
from harness.config.profile import Profile, ThresholdOverride
from harness.errors import InfraError
from harness.pipelines.bandwidth.targets import at_rate
from harness.pipelines.bandwidth.throttleslice import restore_slices
from harness.pipelines.bandwidth.verdicts import evaluate_point, rate_check, rate_error, unfiltered
from harness.pipelines.shared.armsteps import arm_cold_restore
from harness.pipelines.shared.context import GateRun
from harness.pipelines.shared.probesteps import fio_step
from harness.pipelines.shared.provisioned import enforced_rates
from harness.pipelines.shared.restoreprobe import kv_bytes_per_token
from harness.pipelines.shared.sweep import run_arm_sweep
from harness.pipelines.shared.sweepdata import Sweep, compare_measured, failed_ratio, sweep_table
from harness.probes.blkthrottle import rate_text
from harness.records.outcome import CheckResult, Verdict


@dataclass
class SweepContext:
    """What every rate of one sweep shares."""

    run: GateRun
    node: Node
    target: StorageTarget
    concurrency: int
    g3: GateSpec
    g1: GateSpec
    overrides: list[ThresholdOverride]
    baseline: Sweep
    recompute_tree: dict[str, Any]


@dataclass
class PointOutcome:
    record: dict[str, Any]  # the point's entry of measurements["bandwidth_curve"]["points"]
    rate: CheckResult
    checks: list[CheckResult]


def point_profile(profile: Profile, index: int, concurrency: int) -> Profile:
    """The profile of the ``index``-th rate: the candidate arm under a name of its own (its evidence,
    state and tier directory are the point's), one concurrency."""
    cand = profile.arm(profile.candidate)
    name = f"{cand.name}-bw{index}"
    arms = [a.model_copy(update={"name": name}) if a.name == cand.name else a for a in profile.arms]
    load = profile.load.model_copy(update={"concurrency": [concurrency]})
    return profile.model_copy(update={"arms": arms, "candidate": name, "load": load})


def sub_run(run: GateRun, profile: Profile, inventory: Any) -> GateRun:
    """A run over the same campaign and gate folder (faults and notes shared) with its own inputs,
    executors and cgroups."""
    return dataclasses.replace(run, profile=profile, inventory=inventory, cgroups={}, _executors={})


def _figures(sweep: Sweep, concurrency: int) -> dict[str, Any]:
    row = sweep_table(sweep).get(str(concurrency)) or {}
    ttft_ci, thr_ci = row.get("ttft_p50_ci"), row.get("output_throughput_ci")
    return {"ttft_p50_ms": row.get("ttft_p50_ms"), "ttft_p50_interval_ms": ttft_ci[1:] if ttft_ci else None,
            "throughput_tok_s": row.get("output_throughput"), "throughput_interval": thr_ci[1:] if thr_ci else None,
            "repetitions": row.get("repetitions", 0)}


def measure_point(ctx: SweepContext, index: int, rate_bps: float, fraction: float) -> PointOutcome:
    """Verify the rate with fio in its cgroup, then (when delivered) the candidate's G3 sweep there."""
    run = ctx.run
    prof = point_profile(run.profile, index, ctx.concurrency)
    inv = at_rate(run.inventory, ctx.node.name, ctx.target.name, rate_bps)
    pr = sub_run(run, prof, inv)
    target = inv.node(ctx.node.name).target(ctx.target.name)
    assert target is not None
    record: dict[str, Any] = {"provisioned_read_bps": rate_bps, "fraction": fraction, "fio_read_bps": None,
                              "ttft_p50_ms": None, "ttft_p50_interval_ms": None, "throughput_tok_s": None,
                              "throughput_interval": None, "verdicts": {"ttft_p50_reduction": "NOT_RUN",
                                                                        "throughput_gain": "NOT_RUN"},
                              "error": None, "arm": prof.candidate, "label": f"{rate_text(rate_bps)}"}
    checks: list[CheckResult] = []
    rate: Optional[CheckResult] = None
    try:
        with enforced_rates(pr):
            leaf, rate = _verified_rate(ctx, pr, target, index, rate_bps)
            record["fio_read_bps"] = leaf.get("value")
            record["error"] = rate_error(rate)
            if record["error"] is None:
                checks = _candidate(ctx, pr, record, leaf)
    except InfraError as exc:
        run.fault(f"bandwidth-sweep: the point at {rate_text(rate_bps)} stopped", exc)
        record["error"] = record["error"] or f"the point did not finish: {exc}"
    finally:
        pr.close()
    if record["error"] is not None:
        record["verdicts"] = {"ttft_p50_reduction": "ERROR", "throughput_gain": "ERROR"}
    return PointOutcome(record, rate or _no_rate(ctx, target), checks)


def _verified_rate(ctx: SweepContext, pr: GateRun, target: StorageTarget, index: int,
                   rate_bps: float) -> tuple[dict[str, Any], CheckResult]:
    """fio's read under the point's cgroup and G1's check of the rate on it. An INCONCLUSIVE check
    (rounds that never settled: a busy machine starves fio) is measured once more and the second
    decides; a FAIL is not retried (the kernel did not deliver the rate)."""
    leaf, rate = _fio_rate(ctx, pr, target, f"fio/bw{index}")
    if rate.verdict is Verdict.INCONCLUSIVE:
        pr.notes.append(f"bandwidth-sweep: the rate check at {rate_text(rate_bps)} was INCONCLUSIVE "
                        f"({rate.reason or 'not decided'}): fio measured it again")
        leaf, rate = _fio_rate(ctx, pr, target, f"fio/bw{index}-again")
    return leaf, rate


def _fio_rate(ctx: SweepContext, pr: GateRun, target: StorageTarget, key: str) -> tuple[dict[str, Any], CheckResult]:
    leaf = fio_step(pr, pr.inventory.node(ctx.node.name), target, job_sets=["seq-read"], key=key).get("seq_read_bw")
    leaf = leaf or {}
    return leaf, rate_check(ctx.g1, target, ctx.node.name, leaf)


def _no_rate(ctx: SweepContext, target: StorageTarget) -> CheckResult:
    return rate_check(ctx.g1, target, ctx.node.name, {"value": None, "detail": "fio did not run"})


def _candidate(ctx: SweepContext, pr: GateRun, record: dict[str, Any], fio: dict[str, Any]) -> list[CheckResult]:
    """The candidate's sweep at the point's rate, its G3 measured tree and checks (into ``record``);
    ``fio``: the point's read under its cgroup, a storage figure its restores are held to."""
    arm = pr.profile.candidate
    sweep = run_arm_sweep(pr, arm, label=f"{arm} at {record['label']}")
    measured = {
        "candidate": {"failed_ratio": failed_ratio(sweep), "cold_restore": arm_cold_restore(pr, arm, sweep, fio)},
        "compare": unfiltered(compare_measured(sweep, ctx.baseline, ctx.baseline)),
        **ctx.recompute_tree,
    }
    pr.gate_dir.write_evidence_json(f"bandwidth/{arm}-measured.json", measured)
    checks, verdicts = evaluate_point(ctx.g3, measured, ctx.overrides, seed=pr.profile.load.seed)
    record.update({k: v for k, v in _figures(sweep, ctx.concurrency).items()})
    record.update(restore_slices(measured["candidate"]["cold_restore"], ctx.concurrency,
                                 pr.profile.load.prompts_per_point, kv_bytes_per_token(pr.profile)[0],
                                 record["provisioned_read_bps"]))
    record["verdicts"] = verdicts
    return checks


def baseline_figures(sweep: Sweep, concurrency: int) -> dict[str, Any]:
    return _figures(sweep, concurrency)


def rate_of(leaf: Optional[dict[str, Any]]) -> Optional[float]:
    value = (leaf or {}).get("value")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None
