"""G2, single-node baseline: fio, the TTFT/throughput sweep with repetitions, checkpoint write and
model load on the baseline arm; repeatability across repetitions."""

from __future__ import annotations

from typing import Any

from harness.errors import InfraError
from harness.pipelines.shared.armsteps import arm_cold_restore, arm_storage_probes
from harness.pipelines.shared.context import GateRun
from harness.pipelines.shared.loadpoint import expected_reuse_table
from harness.pipelines.shared.sweep import run_arm_sweep
from harness.pipelines.shared.sweepdata import baseline_measured, sweep_table
from harness.pipelines.shared.tierhits import sweep_tier_rows


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
        from harness.pipelines.shared.sweep import load_sweep

        sweep = load_sweep(run, arm, profile.load.concurrency, profile.load.repetitions)
    if profile.load.slo is not None and not stopped:
        from harness.pipelines.shared.sloconfirm import confirm_slo_capacity

        confirm_slo_capacity(run, arm, sweep)  # recorded in the state; G3 reads them (capacity_gain_at_slo)
    measured_baseline.update(baseline_measured(sweep, profile.load.concurrency, profile.load.repetitions))
    cold = arm_cold_restore(run, arm, sweep, (measured_baseline.get("fio") or {}).get("seq_read_bw"))
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
