"""G2, single-node baseline: fio, the TTFT/throughput sweep with repetitions, checkpoint write and
model load on the baseline arm; repeatability across repetitions."""

from __future__ import annotations

from typing import Any

from harness.errors import InfraError
from harness.pipelines.coldrestore import cold_restore_measured, expectation
from harness.pipelines.context import GateRun
from harness.pipelines.loadpoint import expected_reuse_table, point_workload
from harness.pipelines.probesteps import fio_step, probe_step
from harness.pipelines.restoreprobe import kv_bytes_per_token, restore_bandwidth_measured
from harness.pipelines.sweep import probe_key, run_arm_sweep
from harness.pipelines.sweepdata import Sweep, baseline_measured, measurement, sweep_table
from harness.pipelines.tierhits import sweep_tier_rows
from harness.probes.registry import PROBES


def arm_storage_probes(run: GateRun, arm_name: str, prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """fio, checkpoint write and model load on an arm's storage target (measured, measurements)."""
    arm = run.profile.arm(arm_name)
    measured: dict[str, Any] = {}
    charts: dict[str, Any] = {}
    target_name = arm.storage
    if target_name is None:
        why = f"arm {arm.name!r} has no storage target ({'no offload' if not arm.offload else 'CPU/remote tier'})"
        measured["fio"] = {"seq_read_bw": measurement(None, detail=why)}
        return measured, charts
    node = run.node_with_target(target_name)
    target = node.target(target_name)
    assert target is not None
    fio = fio_step(run, node, target, key=f"fio/{prefix}/{node.name}/{target.name}")
    measured["fio"] = fio
    charts["fio"] = {node.name: {target.name: {k: v.get("value") for k, v in fio.items()}}}
    for kind in PROBES.values():  # every registered one-node probe the profile asks for, on this target
        spec = kind.spec_of(run.profile)
        if kind.run is None or spec is None or not kind.runs_on(spec, target_name):
            continue
        got = probe_step(run, kind.name, node, target, f"{kind.name}/{prefix}")
        if got is not None:
            measured[kind.name] = {kind.metric: got[kind.metric]}
            if "chart" in got:
                charts[kind.chart_key] = {arm.name: got["chart"]}
    return measured, charts


def arm_cold_restore(run: GateRun, arm_name: str, sweep: Sweep) -> dict[str, Any]:
    """The ``cold_restore`` subtree of an arm (harness.pipelines.coldrestore)."""
    arm = run.profile.arm(arm_name)
    workload = point_workload(run.profile)
    exp = expectation(workload.populate, workload.measure, arm.lmcache.chunk_size)
    out = cold_restore_measured(sweep, run.profile.load.concurrency, exp, offload=arm.offload)
    if arm.offload and run.profile.load.cold_restore:
        bpt, how = kv_bytes_per_token(run.profile)
        out["restore_bandwidth_ratio"] = restore_bandwidth_measured(
            sweep, run.profile.load.concurrency, run.gate_dir.step_done(probe_key(arm.name)), bpt, how)
    return out


def run_g2(run: GateRun) -> tuple[dict[str, Any], dict[str, Any]]:
    profile = run.profile
    arm = profile.baseline
    measured_baseline, charts = arm_storage_probes(run, arm, "baseline")
    stopped = False
    try:
        sweep = run_arm_sweep(run, arm, label=f"baseline ({arm})")
    except InfraError as exc:
        run.fault(f"the baseline sweep ({arm}) stopped", exc)
        stopped = True
        from harness.pipelines.sweep import load_sweep

        sweep = load_sweep(run, arm, profile.load.concurrency, profile.load.repetitions)
    if profile.load.slo is not None and not stopped:
        from harness.pipelines.sloconfirm import confirm_slo_capacity

        confirm_slo_capacity(run, arm, sweep)  # recorded in the state; G3 reads them (capacity_gain_at_slo)
    measured_baseline.update(baseline_measured(sweep, profile.load.concurrency, profile.load.repetitions))
    cold = arm_cold_restore(run, arm, sweep)
    if not profile.arm(arm).offload:
        cold.pop("offload_hit_tokens")  # nothing to serve from: NOT_APPLICABLE (applicability.py)
    measured_baseline["cold_restore"] = cold
    if stopped or run.faults:
        # Repetitions missing while faults were recorded (the sweep stopped, or points were not
        # counted because the engine hit ENOSPC) record those faults: "incomplete" is then not
        # measured evidence against the storage, and the gate exits 4 (harness.gates.verdict).
        measured_baseline["complete"]["caused_by_fault"] = True
    charts["sweep"] = {arm: sweep_table(sweep)}
    charts["tier_hits"] = {arm: sweep_tier_rows(sweep, offload=profile.arm(arm).offload)}
    if profile.load.workload == "hash-trace":  # the trace's expected reuse beside the measured hit rate (i19)
        charts["expected_reuse"] = expected_reuse_table(profile, charts["tier_hits"])
    measured: dict[str, Any] = {"baseline": measured_baseline}
    # --- estimate (i15): expected vs measured and the estimate_agreement leaves ---
    from harness.estimate.gatehook import add_expected, fio_value

    bw = fio_value(measured_baseline.get("fio", {}))
    add_expected(run, measured, charts, {arm: bw} if bw else {})
    # --- end estimate ---
    return measured, charts
